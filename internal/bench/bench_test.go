package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/app"
	"seckill/internal/bench"
	"seckill/internal/bench/compare"
	"seckill/internal/bench/report"
	"seckill/internal/config"
	"seckill/internal/seckill"
	"seckill/internal/store/storetest"
	"seckill/internal/testenv"
)

const secret = "bench-integration-secret-long-enough-0123456789"

// TestMain lets this test binary be the ceiling's process that --compare
// ceiling-process starts (os.Executable, then `serve-ceiling`), as
// seckill-bench is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve-ceiling" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := bench.ServeCeiling(ctx, os.Args[2:], os.Getenv)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "serve-ceiling:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// startServer runs the real seckill server in process, the HTTP API on a
// test server and the persistence workers, on the database dsn.
func startServer(t *testing.T, dsn, redisURL string) string {
	t.Helper()
	vars := testenv.ServerVars(dsn, redisURL)
	vars["SECKILL_JWT_SECRET"] = secret
	vars["SECKILL_USER_RATE"] = "0"
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	_, srv := testenv.StartServer(t, func(ctx context.Context) (*app.App, error) {
		return app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	})
	srv.StartWorker()
	return srv.URL + "/graphql"
}

// newServer starts the real seckill server (startServer) on a database and
// a Redis database of its own, and returns its endpoint and both URLs.
func newServer(t *testing.T) (endpoint, dsn, redisURL string) {
	t.Helper()
	dsn = storetest.NewDSN(t)
	redisURL = testenv.FlushedRedisURL(t, testenv.RedisDBBench)
	return startServer(t, dsn, redisURL), dsn, redisURL
}

// newPrivateServer starts the real seckill server (startServer) on a
// database and a redis-server of its own, for a test that runs in
// parallel: the memory and CPU it reads are the server's alone.
func newPrivateServer(t *testing.T) (endpoint, dsn, redisURL string) {
	t.Helper()
	dsn = storetest.NewDSN(t)
	redisURL = testenv.StartRedisServer(t).URL()
	return startServer(t, dsn, redisURL), dsn, redisURL
}

// The seckill binary the tests that start it share (buildSeckill), and the
// directory TestMain removes.
var (
	buildOnce    sync.Once
	buildDir     string
	builtSeckill string
	buildErr     error
)

// buildSeckill builds the seckill binary, as --compare fsync runs it, with
// this test binary's race setting so that the build reuses its packages:
// once for all the tests that need it (a race build takes half a minute).
func buildSeckill(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "seckill-bench-test-"); buildErr != nil {
			return
		}
		builtSeckill = filepath.Join(buildDir, "seckill")
		args := []string{"build", "-o", builtSeckill}
		if raceEnabled {
			args = append(args, "-race")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", append(args, "seckill/cmd/seckill")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build seckill: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtSeckill
}

// TestBurstWithComparisons runs the seed's experiment, scaled down, against
// the real server and both comparison servers (the ceiling also as a
// process of its own), and checks that each run's books balance. Speed is
// reported, never asserted: the machine is shared.
func TestBurstWithComparisons(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	endpoint, dsn, redisURL := newServer(t)
	res := runBurst(t, endpoint, dsn, redisURL, bench.Config{
		Compare:         []string{bench.CompareSync, bench.CompareCeiling, bench.CompareCeilingProcess},
		SyncDatabaseURL: storetest.NewEmptyDSN(t),
	}, []string{report.TargetSeckill, report.TargetSync, report.TargetCeiling, report.TargetCeilingProcess})
	if p := res.Runs[0].Persistence; p.Source != report.SourcePostgres || p.LastCreatedAfterMs == nil || p.MaxQueueDepth == nil {
		t.Errorf("seckill verified through %s, without timings or queue depth: %+v", p.Source, p)
	}
	if res.Runs[0].Server == nil {
		t.Error("no server metrics sampled")
	}
	// The ceiling in a process of its own is measured as a server.
	if p := res.Runs[3].CPU.Process(report.ProcServer); p == nil || p.Missing != "" || len(p.PIDs) == 0 {
		t.Errorf("%s: CPU of the server: %+v", res.Runs[3].Target, p)
	}
	if p := res.Runs[0].CPU.Process(report.ProcServer); p == nil || !strings.Contains(p.Missing, "bench's process") {
		t.Errorf("the in-process server's CPU: %+v", p)
	}
	checkText(t, res, "of the ceiling's throughput (", "with the ceiling in a process of its own", "1 (its own database)")
}

