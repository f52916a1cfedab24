package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// TestEventsRolloutWithoutTheVariable: two instances on one database, the
// second started without SECKILL_EVENTS_WEBHOOK_URL (a rolling deploy that
// dropped it, or a job runner that never had it). Orders made through
// either are all delivered to the environment's endpoint: the second
// neither disables it (the old start did, for every instance) nor stops
// writing its events.
func TestEventsRolloutWithoutTheVariable(t *testing.T) {
	rcv := newReceiver(t, func(seckill.Event, int) int { return http.StatusOK })
	a, v := eventsEnv(t, rcv.srv.URL+"/hooks")
	b := a.peer(func(m map[string]string) {
		m["SECKILL_EVENTS_WEBHOOK_URL"], m["SECKILL_EVENTS_WEBHOOK_SECRET"] = "", ""
	})
	b.worker()
	want := map[int64][]seckill.EventType{}
	for i := range 6 {
		e := a
		if i%2 == 1 {
			e = b
		}
		want[e.buyPersisted(v, 5000+int64(i))] = []seckill.EventType{seckill.EventOrderCreated}
		// Past a reconcile of each instance, which reads the endpoints
		// again.
		time.Sleep(100 * time.Millisecond)
	}
	rcv.wait(t, 30*time.Second, want)
	eps, err := b.app.Store.Endpoints(b.ctx)
	if err != nil || len(eps) != 1 || !eps[0].Enabled || eps[0].Source != seckill.EndpointEnv {
		t.Fatalf("endpoints after the second start: %+v, %v", eps, err)
	}
}

// TestEventsEndpointsIndependent: beside an endpoint whose receiver holds
// every call until the test ends, a healthy endpoint gets each event
// within a second of its order's creation (p99), while orders are made:
// each endpoint has its own lane, and one that hangs waits alone.
func TestEventsEndpointsIndependent(t *testing.T) {
	var mu sync.Mutex
	var delays []time.Duration
	healthy := newReceiver(t, func(ev seckill.Event, attempt int) int {
		if attempt == 1 && ev.Type == seckill.EventOrderCreated {
			mu.Lock()
			delays = append(delays, time.Since(ev.OccurredAt))
			mu.Unlock()
		}
		return http.StatusOK
	})
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hanging.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the calls
	// A long timeout: the hanging endpoint's rounds take seconds each.
	e, v := eventsEnv(t, healthy.srv.URL+"/hooks", func(m map[string]string) { m["SECKILL_EVENTS_TIMEOUT"] = "3s" })
	// The hanging one is the older, visited first by a round of every
	// endpoint.
	if _, err := e.app.DB.ExecContext(e.ctx, `UPDATE event_endpoint SET id = 1000 WHERE source = 'env'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.Store.AddEndpoint(e.ctx, hanging.URL+"/hooks", testEventsSecret); err != nil {
		t.Fatal(err)
	}
	want := map[int64][]seckill.EventType{}
	start := time.Now()
	for i := 0; time.Since(start) < 8*time.Second; i++ {
		want[e.buyPersisted(v, 6000+int64(i))] = []seckill.EventType{seckill.EventOrderCreated}
		time.Sleep(100 * time.Millisecond)
	}
	healthy.wait(t, 30*time.Second, want)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(delays)
	p99 := delays[(len(delays)*99+99)/100-1] // nearest rank
	if p99 >= time.Second {
		b, _ := json.Marshal(delays)
		t.Errorf("the healthy endpoint's p99 delay beside a hanging one: %v over %d events, want under 1 s; delays (ns): %s", p99, len(delays), b)
	}
	t.Logf("p99 %v, max %v over %d events", p99, delays[len(delays)-1], len(delays))
}
