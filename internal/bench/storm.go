package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"seckill/internal/admission"
	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
	"seckill/internal/bench/verify"
	"seckill/internal/store"
)

// StormConfig is a storm of the order's life after the sale: a campaign of
// Units sold, then every order closed at once. Kind says how:
//   - StormExpiry (--expiry-storm): its buyers never pay, the pay window is
//     short, and the orders expire together;
//   - StormCancel (--cancel-storm): its buyers cancel (GraphQL cancelOrder);
//   - StormPayment (--payment-storm): its buyers open their payments, then
//     the provider confirms them all (the signed webhook).
//
// A second campaign's sale runs alone before the storm and again during it.
type StormConfig struct {
	Kind  string // StormExpiry, StormCancel or StormPayment; "": StormExpiry
	Units int64  // orders sold and closed; 0: no storm
	// Window is the campaign's pay window (whole seconds; --pay-window);
	// 0: DefaultStormWindow(Units) for an expiry, an hour otherwise.
	Window        time.Duration
	Callers       int           // the sale's callers; 0: DefaultStormCallers
	ProbeDuration time.Duration // the second campaign's closed-model sale; 0: DefaultProbeDuration
	ProbeCallers  int           // its callers; 0: DefaultProbeCallers
	// ProbeUsers are its buyers, each buying once: more than it can sell
	// in ProbeDuration; 0: DefaultProbeUsers.
	ProbeUsers int
	// Closers are the buyers (or the provider's deliveries) closing their
	// orders at once in a cancel or payment storm; 0: DefaultStormClosers.
	Closers int
	// Timeout bounds the wait for every order to close; 0:
	// DefaultStormTimeout(Units).
	Timeout time.Duration
}

// The kinds of storm.
const (
	StormExpiry  = "expiry"
	StormCancel  = "cancel"
	StormPayment = "payment"
)

// Defaults of the storms.
const (
	DefaultStormUnits    = 20_000
	DefaultStormCallers  = 128
	DefaultStormClosers  = 64
	DefaultProbeDuration = 3 * time.Second
	DefaultProbeCallers  = 32
	maxStormUnits        = 2_000_000
	maxStormClosers      = 4096
	// probeStock sizes the second campaign: it never sells out.
	probeStock        = 1_000_000
	DefaultProbeUsers = 100_000
	// expiryPoll is how often the bench counts the orders still awaiting
	// payment; poolEvery how often it samples pg_stat_activity.
	expiryPoll = 250 * time.Millisecond
	poolEvery  = 100 * time.Millisecond
	// closeWindow is the pay window of a cancel or payment storm's
	// campaign: no order may expire before its buyer closes it.
	closeWindow = time.Hour
)

// stormFlag is the command-line flag of a storm of kind.
func stormFlag(kind string) string { return "--" + cmp.Or(kind, StormExpiry) + "-storm" }

// DefaultStormWindow is the pay window for units: long enough that the
// sale is over and persisted before the first order is due here (10 s
// plus a second per 2,000 units), so that Redis's memory is read with
// every order awaiting payment.
func DefaultStormWindow(units int64) time.Duration {
	return 10*time.Second + time.Duration((units+1999)/2000)*time.Second
}

// DefaultStormTimeout bounds the wait for the storm: two minutes, or 200
// orders closed a second if that is longer.
func DefaultStormTimeout(units int64) time.Duration {
	return max(2*time.Minute, time.Duration(units/200)*time.Second)
}

