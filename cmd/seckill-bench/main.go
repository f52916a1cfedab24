// Command seckill-bench load-tests a running seckill server and compares it
// with other designs. It is an operator tool beside the server, not part
// of it: it shares seckill's packages and starts the real seckill binary
// when it needs a server of its own, but never wires one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"seckill/internal/bench"
	"seckill/internal/bench/report"
	"seckill/internal/cli"
	"seckill/internal/config"
)

const usage = `Usage: seckill-bench [flags]

Load-tests a running seckill server (seckill serve) through GraphQL: creates
a campaign as admin, signs its buyers' tokens with the server's
SECKILL_JWT_SECRET, sends the load, waits until every accepted order is in
Postgres, verifies there is no oversell, lost or duplicate order, and reports.

  burst (default)   every user fires at once: --users 1000 --stock 200 [--attempts N]
  open model        --rate R [--duration 10s]: R requests a second, answered or not
  closed model      --duration D [--concurrency 100]: C callers, each waits for its answer

  --compare sync     also run the load, in the same run, against the seed's
                     synchronous design (one Postgres transaction a purchase;
                     database seckill_bench_sync, recreated)
  --compare ceiling  also run it against a bare net/http handler that runs
                     only the admission script: the ceiling of the path;
                     with --rounds N, N rounds of the server and the
                     ceilings, alternated (the server first in odd rounds,
                     last in even ones), compared by their medians and
                     round by round
  --compare ceiling-process
                     the same handler in a process of its own, as seckill
                     serve is (seckill-bench serve-ceiling, started by the
                     bench): in the bench's process the ceiling shares the
                     load generator's Go runtime, which no server can
  --compare fsync    also run it against the seckill binary on two private
                     redis-servers (AOF on, appendfsync everysec, then always;
                     databases seckill_bench_fsync_*, recreated): the cost of
                     losing nothing acknowledged when the host crashes
  --compare wait     also run it against the seckill binary on a private
                     redis-server master with one replica, without and with
                     SECKILL_REDIS_MIN_REPLICAS=1 (databases
                     seckill_bench_no_wait and seckill_bench_wait, recreated):
                     the cost of confirming every acceptance on a replica
  --compare limit    also run it against the seckill binary on a private
                     redis-server (appendfsync everysec) without the shared
                     limits (SECKILL_USER_RATE=0, SECKILL_ADDRESS_RATE=0),
                     then with both on at rates the load never reaches
                     (databases seckill_bench_no_limit and
                     seckill_bench_limit, recreated): the cost of checking
                     them on every purchase; a RATE_LIMITED answer fails
                     the run, as the ratio would then price refusals

  --compare base --base-binary PATH [--rounds 5]
                     instead of the server at --url: the seckill binary at
                     PATH (BASE) against HEAD's (--seckill, default the one
                     beside seckill-bench), each on a private redis-server
                     and database (seckill_bench_base, seckill_bench_head,
                     recreated) with the shared limits on at rates the load
                     never reaches; a closed-model load (--duration,
                     default 4s; --concurrency, default 64; at least
                     100,000 units) and the seed's burst (1000 users, 200
                     units) against each build for --rounds rounds (base
                     first in odd rounds, head first in even ones, half a
                     second apart); prints each run, and per load the throughput
                     ratio head ÷ base, p50, p99 and each process's CPU per
                     purchase (make bench-compare BASE=<commit> builds BASE
                     and runs it)

  --expiry-storm N [--pay-window 20s] [--concurrency 128] [--duration 3s]
                     instead of one load: sells a campaign of N units with
                     that pay window (default 10 s + 1 s per 2,000 units)
                     to N buyers who never pay (a burst of --concurrency
                     callers), waits until every order is CREATED, and
                     reports Redis's used_memory before and after per
                     awaiting order with the keys that grew by pattern
                     (MEMORY USAGE); then, from the first pay_by until the
                     last order is EXPIRED in Postgres (at most
                     --expiry-timeout), the expiry rate, the server's
                     Postgres pool in use (pg_stat_activity every 100 ms)
                     and each process's CPU per expired order; and the p99
                     and persistence lag of a second campaign's sale (a
                     closed model of 32 callers for --duration) alone
                     before the storm and again during it, with their
                     ratio (issue #20's target: within 1.5×). Run it
                     against a server on a Redis of its own: used_memory
                     is the instance's

  --cancel-storm N [--storm-callers 64] [--concurrency 128] [--duration 3s]
  --payment-storm N [--storm-callers 64] [--concurrency 128] [--duration 3s]
                     instead of one load: sells a campaign of N units (a
                     burst of --concurrency callers, a pay window of an
                     hour) and waits until every order is CREATED; with
                     --payment-storm every buyer then opens their payment
                     (createPayment, timed apart). Then the storm:
                     --storm-callers at once close one order each, waiting
                     for the answer, until every order is closed: its buyer
                     cancels it (GraphQL cancelOrder), or the provider
                     confirms its payment (a signed payment.succeeded to
                     /webhooks/payments). Reports the orders closed a
                     second, the requests' latency, the server's Postgres
                     pool in use, each process's CPU per order closed, and
                     the p99 and persistence lag of a second campaign's
                     sale (a closed model of 32 callers for --duration)
                     alone before the storm and again during it. The
                     verdict fails unless every order ended CANCELLED with
                     its unit back on sale, or PAID with one succeeded
                     payment, and the books balance. At most
                     --storm-timeout (default max(2m, one second per 200
                     units))

  --pay-ratio 0.7 [--pay-delay 200ms] [--pay-window 5s]
                     accepted buyers open their payment (createPayment) and
                     this share of them has it confirmed after the delay
                     through the signed webhook, as a payment provider
                     would; the rest never pay, so their orders expire after
                     the campaign's pay window and the units sell again to
                     later buyers (a sustained load longer than the window
                     shows it). The report adds paid, expired, resold, and
                     checks initial = remaining + queued + awaiting payment
                     + paid.

  --waiting-room [--room-rate N] [--room-opens 5s] [--room-pass 10s]
                     the campaign the bench creates has a waiting room that
                     opens --room-opens before the sale and lets --room-rate
                     buyers through a second (default: a third of --users).
                     Every buyer joins it at a random moment before the open,
                     asks where they stand (the waitingRoom query, every
                     second and when their turn is due), buys with the pass
                     of their turn, and gives up when the room says SOLD_OUT
                     or MISSED; a few purchases without a pass are sent just
                     after the open and must be refused. The verdict fails
                     unless exactly the stock sold (min(stock, users)) and
                     nobody bought without a turn; the report adds the
                     room's counts (joined, let through, missed, sold out),
                     the purchases per second of the sale, and fairness:
                     Spearman's rank correlation between join time and place
                     among those who joined before the open (near 0, within
                     a few standard errors 1/sqrt(n-1)).

  --token-alg hs256,rs256,es256
                     run the load once per algorithm of the buyers' tokens,
                     each on a campaign of its own, in the same run, and
                     compare their throughput: hs256 signs with the
                     server's SECKILL_JWT_SECRET (the default); rs256 and
                     es256 come from the bench's own identity provider (a
                     discovery document and a key set on --idp-addr, fresh
                     keys every run, string subjects the server has never
                     seen: each buyer's first purchase is also its
                     subject's first sight), which the server must trust:
                       SECKILL_AUTH_JWKS_URL=http://127.0.0.1:8099/jwks
                       SECKILL_AUTH_ISSUER=http://127.0.0.1:8099
                       SECKILL_AUTH_AUDIENCE=seckill-bench seckill serve

Every report gives the CPU time per accepted purchase and per persisted
order of each local process: the server (the one listening on --url's
port), Redis (SECKILL_REDIS_URL's port), Postgres (the postmaster on
SECKILL_DATABASE_URL's port and its children of that database) and the
bench, read from /proc from the start of the load until the last accepted
order is in Postgres. /proc counts in 10 ms ticks: run for seconds, not a
burst of milliseconds, for figures worth reading.

Reads SECKILL_JWT_SECRET, SECKILL_JWT_ISSUER, SECKILL_DATABASE_URL,
SECKILL_REDIS_URL and SECKILL_PAYMENT_WEBHOOK_SECRET like the server
(SECKILL_ENV=dev for the development secrets).
Ctrl-C stops the load and prints the partial report.

Flags:
`

