// Package bench is `seckill bench`: the load test of the articles seckill
// grew from (1000 users with tokens buy at once against 200 units), built
// in, plus sustained open- and closed-model loads. It drives a running
// server over GraphQL, verifies what the run left in Postgres and Redis
// (oversell, lost and duplicate orders) and reports throughput and latency.
//
// With --compare it runs the same load, in the same run, against two
// servers it starts itself: "sync", the seed's synchronous design (one
// Postgres transaction per purchase), and "ceiling", a bare net/http
// handler that runs only the admission script — the fastest the purchase
// path can be.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/auth"
	"seckill/internal/store"
)

// Targets a run can measure.
const (
	TargetSeckill = "seckill" // the server at --url
	TargetSync    = "sync"    // the seed's synchronous design, started by the bench
	TargetCeiling = "ceiling" // the admission script behind a bare handler, started by the bench
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

	PersistTimeout time.Duration // how long to wait for accepted orders to be persisted
	Compare        []string      // TargetSync, TargetCeiling

	// Secrets and services, normally from the server's configuration.
	JWTSecret     string
	JWTIssuer     string
	DatabaseURL   string // the server's Postgres, to verify orders; "" verifies through GraphQL only
	RedisURL      string // the server's Redis (queue depth) and the ceiling's
	RedisPoolSize int    // the ceiling's Redis pool; 0: go-redis's default, as the server
	DBMaxConns    int    // the sync design's Postgres pool, as the server's
	// SyncDatabaseURL is an empty database for the sync design; "" makes
	// the bench recreate SyncDatabase on the server at DatabaseURL.
	SyncDatabaseURL string

	Progress    io.Writer // progress and status lines; nil for none
	ProgressTTY bool      // redraw the progress line in place
}

