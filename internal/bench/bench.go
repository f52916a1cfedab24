// Package bench is seckill-bench's engine: the load test of the articles
// seckill grew from (1000 users with tokens buy at once against 200 units),
// plus sustained open- and closed-model loads. It drives a running server
// over GraphQL, verifies what the run left in Postgres and Redis (oversell,
// lost and duplicate orders) and reports throughput and latency.
//
// With Compare it runs the same load, in the same run, against other
// servers: "sync", the seed's synchronous design (one Postgres transaction
// per purchase); "ceiling", a bare net/http handler that runs only the
// admission script; "fsync", the real seckill binary on two private
// Redis servers, one with appendfsync everysec and one with always; and
// "wait", the seckill binary on a private master with a replica, without
// and with WAIT for that replica; and "limit", the seckill binary on a
// private Redis without and with the shared per-user and per-address
// limits (at rates that never refuse the load).
//
// Every seckill run also reports the CPU time per accepted and persisted
// order of each local process (server, Redis, Postgres, the bench), read
// from /proc. With Compare "base" it measures another build of the seckill
// binary against the working tree's instead, each on a private Redis and
// database, alternated round by round; with Storm it sells a campaign to
// buyers who never pay and measures their expiry.
//
// The work is split by job: load generates the requests, report turns
// them into figures and text, verify checks the books and samples the
// stores, compare holds the compared servers, cpu reads /proc. This
// package runs one target after another.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"seckill/internal/auth"
	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
	"seckill/internal/seckill"
)

// What Compare may hold.
const (
	CompareSync    = report.TargetSync
	CompareCeiling = report.TargetCeiling
	// CompareCeilingProcess is the ceiling in a process of its own.
	CompareCeilingProcess = report.TargetCeilingProcess
	CompareFsync          = "fsync" // report.TargetEverysec and report.TargetAlways
	CompareWait           = "wait"  // report.TargetNoWait and report.TargetWait
	CompareLimit          = "limit" // report.TargetNoLimit and report.TargetLimit
	// CompareBase measures Base.Binary against the working tree's build,
	// instead of the server at URL (report.TargetBase, TargetHead).
	CompareBase = "base"
)

// DefaultURL is where `seckill serve` answers GraphQL by default.
const DefaultURL = "http://localhost:8080/graphql"

// Defaults of Config's zero values.
const (
	DefaultUsers          = 1000
	DefaultStock          = 200
	DefaultClosedCallers  = 100
	DefaultMaxInFlight    = 2000
	DefaultTimeout        = 10 * time.Second
	DefaultPersistTimeout = 60 * time.Second
	DefaultDuration       = 10 * time.Second
	maxUsers              = 2_000_000
	maxRounds             = 20
)

