package seckill_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"seckill/internal/seckill"
)

func TestBackoff(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 7; n++ {
		got = append(got, seckill.Backoff(n, 10*time.Second))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Backoff(1..7, 10s) = %v, want %v", got, want)
		}
	}
}

// fakeOutbox hands out its deliveries once per DeliverDue and records what
// came back.
type fakeOutbox struct {
	mu       sync.Mutex
	eps      []seckill.Endpoint
	due      []seckill.Delivery
	limits   []int
	attempts []seckill.Attempt
	health   []seckill.EndpointHealth
}

func (f *fakeOutbox) Endpoints(context.Context) ([]seckill.Endpoint, error) { return f.eps, nil }

func (f *fakeOutbox) DeliverDue(ctx context.Context, e seckill.Endpoint, limit int, _ bool,
	send func(context.Context, []seckill.Delivery) ([]seckill.Attempt, seckill.EndpointHealth)) (int, error) {
	f.mu.Lock()
	f.limits = append(f.limits, limit)
	due := f.due[:min(limit, len(f.due))]
	f.mu.Unlock()
	as, h := send(ctx, due)
	f.mu.Lock()
	f.attempts, f.health = append(f.attempts, as...), append(f.health, h)
	f.mu.Unlock()
	return len(due), nil
}

func (f *fakeOutbox) PruneDelivered(context.Context, time.Time, int) (int, error) { return 0, nil }

// fakeSender answers each event as answer says, after delay.
type fakeSender struct {
	delay  time.Duration
	status int
	mu     sync.Mutex
	sent   int
}

func (s *fakeSender) Send(ctx context.Context, _ seckill.Endpoint, _ seckill.Event) seckill.SendResult {
	s.mu.Lock()
	s.sent++
	s.mu.Unlock()
	select {
	case <-time.After(s.delay):
		return seckill.SendResult{Status: s.status, Answer: "answer"}
	case <-ctx.Done():
		return seckill.SendResult{Answer: "no answer: " + ctx.Err().Error()}
	}
}

func deliveries(n, attempts int) []seckill.Delivery {
	out := make([]seckill.Delivery, n)
	for i := range out {
		out[i] = seckill.Delivery{Event: seckill.Event{ID: seckill.EventID(int64(i+1), 1), Sequence: 1}, OrderID: int64(i + 1), Attempts: attempts}
	}
	return out
}

func newDeliverer(t *testing.T, o seckill.EventOutbox, s seckill.EventSender, cfg seckill.DeliveryConfig, counts map[seckill.DeliveryOutcome]int) *seckill.Deliverer {
	t.Helper()
	d, err := seckill.NewDeliverer(o, s, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg,
		func(o seckill.DeliveryOutcome, n int) { counts[o] += n })
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var testDelivery = seckill.DeliveryConfig{Batch: 10, Concurrency: 4, MaxAttempts: 3, MaxBackoff: time.Minute,
	MaxProbeBackoff: 30 * time.Second, RoundTimeout: time.Second}

// TestDelivererFailuresBackOffAndDie: failed events come back after their
// backoff, the last attempt makes one dead, a round with no success makes
// the endpoint a probed one (one event a round, not before its backoff).
func TestDelivererFailuresBackOffAndDie(t *testing.T) {
	o := &fakeOutbox{eps: []seckill.Endpoint{{ID: 1, Enabled: true}}, due: append(deliveries(2, 0), deliveries(1, 2)...)}
	o.due[2].OrderID, o.due[2].ID = 3, seckill.EventID(3, 1)
	counts := map[seckill.DeliveryOutcome]int{}
	d := newDeliverer(t, o, &fakeSender{status: 500}, testDelivery, counts)
	start := time.Now()
	if n, full, err := d.DeliverOnce(t.Context()); err != nil || n != 3 || full {
		t.Fatalf("DeliverOnce = %d, %v, %v", n, full, err)
	}
	for _, a := range o.attempts {
		wait := a.Next.Sub(start)
		switch {
		case a.OrderID == 3 && !a.Dead:
			t.Errorf("the third failure of order 3 is not dead")
		case a.OrderID != 3 && (a.Dead || wait < time.Second || wait > 2*time.Second):
			t.Errorf("attempt %+v: next in %v, want a second", a, wait)
		}
	}
	h := o.health[0]
	if h.OK || h.Failures != 1 || h.NextAttempt.Sub(start) < time.Second || h.LastError == "" {
		t.Errorf("health %+v", h)
	}
	if counts[seckill.OutcomeFailed] != 2 || counts[seckill.OutcomeDead] != 1 || counts[seckill.OutcomeDelivered] != 0 {
		t.Errorf("outcomes %v", counts)
	}

	// The endpoint is failing: skipped until its next attempt, then probed
	// with one event.
	o.eps[0].Failures, o.eps[0].NextAttempt = 1, time.Now().Add(time.Hour)
	if n, _, _ := d.DeliverOnce(t.Context()); n != 0 || len(o.limits) != 1 {
		t.Fatalf("a backing-off endpoint was sent %d", n)
	}
	o.eps[0].NextAttempt = time.Now().Add(-time.Second)
	if n, _, _ := d.DeliverOnce(t.Context()); n != 1 || o.limits[1] != 1 {
		t.Fatalf("probe: %d sent with limit %v", n, o.limits)
	}
}

// TestDelivererRoundTimeout: a slow endpoint's round ends at RoundTimeout;
// what was not sent by then is skipped (due again, no attempt counted), not
// failed.
func TestDelivererRoundTimeout(t *testing.T) {
	o := &fakeOutbox{eps: []seckill.Endpoint{{ID: 1, Enabled: true}}, due: deliveries(10, 0)}
	s := &fakeSender{delay: 150 * time.Millisecond, status: 200}
	cfg := testDelivery
	cfg.Concurrency, cfg.RoundTimeout = 1, 400*time.Millisecond
	counts := map[seckill.DeliveryOutcome]int{}
	d := newDeliverer(t, o, s, cfg, counts)
	begin := time.Now()
	if _, full, err := d.DeliverOnce(t.Context()); err != nil || !full {
		t.Fatalf("DeliverOnce: full %v, %v", full, err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("the round took %v", took)
	}
	var sent, skipped int
	for _, a := range o.attempts {
		if a.Skipped {
			skipped++
		} else {
			sent++
		}
	}
	if sent < 2 || sent > 3 || sent+skipped != 10 || s.sent != sent {
		t.Errorf("%d sent, %d skipped (sender saw %d)", sent, skipped, s.sent)
	}
	if counts[seckill.OutcomeDelivered]+counts[seckill.OutcomeFailed] != sent || !o.health[0].OK {
		t.Errorf("outcomes %v, health %+v", counts, o.health[0])
	}
}
