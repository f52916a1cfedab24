package bench

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/bench/compare"
	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
	"seckill/internal/bench/verify"
)

// freshTokens returns a verifier of its own for a comparison server, as a
// server process has.
func (r *runner) freshTokens() *auth.Tokens {
	return auth.NewTokens([]byte(r.cfg.JWTSecret), r.cfg.JWTIssuer)
}

// loadInProcess serves decide as a comparison server on a free loopback
// port, runs the load against its voucherID and stops the server.
func (r *runner) loadInProcess(ctx context.Context, label string, decide compare.PurchaseFunc, voucherID int64) (*load.Recorder, string, error) {
	srv, err := compare.Start(compare.PurchaseHandler(r.freshTokens(), decide), "/graphql")
	if err != nil {
		return nil, "", err
	}
	rec := r.load(ctx, label, srv.URL, load.PurchaseBody(voucherID))
	srv.Close()
	return rec, srv.URL, nil
}

// runSync measures the seed's synchronous design with the same load.
func (r *runner) runSync(ctx context.Context, stock int64) (*report.Report, error) {
	cfg := r.cfg
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dsn := cfg.SyncDatabaseURL
	if dsn == "" {
		if cfg.DatabaseURL == "" {
			return nil, errors.New("needs Postgres: set SECKILL_DATABASE_URL")
		}
		var err error
		if dsn, err = compare.RecreateDatabase(sctx, cfg.DatabaseURL, compare.SyncDatabase); err != nil {
			return nil, err
		}
	}
	design, err := compare.OpenSync(sctx, dsn, cfg.DBMaxConns, stock, r.end)
	if err != nil {
		return nil, err
	}
	defer design.Close()
	probe := startCPU(ctx, cpuTarget{inProcess: true, databaseURL: dsn})
	defer probe.stop()
	rec, endpoint, err := r.loadInProcess(ctx, report.TargetSync, design.Purchase, compare.SyncVoucherID)
	if err != nil {
		return nil, err
	}
	// Every order is in Postgres once it is answered.
	cpuWin := probe.stop()
	rep := report.Build(report.TargetSync, endpoint, compare.SyncVoucherID, stock, rec, ctx.Err() != nil)
	rep.VoucherOf = "its own database"
	// Every order is written before its answer: nothing to wait for.
	p := &report.Persistence{Source: report.SourcePostgres, Complete: true}
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	lo, hi := r.userRange()
	c, err := (&verify.Postgres{DB: design.DB}).Verify(vctx, p, compare.SyncVoucherID, lo, hi, rec.Snapshot().Accepted)
	if err != nil {
		return nil, err
	}
	if rep.Accepted > 0 && c.Rows > 0 {
		firstAccepted, lastAccepted := rec.At(&rec.FirstAccepted), rec.At(&rec.LastAccepted)
		// created_at is the transaction's start, before the answer: the
		// report says "before" rather than a negative delay.
		p.LastCreatedAfterMs = report.Ptr(report.Ms(c.LastCreated.Sub(lastAccepted)))
		if d := lastAccepted.Sub(firstAccepted); d > 0 {
			p.PersistedPerS = report.Ptr(float64(c.Rows) / d.Seconds())
		}
	}
	p.Note = "database " + redactDSN(dsn)
	rep.Persistence = p
	rep.CPU = cpuWin.report(map[string]int64{report.UnitAccepted: rep.Accepted, report.UnitPersisted: c.Rows})
	rep.Judge()
	return rep, nil
}

