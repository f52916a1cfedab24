package app

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/config"
	"seckill/internal/seckill"
	"seckill/internal/store"
)

// countingOutbox is an outbox with nothing to deliver that counts the
// rounds that looked at it.
type countingOutbox struct{ looks atomic.Int64 }

func (o *countingOutbox) Endpoints(context.Context) ([]seckill.Endpoint, error) {
	o.looks.Add(1)
	return nil, nil
}

func (o *countingOutbox) DeliverDue(context.Context, seckill.Endpoint, int, bool, func(context.Context, []seckill.Delivery) ([]seckill.Attempt, seckill.EndpointHealth)) (int, error) {
	return 0, nil
}

func (o *countingOutbox) PruneDelivered(context.Context, time.Time, int) (int, error) { return 0, nil }

type silentSender struct{}

func (silentSender) Send(context.Context, seckill.Endpoint, seckill.Event) seckill.SendResult {
	return seckill.SendResult{}
}

// TestEventsRunnerIdleWithoutEndpoint: while the process knows of no
// enabled endpoint the events runner does not look at the outbox (an idle
// worker read the endpoints five times a second for nothing); once one is
// enabled it looks every EventsInterval.
func TestEventsRunnerIdleWithoutEndpoint(t *testing.T) {
	out := &countingOutbox{}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := seckill.NewDeliverer(out, silentSender{}, logger, seckill.DeliveryConfig{
		Batch: 10, Concurrency: 1, MaxAttempts: 1, MaxBackoff: time.Second, MaxProbeBackoff: time.Second, RoundTimeout: time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &App{Logger: logger, Events: d, Store: store.New(nil), Config: &config.Config{EventsInterval: 10 * time.Millisecond}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); a.runEvents(ctx) }()
	defer func() { cancel(); <-done }()

	time.Sleep(300 * time.Millisecond)
	if n := out.looks.Load(); n != 0 {
		t.Errorf("with no endpoint enabled the runner looked at the outbox %d times in 300 ms, want none", n)
	}
	a.Store.SetEventsOn(true)
	deadline := time.Now().Add(5 * time.Second)
	for out.looks.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("with an endpoint enabled the runner looked %d times in 5 s, want one every 10 ms", out.looks.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
