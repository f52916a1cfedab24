package load

import (
	"cmp"
	"net/http"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"seckill/internal/bench/benchtest"
)

func fakeTarget(t *testing.T, f *benchtest.FakeServer, users int) Target {
	t.Helper()
	return Target{
		Endpoint: f.URL, Body: PurchaseBody(7), Auth: benchtest.Tokens(t, users),
		Client: &http.Client{Transport: NewTransport(256)},
	}
}

// newFake starts a fake server with stock units (0: more than any test
// buys).
func newFake(t *testing.T, delay time.Duration, stock int64) *benchtest.FakeServer {
	f := benchtest.NewFakeServer(t, delay)
	f.SetStock(cmp.Or(stock, 1<<40))
	return f
}

// TestOpenModelRate checks that the open model sends exactly rate×duration
// requests, spread evenly over the duration, whatever the answers take.
func TestOpenModelRate(t *testing.T) {
	for _, tc := range []struct {
		rate     float64
		duration time.Duration
	}{
		{rate: 50, duration: time.Second},
		{rate: 1000, duration: time.Second},
	} {
		f := newFake(t, 20*time.Millisecond, 0)
		spec := Spec{Mode: ModeOpen, Users: 100, Rate: tc.rate, Duration: tc.duration, MaxInFlight: 100_000, Timeout: 30 * time.Second}
		rec := NewRecorder()
		Run(t.Context(), spec, fakeTarget(t, f, spec.Users), rec)

		want := int64(tc.rate * tc.duration.Seconds())
		if got := rec.Sent.Load(); got != want {
			t.Errorf("rate %v: sent %d, want %d", tc.rate, got, want)
		}
		if got := rec.Answered.Load(); got != want {
			t.Errorf("rate %v: answered %d, want %d (errors %v)", tc.rate, got, want, rec.Snapshot().Errors)
		}
		if d := rec.Dropped.Load(); d != 0 {
			t.Errorf("rate %v: dropped %d", tc.rate, d)
		}
		// The arrivals span the duration less one interval. A request never
		// leaves before its planned time, so a scheduler that bunches the
		// load fails, whatever else runs on the machine: the first send may
		// be late by as much as the generator reports. The upper bound holds
		// only when the generator kept its schedule; on a machine too busy
		// for that (it reports how late it sent), the requests pile up in
		// the client and the server, and only the counts above are checked.
		arrivals := f.Arrivals()
		first, last := arrivals[0], arrivals[len(arrivals)-1]
		span := last.Sub(first)
		ideal := tc.duration - time.Duration(float64(time.Second)/tc.rate)
		late := time.Duration(rec.MaxLate.Load())
		if span < ideal-late-50*time.Millisecond {
			t.Errorf("rate %v: arrivals span %v, want about %v: bunched", tc.rate, span, ideal)
		}
		if late < 100*time.Millisecond && span > ideal+2*time.Second {
			t.Errorf("rate %v: arrivals span %v, want about %v", tc.rate, span, ideal)
		} else if late >= 100*time.Millisecond {
			t.Logf("rate %v: the machine is too busy for the schedule (sends up to %v late); arrivals span %v", tc.rate, late, span)
		}
		// Every latency includes the server's 20 ms: it is measured from
		// the planned time, never from a later actual send.
		if p := rec.All.Min(); p < 20*time.Millisecond {
			t.Errorf("rate %v: min latency %v below the server's delay", tc.rate, p)
		}
	}
}

// TestOpenModelDropsBeyondCap checks that the open model never exceeds its
// in-flight cap, counting what it could not send instead of waiting.
func TestOpenModelDropsBeyondCap(t *testing.T) {
	f := newFake(t, 400*time.Millisecond, 0)
	spec := Spec{Mode: ModeOpen, Users: 10, Rate: 1000, Duration: 200 * time.Millisecond, MaxInFlight: 20, Timeout: 5 * time.Second}
	rec := NewRecorder()
	Run(t.Context(), spec, fakeTarget(t, f, spec.Users), rec)
	// No answer comes back within the 200 ms of sending: exactly the cap
	// leaves.
	if got := rec.Sent.Load(); got != 20 {
		t.Errorf("sent %d, want 20", got)
	}
	if got := rec.Dropped.Load(); got != 180 {
		t.Errorf("dropped %d, want 180", got)
	}
	if got := f.MaxParallel.Load(); got > 20 {
		t.Errorf("%d requests in flight at once, cap 20", got)
	}
}

func TestBurst(t *testing.T) {
	f := newFake(t, 0, 10)
	spec := Spec{Mode: ModeBurst, Users: 50, Attempts: 3, Concurrency: 50, Timeout: 5 * time.Second, Warm: true}
	rec := NewRecorder()
	Run(t.Context(), spec, fakeTarget(t, f, spec.Users), rec)
	want := map[string]int64{"ACCEPTED": 10, "ALREADY_PURCHASED": 20, "SOLD_OUT": 120}
	tally := rec.Snapshot()
	if diff := gocmp.Diff(want, tally.Outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if got := rec.Sent.Load(); got != 150 {
		t.Errorf("sent %d, want 150", got)
	}
	ids, buyers := map[int64]bool{}, map[int]bool{}
	for _, a := range tally.Accepted {
		ids[a.OrderID], buyers[a.User] = true, true
	}
	if len(tally.Accepted) != 10 || len(ids) != 10 || len(buyers) != 10 {
		t.Errorf("accepted %d answers for %d order ids and %d buyers, want 10 of each", len(tally.Accepted), len(ids), len(buyers))
	}
}

func TestClosedModel(t *testing.T) {
	f := newFake(t, 5*time.Millisecond, 0)
	spec := Spec{Mode: ModeClosed, Users: 1000, Concurrency: 4, Duration: 300 * time.Millisecond, Timeout: 5 * time.Second}
	rec := NewRecorder()
	Run(t.Context(), spec, fakeTarget(t, f, spec.Users), rec)
	if got := f.MaxParallel.Load(); got > 4 {
		t.Errorf("%d requests at once from 4 callers", got)
	}
	// Each caller waits at least 5 ms per answer: at most 61 each in 300 ms.
	if n := rec.Answered.Load(); n < 4 || n > 4*61 {
		t.Errorf("answered %d, want between 4 and 244", n)
	}
}

func TestParseOutcome(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want result
		ok   bool
	}{
		{`{"data":{"seckill":{"outcome":"ACCEPTED","orderId":"4294967297"}}}`, result{outcome: "ACCEPTED", orderID: 4294967297}, true},
		{`{"data":{"seckill":{"outcome":"SOLD_OUT","orderId":null}}}` + "\n", result{outcome: "SOLD_OUT"}, true},
		{`{"data":{"seckill":{"outcome":"ACCEPTED","orderId":"x1"}}}`, result{}, false},
		{`{"data":{"seckill":{"outcome":"SOLD_OUT","orderId":null},"extra":1}}`, result{}, false},
		{`{"errors":[{"message":"x"}],"data":null}`, result{}, false},
	} {
		got, ok := parseOutcome([]byte(tc.in))
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseOutcome(%s) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func BenchmarkParseOutcome(b *testing.B) {
	data := []byte(`{"data":{"seckill":{"outcome":"ACCEPTED","orderId":"4294967297"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := parseOutcome(data); !ok {
			b.Fatal("not parsed")
		}
	}
}