// Config is one bench run.
type Config struct {
	URL       string // GraphQL endpoint of the server; DefaultURL when empty
	VoucherID int64  // an existing campaign to buy from; 0 creates one of Stock units
	Stock     int64  // units of the campaign the bench creates

	// Users is how many distinct buyers there are; request k is made by
	// user k mod Users. 0: DefaultUsers in a burst; in a sustained run,
	// enough that the stock sells to distinct users and then some.
	Users    int
	Attempts int // burst: requests per user (default 1)
	// Concurrency is how many callers send at once: burst (default Users)
	// and closed model (default DefaultClosedCallers).
	Concurrency int
	Rate        float64       // > 0: open model at this many requests a second
	Duration    time.Duration // sustained runs; with Rate 0 it selects the closed model
	Ramp        time.Duration // burst: callers start spread over this long
	MaxInFlight int           // open model: more outstanding requests are dropped
	Timeout     time.Duration // one request
	// Warm opens every caller's connection before the clock starts (burst
	// and closed model): the run then measures the server, not the TCP
	// handshakes of a thousand new clients.
	Warm bool

	// Challenge, "pow" or "quiz", gives the campaign the bench creates that
	// challenge; every buyer solves theirs before buying. PoWBits is the
	// proof of work's difficulty (0: the server's default).
	Challenge string
	PoWBits   int

	// Room, when On, gives the campaign the bench creates a waiting room
	// that every buyer goes through before buying (room.go).
	Room RoomConfig

	// Pay makes the accepted buyers pay, or not, through the webhook.
	Pay PayConfig

	// TokenAlgs are the kinds of buyers' tokens (TokenHS256, TokenRS256,
	// TokenES256): the load runs against the server at URL once with each,
	// on a campaign of its own, in this order; default TokenHS256 alone.
	// The provider's tokens come from the bench's identity provider on
	// IdPAddr (default DefaultIdPAddr), for audience IdPAudience (default
	// DefaultIdPAudience), which the server must trust.
	TokenAlgs   []string
	IdPAddr     string
	IdPAudience string

	PersistTimeout time.Duration // how long to wait for accepted orders to be persisted
	Compare        []string      // CompareSync, CompareCeiling, CompareCeilingProcess, CompareFsync, CompareWait, CompareLimit
	// Shards, when set, runs the load against a new campaign of each of
	// these numbers of stock shards instead (shards.go), and reports how
	// each spread over the Redis masters.
	Shards []int

	// Secrets and services, normally from the server's configuration.
	JWTSecret   string
	JWTIssuer   string
	DatabaseURL string // the server's Postgres, to verify orders; "" verifies through GraphQL only
	RedisURL    string // the server's Redis (queue depth) and the ceiling's
	// RedisClusterAddrs are the server's Redis Cluster nodes (host:port),
	// when it runs on one: the CPU probe measures them instead of RedisURL.
	RedisClusterAddrs []string
	RedisPoolSize     int // the ceiling's Redis pool; 0: go-redis's default, as the server
	DBMaxConns        int // the sync design's Postgres pool, as the server's
	// SyncDatabaseURL is an empty database for the sync design; "" makes
	// the bench recreate compare.SyncDatabase on the server at DatabaseURL.
	SyncDatabaseURL string

	// Fsync is how --compare fsync, wait, limit and base start their servers.
	Fsync FsyncConfig
	// Base is the build --compare base measures the working tree's against.
	Base BaseConfig
	// Rounds is how many times --compare base runs each load against each
	// build (0: DefaultBaseRounds), or --compare ceiling the load against
	// the server and the ceiling (0: once each): alternated, and compared by
	// their medians and round by round.
	Rounds int
	// Storm, with Units set, runs --expiry-storm instead of the load.
	Storm StormConfig

	Progress    io.Writer // progress and status lines; nil for none
	ProgressTTY bool      // redraw the progress line in place
}