// validateStorm checks a storm's settings and fills the defaults.
func (cfg *Config) validateStorm() error {
	st := &cfg.Storm
	st.Kind = cmp.Or(st.Kind, StormExpiry)
	flag := stormFlag(st.Kind)
	switch {
	case st.Kind != StormExpiry && st.Kind != StormCancel && st.Kind != StormPayment:
		return fmt.Errorf("unknown storm %q (want expiry, cancel or payment)", st.Kind)
	case st.Units < 1 || st.Units > maxStormUnits:
		return fmt.Errorf("%s must be between 1 and %s units", flag, report.Number(maxStormUnits))
	case st.ProbeUsers < 0 || st.ProbeUsers > maxUsers:
		return fmt.Errorf("the second sale's buyers must be between 1 and %s", report.Number(maxUsers))
	case st.Closers < 0 || st.Closers > maxStormClosers:
		return fmt.Errorf("--storm-callers must be between 1 and %d", maxStormClosers)
	case st.Closers != 0 && st.Kind == StormExpiry:
		return errors.New("--storm-callers sets who closes the orders of a cancel or payment storm: omit it with --expiry-storm")
	case len(cfg.Compare) > 0:
		return fmt.Errorf("%s runs against the server at --url only: omit --compare", flag)
	case cfg.VoucherID != 0 || cfg.Challenge != "":
		return fmt.Errorf("%s creates its own campaigns: omit --voucher and --challenge", flag)
	case cfg.Rate > 0:
		return fmt.Errorf("%s sells with a burst and a closed model: omit --rate", flag)
	case cfg.Pay.Ratio != 0 || cfg.Pay.Delay != 0:
		return fmt.Errorf("the storm decides who pays in %s: omit --pay-ratio and --pay-delay", flag)
	case cfg.Pay.Window != 0 && st.Kind != StormExpiry:
		return fmt.Errorf("no order may expire in %s: omit --pay-window", flag)
	case cfg.DatabaseURL == "" || cfg.RedisURL == "":
		return fmt.Errorf("%s reads the server's Postgres and Redis: set SECKILL_DATABASE_URL and SECKILL_REDIS_URL", flag)
	case st.Kind == StormPayment && cfg.Pay.WebhookSecret == "":
		return errors.New("no webhook secret: --payment-storm signs the provider's calls with the server's SECKILL_PAYMENT_WEBHOOK_SECRET")
	}
	if cfg.Pay.Window != 0 {
		st.Window = cfg.Pay.Window
	}
	if st.Kind == StormExpiry {
		st.Window = cmp.Or(st.Window, DefaultStormWindow(st.Units))
	} else {
		st.Window, st.Closers = closeWindow, cmp.Or(st.Closers, DefaultStormClosers)
	}
	if st.Window < time.Second || st.Window%time.Second != 0 || st.Window > time.Hour {
		return errors.New("--pay-window must be whole seconds between 1s and 1h")
	}
	st.Callers = cmp.Or(st.Callers, DefaultStormCallers)
	st.ProbeDuration = cmp.Or(st.ProbeDuration, DefaultProbeDuration)
	st.ProbeCallers = cmp.Or(st.ProbeCallers, DefaultProbeCallers)
	st.ProbeUsers = cmp.Or(st.ProbeUsers, DefaultProbeUsers)
	st.Timeout = cmp.Or(st.Timeout, DefaultStormTimeout(st.Units))
	// No payer runs beside the sales: the storm decides who pays.
	secret := cfg.Pay.WebhookSecret
	cfg.Pay = PayConfig{WebhookSecret: secret}
	return nil
}

// stormSales are a storm's three sales and the bench's direct access to
// the server's stores:
//   - sale, the campaign of the storm's units (its target
//     report.TargetStormSale);
//   - alone, a second campaign's closed-model sale before the storm;
//   - during, the same sale while the storm runs, with buyers of its own.
type stormSales struct {
	cfg                 Config
	sale, alone, during *runner
	db                  *bun.DB
	rdb                 *redis.Client
}

// newStormSales validates cfg.Storm, signs the three sales' buyers and
// connects to the server's stores. The caller closes it.
func newStormSales(ctx context.Context, cfg *Config) (*stormSales, error) {
	if err := cfg.validateStorm(); err != nil {
		return nil, err
	}
	st := cfg.Storm
	saleCfg := *cfg
	saleCfg.Stock, saleCfg.Users, saleCfg.Concurrency, saleCfg.Duration, saleCfg.Warm = st.Units, int(st.Units), st.Callers, 0, true
	probeCfg := *cfg
	probeCfg.Stock, probeCfg.Users, probeCfg.Concurrency, probeCfg.Duration, probeCfg.Warm = probeStock, st.ProbeUsers, st.ProbeCallers, st.ProbeDuration, true
	s := &stormSales{cfg: *cfg}
	var err error
	if s.sale, err = newRunner(ctx, saleCfg, true); err != nil {
		return nil, err
	}
	if s.alone, err = newRunner(ctx, probeCfg, false); err != nil {
		return nil, err
	}
	// Each sale has buyers of its own: a campaign's buyer buys once. The
	// sale during the storm waits for its orders as long as the storm may
	// last: its persistence may queue behind the storm.
	duringCfg := probeCfg
	duringCfg.PersistTimeout = max(cmp.Or(cfg.PersistTimeout, DefaultPersistTimeout), st.Timeout)
	for s.during == nil || s.during.userLo == s.alone.userLo || s.during.userLo == s.sale.userLo {
		if s.during, err = newRunner(ctx, duringCfg, false); err != nil {
			return nil, err
		}
	}
	octx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if s.db, err = store.Open(octx, verify.BenchDSN(cfg.DatabaseURL), 4); err != nil {
		return nil, err
	}
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		s.db.Close()
		return nil, fmt.Errorf("SECKILL_REDIS_URL: %w", err)
	}
	s.rdb = redis.NewClient(opt)
	return s, nil
}