// spec validates cfg, fills its defaults and returns the load.
func (cfg *Config) spec() (loadSpec, error) {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	if cfg.Stock == 0 {
		cfg.Stock = DefaultStock
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PersistTimeout == 0 {
		cfg.PersistTimeout = DefaultPersistTimeout
	}
	if cfg.DBMaxConns == 0 {
		cfg.DBMaxConns = 20
	}
	s := loadSpec{timeout: cfg.Timeout, ramp: cfg.Ramp, rate: cfg.Rate, duration: cfg.Duration, warm: cfg.Warm}
	switch {
	case cfg.Rate < 0, cfg.Duration < 0, cfg.Ramp < 0, cfg.Timeout < 0, cfg.PersistTimeout < 0:
		return s, errors.New("--rate, --duration, --ramp and the timeouts must not be negative")
	case cfg.Stock < 1 || cfg.Stock > 10_000_000:
		return s, errors.New("--stock must be between 1 and 10,000,000")
	case cfg.Users < 0 || cfg.Users > maxUsers:
		return s, fmt.Errorf("--users must be between 1 and %s", group(maxUsers))
	case cfg.Attempts < 0 || cfg.Concurrency < 0 || cfg.MaxInFlight < 0:
		return s, errors.New("--attempts, --concurrency and --max-inflight must not be negative")
	case cfg.VoucherID < 0:
		return s, errors.New("--voucher must be a voucher id")
	}
	for _, c := range cfg.Compare {
		if c != TargetSync && c != TargetCeiling {
			return s, fmt.Errorf("--compare: unknown target %q (want sync or ceiling)", c)
		}
	}
	switch {
	case cfg.Rate > 0:
		s.mode = ModeOpen
		if s.duration == 0 {
			s.duration = DefaultDuration
		}
		s.maxInFlight = cfg.MaxInFlight
		if s.maxInFlight == 0 {
			s.maxInFlight = DefaultMaxInFlight
		}
		if s.planned() < 1 {
			return s, errors.New("--rate × --duration is less than one request")
		}
	case cfg.Duration > 0:
		s.mode = ModeClosed
		s.concurrency = cmp0(cfg.Concurrency, DefaultClosedCallers)
	default:
		s.mode = ModeBurst
		s.attempts = cmp0(cfg.Attempts, 1)
	}
	s.users = cfg.Users
	if s.users == 0 {
		switch s.mode {
		case ModeBurst:
			s.users = DefaultUsers
		case ModeOpen:
			// Every request a new buyer, as in a real crowd, until twice
			// the stock: after that, repeat buyers.
			s.users = int(min(s.planned(), max(2*cfg.Stock, 10_000)))
		default:
			s.users = int(max(2*cfg.Stock, 10_000))
		}
		s.users = min(s.users, maxUsers)
	}
	if s.mode == ModeBurst {
		s.concurrency = cmp0(cfg.Concurrency, s.users)
	}
	return s, nil
}

func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// runner holds what every target of one run shares.
type runner struct {
	cfg     Config
	spec    loadSpec
	disp    *display
	userLo  int64    // first user id; user index i is userLo+i
	auth    []string // "Bearer <token>" by user index
	tokens  *auth.Tokens
	control *controlClient
	end     time.Time // when the campaigns stop selling
}

// Run runs the load against the server at cfg.URL and, for each of
// cfg.Compare, against that comparison server, one after the other, and
// returns their reports. When ctx ends it stops sending and returns the
// partial result (Interrupted set) without an error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	spec, err := cfg.spec()
	if err != nil {
		return nil, err
	}
	if cfg.JWTSecret == "" {
		return nil, errors.New("no JWT secret: the bench signs its users' tokens with the server's SECKILL_JWT_SECRET")
	}
	r := &runner{cfg: cfg, spec: spec, disp: newDisplay(cfg.Progress, cfg.ProgressTTY)}
	r.tokens = auth.NewTokens([]byte(cfg.JWTSecret), cfg.JWTIssuer)
	ttl := 2*time.Hour + 2*spec.duration + cfg.PersistTimeout
	r.end = time.Now().Add(ttl)

	// Fresh buyers every run, so that runs against the same server never
	// meet an earlier run's buyers: a random block of a billion ids.
	r.userLo = int64(1+rand.N(9_000)) * 1_000_000_000
	admin, err := r.tokens.Issue(r.userLo-1, true, ttl)
	if err != nil {
		return nil, err
	}
	r.control = newControlClient(cfg.URL, admin)
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err = r.control.preflight(pctx)
	cancel()
	if err != nil {
		return nil, err
	}

	if spec.users > 50_000 {
		r.disp.println("minting %s tokens...", group(int64(spec.users)))
	}
	r.auth, err = mintTokens(ctx, r.tokens, r.userLo, spec.users, ttl)
	if ctx.Err() != nil {
		return nil, errors.New("interrupted before the load began")
	} else if err != nil {
		return nil, err
	}

	res := &Result{Load: LoadInfo{
		Mode: spec.mode, Users: spec.users, Attempts: spec.attempts, Concurrency: spec.concurrency,
		Rate: spec.rate, DurationS: spec.duration.Seconds(), RampS: spec.ramp.Seconds(),
		MaxInFlight: spec.maxInFlight, TimeoutS: spec.timeout.Seconds(), Warm: spec.warm && spec.mode != ModeOpen,
	}}
	rep, err := r.runSeckill(ctx)
	if err != nil {
		return nil, err
	}
	res.Load.Stock = rep.Stock
	res.Runs = append(res.Runs, rep)
	done := map[string]bool{}
	for _, target := range cfg.Compare {
		if ctx.Err() != nil || done[target] {
			continue
		}
		done[target] = true
		var other *Report
		switch target {
		case TargetSync:
			other, err = r.runSync(ctx, res.Load.Stock)
		case TargetCeiling:
			other, err = r.runCeiling(ctx, res.Load.Stock)
		}
		if err != nil {
			return res, fmt.Errorf("--compare %s: %w", target, err)
		}
		res.Runs = append(res.Runs, other)
	}
	res.Comparisons = compare(res.Runs)
	res.Interrupted = ctx.Err() != nil
	return res, nil
}