// spec validates cfg, fills its defaults and returns the load.
func (cfg *Config) spec() (load.Spec, error) {
	cfg.URL = cmp.Or(cfg.URL, DefaultURL)
	cfg.Stock = cmp.Or(cfg.Stock, DefaultStock)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.PersistTimeout = cmp.Or(cfg.PersistTimeout, DefaultPersistTimeout)
	cfg.DBMaxConns = cmp.Or(cfg.DBMaxConns, 20)
	cfg.IdPAddr = cmp.Or(cfg.IdPAddr, DefaultIdPAddr)
	cfg.IdPAudience = cmp.Or(cfg.IdPAudience, DefaultIdPAudience)
	if len(cfg.TokenAlgs) == 0 {
		cfg.TokenAlgs = []string{TokenHS256}
	}
	s := load.Spec{Timeout: cfg.Timeout, Ramp: cfg.Ramp, Rate: cfg.Rate, Duration: cfg.Duration, Warm: cfg.Warm}
	switch {
	case cfg.Rate < 0, cfg.Duration < 0, cfg.Ramp < 0, cfg.Timeout < 0, cfg.PersistTimeout < 0:
		return s, errors.New("--rate, --duration, --ramp and the timeouts must not be negative")
	case cfg.Stock < 1 || cfg.Stock > 10_000_000:
		return s, errors.New("--stock must be between 1 and 10,000,000")
	case cfg.Users < 0 || cfg.Users > maxUsers:
		return s, fmt.Errorf("--users must be between 1 and %s", report.Number(maxUsers))
	case cfg.Attempts < 0 || cfg.Concurrency < 0 || cfg.MaxInFlight < 0:
		return s, errors.New("--attempts, --concurrency and --max-inflight must not be negative")
	case cfg.VoucherID < 0:
		return s, errors.New("--voucher must be a voucher id")
	case cfg.Rounds < 0 || cfg.Rounds > maxRounds:
		return s, fmt.Errorf("--rounds must be between 1 and %d", maxRounds)
	case cfg.Rounds > 0 && !slices.Equal(cfg.Compare, []string{CompareBase}) && !onlyCeilings(cfg.Compare):
		return s, errors.New("--rounds goes with --compare base, or with --compare ceiling and ceiling-process alone")
	case cfg.Rounds > 0 && cfg.Compare[0] != CompareBase && (cfg.VoucherID != 0 || len(cfg.Shards) > 0 || cfg.Pay.On || cfg.Room.On || !slices.Equal(cfg.TokenAlgs, []string{TokenHS256})):
		return s, errors.New("--rounds with --compare ceiling buys from a new campaign in every round with the bench's own tokens: omit --voucher, --shards, --pay-*, --waiting-room and --token-alg")
	}
	if err := cfg.Pay.validate(cfg); err != nil {
		return s, err
	}
	for i, a := range cfg.TokenAlgs {
		if a != TokenHS256 && providerAlgs[a] == "" {
			return s, fmt.Errorf("--token-alg: unknown algorithm %q (want hs256, rs256 or es256)", a)
		}
		if slices.Contains(cfg.TokenAlgs[:i], a) {
			return s, fmt.Errorf("--token-alg: %s twice", a)
		}
	}
	if len(cfg.TokenAlgs) > 1 && cfg.VoucherID != 0 {
		return s, errors.New("--token-alg with several algorithms runs each on a campaign of its own: omit --voucher")
	}
	if (len(cfg.TokenAlgs) > 1 || cfg.TokenAlgs[0] != TokenHS256) && (cfg.Storm.Units != 0 || slices.Contains(cfg.Compare, CompareBase)) {
		return s, errors.New("--token-alg rs256 and es256 measure the server at --url: not with --expiry-storm or --compare base")
	}
	for _, c := range cfg.Compare {
		if c != CompareSync && c != CompareCeiling && c != CompareCeilingProcess && c != CompareFsync && c != CompareWait && c != CompareLimit && c != CompareBase {
			return s, fmt.Errorf("--compare: unknown target %q (want sync, ceiling, ceiling-process, fsync, wait, limit or base)", c)
		}
	}
	switch {
	case cfg.Rate > 0:
		s.Mode = load.ModeOpen
		s.Duration = cmp.Or(s.Duration, DefaultDuration)
		s.MaxInFlight = cmp.Or(cfg.MaxInFlight, DefaultMaxInFlight)
		if s.Planned() < 1 {
			return s, errors.New("--rate × --duration is less than one request")
		}
	case cfg.Duration > 0:
		s.Mode = load.ModeClosed
		s.Concurrency = cmp.Or(cfg.Concurrency, DefaultClosedCallers)
	default:
		s.Mode = load.ModeBurst
		s.Attempts = cmp.Or(cfg.Attempts, 1)
	}
	s.Users = cfg.Users
	if s.Users == 0 {
		switch s.Mode {
		case load.ModeBurst:
			s.Users = DefaultUsers
		case load.ModeOpen:
			// Every request a new buyer, as in a real crowd, until twice
			// the stock: after that, repeat buyers.
			s.Users = int(min(s.Planned(), max(2*cfg.Stock, 10_000)))
		default:
			s.Users = int(max(2*cfg.Stock, 10_000))
		}
		s.Users = min(s.Users, maxUsers)
	}
	if s.Mode == load.ModeBurst {
		s.Concurrency = cmp.Or(cfg.Concurrency, s.Users)
	}
	if err := cfg.Room.validate(cfg, s); err != nil {
		return s, err
	}
	if cfg.Room.On {
		s.Concurrency = s.Users // every buyer waits in the room at once
	}
	return s, nil
}