func (s *stormSales) close() {
	s.db.Close()
	s.rdb.Close()
}

// target is the server at --url, buying from voucherID.
func (s *stormSales) target(label string, voucherID int64) seckillTarget {
	return seckillTarget{label: label, url: s.cfg.URL, voucherID: voucherID, lag: true,
		databaseURL: s.cfg.DatabaseURL, redisURL: s.cfg.RedisURL, redisNodes: s.cfg.RedisClusterAddrs}
}

// runAlone creates the second campaign, checks that the bench reads the
// server's stores, and sells it alone.
func (s *stormSales) runAlone(ctx context.Context) (voucherID int64, rep *report.Report, err error) {
	control := newControlClient(s.cfg.URL, s.sale.admin)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if voucherID, err = control.createCampaign(cctx, probeStock, time.Until(s.sale.end), nil); err != nil {
		return 0, nil, err
	}
	if err := s.checkStores(cctx, voucherID); err != nil {
		return 0, nil, err
	}
	if rep, err = s.alone.runSeckill(ctx, s.target(report.TargetProbeAlone, voucherID)); err != nil {
		return 0, nil, fmt.Errorf("the second campaign's sale alone: %w", err)
	}
	return voucherID, rep, nil
}

// runSale creates the storm's campaign, with the storm's pay window, and
// sells it until every order is in Postgres.
func (s *stormSales) runSale(ctx context.Context) (voucherID int64, rep *report.Report, err error) {
	st := s.cfg.Storm
	control := newControlClient(s.cfg.URL, s.sale.admin)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	voucherID, err = control.createCampaign(cctx, st.Units, time.Until(s.sale.end),
		map[string]any{"payWindowSeconds": int(st.Window / time.Second)})
	if err != nil {
		return 0, nil, err
	}
	if rep, err = s.sale.runSeckill(ctx, s.target(report.TargetStormSale, voucherID)); err != nil {
		return 0, nil, fmt.Errorf("the sale: %w", err)
	}
	return voucherID, rep, nil
}

// storm is one --expiry-storm run under way.
type storm struct {
	*stormSales
	out *report.Storm
}

