package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"seckill/internal/seckill"
	"seckill/internal/signature"
)

const testEventsSecret = "the-platform's-secret-for-events"

// receiver is the platform's end of the order events, as docs/events.md
// tells a receiver to be: it checks the signature, deduplicates by event id
// and keeps each order's events in sequence. answer decides each call's
// answer (after the signature check); it may sleep to time out.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	answer func(ev seckill.Event, attempt int) int

	mu       sync.Mutex
	calls    int
	attempts map[string]int            // calls per event id
	got      map[string]seckill.Event  // each event once, by id
	order    map[int64][]int           // each order's sequences in the order they were first taken
	bad      []string                  // what should never happen
	last     map[int64]int             // each order's highest sequence taken
	orders   map[int64]json.RawMessage // each order as its last event left it
}

func newReceiver(t *testing.T, answer func(ev seckill.Event, attempt int) int) *receiver {
	r := &receiver{t: t, answer: answer, attempts: map[string]int{}, got: map[string]seckill.Event{},
		order: map[int64][]int{}, last: map[int64]int{}, orders: map[int64]json.RawMessage{}}
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	if err := signature.Verify([]byte(testEventsSecret), req.Header.Get(signature.Header), body, time.Now()); err != nil {
		r.mu.Lock()
		r.bad = append(r.bad, "signature: "+err.Error())
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var ev seckill.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "json", http.StatusBadRequest)
		return
	}
	var o struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(ev.Order, &o)
	var orderID int64
	fmt.Sscan(o.ID, &orderID)

	r.mu.Lock()
	r.calls++
	r.attempts[ev.ID]++
	attempt := r.attempts[ev.ID]
	r.mu.Unlock()
	status := r.answer(ev, attempt)
	if status < 200 || status > 299 {
		http.Error(w, "not now", status)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.got[ev.ID]; !dup {
		r.got[ev.ID] = ev
		if ev.ID != seckill.EventID(orderID, ev.Sequence) {
			r.bad = append(r.bad, fmt.Sprintf("event %s of order %d has sequence %d", ev.ID, orderID, ev.Sequence))
		}
		if ev.Sequence != r.last[orderID]+1 {
			r.bad = append(r.bad, fmt.Sprintf("order %d: sequence %d after %d", orderID, ev.Sequence, r.last[orderID]))
		}
		r.last[orderID] = max(r.last[orderID], ev.Sequence)
		r.order[orderID] = append(r.order[orderID], ev.Sequence)
		r.orders[orderID] = ev.Order
	}
	w.WriteHeader(http.StatusNoContent)
}

// types returns each order's event types, in sequence.
func (r *receiver) types() map[int64][]seckill.EventType {
	r.mu.Lock()
	defer r.mu.Unlock()
	type seqType struct {
		seq int
		typ seckill.EventType
	}
	by := map[int64][]seqType{}
	for _, ev := range r.got {
		var o struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(ev.Order, &o)
		var id int64
		fmt.Sscan(o.ID, &id)
		by[id] = append(by[id], seqType{ev.Sequence, ev.Type})
	}
	out := map[int64][]seckill.EventType{}
	for id, evs := range by {
		slices.SortFunc(evs, func(a, b seqType) int { return a.seq - b.seq })
		for _, e := range evs {
			out[id] = append(out[id], e.typ)
		}
	}
	return out
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *receiver) problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bad)
}

// eventsEnv starts a server with its workers whose events go to the
// receiver's URL, fast retries.
func eventsEnv(t *testing.T, url string, opts ...envOption) (*testEnv, int64) {
	t.Helper()
	return newLifeEnvWith(t, 100, append([]envOption{func(m map[string]string) {
		m["SECKILL_EVENTS_WEBHOOK_URL"], m["SECKILL_EVENTS_WEBHOOK_SECRET"] = url, testEventsSecret
		m["SECKILL_EVENTS_MAX_BACKOFF"], m["SECKILL_EVENTS_PROBE_BACKOFF"] = "1s", "1s"
		m["SECKILL_EVENTS_INTERVAL"], m["SECKILL_EVENTS_TIMEOUT"] = "20ms", "300ms"
		m["SECKILL_EVENTS_RETENTION"] = "1h" // the tests read the delivered rows
	}}, opts...)...)
}

// lifeOfOrders buys n orders and moves them on: the first third paid, the
// second cancelled, the rest left CREATED. It returns each order's expected
// events.
func (e *testEnv) lifeOfOrders(voucherID int64, firstUser int64, n int) map[int64][]seckill.EventType {
	e.t.Helper()
	want := map[int64][]seckill.EventType{}
	for i := range n {
		user := firstUser + int64(i)
		id := e.buyPersisted(voucherID, user)
		want[id] = []seckill.EventType{seckill.EventOrderCreated}
		switch i % 3 {
		case 0:
			p := e.createPayment(id, user)
			if _, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(p, seckill.EventPaymentSucceeded)); err != nil {
				e.t.Fatal(err)
			}
			want[id] = append(want[id], seckill.EventOrderPaid)
		case 1:
			if _, err := e.app.Life.CancelOrder(asUser(e.ctx, user, false), id); err != nil {
				e.t.Fatal(err)
			}
			want[id] = append(want[id], seckill.EventOrderCancelled)
		}
	}
	return want
}

func (r *receiver) wait(t *testing.T, timeout time.Duration, want map[int64][]seckill.EventType) {
	t.Helper()
	total := 0
	for _, evs := range want {
		total += len(evs)
	}
	eventually(t, timeout, fmt.Sprintf("%d events received", total), func() bool { return r.count() >= total })
	if diff := cmp.Diff(want, r.types()); diff != "" {
		t.Errorf("events received (-want +got):\n%s", diff)
	}
	if p := r.problems(); len(p) > 0 {
		t.Errorf("receiver saw: %v", p)
	}
}

