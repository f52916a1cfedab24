package bench_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/app"
	"seckill/internal/bench"
	"seckill/internal/bench/report"
	"seckill/internal/config"
	"seckill/internal/store/storetest"
	"seckill/internal/testenv"
)

// TestTokenAlgs runs the burst three times in one run, with HS256 tokens
// and with the bench's identity provider's RS256 and ES256 tokens, against
// the real server trusting that provider, and checks each run's books and
// the comparisons. Speed is reported, never asserted.
func TestTokenAlgs(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idpAddr := ln.Addr().String()
	ln.Close()

	dsn := storetest.NewDSN(t)
	redisURL := testenv.FlushedRedisURL(t, testenv.RedisDBBench)
	vars := testenv.ServerVars(dsn, redisURL)
	vars["SECKILL_JWT_SECRET"] = secret
	vars["SECKILL_USER_RATE"] = "0"
	vars["SECKILL_AUTH_JWKS_URL"] = "http://" + idpAddr + "/jwks"
	vars["SECKILL_AUTH_ISSUER"] = "http://" + idpAddr
	vars["SECKILL_AUTH_AUDIENCE"] = bench.DefaultIdPAudience
	vars["SECKILL_AUTH_MIN_REFETCH"] = "1s"
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	_, srv := testenv.StartServer(t, func(ctx context.Context) (*app.App, error) {
		return app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	})
	srv.StartWorker()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := bench.Run(ctx, bench.Config{
		URL: srv.URL + "/graphql", Users: 200, Stock: 50,
		TokenAlgs: []string{bench.TokenHS256, bench.TokenRS256, bench.TokenES256}, IdPAddr: idpAddr,
		JWTSecret: secret, JWTIssuer: "seckill", DatabaseURL: dsn, RedisURL: redisURL,
		PersistTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, r := range res.Runs {
		targets = append(targets, r.Target)
		p := r.Persistence
		t.Logf("%s: %.0f requests/s, p99 %.1f ms; %s", r.Target, r.Throughput, r.Latency.P99, r.Verdict)
		if !r.OK || r.Answered != 200 || r.Accepted != 50 || r.Outcomes["SOLD_OUT"] != 150 {
			t.Errorf("%s: %s; answered %d, outcomes %v, errors %v", r.Target, r.Verdict, r.Answered, r.Outcomes, r.Errors)
		}
		if p == nil || !p.Complete || p.Rows != 50 || p.Lost != 0 || p.Unexpected != 0 || p.DuplicateUsers != 0 {
			t.Errorf("%s: persistence %+v", r.Target, p)
		}
	}
	if diff := cmp.Diff([]string{report.TargetSeckill, report.TargetRS256, report.TargetES256}, targets); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
	}
	var others []string
	for _, c := range res.Comparisons {
		t.Log(c.Text)
		if c.Base == report.TargetSeckill {
			others = append(others, c.Other)
		}
	}
	if diff := cmp.Diff([]string{report.TargetRS256, report.TargetES256}, others); diff != "" {
		t.Errorf("comparisons with HS256 (-want +got):\n%s", diff)
	}
}
