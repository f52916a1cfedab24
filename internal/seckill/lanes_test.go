package seckill_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// laneOutbox has one due event per endpoint at every round, and counts
// each endpoint's rounds.
type laneOutbox struct {
	eps    []seckill.Endpoint
	mu     sync.Mutex
	rounds map[int64]int
}

func (o *laneOutbox) Endpoints(context.Context) ([]seckill.Endpoint, error) { return o.eps, nil }

func (o *laneOutbox) DeliverDue(ctx context.Context, e seckill.Endpoint, _ int, _ bool,
	send func(context.Context, []seckill.Delivery) ([]seckill.Attempt, seckill.EndpointHealth)) (int, error) {
	send(ctx, deliveries(1, 0))
	o.mu.Lock()
	o.rounds[e.ID]++
	o.mu.Unlock()
	return 1, nil
}

func (o *laneOutbox) PruneDelivered(context.Context, time.Time, int) (int, error) { return 0, nil }

func (o *laneOutbox) count(id int64) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rounds[id]
}

// hangingSender holds every call to endpoint 1 until its round's time runs
// out and answers the others at once.
type hangingSender struct{ held atomic.Int64 }

func (s *hangingSender) Send(ctx context.Context, e seckill.Endpoint, _ seckill.Event) seckill.SendResult {
	if e.ID == 1 {
		s.held.Add(1)
		<-ctx.Done()
		return seckill.SendResult{Answer: seckill.AnswerTimeout}
	}
	return seckill.SendResult{Status: 204, Answer: seckill.AnswerStatus(204)}
}

// TestRunGivesEachEndpointItsLane: while an endpoint's round hangs (for
// its whole round time), another endpoint's rounds go on every interval.
func TestRunGivesEachEndpointItsLane(t *testing.T) {
	o := &laneOutbox{eps: []seckill.Endpoint{{ID: 1, Enabled: true}, {ID: 2, Enabled: true}}, rounds: map[int64]int{}}
	s := &hangingSender{}
	cfg := testDelivery
	cfg.RoundTimeout = 10 * time.Second
	d, err := seckill.NewDeliverer(o, s, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, 10*time.Millisecond, func() bool { return true }, func(error) {})
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for s.held.Load() == 0 || o.count(2) < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("in 5 s: endpoint 1 held %d calls, endpoint 2 had %d rounds, want 20 while 1 hangs", s.held.Load(), o.count(2))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := o.count(1); n != 0 {
		t.Errorf("the hanging endpoint finished %d rounds", n)
	}
}