// runCeiling measures the admission script behind a bare handler, in the
// bench's process.
func (r *runner) runCeiling(ctx context.Context, stock int64) (*report.Report, error) {
	cfg := r.cfg
	if cfg.RedisURL == "" {
		return nil, errors.New("needs Redis: set SECKILL_REDIS_URL")
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := compare.OpenCeiling(sctx, cfg.RedisURL, cfg.RedisPoolSize, stock, r.end)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	probe := startCPU(ctx, cpuTarget{inProcess: true, redisAddrs: redisAddrs(cfg.RedisURL)})
	defer probe.stop()
	rec, endpoint, err := r.loadInProcess(ctx, report.TargetCeiling, c.Purchase, compare.CeilingVoucherID)
	if err != nil {
		return nil, err
	}
	note := "persists nothing: its admissions stay pending in Redis under " + c.Prefix + " (deleted after the run)"
	return r.ceilingReport(ctx, report.TargetCeiling, endpoint, stock, rec, probe.stop(), note, c.State)
}

// runCeilingProcess measures the same handler in a process of its own,
// this program run as `serve-ceiling` (ServeCeiling), as seckill serve is.
func (r *runner) runCeilingProcess(ctx context.Context, stock int64) (*report.Report, error) {
	cfg := r.cfg
	if cfg.RedisURL == "" {
		return nil, errors.New("needs Redis: set SECKILL_REDIS_URL")
	}
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.Fsync.Dir, "seckill-bench-ceiling-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := compare.StartCeilingProcess(ctx, bin, dir, cfg.RedisURL, cfg.RedisPoolSize, stock, r.end, cfg.JWTSecret, cfg.JWTIssuer)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	probe := startCPU(ctx, cpuTarget{serverURL: c.URL, redisAddrs: redisAddrs(cfg.RedisURL)})
	defer probe.stop()
	rec := r.load(ctx, report.TargetCeilingProcess, c.URL, load.PurchaseBody(compare.CeilingVoucherID))
	note := "persists nothing: its admissions stay pending in Redis (deleted when it stops)"
	return r.ceilingReport(ctx, report.TargetCeilingProcess, c.URL, stock, rec, probe.stop(), note, c.State)
}

// ceilingReport is a ceiling's report: it persists nothing, so the window
// ends with the load, and its books are its campaign's state in Redis.
func (r *runner) ceilingReport(ctx context.Context, target, endpoint string, stock int64, rec *load.Recorder, cpuWin *cpuWindow,
	note string, state func(context.Context) (remaining, pending int64, err error)) (*report.Report, error) {
	rep := report.Build(target, endpoint, compare.CeilingVoucherID, stock, rec, ctx.Err() != nil)
	rep.VoucherOf = "its own Redis keys"
	p := &report.Persistence{Source: report.SourceRedis, Complete: true, Note: note}
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	remaining, pending, err := state(vctx)
	if err != nil {
		return nil, fmt.Errorf("read %s state: %w", target, err)
	}
	p.RedisRemaining, p.RedisPending = report.Ptr(remaining), report.Ptr(pending)
	p.Rows = pending
	if d := rep.Accepted - pending; d > 0 {
		p.Lost = d
	} else {
		p.Unexpected = -d
	}
	rep.Persistence = p
	rep.CPU = cpuWin.report(map[string]int64{report.UnitAccepted: rep.Accepted})
	rep.Judge()
	return rep, nil
}

// ServeCeiling is `seckill-bench serve-ceiling`, the process
// runCeilingProcess starts: flags --addr, --stock, --until and --pool, and
// SECKILL_REDIS_URL, SECKILL_JWT_SECRET and SECKILL_JWT_ISSUER from getenv.
func ServeCeiling(ctx context.Context, args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet("serve-ceiling", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "where to listen")
	stock := fs.Int64("stock", DefaultStock, "units on sale")
	until := fs.String("until", "", "when the sale ends (RFC 3339)")
	pool := fs.Int("pool", 0, "Redis connections (0: go-redis's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	end, err := time.Parse(time.RFC3339, *until)
	if err != nil {
		return fmt.Errorf("--until: %w", err)
	}
	secret := getenv("SECKILL_JWT_SECRET")
	if secret == "" {
		return errors.New("serve-ceiling needs SECKILL_JWT_SECRET")
	}
	tokens := auth.NewTokens([]byte(secret), getenv("SECKILL_JWT_ISSUER"))
	return compare.ServeCeiling(ctx, *addr, getenv("SECKILL_REDIS_URL"), *pool, *stock, end, tokens)
}

// FsyncConfig is how --compare fsync, wait and limit start their servers.
type FsyncConfig struct {
	SeckillBin string // the seckill binary; "": seckill beside the running program, else on PATH
	RedisBin   string // "": redis-server on PATH
	Dir        string // where the private Redis servers keep their AOF; "": the system's temp directory
	// DatabaseURLs are empty databases for the servers, by target
	// (report.TargetEverysec, TargetNoWait, TargetLimit, ...); a missing one
	// makes the bench recreate seckill_bench_fsync_<setting> or
	// seckill_bench_<target> on the server at Config.DatabaseURL.
	DatabaseURLs map[string]string
}

// runFsync measures the real seckill server on two private Redis servers
// with the append-only file on, first with appendfsync everysec, then with
// always: the cost of losing nothing acknowledged when the host crashes.
// Each gets a campaign of Config.Stock units.
func (r *runner) runFsync(ctx context.Context) ([]*report.Report, error) {
	return r.runPrivates(ctx, "fsync", []string{report.TargetEverysec, report.TargetAlways}, r.runOnRedis)
}

// runPrivates measures one private server per label, one after the other:
// run starts each with the seckill and redis-server binaries, its files
// under dir (named after name, removed at the end), and measures it.
func (r *runner) runPrivates(ctx context.Context, name string, labels []string,
	run func(ctx context.Context, seckillBin, redisBin, dir, label string) (*report.Report, error)) ([]*report.Report, error) {
	seckillBin, redisBin, dir, err := r.privateBinaries(name)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []*report.Report
	for _, label := range labels {
		if ctx.Err() != nil {
			break
		}
		rep, err := run(ctx, seckillBin, redisBin, dir, label)
		if err != nil {
			return out, fmt.Errorf("%s: %w", label, err)
		}
		out = append(out, rep)
	}
	return out, nil
}

// privateBinaries finds the seckill and redis-server binaries that --compare
// fsync, wait and limit run, and makes a directory for their files (the caller
// removes it).
func (r *runner) privateBinaries(name string) (seckillBin, redisBin, dir string, err error) {
	fc := r.cfg.Fsync
	if seckillBin, err = findSeckill(fc.SeckillBin); err != nil {
		return "", "", "", err
	}
	if redisBin, err = exec.LookPath(cmp.Or(fc.RedisBin, "redis-server")); err != nil {
		return "", "", "", fmt.Errorf("needs redis-server (install Redis or pass --redis-server): %w", err)
	}
	dir, err = os.MkdirTemp(fc.Dir, "seckill-bench-"+name+"-")
	return seckillBin, redisBin, dir, err
}

// runOnRedis starts a private Redis with the appendfsync setting of label
// (report.TargetEverysec or TargetAlways) and a seckill server on it and
// an empty database, and measures that server.
func (r *runner) runOnRedis(ctx context.Context, seckillBin, redisBin, dir, label string) (*report.Report, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	setting := map[string]string{report.TargetEverysec: compare.FsyncEverysec, report.TargetAlways: compare.FsyncAlways}[label]
	rs, err := compare.StartRedis(sctx, redisBin, dir, setting)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	return r.runPrivate(ctx, seckillBin, dir, label, "seckill_bench_fsync_"+setting, rs.URL, nil,
		fmt.Sprintf("seckill serve on a private redis-server, appendonly yes, appendfsync %s, AOF in %s", setting, filepath.Dir(rs.Dir)))
}

// runWait measures the real seckill server on a private Redis master with
// one replica, first answering on the master's word, then with every
// acceptance confirmed by the replica (SECKILL_REDIS_MIN_REPLICAS=1): the
// cost of losing nothing accepted when the master dies. Both use
// appendfsync everysec, so that the disk does not hide the network.
func (r *runner) runWait(ctx context.Context) ([]*report.Report, error) {
	return r.runPrivates(ctx, "wait", []string{report.TargetNoWait, report.TargetWait}, r.runReplicated)
}

// runReplicated starts a private master and replica and a seckill server
// on them that waits for the replica if label is report.TargetWait, and
// measures that server.
func (r *runner) runReplicated(ctx context.Context, seckillBin, redisBin, dir, label string) (*report.Report, error) {
	minReplicas := 0
	if label == report.TargetWait {
		minReplicas = 1
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	master, err := compare.StartRedis(sctx, redisBin, dir, compare.FsyncEverysec, "--repl-diskless-sync-delay", "0")
	if err != nil {
		return nil, err
	}
	defer master.Close()
	replica, err := compare.StartReplica(sctx, redisBin, dir, compare.FsyncEverysec, master)
	if err != nil {
		return nil, err
	}
	defer replica.Close()
	return r.runPrivate(ctx, seckillBin, dir, label, "seckill_bench_"+strings.ReplaceAll(label, "-", "_"), master.URL,
		[]string{"SECKILL_REDIS_MIN_REPLICAS=" + strconv.Itoa(minReplicas)},
		fmt.Sprintf("seckill serve with SECKILL_REDIS_MIN_REPLICAS=%d on a private redis-server master with one replica, appendfsync everysec", minReplicas))
}

// limitEnv is the seckill server's limits for each target of --compare
// limit. With the limits on, each bench user buys once (a burst of 10 at 5
// a second allows ten attempts) and all the bench's traffic comes from
// 127.0.0.1, whose limit of a million a second, a million at once, the
// bench never reaches: every purchase pays for both checks (the in-memory
// one and the GCRA cells in the admission script) and none is refused.
// Every variable is set on both sides, so that the operator's environment
// decides nothing.
var limitEnv = map[string][]string{
	report.TargetNoLimit: {"SECKILL_USER_RATE=0", "SECKILL_ADDRESS_RATE=0"},
	report.TargetLimit: {"SECKILL_USER_RATE=5", "SECKILL_USER_BURST=10",
		"SECKILL_ADDRESS_RATE=1000000", "SECKILL_ADDRESS_BURST=1000000"},
}

// runLimit measures the real seckill server on a private Redis, first
// without the shared per-user and per-address limits, then with both on at
// rates that never refuse the bench's load: the cost of checking the limits
// on every purchase. Both use appendfsync everysec, as wait does.
func (r *runner) runLimit(ctx context.Context) ([]*report.Report, error) {
	return r.runPrivates(ctx, "limit", []string{report.TargetNoLimit, report.TargetLimit}, r.runLimited)
}

// runLimited starts a private Redis and a seckill server on it with the
// limits of label, and measures that server.
func (r *runner) runLimited(ctx context.Context, seckillBin, redisBin, dir, label string) (*report.Report, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rs, err := compare.StartRedis(sctx, redisBin, dir, compare.FsyncEverysec)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	env := limitEnv[label]
	return r.runPrivate(ctx, seckillBin, dir, label, "seckill_bench_"+strings.ReplaceAll(label, "-", "_"), rs.URL, env,
		fmt.Sprintf("seckill serve with %s on a private redis-server, appendfsync everysec", strings.Join(env, " ")))
}

// runPrivate starts a seckill server on redisURL, an empty database (from
// Config.Fsync.DatabaseURLs[label], else dbName recreated) and the extra
// environment env, and measures it; note says what it ran on.
func (r *runner) runPrivate(ctx context.Context, seckillBin, dir, label, dbName, redisURL string, env []string, note string) (*report.Report, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	dsn := r.cfg.Fsync.DatabaseURLs[label]
	if dsn == "" {
		if r.cfg.DatabaseURL == "" {
			return nil, errors.New("needs Postgres: set SECKILL_DATABASE_URL")
		}
		var err error
		if dsn, err = compare.RecreateDatabase(sctx, r.cfg.DatabaseURL, dbName); err != nil {
			return nil, err
		}
	}
	srv, err := compare.StartSeckill(sctx, seckillBin, dir, append([]string{
		"SECKILL_DATABASE_URL=" + dsn, "SECKILL_REDIS_URL=" + redisURL,
		"SECKILL_JWT_SECRET=" + r.cfg.JWTSecret, "SECKILL_JWT_ISSUER=" + r.cfg.JWTIssuer,
	}, env...))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	rep, err := r.runSeckill(ctx, seckillTarget{
		label: label, url: srv.URL, voucherOf: "its own database",
		databaseURL: dsn, redisURL: redisURL,
	})
	if err != nil {
		return nil, err
	}
	if rep.Persistence != nil {
		rep.Persistence.Note = joinNotes(note+"; database "+redactDSN(dsn), rep.Persistence.Note)
	}
	return rep, nil
}

// findSeckill returns bin if set, else the seckill binary beside the
// running program (bin/seckill beside bin/seckill-bench), else seckill on
// PATH.
func findSeckill(bin string) (string, error) {
	if bin != "" {
		return exec.LookPath(bin)
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "seckill")
		if st, err := os.Stat(beside); err == nil && !st.IsDir() {
			return beside, nil
		}
	}
	p, err := exec.LookPath("seckill")
	if err != nil {
		return "", errors.New("needs the seckill binary: build it (make build) or pass --seckill PATH")
	}
	return p, nil
}

func joinNotes(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// redactDSN drops the password from a database URL.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// runCeilingRounds measures the server at URL and the ceilings of
// cfg.Compare in turn for cfg.Rounds rounds (--rounds with --compare
// ceiling, ceiling-process): the server first in odd rounds, last in even
// ones, half a second apart, each run on a campaign of its own. One run of
// each moves with whatever else the machine does at that moment; the
// medians of several alternated rounds do not (report.Compare relates them).
func (r *runner) runCeilingRounds(ctx context.Context, res *report.Result) error {
	cfg := r.cfg
	order := []string{report.TargetSeckill}
	for _, c := range cfg.Compare {
		if !slices.Contains(order, c) {
			order = append(order, c)
		}
	}
	for round := 1; round <= cfg.Rounds && ctx.Err() == nil; round++ {
		for _, target := range order {
			if !load.SleepUntil(ctx, time.Now().Add(buildSettle)) {
				return nil
			}
			var rep *report.Report
			var err error
			switch target {
			case CompareCeiling:
				rep, err = r.runCeiling(ctx, cfg.Stock)
			case CompareCeilingProcess:
				rep, err = r.runCeilingProcess(ctx, cfg.Stock)
			default:
				rep, err = r.runSeckill(ctx, seckillTarget{label: target, url: cfg.URL,
					databaseURL: cfg.DatabaseURL, redisURL: cfg.RedisURL, redisNodes: cfg.RedisClusterAddrs})
			}
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", target, round, err)
			}
			rep.Round = round
			res.Runs = append(res.Runs, rep)
		}
		slices.Reverse(order)
	}
	return nil
}