// mintTokens signs a token for each of n users from userLo, on every core.
func mintTokens(ctx context.Context, tokens *auth.Tokens, userLo int64, n int, ttl time.Duration) ([]string, error) {
	out := make([]string, n)
	workers := min(runtime.GOMAXPROCS(0), max(n/1000, 1))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if i%4096 == 0 && ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				t, err := tokens.Issue(userLo+int64(i), false, ttl)
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = "Bearer " + t
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// userRange is the ids of this run's buyers.
func (r *runner) userRange() (lo, hi int64) { return r.userLo, r.userLo + int64(len(r.auth)) - 1 }

// load runs the spec against endpoint with a fresh transport and recorder.
func (r *runner) load(ctx context.Context, label, endpoint string, body []byte) *recorder {
	conns := max(r.spec.concurrency, r.spec.maxInFlight)
	tr := newTransport(conns)
	defer tr.CloseIdleConnections()
	rec := newRecorder()
	stop := watchLoad(r.disp, label, r.spec, rec)
	runLoad(ctx, r.spec, loadTarget{
		endpoint: endpoint, body: body, auth: r.auth,
		client: &http.Client{Transport: tr},
	}, rec)
	stop()
	return rec
}

// runSeckill measures the server at cfg.URL and verifies what it persisted.
func (r *runner) runSeckill(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	var (
		voucherID  = cfg.VoucherID
		stock      int64
		soldBefore int64
	)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if voucherID == 0 {
		id, err := r.control.createCampaign(sctx, cfg.Stock, time.Until(r.end))
		if err != nil {
			return nil, err
		}
		voucherID, stock = id, cfg.Stock
	} else {
		st, err := r.control.campaign(sctx, voucherID)
		if err != nil {
			return nil, err
		}
		if st.Status != "ACTIVE" {
			return nil, fmt.Errorf("voucher %d is %s, not on sale: create a campaign (omit --voucher) or pick another", voucherID, st.Status)
		}
		stock, soldBefore = st.Remaining, st.Sold
	}

	// Optional direct access to the server's Postgres and Redis.
	var (
		pg    *pgVerifier
		adm   *admission.Admitter
		notes []string
	)
	if cfg.DatabaseURL != "" {
		db, err := store.Open(sctx, cfg.DatabaseURL, 2)
		if err != nil {
			notes = append(notes, fmt.Sprintf("Postgres not verified directly (%v); GraphQL counts only", err))
		} else {
			defer db.Close()
			pg = &pgVerifier{db: db, failures: true}
			if _, err := pg.counts(sctx, voucherID, 1, 1); err != nil {
				notes = append(notes, fmt.Sprintf("Postgres at SECKILL_DATABASE_URL does not hold voucher %d (%v): is it the server's database? GraphQL counts only", voucherID, err))
				pg = nil
			}
		}
	}
	if cfg.RedisURL != "" {
		if opt, err := redis.ParseURL(cfg.RedisURL); err == nil {
			rdb := redis.NewClient(opt)
			defer rdb.Close()
			if rdb.Ping(sctx).Err() == nil {
				adm = admission.New(rdb, admission.Options{})
			}
		}
	}
	cancel()

	smp := startSampler(ctx, adm, voucherID, metricsURL(cfg.URL))
	rec := r.load(ctx, TargetSeckill, cfg.URL, purchaseBody(voucherID))
	interrupted := ctx.Err() != nil

	rep := buildReport(TargetSeckill, cfg.URL, voucherID, stock, rec, interrupted)
	p := &Persistence{Source: "graphql"}
	if pg != nil {
		p.Source = "postgres"
	}
	lo, hi := r.userRange()
	lastAccepted := rec.start.Add(time.Duration(rec.lastAccepted.Load()))
	firstAccepted := rec.start.Add(time.Duration(rec.firstAccepted.Load()))

	// Wait until every accepted order is persisted; after Ctrl-C look
	// once instead, so the partial report comes at once.
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.PersistTimeout+30*time.Second)
	defer cancel()
	persisted := func(ctx context.Context) (int64, error) {
		if pg != nil {
			c, err := pg.counts(ctx, voucherID, lo, hi)
			return c.rows + c.failed, err
		}
		st, err := r.control.campaign(ctx, voucherID)
		return st.Sold - soldBefore, err
	}
	waitStart := time.Now()
	timeout := cfg.PersistTimeout
	if interrupted {
		timeout = 0
	}
	complete, doneAt, err := waitPersisted(vctx, r.disp, TargetSeckill, rep.Accepted, timeout, persisted)
	if err != nil {
		return nil, fmt.Errorf("wait for persistence: %w", err)
	}
	p.Complete, p.WaitedS = complete, doneAt.Sub(waitStart).Seconds()
	smp.stop()
	p.MaxQueueDepth = smp.maxQueueDepth()
	rep.Server = smp.serverStats()

	// Verify.
	if st, err := r.control.campaign(vctx, voucherID); err == nil {
		p.Sold, p.RedisRemaining = ptr(st.Sold), ptr(st.Remaining)
		if pg == nil {
			p.Rows = st.Sold - soldBefore
			p.PostgresStock = ptr(st.Stock - st.Sold)
		}
	} else {
		notes = append(notes, "voucher state unavailable: "+err.Error())
	}
	if adm != nil {
		if q, err := adm.Queued(vctx, []int64{voucherID}); err == nil {
			p.RedisPending = ptr(q[voucherID])
		}
	}
	if pg != nil {
		c, err := verifyPostgres(vctx, pg, p, voucherID, lo, hi, rec.accepted)
		if err != nil {
			return nil, fmt.Errorf("verify orders in Postgres: %w", err)
		}
		if rep.Accepted > 0 && c.rows > 0 {
			p.LastCreatedAfterMs = ptr(ms(c.lastCreated.Sub(lastAccepted)))
			if d := c.lastCreated.Sub(firstAccepted); d > 0 {
				p.PersistedPerS = ptr(float64(c.rows) / d.Seconds())
			}
		}
	} else {
		if missing := rep.Accepted - p.Rows; missing > 0 {
			p.Lost = missing
		}
		if complete && rep.Accepted > 0 {
			// Known only to the polling interval.
			p.LastCreatedAfterMs = ptr(ms(doneAt.Sub(lastAccepted)))
			if d := doneAt.Sub(firstAccepted); d > 0 {
				p.PersistedPerS = ptr(float64(rep.Accepted) / d.Seconds())
			}
			notes = append(notes, "persistence times are upper bounds from polling GraphQL every 50 ms")
		}
	}
	p.Note = joinNotes(notes)
	rep.Persistence = p
	rep.judge()
	return rep, nil
}