// TestEventsReachAFlakyReceiver: a receiver that answers 500 to each
// event's first call and then 200, and one that times out the first call
// of each, each get every event of every order once (by id) and in order
// per order; the attempts that failed are recorded with their answer.
func TestEventsReachAFlakyReceiver(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(ev seckill.Event, attempt int) int
		last   string // what the failed attempt recorded
	}{
		{"500 then 200", func(_ seckill.Event, attempt int) int {
			if attempt == 1 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}, "status 500"},
		{"times out then answers", func(_ seckill.Event, attempt int) int {
			if attempt == 1 {
				time.Sleep(500 * time.Millisecond) // past SECKILL_EVENTS_TIMEOUT
			}
			return http.StatusOK
		}, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.answer)
			e, v := eventsEnv(t, rcv.srv.URL+"/hooks")
			want := e.lifeOfOrders(v, 1000, 6)
			rcv.wait(t, 30*time.Second, want)
			// A call that timed out may have been taken all the same: the
			// receiver has it, and it is sent again (at least once).
			eventually(t, 30*time.Second, "every event delivered", func() bool {
				return e.count(`SELECT count(*) FROM order_event WHERE delivered_at IS NULL`) == 0
			})
			rcv.mu.Lock()
			for id, n := range rcv.attempts {
				if n < 2 {
					t.Errorf("event %s was taken at its first call", id)
				}
			}
			rcv.mu.Unlock()
			// Each row records its last (successful) answer; the failed
			// first attempt was logged by the endpoint's health.
			if n := e.count(`SELECT count(*) FROM order_event WHERE delivered_at IS NULL OR attempts < 2`); n != 0 {
				t.Errorf("%d events undelivered or delivered at their first attempt", n)
			}
			var lastError string
			if err := e.app.DB.NewRaw(`SELECT last_error FROM event_endpoint`).Scan(e.ctx, &lastError); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(lastError, tc.last) {
				t.Errorf("endpoint's last error %q, want it to say %q", lastError, tc.last)
			}
		})
	}
}

// TestEventsReceiverDownForAWhile: the receiver's address refuses
// connections while orders are bought and paid, then comes back: it gets
// everything, in order per order, within a probe interval or two.
func TestEventsReceiverDownForAWhile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down
	rcv := newReceiver(t, func(seckill.Event, int) int { return http.StatusOK })
	// Delivered events are deleted at once, as by default.
	e, v := eventsEnv(t, "http://"+addr+"/hooks", func(m map[string]string) { m["SECKILL_EVENTS_RETENTION"] = "0" })
	want := e.lifeOfOrders(v, 2000, 12)
	time.Sleep(3 * time.Second) // a few probes fail
	var failures int
	if err := e.app.DB.NewRaw(`SELECT failures FROM event_endpoint WHERE source = 'env'`).Scan(e.ctx, &failures); err != nil || failures == 0 {
		t.Fatalf("endpoint failures while down: %d, %v", failures, err)
	}
	if n := rcv.count(); n != 0 {
		t.Fatalf("received %d while down", n)
	}
	back, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rcv}
	go srv.Serve(back)
	t.Cleanup(func() { srv.Close() })
	rcv.wait(t, 30*time.Second, want)
	eventually(t, 10*time.Second, "the outbox empty", func() bool { return e.count(`SELECT count(*) FROM order_event`) == 0 })
}

// TestEventsReceiverThatFails: every call fails, so each order's first
// event dies after its attempts and holds back the order's next; the
// dashboard's redelivery of the range sends them all, in order, once the
// receiver takes them. Dead deliveries are counted in the metrics.
func TestEventsReceiverThatFails(t *testing.T) {
	var mu sync.Mutex
	failing := true
	rcv := newReceiver(t, func(seckill.Event, int) int {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	e, v := eventsEnv(t, rcv.srv.URL, func(m map[string]string) { m["SECKILL_EVENTS_MAX_ATTEMPTS"] = "2" })
	start := time.Now()
	want := e.lifeOfOrders(v, 3000, 3)
	eventually(t, 30*time.Second, "the first events dead", func() bool {
		return e.count(`SELECT count(*) FROM order_event WHERE dead`) == 3
	})
	if n := e.count(`SELECT count(*) FROM order_event WHERE dead AND sequence <> 1`); n != 0 {
		t.Errorf("%d later events tried while their first was dead", n)
	}
	eps, err := e.app.Store.Endpoints(e.ctx)
	if err != nil || len(eps) != 1 {
		t.Fatalf("endpoints %v, %v", eps, err)
	}
	dead, err := e.app.Store.Deliveries(e.ctx, seckill.DeliveryFilter{EndpointID: eps[0].ID, State: seckill.DeliveryDead})
	if err != nil || len(dead) != 3 || dead[0].LastStatus != http.StatusBadRequest || dead[0].LastAnswer != "status 400" {
		t.Fatalf("dead deliveries %+v, %v", dead, err)
	}
	if got := testutil.ToFloat64(e.app.Metrics.EventDeliveries.WithLabelValues("dead")); got != 3 {
		t.Errorf("dead deliveries counted %v, want 3", got)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	if n, err := e.app.Store.Redeliver(e.ctx, seckill.RedeliverFilter{EndpointID: eps[0].ID, From: start, To: time.Now().Add(time.Minute), DeadOnly: true}); err != nil || n != 3 {
		t.Fatalf("Redeliver = %d, %v", n, err)
	}
	rcv.wait(t, 30*time.Second, want)
}