// runStorm runs the storm cfg.Storm says: runCloseStorm's, or an expiry
// storm. An expiry storm sells cfg.Storm.Units units of a campaign with a short pay
// window to buyers who never pay and measures what their expiry costs:
//
//  1. a closed-model sale of a second campaign, alone;
//  2. Redis's memory (used_memory and the keys by pattern);
//  3. the campaign's sale, a burst of one purchase per buyer, until every
//     order is CREATED in Postgres; Redis's memory again;
//  4. from the first pay_by: the server's pool in pg_stat_activity and
//     each process's CPU, and as soon as orders expire the second
//     campaign's sale again; then the wait until every order is EXPIRED.
func runStorm(ctx context.Context, cfg Config) (*report.Result, error) {
	if cmp.Or(cfg.Storm.Kind, StormExpiry) != StormExpiry {
		return runCloseStorm(ctx, cfg)
	}
	sales, err := newStormSales(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer sales.close()
	st := cfg.Storm
	s := &storm{stormSales: sales, out: &report.Storm{Units: st.Units, PayWindowS: st.Window.Seconds()}}
	s.out.SaleLoad, s.out.ProbeLoad = s.sale.loadInfo(), s.alone.loadInfo()

	return finishStorm(ctx, &report.Result{Storm: s.out}, s.out, func() bool { return s.out.Sale != nil }, s.run)
}

// stormOut is a storm's report, judged once the storm is over.
type stormOut interface {
	Relate()
	Judge(interrupted bool)
}

// finishStorm runs a storm and judges out, its report in res, when its
// sale ran (sold). A storm that failed before its sale returns no report;
// one that failed later returns what it measured with the error.
func finishStorm(ctx context.Context, res *report.Result, out stormOut, sold func() bool, run func(context.Context) error) (*report.Result, error) {
	err := run(ctx)
	res.Interrupted = ctx.Err() != nil
	if !sold() {
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	out.Relate()
	out.Judge(res.Interrupted)
	return res, err
}

func (s *storm) run(ctx context.Context) error {
	out := s.out
	var err error
	// 1. The second campaign, sold alone.
	if out.ProbeVoucherID, out.Alone, err = s.runAlone(ctx); err != nil {
		return err
	}
	// 2. Redis before the sale.
	before, err := s.memory(ctx)
	if err != nil {
		return err
	}
	// 3. The sale nobody pays for.
	if out.VoucherID, out.Sale, err = s.runSale(ctx); err != nil {
		return err
	}
	exp := verify.Expiry{PG: &verify.Postgres{DB: s.db}, VoucherID: out.VoucherID}
	after, err := s.memory(ctx)
	if err != nil {
		return err
	}
	if out.Memory.Awaiting, err = exp.Awaiting(ctx); err != nil {
		return err
	}
	m := &out.Memory
	m.BeforeBytes, m.AfterBytes, m.Shared = before.used, after.used, before.shared || after.shared
	if m.Awaiting > 0 {
		m.PerOrderBytes = float64(after.used-before.used) / float64(m.Awaiting)
	}
	m.Keys = verify.Growth(before.census, after.census, m.Awaiting)
	e := &out.Expiry
	if e.FirstPayBy, e.LastPayBy, err = exp.PayBy(ctx); err != nil {
		return err
	}
	if m.Awaiting < out.Sale.Accepted {
		out.Notes = append(out.Notes, fmt.Sprintf("orders began to expire before the sale was persisted: Redis's memory was read with %s of %s "+
			"awaiting payment; give a longer --pay-window", report.Number(m.Awaiting), report.Number(out.Sale.Accepted)))
	}
	return s.expire(ctx, exp)
}

// checkStores makes sure the bench reads the stores of the server at
// --url, which just created campaign voucherID: every figure of the storm
// comes from them.
func (s *stormSales) checkStores(ctx context.Context, voucherID int64) error {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM seckill_campaign WHERE voucher_id = ?`, voucherID).Scan(&n); err != nil {
		return fmt.Errorf("%s: read SECKILL_DATABASE_URL: %w", stormFlag(s.cfg.Storm.Kind), err)
	}
	if n != 1 {
		return fmt.Errorf("%s: the database at SECKILL_DATABASE_URL (%s) lacks campaign %d, which the server at %s just created: give the bench the server's database",
			stormFlag(s.cfg.Storm.Kind), redactDSN(s.cfg.DatabaseURL), voucherID, s.cfg.URL)
	}
	live, err := admission.New(s.rdb, admission.Options{}).LiveCounts(ctx, []int64{voucherID})
	if err != nil {
		return fmt.Errorf("%s: read SECKILL_REDIS_URL: %w", stormFlag(s.cfg.Storm.Kind), err)
	}
	if !live[voucherID].Known {
		return fmt.Errorf("%s: the Redis at SECKILL_REDIS_URL does not hold campaign %d, which the server at %s just created: give the bench the server's Redis",
			stormFlag(s.cfg.Storm.Kind), voucherID, s.cfg.URL)
	}
	return nil
}

// redisMemory is Redis's memory at one moment.
type redisMemory struct {
	used   int64
	shared bool
	census verify.Census
}

func (s *stormSales) memory(ctx context.Context) (redisMemory, error) {
	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var m redisMemory
	var err error
	if m.census, err = verify.TakeCensus(mctx, s.rdb); err != nil {
		return m, err
	}
	m.used, m.shared, err = verify.UsedMemory(mctx, s.rdb)
	return m, err
}

// expire measures the storm from the first pay_by until every order is
// EXPIRED: the pool and each process's CPU (but during the second sale,
// whose purchases would count as expiries' work), with the second sale
// run as soon as orders expire.
func (s *storm) expire(ctx context.Context, exp verify.Expiry) error {
	out, st := s.out, s.cfg.Storm
	e := &out.Expiry
	s.sale.disp.Println("expiry storm: waiting for the first pay_by (%s)...", e.FirstPayBy.Local().Format("15:04:05"))
	if !load.SleepUntil(ctx, e.FirstPayBy) {
		return ctx.Err()
	}
	deadline := time.Now().Add(st.Timeout)
	pool := verify.StartPoolSampler(ctx, s.db, s.cfg.DBMaxConns, poolEvery)
	tgt := s.target(report.TargetStormSale, out.VoucherID).cpuTarget()
	cpu1, start1 := startCPU(ctx, tgt), time.Now()

	// The second sale, once the storm is under way: a second after the
	// first orders expired, or three seconds past the first pay_by.
	awaiting := out.Memory.Awaiting
	start := time.Now().Add(3 * time.Second)
	for time.Now().Before(start) && ctx.Err() == nil {
		n, err := exp.Awaiting(ctx)
		if err != nil {
			return err
		}
		if n < awaiting {
			start = minTime(start, time.Now().Add(time.Second))
		}
		load.SleepUntil(ctx, minTime(start, time.Now().Add(poolEvery)))
	}
	win1, end1 := cpu1.stop(), time.Now()
	// The second window opens when the second sale's load is over: its
	// persistence, which the storm may hold up for as long as it lasts,
	// counts as the storm's work (it is small beside it).
	var cpu2 *cpuProbe
	var start2 time.Time
	dt := s.target(report.TargetProbeDuring, out.ProbeVoucherID)
	dt.afterLoad = func() { cpu2, start2 = startCPU(ctx, tgt), time.Now() }
	during, err := s.during.runSeckill(ctx, dt)
	if cpu2 == nil { // the sale never began
		cpu2, start2 = startCPU(ctx, tgt), time.Now()
	}
	if err != nil {
		cpu2.stop()
		pool.Stop()
		return fmt.Errorf("the second campaign's sale during the storm: %w", err)
	}
	out.During = during

	// Then until every order expired, or the timeout.
	for ctx.Err() == nil {
		n, err := exp.Awaiting(ctx)
		if err != nil {
			return err
		}
		s.sale.disp.Update(fmt.Sprintf("expiry storm: %s of %s orders still awaiting payment", report.Number(n), report.Number(awaiting)), false)
		if n == 0 || time.Now().After(deadline) {
			break
		}
		load.SleepUntil(ctx, time.Now().Add(expiryPoll))
	}
	s.sale.disp.End()
	win2, end2 := cpu2.stop(), time.Now()
	out.Pool = pool.Stop()

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if e.Expired, e.FirstClosed, e.LastClosed, e.PeakPerS, err = exp.Expired(fctx); err != nil {
		return err
	}
	e.Complete = e.Expired >= out.Sale.Accepted
	if e.Expired > 0 {
		e.DurationS = e.LastClosed.Sub(e.FirstPayBy).Seconds()
		if e.DurationS > 0 {
			e.PerS = float64(e.Expired) / e.DurationS
		}
		e.BehindS = e.LastClosed.Sub(e.LastPayBy).Seconds()
	}
	// The CPU of the expiry without the second sale's purchases: both
	// windows, per order expired in them.
	n1, err := exp.ExpiredBetween(fctx, start1, end1)
	if err != nil {
		return err
	}
	n2, err := exp.ExpiredBetween(fctx, start2, end2)
	if err != nil {
		return err
	}
	out.CPU = win1.merge(win2).report(map[string]int64{report.UnitExpired: n1 + n2})
	// The share of the second sale the storm covered.
	if d := out.During; d != nil && d.ElapsedS > 0 && e.Expired > 0 {
		from, to := d.StartedAt, d.StartedAt.Add(time.Duration(d.ElapsedS*float64(time.Second)))
		covered := minTime(to, e.LastClosed).Sub(maxTime(from, e.FirstPayBy))
		out.Interference.Overlap = min(max(covered.Seconds()/to.Sub(from).Seconds(), 0), 1)
	}
	if e.Complete {
		live := admission.New(s.rdb, admission.Options{})
		b, err := verify.Books(fctx, live, store.New(s.db), out.VoucherID, s.cfg.PersistTimeout)
		if err != nil {
			return fmt.Errorf("the books after the storm: %w", err)
		}
		e.Books = &b
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