// compareFlag collects --compare values, repeated or comma-separated.
type compareFlag []string

func (c *compareFlag) String() string { return strings.Join(*c, ",") }

func (c *compareFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*c = append(*c, s)
		}
	}
	return nil
}

func main() { cli.Main("seckill-bench", run) }

// run parses args, reads the server's configuration from the environment,
// runs and prints the report (text, or JSON with --json) on stdout and the
// progress on stderr. It returns an error when the run could not be made,
// was interrupted, or its verdict is FAIL.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "serve-ceiling" {
		// The ceiling in a process of its own, which --compare
		// ceiling-process starts.
		return bench.ServeCeiling(ctx, args[1:], os.Getenv)
	}
	cfg, asJSON, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	sc, err := config.Load(nil)
	if err != nil {
		return err
	}
	cfg.JWTSecret, cfg.JWTIssuer = sc.JWTSecret, sc.JWTIssuer
	cfg.DatabaseURL, cfg.RedisURL, cfg.RedisClusterAddrs = sc.DatabaseURL, sc.RedisURL, sc.RedisClusterAddrs
	cfg.RedisPoolSize, cfg.DBMaxConns = sc.RedisPoolSize, sc.DBMaxConns
	cfg.Pay.WebhookSecret = sc.PaymentWebhookSecret
	cfg.Progress, cfg.ProgressTTY = stderr, report.IsTerminal(stderr)

	res, runErr := bench.Run(ctx, cfg)
	if res != nil && len(res.AllRuns()) > 0 {
		if asJSON {
			err = res.WriteJSON(stdout)
		} else {
			err = res.WriteText(stdout)
		}
		if err != nil {
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	if res.Interrupted {
		return errors.New("interrupted; the report is partial")
	}
	var failed []string
	for _, r := range res.AllRuns() {
		if !r.OK {
			failed = append(failed, r.Label())
		}
	}
	if s := res.Storm; s != nil && !s.OK {
		failed = append(failed, "the expiry storm")
	}
	if s := res.CloseStorm; s != nil && !s.OK {
		failed = append(failed, "the "+s.Kind+" storm")
	}
	if len(failed) > 0 {
		return fmt.Errorf("the verdict is FAIL for %s", strings.Join(failed, ", "))
	}
	return nil
}

// parseFlags turns the command line into a run's configuration, without
// the services and secrets, which come from the environment.
func parseFlags(args []string, stderr io.Writer) (cfg bench.Config, asJSON bool, err error) {
	fs := flag.NewFlagSet("seckill-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var compare compareFlag
	fs.StringVar(&cfg.URL, "url", bench.DefaultURL, "GraphQL endpoint of the server")
	fs.Int64Var(&cfg.VoucherID, "voucher", 0, "buy from this existing campaign instead of creating one")
	fs.Int64Var(&cfg.Stock, "stock", bench.DefaultStock, "units of the campaign the bench creates")
	fs.IntVar(&cfg.Users, "users", 0, "distinct buyers (default 1000 in a burst; in sustained runs max(2×stock, 10000), at most one per request)")
	fs.IntVar(&cfg.Attempts, "attempts", 1, "burst: requests per user")
	fs.IntVar(&cfg.Concurrency, "concurrency", 0, "burst: callers at once (default: users); with --duration and no --rate: closed model with this many callers (default 100)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open model: requests a second")
	fs.DurationVar(&cfg.Duration, "duration", 0, "sustained run length (default 10s with --rate)")
	fs.DurationVar(&cfg.Ramp, "ramp", 0, "burst: start the callers spread over this long, like JMeter's ramp-up (default: all at once)")
	fs.BoolVar(&cfg.Warm, "warm", false, "burst and closed model: open every caller's connection before the clock starts (measures the server, not TCP handshakes)")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", bench.DefaultMaxInFlight, "open model: outstanding requests at most; more are dropped and counted")
	fs.DurationVar(&cfg.Timeout, "timeout", bench.DefaultTimeout, "timeout of one request")
	fs.DurationVar(&cfg.PersistTimeout, "persist-timeout", bench.DefaultPersistTimeout, "how long to wait for accepted orders to reach Postgres")
	fs.Var(&compare, "compare", "sync, ceiling, ceiling-process, fsync, wait and/or limit (comma-separated or repeated): run the same load against them too; or base alone: BASE's build against HEAD's")
	fs.StringVar(&cfg.Fsync.SeckillBin, "seckill", "", "--compare fsync, wait, limit and base: the seckill binary (with base: HEAD's; default: seckill beside seckill-bench, else on PATH)")
	fs.StringVar(&cfg.Fsync.RedisBin, "redis-server", "redis-server", "--compare fsync, wait, limit and base: the redis-server binary")
	fs.StringVar(&cfg.Fsync.Dir, "fsync-dir", "", "--compare fsync, wait, limit and base: directory for the private Redis servers' AOF, on the disk to measure (default: the temp directory)")
	fs.StringVar(&cfg.Base.Binary, "base-binary", "", "--compare base: the seckill binary of BASE, measured against HEAD's (--seckill)")
	fs.IntVar(&cfg.Rounds, "rounds", 0, fmt.Sprintf("--compare base: rounds of each load against each build, alternated (default %d); --compare ceiling and/or ceiling-process alone: rounds of the load against the server and the ceilings, alternated (default 1)", bench.DefaultBaseRounds))
	fs.StringVar(&cfg.Challenge, "challenge", "", "pow or quiz: give the campaign the bench creates this challenge; every buyer asks for theirs and solves it before buying (the report shows how the purchases spread)")
	fs.IntVar(&cfg.PoWBits, "pow-bits", 0, "--challenge pow: leading zero bits (default: the server's, 20)")
	fs.BoolVar(&cfg.Room.On, "waiting-room", false, "give the campaign the bench creates a waiting room: every buyer joins it before the sale at a random moment, waits for their turn and buys with its pass (see above)")
	fs.IntVar(&cfg.Room.Rate, "room-rate", 0, "--waiting-room: turns a second (default: a third of --users, so that every turn comes within about 3 s)")
	fs.DurationVar(&cfg.Room.Opens, "room-opens", 0, fmt.Sprintf("--waiting-room: how long before the sale the room opens, whole seconds; the buyers join over it (default %s)", bench.DefaultRoomOpens))
	fs.DurationVar(&cfg.Room.Pass, "room-pass", 0, "--waiting-room: how long a pass lasts from its turn, whole seconds from 10s to 1h (default: the server's, 1m)")
	fs.Float64Var(&cfg.Pay.Ratio, "pay-ratio", 0, "share (0 to 1) of accepted buyers who pay through the signed webhook; the others let their orders expire")
	fs.DurationVar(&cfg.Pay.Delay, "pay-delay", 0, "with --pay-ratio: how long after createPayment the provider confirms a payment")
	fs.DurationVar(&cfg.Pay.Window, "pay-window", 0, "with --pay-ratio: the pay window of the campaign the bench creates (whole seconds; default: the server's SECKILL_PAY_WINDOW)")
	fs.Int64Var(&cfg.Storm.Units, "expiry-storm", 0, fmt.Sprintf("sell this many units (e.g. %d) of a campaign with a short --pay-window to buyers who never pay, and measure their expiry (see above)", bench.DefaultStormUnits))
	fs.DurationVar(&cfg.Storm.Timeout, "expiry-timeout", 0, "--expiry-storm: how long to wait for every order to expire (default max(2m, one second per 200 units))")
	var cancelStorm, paymentStorm int64
	fs.Int64Var(&cancelStorm, "cancel-storm", 0, fmt.Sprintf("sell this many units (e.g. %d) and have every buyer cancel at once through GraphQL (see above)", bench.DefaultStormUnits))
	fs.Int64Var(&paymentStorm, "payment-storm", 0, fmt.Sprintf("sell this many units (e.g. %d) and have the provider confirm every payment at once through the webhook (see above)", bench.DefaultStormUnits))
	fs.IntVar(&cfg.Storm.Closers, "storm-callers", 0, fmt.Sprintf("--cancel-storm and --payment-storm: orders closed at once, each waiting for its answer (default %d)", bench.DefaultStormClosers))
	fs.DurationVar(&cfg.Storm.Timeout, "storm-timeout", 0, "--cancel-storm and --payment-storm: how long the storm may run (default max(2m, one second per 200 units))")
	var algs compareFlag
	fs.Var(&algs, "token-alg", "hs256, rs256 and/or es256 (comma-separated or repeated): the buyers' tokens, one run of the load each (default hs256)")
	fs.StringVar(&cfg.IdPAddr, "idp-addr", bench.DefaultIdPAddr, "--token-alg rs256/es256: where the bench's identity provider listens (the server's SECKILL_AUTH_JWKS_URL is http://ADDR/jwks)")
	fs.StringVar(&cfg.IdPAudience, "idp-audience", bench.DefaultIdPAudience, "--token-alg rs256/es256: the aud of its tokens (the server's SECKILL_AUTH_AUDIENCE)")
	var shards compareFlag
	fs.Var(&shards, "shards", "e.g. 1,3: run the load against a new campaign of each number of stock shards (1 to 64), one after the other, and report each Redis master's share of the admission scripts and the busiest master's CPU per script (INFO commandstats and cpu)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return cfg, false, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return cfg, false, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch cfg.Challenge {
	case "", bench.ChallengePoW, bench.ChallengeQuiz:
	default:
		return cfg, false, fmt.Errorf("--challenge must be pow or quiz, not %q", cfg.Challenge)
	}
	if cfg.Challenge != "" && cfg.VoucherID != 0 {
		return cfg, false, errors.New("--challenge sets the challenge of the campaign the bench creates: omit --voucher")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if strings.HasPrefix(f.Name, "pay-") {
			cfg.Pay.On = true
		}
	})
	var storms []string
	for name, units := range map[string]int64{"expiry": cfg.Storm.Units, "cancel": cancelStorm, "payment": paymentStorm} {
		if set[name+"-storm"] {
			storms = append(storms, "--"+name+"-storm")
			cfg.Storm.Kind, cfg.Storm.Units = name, units
		}
	}
	if len(storms) > 1 {
		return cfg, false, errors.New("one storm at a time: --expiry-storm, --cancel-storm or --payment-storm")
	}
	if set["expiry-timeout"] && set["storm-timeout"] {
		return cfg, false, errors.New("--expiry-timeout goes with --expiry-storm, --storm-timeout with the others: not both")
	}
	if len(storms) == 1 {
		if set["stock"] || set["users"] || set["attempts"] {
			return cfg, false, fmt.Errorf("%s N sets the campaign's units and buyers: omit --stock, --users and --attempts", storms[0])
		}
		// The sale's callers, and the second campaign's sale.
		cfg.Storm.Callers, cfg.Concurrency = cfg.Concurrency, 0
		cfg.Storm.ProbeDuration, cfg.Duration = cfg.Duration, 0
	}
	cfg.Compare = compare
	cfg.TokenAlgs = algs
	for _, v := range shards {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return cfg, false, fmt.Errorf("--shards takes numbers of shards from 1 to 64, not %q", v)
		}
		cfg.Shards = append(cfg.Shards, n)
	}
	if len(cfg.Shards) > 0 && (cfg.VoucherID != 0 || len(cfg.Compare) > 0 || len(storms) > 0) {
		return cfg, false, errors.New("--shards creates its own campaigns and runs alone: omit --voucher, --compare and the storms")
	}
	return cfg, asJSON, nil
}