// runner holds what every target of one run shares.
type runner struct {
	cfg    Config
	spec   load.Spec
	disp   *report.Display
	userLo int64    // first user id; user index i is userLo+i
	auth   []string // "Bearer <token>" by user index, of the algorithm being run
	hsAuth []string // the HS256 tokens (the compared servers verify only these)
	// provider says auth holds the identity provider's tokens: the server
	// gave their subjects user ids of its own (from
	// seckill.FirstExternalUserID), so the run's orders are found by
	// campaign alone.
	provider bool
	idp      *benchIdP // nil unless an algorithm needs it
	admin    string    // an admin token for the control clients
	tokens   *auth.Tokens
	end      time.Time // when the campaigns stop selling
	// makeBody, when set, makes each request's body (load.Target.Prepare),
	// within makeBodyTimeout (load.Target.PrepareTimeout; 0: within the
	// request's timeout), its failures named makeBodyLabel.
	makeBody        func(ctx context.Context, user int) ([]byte, error)
	makeBodyTimeout time.Duration
	makeBodyLabel   string
	// onAccept, when set, hears of each ACCEPTED answer (load.Recorder.OnAccept).
	onAccept func(load.Acceptance)
}

// Run runs the load against the server at cfg.URL and, for each of
// cfg.Compare, against the compared servers, one after the other, and
// returns their reports. When ctx ends it stops sending and returns the
// partial result (Interrupted set) without an error.
func Run(ctx context.Context, cfg Config) (*report.Result, error) {
	if slices.Contains(cfg.Compare, CompareBase) {
		return runBuilds(ctx, cfg)
	}
	if cfg.Storm.Units != 0 {
		return runStorm(ctx, cfg)
	}
	r, err := newRunner(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	if r.idp != nil {
		defer r.idp.close()
	}
	res := &report.Result{Load: r.loadInfo()}
	if len(cfg.Shards) > 0 {
		err := r.runShards(ctx, res)
		if len(res.Runs) > 0 {
			res.Load.Stock = res.Runs[0].Stock
		}
		res.Interrupted = ctx.Err() != nil
		return res, err
	}
	if cfg.Rounds > 0 {
		err := r.runCeilingRounds(ctx, res)
		res.Comparisons = report.Compare(res.Runs)
		res.Interrupted = ctx.Err() != nil
		return res, err
	}
	if cfg.Pay.On {
		res.Load.Pay = &report.PayLoad{Ratio: cfg.Pay.Ratio, DelayS: cfg.Pay.Delay.Seconds(), WindowS: cfg.Pay.Window.Seconds()}
	}
	for i, alg := range r.cfg.TokenAlgs {
		if ctx.Err() != nil {
			break
		}
		if err := r.useTokens(ctx, alg); err != nil {
			return res, err
		}
		rep, err := r.runSeckill(ctx, seckillTarget{
			label: tokenTarget(alg), url: cfg.URL, voucherID: cfg.VoucherID,
			databaseURL: cfg.DatabaseURL, redisURL: cfg.RedisURL, redisNodes: cfg.RedisClusterAddrs,
		})
		if err != nil {
			return res, err
		}
		if i == 0 {
			res.Load.Stock = rep.Stock
		}
		res.Runs = append(res.Runs, rep)
	}
	// The compared servers verify our HS256 tokens only.
	r.auth, r.provider = r.hsAuth, false
	done := map[string]bool{}
	for _, target := range cfg.Compare {
		if ctx.Err() != nil || done[target] {
			continue
		}
		done[target] = true
		var other []*report.Report
		switch target {
		case CompareSync:
			other, err = one(r.runSync(ctx, res.Load.Stock))
		case CompareCeiling:
			other, err = one(r.runCeiling(ctx, res.Load.Stock))
		case CompareCeilingProcess:
			other, err = one(r.runCeilingProcess(ctx, res.Load.Stock))
		case CompareFsync:
			other, err = r.runFsync(ctx)
		case CompareWait:
			other, err = r.runWait(ctx)
		case CompareLimit:
			other, err = r.runLimit(ctx)
		}
		res.Runs = append(res.Runs, other...)
		if err != nil {
			return res, fmt.Errorf("--compare %s: %w", target, err)
		}
	}
	res.Comparisons = report.Compare(res.Runs)
	res.Interrupted = ctx.Err() != nil
	return res, nil
}

// onlyCeilings reports whether compare names the ceilings and nothing else.
func onlyCeilings(compare []string) bool {
	return len(compare) > 0 && !slices.ContainsFunc(compare, func(c string) bool {
		return c != CompareCeiling && c != CompareCeilingProcess
	})
}

func one(r *report.Report, err error) ([]*report.Report, error) {
	if err != nil {
		return nil, err
	}
	return []*report.Report{r}, nil
}

// newRunner validates cfg, checks the server at cfg.URL (when preflight
// says so: --compare base starts its own) and signs the buyers' tokens.
func newRunner(ctx context.Context, cfg Config, preflight bool) (*runner, error) {
	spec, err := cfg.spec()
	if err != nil {
		return nil, err
	}
	if cfg.JWTSecret == "" {
		return nil, errors.New("no JWT secret: the bench signs its users' tokens with the server's SECKILL_JWT_SECRET")
	}
	r := &runner{cfg: cfg, spec: spec, disp: report.NewDisplay(cfg.Progress, cfg.ProgressTTY)}
	r.tokens = auth.NewTokens([]byte(cfg.JWTSecret), cfg.JWTIssuer)
	ttl := 2*time.Hour + 2*spec.Duration + cfg.PersistTimeout
	r.end = time.Now().Add(ttl)

	// Fresh buyers every run, so that runs against the same server never
	// meet an earlier run's buyers: a random block of a billion ids.
	r.userLo = int64(1+rand.N(9_000)) * 1_000_000_000
	if r.admin, err = r.tokens.Issue(r.userLo-1, true, ttl); err != nil {
		return nil, err
	}
	if preflight {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = newControlClient(cfg.URL, r.admin).preflight(pctx)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if spec.Users > 50_000 {
		r.disp.Println("minting %s tokens...", report.Number(int64(spec.Users)))
	}
	r.auth, err = mintTokens(ctx, r.tokens, r.userLo, spec.Users, ttl)
	if ctx.Err() != nil {
		return nil, errors.New("interrupted before the load began")
	} else if err != nil {
		return nil, err
	}
	r.hsAuth = r.auth
	if slices.ContainsFunc(cfg.TokenAlgs, func(a string) bool { return a != TokenHS256 }) {
		if r.idp, err = startIdP(cfg.IdPAddr); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// useTokens makes the buyers' tokens those of alg, minting them (and
// checking that the server accepts them) for a provider's algorithm.
func (r *runner) useTokens(ctx context.Context, alg string) error {
	if alg == TokenHS256 {
		r.auth, r.provider = r.hsAuth, false
		return nil
	}
	if err := r.providerPreflight(ctx, alg); err != nil {
		return err
	}
	if r.spec.Users > 10_000 {
		r.disp.Println("minting %s %s tokens...", report.Number(int64(r.spec.Users)), alg)
	}
	auth, err := r.idp.mint(ctx, alg, r.cfg.IdPAudience, r.userLo, r.spec.Users, time.Until(r.end))
	if err != nil {
		return err
	}
	r.auth, r.provider = auth, true
	return nil
}

// tokenTarget is the report's target of a run with alg's tokens.
func tokenTarget(alg string) string {
	switch alg {
	case TokenRS256:
		return report.TargetRS256
	case TokenES256:
		return report.TargetES256
	}
	return report.TargetSeckill
}

// userRange is the ids of this run's buyers.
// With a provider's tokens they are the ids the server gave their
// subjects, which the bench does not know: every id in the providers'
// range (the campaign is the run's own).
func (r *runner) userRange() (lo, hi int64) {
	if r.provider {
		return seckill.FirstExternalUserID, math.MaxInt64
	}
	return r.userLo, r.userLo + int64(len(r.auth)) - 1
}

// load runs the spec against endpoint with a fresh transport and recorder.
func (r *runner) load(ctx context.Context, label, endpoint string, body []byte) *load.Recorder {
	conns := max(r.spec.Concurrency, r.spec.MaxInFlight)
	tr := load.NewTransport(conns)
	defer tr.CloseIdleConnections()
	rec := load.NewRecorder()
	rec.OnAccept = r.onAccept
	stop := report.Watch(r.disp, label, r.spec, rec)
	load.Run(ctx, r.spec, load.Target{
		Endpoint: endpoint, Body: body, Auth: r.auth, Prepare: r.makeBody,
		PrepareTimeout: r.makeBodyTimeout, PrepareLabel: r.makeBodyLabel,
		Client: &http.Client{Transport: tr},
	}, rec)
	stop()
	return rec
}
