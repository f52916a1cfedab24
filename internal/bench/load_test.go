package bench

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func fakeTarget(t *testing.T, f *fakeServer, users int) loadTarget {
	t.Helper()
	f.mu.Lock()
	if f.stock == 0 {
		f.stock = 1 << 40
	}
	f.mu.Unlock()
	return loadTarget{
		endpoint: f.URL, body: purchaseBody(7), auth: testTokens(t, users),
		client: &http.Client{Transport: newTransport(256)},
	}
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
		f := newFakeServer(t, 20*time.Millisecond)
		spec := loadSpec{mode: ModeOpen, users: 100, rate: tc.rate, duration: tc.duration, maxInFlight: 100_000, timeout: 30 * time.Second}
		rec := newRecorder()
		runLoad(t.Context(), spec, fakeTarget(t, f, spec.users), rec)

		want := int64(tc.rate * tc.duration.Seconds())
		if got := rec.sent.Load(); got != want {
			t.Errorf("rate %v: sent %d, want %d", tc.rate, got, want)
		}
		if got := rec.answered.Load(); got != want {
			t.Errorf("rate %v: answered %d, want %d (errors %v)", tc.rate, got, want, rec.errors)
		}
		if d := rec.dropped.Load(); d != 0 {
			t.Errorf("rate %v: dropped %d", tc.rate, d)
		}
		// The arrivals span the duration less one interval. A request never
		// leaves before its planned time, so a scheduler that bunches the
		// load fails; on a busy shared machine (or under the race detector)
		// sends and arrivals run late, so the upper bound is loose.
		f.mu.Lock()
		first, last := f.arrivals[0], f.arrivals[len(f.arrivals)-1]
		f.mu.Unlock()
		span := last.Sub(first)
		ideal := tc.duration - time.Duration(float64(time.Second)/tc.rate)
		if span < ideal-50*time.Millisecond || span > ideal+2*time.Second {
			t.Errorf("rate %v: arrivals span %v, want about %v", tc.rate, span, ideal)
		}
		// Every latency includes the server's 20 ms: it is measured from
		// the planned time, never from a later actual send.
		if p := rec.all.Min(); p < 20*time.Millisecond {
			t.Errorf("rate %v: min latency %v below the server's delay", tc.rate, p)
		}
	}
}

// TestOpenModelDropsBeyondCap checks that the open model never exceeds its
// in-flight cap, counting what it could not send instead of waiting.
func TestOpenModelDropsBeyondCap(t *testing.T) {
	f := newFakeServer(t, 400*time.Millisecond)
	spec := loadSpec{mode: ModeOpen, users: 10, rate: 1000, duration: 200 * time.Millisecond, maxInFlight: 20, timeout: 5 * time.Second}
	rec := newRecorder()
	runLoad(t.Context(), spec, fakeTarget(t, f, spec.users), rec)
	// No answer comes back within the 200 ms of sending: exactly the cap
	// leaves.
	if got := rec.sent.Load(); got != 20 {
		t.Errorf("sent %d, want 20", got)
	}
	if got := rec.dropped.Load(); got != 180 {
		t.Errorf("dropped %d, want 180", got)
	}
	if got := f.maxParallel.Load(); got > 20 {
		t.Errorf("%d requests in flight at once, cap 20", got)
	}
}

func TestBurst(t *testing.T) {
	f := newFakeServer(t, 0)
	f.stock = 10
	spec := loadSpec{mode: ModeBurst, users: 50, attempts: 3, concurrency: 50, timeout: 5 * time.Second, warm: true}
	rec := newRecorder()
	runLoad(t.Context(), spec, fakeTarget(t, f, spec.users), rec)
	want := map[string]int64{"ACCEPTED": 10, "ALREADY_PURCHASED": 20, "SOLD_OUT": 120}
	if diff := cmp.Diff(want, rec.outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if got := rec.sent.Load(); got != 150 {
		t.Errorf("sent %d, want 150", got)
	}
	r := buildReport(TargetSeckill, f.URL, 7, 10, rec, false)
	if r.DuplicateAnswers != 0 || r.Accepted != 10 {
		t.Errorf("report: accepted %d, duplicates %d", r.Accepted, r.DuplicateAnswers)
	}
}

func TestClosedModel(t *testing.T) {
	f := newFakeServer(t, 5*time.Millisecond)
	spec := loadSpec{mode: ModeClosed, users: 1000, concurrency: 4, duration: 300 * time.Millisecond, timeout: 5 * time.Second}
	rec := newRecorder()
	runLoad(t.Context(), spec, fakeTarget(t, f, spec.users), rec)
	if got := f.maxParallel.Load(); got > 4 {
		t.Errorf("%d requests at once from 4 callers", got)
	}
	// Each caller waits at least 5 ms per answer: at most 61 each in 300 ms.
	if n := rec.answered.Load(); n < 4 || n > 4*61 {
		t.Errorf("answered %d, want between 4 and 244", n)
	}
}

// TestInterrupt checks that a cancelled run stops sending at once and still
// reports what it saw.
func TestInterrupt(t *testing.T) {
	f := newFakeServer(t, 20*time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, Config{URL: f.URL, Rate: 200, Duration: 10 * time.Second, Stock: 50, JWTSecret: testSecret, JWTIssuer: "seckill"})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("interrupted run took %v", took)
	}
	if !res.Interrupted || !res.Runs[0].Interrupted {
		t.Error("result not marked interrupted")
	}
	if s := res.Runs[0].Sent; s == 0 || s >= 2000 {
		t.Errorf("sent %d requests before the interrupt", s)
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
