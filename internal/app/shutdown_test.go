package app

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"seckill/internal/config"
	"seckill/internal/store/storetest"
	"seckill/internal/testenv"
)

// TestServeShutsDownWithoutLosingOrders runs `seckill serve` as main runs
// it, buys while it is up, stops it as SIGTERM would, and checks that every
// accepted order reaches Postgres: persisted before the stop, or handed to
// the queue and persisted by a worker started afterwards.
func TestServeShutsDownWithoutLosingOrders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	vars := map[string]string{
		"SECKILL_ENV":              "dev",
		"SECKILL_HTTP_ADDR":        addr,
		"SECKILL_DATABASE_URL":     storetest.NewDSN(t),
		"SECKILL_REDIS_URL":        testenv.RedisURL(t, testenv.OwnedDB(testenv.RedisDBApp)),
		"SECKILL_SHUTDOWN_TIMEOUT": "5s",
		"SECKILL_LOG_LEVEL":        "warn",
		"SECKILL_REDIS_TIMEOUT":    "10s", // a shared, loaded machine: a slow answer is no fault here
		"SECKILL_USER_RATE":        "0",
	}
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: cfg.LogLevel}))

	// The same Redis database as the other tests here: start it empty.
	probe, err := New(t.Context(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.FlushRedis(t.Context(), probe.Redis); err != nil {
		t.Fatal(err)
	}
	probe.Close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, cfg, logger, true, nil) }()
	base := "http://" + addr
	eventually(t, 20*time.Second, "the server to answer /readyz", func() bool {
		res, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})

	// Drive it through a testEnv-like client pointed at the real listener.
	a, err := New(t.Context(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	e := &testEnv{t: t, app: a, url: base, ctx: t.Context()}
	voucher := e.createCampaign(300)

	var mu sync.Mutex
	var accepted []string
	var wg sync.WaitGroup
	buy := func(from, to int) {
		for u := from; u < to; u++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := e.buy(nil, e.token(int64(7000+u), false), voucher)
				if err == nil && p.Outcome == "ACCEPTED" {
					mu.Lock()
					accepted = append(accepted, *p.OrderID)
					mu.Unlock()
				}
			}()
		}
	}
	buy(0, 150)
	wg.Wait()
	buy(150, 300)
	stop() // SIGTERM while the second wave is in flight
	wg.Wait()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after the stop")
	}
	if len(accepted) < 150 {
		t.Fatalf("only %d accepted, want at least the first wave: the test proves little", len(accepted))
	}

	// Whatever was accepted and not yet written is in the queue (or pending
	// in Redis for the reconciler): a worker started now finishes the job.
	wctx, wstop := context.WithCancel(context.Background())
	defer wstop()
	go func() { _ = Worker(wctx, cfg, logger) }()
	eventually(t, 30*time.Second, "every accepted order persisted", func() bool { return e.rows(voucher) >= len(accepted) })
	var ids []string
	if err := a.DB.NewSelect().Table("voucher_order").Column("id").Where("voucher_id = ?", voucher).Scan(t.Context(), &ids); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, id := range ids {
		have[id] = true
	}
	for _, id := range accepted {
		if !have[id] {
			t.Fatalf("accepted order %s was lost in the shutdown", id)
		}
	}
	if len(ids) != len(accepted) {
		t.Fatalf("%d rows for %d accepted orders", len(ids), len(accepted))
	}
	t.Logf("%d accepted before and during the stop, all persisted", len(accepted))
}