// freshTokens returns a verifier with an empty cache, so that a comparison
// server verifies each buyer's token once, as seckill's server does, rather
// than finding the tokens an earlier comparison run verified.
func (r *runner) freshTokens() *auth.Tokens {
	return auth.NewTokens([]byte(r.cfg.JWTSecret), r.cfg.JWTIssuer)
}

// runSync measures the seed's synchronous design with the same load.
func (r *runner) runSync(ctx context.Context, stock int64) (*Report, error) {
	cfg := r.cfg
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dsn := cfg.SyncDatabaseURL
	if dsn == "" {
		if cfg.DatabaseURL == "" {
			return nil, errors.New("needs Postgres: set SECKILL_DATABASE_URL")
		}
		var err error
		if dsn, err = recreateDatabase(sctx, cfg.DatabaseURL, SyncDatabase); err != nil {
			return nil, err
		}
	}
	design, err := openSyncDesign(sctx, dsn, cfg.DBMaxConns, stock, r.end)
	if err != nil {
		return nil, err
	}
	defer design.close()
	srv, err := startLocal(purchaseHandler(r.freshTokens(), design.purchase), "/graphql")
	if err != nil {
		return nil, err
	}
	rec := r.load(ctx, TargetSync, srv.url, purchaseBody(syncVoucherID))
	srv.close()

	rep := buildReport(TargetSync, srv.url, syncVoucherID, stock, rec, ctx.Err() != nil)
	// Every order is written before its answer: nothing to wait for.
	p := &Persistence{Source: "postgres", Complete: true}
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	lo, hi := r.userRange()
	c, err := verifyPostgres(vctx, &pgVerifier{db: design.db}, p, syncVoucherID, lo, hi, rec.accepted)
	if err != nil {
		return nil, err
	}
	if rep.Accepted > 0 && c.rows > 0 {
		lastAccepted := rec.start.Add(time.Duration(rec.lastAccepted.Load()))
		firstAccepted := rec.start.Add(time.Duration(rec.firstAccepted.Load()))
		// created_at is the transaction's start, before the answer.
		p.LastCreatedAfterMs = ptr(max(ms(c.lastCreated.Sub(lastAccepted)), 0))
		if d := lastAccepted.Sub(firstAccepted); d > 0 {
			p.PersistedPerS = ptr(float64(c.rows) / d.Seconds())
		}
	}
	p.Note = "database " + redactDSN(dsn)
	rep.Persistence = p
	rep.judge()
	return rep, nil
}

// runCeiling measures the admission script behind a bare handler.
func (r *runner) runCeiling(ctx context.Context, stock int64) (*Report, error) {
	cfg := r.cfg
	if cfg.RedisURL == "" {
		return nil, errors.New("needs Redis: set SECKILL_REDIS_URL")
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := openCeiling(sctx, cfg.RedisURL, cfg.RedisPoolSize, stock, r.end)
	if err != nil {
		return nil, err
	}
	defer c.close()
	srv, err := startLocal(purchaseHandler(r.freshTokens(), c.purchase), "/graphql")
	if err != nil {
		return nil, err
	}
	rec := r.load(ctx, TargetCeiling, srv.url, purchaseBody(ceilingVoucherID))
	srv.close()

	rep := buildReport(TargetCeiling, srv.url, ceilingVoucherID, stock, rec, ctx.Err() != nil)
	p := &Persistence{Source: "redis", Complete: true, Note: "no persistence: admissions stay pending in Redis under " + c.prefix}
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	remaining, pending, err := c.state(vctx)
	if err != nil {
		return nil, fmt.Errorf("read ceiling state: %w", err)
	}
	p.RedisRemaining, p.RedisPending = ptr(remaining), ptr(pending)
	p.Rows = pending
	if d := rep.Accepted - pending; d > 0 {
		p.Lost = d
	} else {
		p.Unexpected = -d
	}
	rep.Persistence = p
	rep.judge()
	return rep, nil
}

func joinNotes(notes []string) string { return strings.Join(notes, "; ") }

// redactDSN drops the password from a database URL.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
