package bench_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/app"
	"seckill/internal/bench"
	"seckill/internal/config"
	"seckill/internal/store/storetest"
	"seckill/internal/testenv"
)

const secret = "bench-integration-secret-long-enough-0123456789"

// startServer runs the real seckill server in process: the HTTP API on an
// httptest server and the persistence workers, on a fresh database.
func startServer(t *testing.T, dsn, redisURL string) string {
	t.Helper()
	env := map[string]string{
		"SECKILL_ENV":          "dev",
		"SECKILL_DATABASE_URL": dsn,
		"SECKILL_REDIS_URL":    redisURL,
		"SECKILL_JWT_SECRET":   secret,
		"SECKILL_USER_RATE":    "0",
	}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler(nil))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.RunWorker(ctx); err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		wg.Wait()
		a.Close()
	})
	return srv.URL + "/graphql"
}

// TestBurstWithComparisons runs the seed's experiment, scaled down, against
// the real server and both comparison servers, and checks that each run's
// books balance. Speed is reported, never asserted: the machine is shared.
func TestBurstWithComparisons(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	dsn := storetest.NewDSN(t)
	redisURL := testenv.FlushedRedisURL(t, testenv.RedisDBBench)
	endpoint := startServer(t, dsn, redisURL)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
	var progress bytes.Buffer
	res, err := bench.Run(ctx, bench.Config{
		URL: endpoint, Users: 200, Stock: 50,
		Compare:   []string{bench.TargetSync, bench.TargetCeiling},
		JWTSecret: secret, JWTIssuer: "seckill",
		DatabaseURL: dsn, RedisURL: redisURL, SyncDatabaseURL: storetest.NewEmptyDSN(t),
		PersistTimeout: 30 * time.Second, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(res.Runs))
	}
	for _, r := range res.Runs {
		p := r.Persistence
		t.Logf("%s: %.0f requests/s, p99 %.1f ms; %s", r.Target, r.Throughput, r.Latency.P99, r.Verdict)
		if !r.OK {
			t.Errorf("%s: %s", r.Target, r.Verdict)
		}
		if r.Answered != 200 || r.Failed != 0 {
			t.Errorf("%s: answered %d, failed %d (%v)", r.Target, r.Answered, r.Failed, r.Errors)
		}
		if r.Accepted != 50 || r.Outcomes["SOLD_OUT"] != 150 {
			t.Errorf("%s: outcomes %v", r.Target, r.Outcomes)
		}
		if p == nil || !p.Complete || p.Rows != r.Accepted || p.Lost != 0 || p.Unexpected != 0 ||
			p.DuplicateIDs != 0 || p.DuplicateUsers != 0 || r.DuplicateAnswers != 0 {
			t.Errorf("%s: persistence %+v", r.Target, p)
		}
		if p != nil && p.RedisRemaining != nil && *p.RedisRemaining != 0 {
			t.Errorf("%s: Redis remaining %d", r.Target, *p.RedisRemaining)
		}
		if p != nil && p.PostgresStock != nil && *p.PostgresStock != 0 {
			t.Errorf("%s: Postgres stock %d", r.Target, *p.PostgresStock)
		}
	}
	if p := res.Runs[0].Persistence; p.Source != "postgres" || p.LastCreatedAfterMs == nil || p.MaxQueueDepth == nil {
		t.Errorf("seckill verified through %s, without timings or queue depth: %+v", p.Source, p)
	}
	if res.Runs[0].Server == nil {
		t.Error("no server metrics sampled")
	}
	if len(res.Comparisons) != 2 {
		t.Errorf("comparisons: %+v", res.Comparisons)
	}
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	if !strings.Contains(text.String(), "of the ceiling's throughput") {
		t.Error("no ceiling comparison in the text report")
	}
	if err := res.WriteJSON(io.Discard); err != nil {
		t.Fatal(err)
	}
}