// TestBurstAgainstPrivateServers runs the same burst against the seckill
// binary on private Redis servers the bench starts: each appendfsync
// setting, without and with WAIT for a replica, without and with the
// shared limits.
func TestBurstAgainstPrivateServers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	// Its servers, Redis and databases are its own: it runs beside the
	// other parallel tests once the serial ones are done.
	t.Parallel()
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("needs redis-server on PATH (make test-services uses it too)")
	}
	seckillBin := buildSeckill(t)
	endpoint, dsn, redisURL := newPrivateServer(t)
	res := runBurst(t, endpoint, dsn, redisURL, bench.Config{
		Compare: []string{bench.CompareFsync, bench.CompareWait, bench.CompareLimit},
		Fsync: bench.FsyncConfig{SeckillBin: seckillBin, RedisBin: redisServer, Dir: t.TempDir(), DatabaseURLs: map[string]string{
			compare.FsyncEverysec: storetest.NewEmptyDSN(t), compare.FsyncAlways: storetest.NewEmptyDSN(t),
			report.TargetNoWait: storetest.NewEmptyDSN(t), report.TargetWait: storetest.NewEmptyDSN(t),
			report.TargetNoLimit: storetest.NewEmptyDSN(t), report.TargetLimit: storetest.NewEmptyDSN(t),
		}},
	}, []string{report.TargetSeckill, report.TargetEverysec, report.TargetAlways, report.TargetNoWait, report.TargetWait,
		report.TargetNoLimit, report.TargetLimit})
	for _, r := range res.Runs[1:3] {
		if p := r.Persistence; p.Source != report.SourcePostgres || !strings.Contains(p.Note, "appendfsync "+r.Target) {
			t.Errorf("%s: verified through %s, note %q", r.Target, p.Source, p.Note)
		}
	}
	for i, r := range res.Runs[3:5] {
		if p := r.Persistence; p.Source != report.SourcePostgres || !strings.Contains(p.Note, fmt.Sprintf("SECKILL_REDIS_MIN_REPLICAS=%d ", i)) {
			t.Errorf("%s: verified through %s, note %q", r.Target, p.Source, p.Note)
		}
	}
	for _, r := range res.Runs[5:] {
		wantEnv := map[string]string{report.TargetNoLimit: "SECKILL_USER_RATE=0 SECKILL_ADDRESS_RATE=0 ",
			report.TargetLimit: "SECKILL_USER_RATE=5 SECKILL_USER_BURST=10 SECKILL_ADDRESS_RATE=1000000 SECKILL_ADDRESS_BURST=1000000 "}[r.Target]
		if p := r.Persistence; p.Source != report.SourcePostgres || !strings.Contains(p.Note, wantEnv) {
			t.Errorf("%s: verified through %s, note %q", r.Target, p.Source, p.Note)
		}
	}
	// The servers the bench started are processes of their own, on Redis
	// servers of their own: the CPU probe finds all three by their ports.
	for _, r := range res.Runs[1:] {
		for _, name := range []string{report.ProcServer, report.ProcRedis, report.ProcPostgres, report.ProcSum, report.ProcBench} {
			if p := r.CPU.Process(name); p == nil || p.Missing != "" || (name != report.ProcSum && len(p.PIDs) == 0) {
				t.Errorf("%s: CPU of %s: %+v", r.Target, name, p)
			}
		}
	}
	checkText(t, res, "appendfsync always: ", "WAIT for 1 replica: ", "shared limit per user and per address: ")
}

// runBurst runs the seed's experiment, scaled down (200 users, 50 units),
// against the server at endpoint and cfg's comparisons, and checks that
// the targets ran in the order of want, each answering every request with
// its books balanced, and three comparisons made.
func runBurst(t *testing.T, endpoint, dsn, redisURL string, cfg bench.Config, want []string) *report.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	cfg.URL, cfg.Users, cfg.Stock = endpoint, 200, 50
	cfg.JWTSecret, cfg.JWTIssuer, cfg.DatabaseURL, cfg.RedisURL = secret, "seckill", dsn, redisURL
	cfg.PersistTimeout, cfg.Progress = 30*time.Second, &progress
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, r := range res.Runs {
		targets = append(targets, r.Target)
	}
	if diff := cmp.Diff(want, targets); diff != "" {
		t.Fatalf("targets (-want +got):\n%s", diff)
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
	if len(res.Comparisons) != 3 {
		t.Errorf("comparisons: %+v", res.Comparisons)
	}
	if err := res.WriteJSON(io.Discard); err != nil {
		t.Fatal(err)
	}
	return res
}

// checkText checks that res's text report holds each of lines.
func checkText(t *testing.T, res *report.Result, lines ...string) {
	t.Helper()
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	for _, want := range lines {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q", want)
		}
	}
}

// TestPayAndResell runs buyers who pay half the time against the real
// server, with a pay window short enough that the unpaid orders expire
// while the load still runs: their units must sell again, the confirmed
// payments must be exactly the PAID orders, and the books must balance.
func TestPayAndResell(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	endpoint, dsn, redisURL := newServer(t)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const stock = 20
	res, err := bench.Run(ctx, bench.Config{
		URL: endpoint, Stock: stock, Rate: 20, Duration: 10 * time.Second,
		Pay:       bench.PayConfig{On: true, Ratio: 0.5, Delay: 100 * time.Millisecond, Window: 2 * time.Second, WebhookSecret: config.DevWebhookSecret},
		JWTSecret: secret, JWTIssuer: "seckill",
		DatabaseURL: dsn, RedisURL: redisURL, PersistTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	p := r.Persistence
	if p == nil || p.Payments == nil {
		t.Fatalf("no payments in the report: %+v", p)
	}
	pay := p.Payments
	if !r.OK {
		t.Errorf("verdict: %s", r.Verdict)
	}
	// The first 20 buyers take the stock; about half never pay, their
	// orders expire after 2 s (plus up to a second for the expiry task)
	// and later buyers of the 10 s load buy those units again.
	if pay.Expired == 0 || pay.Resold == 0 || r.Accepted <= stock {
		t.Errorf("nothing expired and resold: accepted %d, %+v", r.Accepted, pay)
	}
	if pay.Confirmed == 0 || pay.Confirmed != pay.Paid || pay.Errors != 0 || pay.Unaccounted != 0 {
		t.Errorf("payments: %+v", pay)
	}
	if got := pay.Paid + pay.Awaiting + pay.Expired + pay.Cancelled + pay.Failed; got != r.Accepted {
		t.Errorf("statuses of %d accepted orders add up to %d: %+v", r.Accepted, got, pay)
	}
	b := pay.Books
	if !b.Known || !b.Balanced || b.Initial != stock || b.Remaining+b.Queued+b.Awaiting+b.Paid != stock || b.Taken != b.Awaiting+b.Paid {
		t.Errorf("books: %+v", b)
	}
	for _, want := range []string{"units resold", "orders expired", "(balanced)", "of buyers pay after"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q", want)
		}
	}
}

// TestCeilingRounds runs --rounds 2 with --compare ceiling,ceiling-process:
// the server and both ceilings alternated, each round on a campaign of its
// own, the process's CPU measured as a server's, and the comparisons made
// of their medians and round by round.
func TestCeilingRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	endpoint, dsn, redisURL := newServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := bench.Run(ctx, bench.Config{
		URL: endpoint, Users: 200, Stock: 50, Compare: []string{bench.CompareCeiling, bench.CompareCeilingProcess}, Rounds: 2,
		JWTSecret: secret, JWTIssuer: "seckill", DatabaseURL: dsn, RedisURL: redisURL, PersistTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	vouchers := map[int64]bool{}
	for _, r := range res.Runs {
		order = append(order, r.Label())
		if !r.OK || r.Accepted != 50 {
			t.Errorf("%s: %d accepted: %s", r.Label(), r.Accepted, r.Verdict)
		}
		if r.Target == report.TargetSeckill {
			vouchers[r.VoucherID] = true
		}
		if p := r.CPU.Process(report.ProcServer); r.Target == report.TargetCeilingProcess && (p == nil || p.Missing != "" || p.Seconds <= 0) {
			t.Errorf("%s: the process's CPU: %+v", r.Label(), p)
		}
	}
	// The server first in odd rounds, last in even ones.
	want := []string{"seckill #1", "ceiling #1", "ceiling-process #1", "ceiling-process #2", "ceiling #2", "seckill #2"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("order of the runs (-want +got):\n%s", diff)
	}
	if len(vouchers) != 2 {
		t.Errorf("the server's rounds bought from campaigns %v; want one each", vouchers)
	}
	if len(res.Comparisons) != 2 {
		t.Fatalf("comparisons: %+v", res.Comparisons)
	}
	for i, other := range []string{report.TargetCeiling, report.TargetCeilingProcess} {
		c := res.Comparisons[i]
		if c.Other != other || c.Rounds != 2 || len(c.RoundRatios) != 2 || c.ThroughputRatio <= 0 ||
			!strings.Contains(c.Text, "of the ceiling's throughput") || !strings.Contains(c.Text, "(medians of 2 rounds, round by round ") {
			t.Errorf("comparison %+v", c)
		}
	}
}

// TestCompareBuilds runs --compare base with the same binary on both
// sides: two rounds of a closed load and of the seed's burst, alternated
// base, head, base, head, each side on its own Redis and database, every
// verdict OK and every process's CPU measured.
func TestCompareBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	// Its servers, Redis and databases are its own: it runs beside the
	// other parallel tests once the serial ones are done.
	t.Parallel()
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("needs redis-server on PATH (make test-services uses it too)")
	}
	seckillBin := buildSeckill(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := bench.Run(ctx, bench.Config{
		Compare: []string{bench.CompareBase}, Base: bench.BaseConfig{Binary: seckillBin}, Rounds: 2,
		Duration: time.Second, Concurrency: 16, Users: 5000, Warm: true,
		JWTSecret: secret, JWTIssuer: "seckill", PersistTimeout: 30 * time.Second,
		Fsync: bench.FsyncConfig{SeckillBin: seckillBin, RedisBin: redisServer, Dir: t.TempDir(), DatabaseURLs: map[string]string{
			report.TargetBase: storetest.NewEmptyDSN(t), report.TargetHead: storetest.NewEmptyDSN(t),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	bc := res.Builds
	if bc == nil || len(bc.Loads) != 2 || bc.Loads[0].Load.Mode != report.ModeClosed || bc.Loads[1].Load.Mode != report.ModeBurst {
		t.Fatalf("loads: %+v", bc)
	}
	for _, l := range bc.Loads {
		var order []string
		for _, r := range l.Runs {
			order = append(order, r.Label())
			if !r.OK {
				t.Errorf("%s %s: %s", l.Load.Mode, r.Label(), r.Verdict)
			}
			for _, name := range []string{report.ProcServer, report.ProcRedis, report.ProcPostgres} {
				if p := r.CPU.Process(name); p == nil || p.Missing != "" {
					t.Errorf("%s %s: CPU of %s: %+v", l.Load.Mode, r.Label(), name, p)
				}
			}
		}
		// Base first in odd rounds, head first in even ones.
		if diff := cmp.Diff([]string{"base #1", "head #1", "head #2", "base #2"}, order); diff != "" {
			t.Errorf("%s: order of the runs (-want +got):\n%s", l.Load.Mode, diff)
		}
		if l.ThroughputRatio <= 0 || len(l.RoundRatios) != 2 || l.Head.CPUPerAcceptedUs[report.ProcSum] <= 0 {
			t.Errorf("%s: summary %+v", l.Load.Mode, l)
		}
	}
	if b := bc.Loads[1]; b.Load.Users != 1000 || b.Load.Stock != 200 || b.Runs[0].Accepted != 200 {
		t.Errorf("the seed's burst: %+v, accepted %d", b.Load, b.Runs[0].Accepted)
	}
	if !strings.Contains(text.String(), "closed: head ÷ base throughput") || !strings.Contains(text.String(), "burst: head ÷ base throughput") {
		t.Error("the text report lacks the ratios")
	}
}

// TestExpiryStorm sells 300 units with a 6 s pay window to buyers who
// never pay, against the real server on a private Redis (beside a loaded
// make test, a shorter window lets orders expire before the sale is
// persisted and Redis's memory read), and checks that the storm is
// measured whole: the memory per awaiting order with the keys
// that grew, every order expired, the pool sampled, the second sale alone
// and during the storm with its persistence lag, and the books balanced
// afterwards. The figures themselves are logged, never asserted.
func TestExpiryStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	// Its servers, Redis and databases are its own: it runs beside the
	// other parallel tests once the serial ones are done.
	t.Parallel()
	endpoint, dsn, redisURL := newPrivateServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := bench.Run(ctx, bench.Config{
		URL: endpoint, Storm: bench.StormConfig{Units: 300, Window: 6 * time.Second, ProbeDuration: time.Second, ProbeCallers: 8, ProbeUsers: 20_000},
		JWTSecret: secret, JWTIssuer: "seckill", DatabaseURL: dsn, RedisURL: redisURL, DBMaxConns: 20,
		PersistTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	s := res.Storm
	if s == nil || !s.OK {
		t.Fatalf("storm: %+v", s)
	}
	// used_memory moves by kilobytes on its own (the allocator, the second
	// sale's keys expiring), more than 300 orders add: the census of the
	// keys that grew is what must show them.
	grew := false
	for _, k := range s.Memory.Keys {
		grew = grew || (strings.HasSuffix(k.Pattern, ":buyers") && k.PerOrderBytes > 0)
	}
	if s.Sale.Accepted != 300 || s.Memory.Awaiting != 300 || !grew || s.Memory.Shared {
		t.Errorf("sale and memory: accepted %d, %+v", s.Sale.Accepted, s.Memory)
	}
	e := s.Expiry
	if !e.Complete || e.Expired != 300 || e.PerS <= 0 || e.FirstPayBy.IsZero() || e.LastClosed.Before(e.FirstPayBy) ||
		e.Books == nil || !e.Books.Balanced || e.Books.Remaining != 300 {
		t.Errorf("expiry: %+v", e)
	}
	if s.Pool.Samples == 0 || s.Pool.PoolSize != 20 {
		t.Errorf("pool: %+v", s.Pool)
	}
	for _, r := range []*report.Report{s.Alone, s.During} {
		if r == nil || !r.OK || r.Persistence.Lag == nil || r.Persistence.Lag.Orders != r.Accepted {
			t.Fatalf("second sale: %+v", r)
		}
	}
	if s.Interference.P99Ratio <= 0 || s.Interference.LagRatio <= 0 || s.Interference.Text == "" {
		t.Errorf("interference: %+v", s.Interference)
	}
	// The CPU windows leave the second sale out; on a loaded machine all
	// 300 orders can expire while it runs, so the count may be 0 here.
	if _, ok := s.CPU.Units[report.UnitExpired]; s.CPU == nil || !ok || len(s.CPU.Processes) == 0 {
		t.Errorf("CPU of the expiry: %+v", s.CPU)
	}
}

// TestCloseStorms sells 200 units to buyers who then close their orders
// at once, against the real server: first they cancel them all
// (--cancel-storm), then, on a campaign of its own, the provider confirms
// all their payments (--payment-storm). Each storm must be measured whole:
// every order closed as asked, its unit back on sale or paid once, the
// books balanced, the pool sampled, the second sale alone and during the
// storm. The figures themselves are logged, never asserted.
func TestCloseStorms(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	// Its servers, Redis and databases are its own: it runs beside the
	// other parallel tests once the serial ones are done.
	t.Parallel()
	endpoint, dsn, redisURL := newPrivateServer(t)
	const units = 200
	for _, kind := range []string{bench.StormCancel, bench.StormPayment} {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		res, err := bench.Run(ctx, bench.Config{
			URL: endpoint, Storm: bench.StormConfig{Kind: kind, Units: 200, Callers: 32, Closers: 16, ProbeDuration: 500 * time.Millisecond, ProbeCallers: 4, ProbeUsers: 10_000},
			JWTSecret: secret, JWTIssuer: "seckill", DatabaseURL: dsn, RedisURL: redisURL, DBMaxConns: 20,
			PersistTimeout: 30 * time.Second, Pay: bench.PayConfig{WebhookSecret: config.DevWebhookSecret},
		})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		var text bytes.Buffer
		if err := res.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + text.String())
		s := res.CloseStorm
		if s == nil || !s.OK || s.Kind != kind || s.Sale.Accepted != units {
			t.Fatalf("%s storm: %+v", kind, s)
		}
		q := s.Requests
		if q.Planned != units || q.Sent != units || q.OK != units || q.Errors != 0 || q.PerS <= 0 || q.Latency.P99 <= 0 {
			t.Errorf("%s: requests %+v", kind, q)
		}
		b := s.Books
		want := map[seckill.OrderStatus]int64{seckill.OrderCancelled: units}
		wantPaid, wantRemaining := int64(0), int64(units)
		if kind == bench.StormPayment {
			want = map[seckill.OrderStatus]int64{seckill.OrderPaid: units}
			wantPaid, wantRemaining = units, 0
			if s.Opened != units {
				t.Errorf("payments opened: %d", s.Opened)
			}
		}
		if diff := cmp.Diff(want, s.Statuses); diff != "" {
			t.Errorf("%s: statuses (-want +got):\n%s", kind, diff)
		}
		if s.Succeeded != wantPaid || s.SucceededOrders != wantPaid || b == nil || !b.Balanced || b.Paid != wantPaid || b.Remaining != wantRemaining {
			t.Errorf("%s: %d payments succeeded for %d orders, books %+v", kind, s.Succeeded, s.SucceededOrders, b)
		}
		if s.Pool.Samples == 0 || s.Pool.PoolSize != 20 || s.Alone == nil || !s.Alone.OK || s.Interference.Text == "" {
			t.Errorf("%s: pool %+v, alone %+v, interference %+v", kind, s.Pool, s.Alone, s.Interference)
		}
		if _, ok := s.CPU.Units[s.Unit()]; s.CPU == nil || !ok {
			t.Errorf("%s: CPU %+v", kind, s.CPU)
		}
		if !strings.Contains(text.String(), "verdict "+kind+" storm: OK") {
			t.Errorf("%s: the text report lacks the verdict", kind)
		}
	}
}
