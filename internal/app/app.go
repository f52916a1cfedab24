// Package app wires seckill together: it is the only package that knows every
// adapter. cmd/seckill parses the command line and calls it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"seckill/internal/admission"
	"seckill/internal/auth"
	"seckill/internal/config"
	"seckill/internal/eventhook"
	"seckill/internal/obs"
	"seckill/internal/sampler"
	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/stripepay"
	"seckill/jobs"
)

// App holds every long-lived dependency of a seckill process.
type App struct {
	Config   *config.Config
	Logger   *slog.Logger
	Metrics  *Metrics
	DB       *bun.DB
	Redis    redis.UniversalClient
	Store    *store.Store
	Admitter *admission.Admitter
	Bus      *admission.Bus
	Queue    *asynq.Client
	Enqueuer *jobs.Enqueuer
	direct   *directPersist // the purchases' way to Postgres (direct.go)
	Tokens   *auth.Tokens   // signs (and verifies) our HS256 tokens
	Provider *auth.Provider // an identity provider's tokens; nil when none is configured
	Verifier *auth.Verifier // every mode configured: what the API checks tokens with
	SignIn   *auth.SignIn   // operators' sign-in through the provider; nil when not configured

	// The domain, by part; Challenger signs and checks challenge tokens.
	Challenger *seckill.Challenger
	Catalog    *seckill.Catalog
	Purchases  *seckill.Purchases
	Challenges *seckill.Challenges
	Rooms      *seckill.Rooms
	Life       *seckill.Life
	Refunds    *seckill.Refunds
	Operators  *seckill.Operators
	Events     *seckill.Deliverer // order events to the platform's endpoints

	redisPoolSize int                         // connections per Redis server
	live          *liveCampaigns              // what Postgres says is live, for the Redis guard
	shards        *campaignShards             // campaigns' stock shards, for the Redis guard and admission
	traceShutdown func(context.Context) error // nil: no tracer provider of ours
	outcomes      *sampler.OutcomeCounter     // per-campaign outcomes for the dashboard
	dashboard     *dashboard
	stripeHook    *stripepay.Handler // POST /webhooks/stripe; nil unless SECKILL_PAYMENT_PROVIDER=stripe
	retiredAt     atomic.Int64       // when reconcileOnce last retired campaigns (Unix ns)
	steps         sync.Map           // a periodic step's name -> its *outageLog (passed)
}

// retireEvery is how often the reconciler trims ended campaigns from Redis.
const retireEvery = time.Minute

// NewLogger returns the process logger: JSON in production, text in
// development, at the configured level. Records logged with a context get
// its request_id and trace_id (obs.LogHandler). go-redis's own lines go to
// it too (process-wide), at most one of a kind every redisLogInterval
// (admission.RedisLog): while a Redis server is away, its pools would
// print one for every failed dial.
func NewLogger(cfg *config.Config) *slog.Logger {
	l := newLogger(cfg, os.Stderr)
	redis.SetLogger(admission.NewRedisLog(l, redisLogInterval))
	return l
}

// redisLogInterval is how often a line of one kind from go-redis is logged
// at most.
const redisLogInterval = 10 * time.Second

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(obs.NewLogHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(obs.NewLogHandler(slog.NewJSONHandler(w, opts)))
}

// New connects to Postgres and Redis, loads the Lua scripts and builds the
// service. Close releases everything.
func New(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*App, error) {
	a := &App{Config: cfg, Logger: logger, Metrics: NewMetrics(), outcomes: sampler.NewOutcomeCounter()}
	for _, w := range cfg.Warnings {
		logger.Warn(w)
	}
	shutdown, err := startTracing(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a.traceShutdown = shutdown
	db, err := store.Open(ctx, cfg.DatabaseURL, cfg.DBMaxConns)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.DB = db

	a.Store = store.New(db)
	a.Store.SetEndpointPolicy(cfg.EventsPolicy())
	// The environment's endpoint is kept in Postgres beside the dashboard's,
	// for its delivery state; the outbox writes only while one is enabled.
	// An instance with the variable declares it; one without leaves it as
	// the others declared it (an operator removes it on the dashboard), so
	// a rollout that drops the variable stops no delivery.
	if cfg.EventsWebhookURL != "" {
		if err := a.Store.DeclareEnvEndpoint(ctx, cfg.EventsWebhookURL, cfg.EventsWebhookSecret); err != nil {
			a.Close()
			return nil, err
		}
	}
	if _, err := a.Store.RefreshEvents(ctx); err != nil {
		a.Close()
		return nil, err
	}
	a.live = newLiveCampaigns(a.Store, logger)
	a.shards = newCampaignShards(a.Store, logger)
	hook := admission.NewConnectHook(admission.Options{Logger: logger, LiveCampaigns: a.live.get,
		CampaignShards: a.shards.get})
	a.Redis, a.redisPoolSize, err = openRedis(cfg, hook)
	if err != nil {
		a.Close()
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.Redis.Ping(pctx).Err(); err != nil {
		a.Close()
		return nil, fmt.Errorf("%s is not reachable: %w", redisWhere(cfg), err)
	}
	if err := a.instrument(); err != nil {
		a.Close()
		return nil, err
	}

	a.Admitter = admission.New(a.Redis, admission.Options{Logger: logger,
		MinReplicas: cfg.RedisMinReplicas, WaitTimeout: cfg.RedisWaitTimeout,
		UserRate: cfg.UserRate, UserBurst: cfg.UserBurst,
		AddressRate: cfg.AddressRate, AddressBurst: cfg.AddressBurst, CampaignShards: a.shards.get})
	if err := a.Admitter.Load(ctx); err != nil {
		a.Close()
		return nil, err
	}
	a.Bus = admission.NewBus(a.Redis, "", logger)
	a.Queue = asynq.NewClientFromRedisClient(a.Redis)
	a.Enqueuer = jobs.NewEnqueuer(a.Queue, cfg.BatchSize, logger)
	a.Tokens = auth.NewTokens([]byte(cfg.JWTSecret), cfg.JWTIssuer)
	if a.Provider, a.Verifier, err = newVerifier(ctx, cfg, a.Tokens, a.Store); err != nil {
		a.Close()
		return nil, err
	}
	if cfg.AuthClientID != "" {
		if a.SignIn, err = auth.NewSignIn(a.Provider, auth.SignInConfig{ClientID: cfg.AuthClientID, ClientSecret: cfg.AuthClientSecret,
			RedirectURL: cfg.AuthRedirectURL, OperatorClaim: cfg.AuthOperatorClaim}); err != nil {
			a.Close()
			return nil, fmt.Errorf("SECKILL_AUTH_CLIENT_ID: %w", err)
		}
	}
	pay, err := newPayments(cfg, logger)
	if err != nil {
		a.Close()
		return nil, err
	}
	if err := a.buildDomain(cfg, pay); err != nil {
		a.Close()
		return nil, err
	}
	if cfg.PaymentProvider == config.PaymentStripe {
		if a.stripeHook, err = stripepay.NewHandler(a.Life, cfg.StripeWebhookSecret, logger); err != nil {
			a.Close()
			return nil, err
		}
	}
	a.dashboard = a.newDashboard()
	a.registerCollectors()
	return a, nil
}

// bcryptCost is the work factor of operators' password hashes; tests
// lower it.
var bcryptCost = seckill.DefaultBcryptCost

// buildDomain builds the domain's parts over the adapters, with the metrics
// and traces each port carries.
func (a *App) buildDomain(cfg *config.Config, pay payments) error {
	logger := a.Logger
	admitter := a.Metrics.wrapAdmitter(a.Admitter, a.outcomes)
	a.direct = &directPersist{queue: outageEnqueuer{a.Enqueuer, newOutageLog(logger, "enqueue admissions (the reconciler requeues them)")}}
	challenger := seckill.NewChallenger([]byte(cfg.JWTSecret), cfg.ChallengeTTL, cfg.ChallengeLead)
	a.Challenger = challenger
	var err error
	if a.Challenges, err = seckill.NewChallenges(a.Store, challenger, time.Now); err != nil {
		return err
	}
	if a.Rooms, err = seckill.NewRooms(seckill.RoomDeps{Challenges: a.Challenges, Line: a.Admitter, Draws: a.Store,
		Admitter: a.Admitter, Now: time.Now}); err != nil {
		return err
	}
	if a.Catalog, err = seckill.NewCatalog(seckill.CatalogDeps{Store: a.Store, Auditor: a.Store, Admission: a.Admitter,
		Admitter: admitter, Challenges: a.Challenges, Logger: logger, Now: time.Now, PayWindow: cfg.PayWindow}); err != nil {
		return err
	}
	a.Purchases, err = seckill.NewPurchases(seckill.PurchaseDeps{
		Orders:    traceStore{a.Metrics.wrapStore(a.Store)},
		Campaigns: a.Store,
		Admitter:  admitter,
		Outbox:    a.Admitter,
		Rebuilder: a.Metrics.wrapRebuilder(a.Admitter),
		Queue:     a.direct,
		Bus:       a.Bus,
		Limiter: a.Metrics.wrapLimiter(admission.NewUserLimiter(cfg.UserRate, cfg.UserBurst),
			func(id int64) { a.outcomes.Add(id, seckill.OutcomeLocalLimit) }),
		Challenger: challenger,
		Logger:     logger,
		Now:        time.Now,
	})
	if err != nil {
		return err
	}
	if a.Refunds, err = seckill.NewRefunds(a.Store, pay.provider, jobs.NewRefundScheduler(a.Queue), a.Store, logger,
		seckill.RefundConfig{ConfirmWait: cfg.RefundConfirmWait, MaxSends: cfg.RefundMaxSends}); err != nil {
		return err
	}
	if a.Life, err = seckill.NewLife(seckill.LifeDeps{Store: a.Metrics.wrapLife(a.Store), Returner: a.Admitter,
		Orders: a.Purchases, Bus: a.Bus, Refunds: a.Refunds, Opener: pay.opener, Auditor: a.Store, Logger: logger,
		Currency: cfg.PaymentCurrency}); err != nil {
		return err
	}
	if a.Operators, err = seckill.NewOperators(a.Store, bcryptCost); err != nil {
		return err
	}
	a.Events, err = seckill.NewDeliverer(a.Store, eventhook.NewSender(cfg.EventsTimeout, cfg.EventsPolicy()), logger, seckill.DeliveryConfig{
		Batch: cfg.EventsBatch, Concurrency: cfg.EventsConcurrency, MaxAttempts: cfg.EventsMaxAttempts,
		MaxBackoff: cfg.EventsMaxBackoff, MaxProbeBackoff: cfg.EventsProbeBackoff, KeepDelivered: cfg.EventsRetention > 0,
		RoundTimeout: 3 * cfg.EventsTimeout,
	}, func(o seckill.DeliveryOutcome, n int) {
		a.Metrics.EventDeliveries.WithLabelValues(string(o)).Add(float64(n))
	})
	return err
}

// Close enqueues what is still gathering, then releases connections.
func (a *App) Close() {
	if a.Enqueuer != nil {
		a.Enqueuer.Close()
	}
	if a.Bus != nil {
		_ = a.Bus.Close()
	}
	if a.Redis != nil {
		_ = a.Redis.Close()
	}
	if a.DB != nil {
		_ = a.DB.Close()
	}
	a.stopTracing()
}

// RunWorker runs the Asynq workers until ctx ends, then stops them: tasks in
// flight get ShutdownTimeout to finish, and any that do not are handed back
// to the queue (and their admissions stay pending in Redis), so none is lost.
func (a *App) RunWorker(ctx context.Context) error {
	outage := newOutageLog(a.Logger, "persist orders")
	persist := tracePersist(func(ctx context.Context, adms []seckill.Admission) error {
		ctx, cancel := context.WithTimeout(ctx, 25*time.Second)
		defer cancel()
		err := a.Purchases.PersistAdmissions(ctx, adms)
		if err != nil {
			outage.fail(ctx, err)
		} else {
			outage.ok(ctx)
		}
		return err
	})
	// A batch is not any one task's: the coalescer runs it without the
	// cancellation of the task that started it, so it outlives a task that
	// gives up (its store writes are idempotent anyway). Tasks beyond two
	// rounds of writes wait for room within their own timeout.
	coalescer := jobs.NewCoalescer(persist, a.Config.BatchSize, a.Config.PersistWriters, 2*a.Config.BatchSize*a.Config.PersistWriters)
	mux := asynq.NewServeMux()
	jobs.Register(mux, jobs.NewPersistHandler(coalescer), jobs.NewExpireHandler(a.Life), jobs.NewRefundHandler(a.Refunds))
	srv := asynq.NewServerFromRedisClient(a.Redis, asynq.Config{
		Concurrency: a.Config.WorkerConcurrency,
		Queues:      map[string]int{jobs.QueueOrders: 1},
		// An idle worker looks at the queue every QueueInterval or so.
		// Each look is a script call and wakes this process and Redis, so
		// the shorter the interval, the more an idle process costs, Redis
		// included, doing nothing. seckill serve persists its own purchases
		// without the queue (direct.go); the queue carries an API-only
		// process's batches, retries and refunds, and only the first task
		// after a quiet spell waits for the look.
		TaskCheckInterval: a.Config.QueueInterval,
		// Retries become due after RetryDelay (from 1 s); check for them
		// every second rather than asynq's default of five.
		DelayedTaskCheckInterval: time.Second,
		RetryDelayFunc:           jobs.RetryDelay,
		Logger:                   jobs.NewLogger(a.Logger),
		LogLevel:                 asynq.WarnLevel,
		ShutdownTimeout:          a.Config.ShutdownTimeout,
		ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
			retried, _ := asynq.GetRetryCount(ctx)
			maxRetry, _ := asynq.GetMaxRetry(ctx)
			id, _ := asynq.GetTaskID(ctx)
			if retried < maxRetry && !errors.Is(err, asynq.SkipRetry) {
				return // it retries; the outage log tells of the run of failures
			}
			// Archived: the dead-letter queue.
			a.Logger.ErrorContext(ctx, "task failed", "task_id", id, "type", t.Type(), "retried", retried, "max_retry", maxRetry, "err", err)
		}),
	})
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	a.Logger.Info("worker started", "concurrency", a.Config.WorkerConcurrency, "batch_size", a.Config.BatchSize, "writers", a.Config.PersistWriters,
		"expiry_writers", a.Config.ExpiryWriters)
	var expiring, direct sync.WaitGroup
	for range a.Config.ExpiryWriters {
		expiring.Go(func() { a.runExpiry(ctx) })
	}
	expiring.Go(func() { a.runEvents(ctx) })
	// This process's own purchases skip the queue (direct.go).
	direct.Go(func() {
		a.direct.run(ctx, persist, a.Config.BatchSize, a.Config.PersistWriters, a.Config.ShutdownTimeout)
	})
	<-ctx.Done()
	a.Logger.Info("worker stopping")
	direct.Wait()
	srv.Shutdown()
	expiring.Wait()
	return nil
}

// runExpiry expires orders past their pay_by in batches until ctx ends: a
// batch at once while the last one was full (an expiry storm), else one
// every ExpiryInterval. Each runner holds at most one Postgres connection;
// the runners of every process take disjoint batches.
func (a *App) runExpiry(ctx context.Context) {
	outage := newOutageLog(a.Logger, "expire orders")
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := a.Life.ExpireDue(ctx, a.Config.ExpiryBatch)
		switch {
		case err != nil && ctx.Err() == nil:
			outage.fail(ctx, err)
		case err == nil:
			outage.ok(ctx)
		}
		next := a.Config.ExpiryInterval
		if err == nil && n == a.Config.ExpiryBatch {
			next = 0 // more are due
		}
		t.Reset(next)
	}
}

// runEvents delivers the outbox's order events until ctx ends, each
// enabled endpoint on a lane of its own (seckill.Deliverer.Run: a round at
// once while its last one took a full batch, else one every
// EventsInterval, so that during a sale each round takes many); and once a
// minute it prunes the events delivered longer than EventsRetention ago.
// The lanes of every process take disjoint batches (SKIP LOCKED), and an
// order's next event is never sent before its previous one was delivered,
// whichever process sends it.
func (a *App) runEvents(ctx context.Context) {
	var mu sync.Mutex // the lanes report from their goroutines
	outage := newOutageLog(a.Logger, "deliver order events")
	report := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			outage.fail(ctx, err)
		} else {
			outage.ok(ctx)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	// With no endpoint enabled (as this process last read, at start and
	// every ReconcileInterval) there is nothing to deliver: Run does not
	// even read the endpoints.
	wg.Go(func() { a.Events.Run(ctx, a.Config.EventsInterval, a.Store.EventsOn, report) })
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if n, err := a.Events.Prune(ctx, a.Config.EventsRetention, 10000); err != nil && ctx.Err() == nil {
			a.Logger.ErrorContext(ctx, "prune delivered events", "err", err)
		} else if n > 0 {
			a.Logger.InfoContext(ctx, "pruned delivered events", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunReconciler rebuilds campaigns Redis lost or must rebuild (from
// Postgres, in a new epoch), re-enqueues admissions whose
// enqueue never happened, expires unpaid orders whose expiry task was lost
// and gives back units Redis could not take before, every
// ReconcileInterval until ctx ends. Running it
// in several processes at once is safe: both steps are idempotent.
func (a *App) RunReconciler(ctx context.Context) {
	t := time.NewTicker(a.Config.ReconcileInterval)
	defer t.Stop()
	for {
		a.reconcileOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *App) reconcileOnce(ctx context.Context) {
	live, _ := a.live.get(ctx)     // keeps the Redis guard's fallback list fresh
	_, _ = a.shards.get(ctx, live) // and its memory of their shards
	// An endpoint added on another instance's dashboard turns this
	// process's outbox writes on within one interval.
	_, err := a.Store.RefreshEvents(ctx)
	a.passed(ctx, "look for event endpoints", err)
	_, err = a.Purchases.RestoreCampaigns(ctx)
	a.passed(ctx, "restore campaigns", err)
	// Moves of units between stock shards that their process left halfway.
	if n, err := a.Admitter.FinishMoves(ctx, live); a.passed(ctx, "finish moves between stock shards", err) && n > 0 {
		a.Logger.InfoContext(ctx, "finished moves of units between stock shards", "count", n)
	}
	if n, err := a.Purchases.Reconcile(ctx, a.Config.ReconcileAfter, 1000); a.passed(ctx, "reconcile admissions", err) {
		a.Metrics.Reconciled.Add(float64(n))
	}
	if expired, returned, err := a.Life.SweepOrders(ctx, 1000); a.passed(ctx, "sweep orders", err) && expired+returned > 0 {
		a.Logger.InfoContext(ctx, "swept orders", "expired", expired, "units_returned", returned)
	}
	if n, err := a.Refunds.Sweep(ctx, 1000); a.passed(ctx, "sweep refunds", err) && n > 0 {
		a.Logger.InfoContext(ctx, "scheduled refunds whose send was due", "count", n)
	}
	if last := a.retiredAt.Load(); time.Since(time.Unix(0, last)) >= retireEvery && a.retiredAt.CompareAndSwap(last, time.Now().UnixNano()) {
		if n, err := a.Purchases.RetireCampaigns(ctx); a.passed(ctx, "retire ended campaigns", err) && n > 0 {
			a.Logger.InfoContext(ctx, "trimmed ended campaigns in redis", "count", n)
		}
	}
}

// passed reports whether a pass of a periodic step (what: "sweep orders")
// succeeded. A run of failed passes (every pass fails while Postgres is
// away, several a second) is logged when it starts and when it ends
// (outageLog), not once per pass; one that ctx's end caused is not logged.
func (a *App) passed(ctx context.Context, what string, err error) bool {
	v, ok := a.steps.Load(what)
	if !ok {
		v, _ = a.steps.LoadOrStore(what, newOutageLog(a.Logger, what))
	}
	o := v.(*outageLog)
	switch {
	case err == nil:
		o.ok(ctx)
		return true
	case ctx.Err() == nil:
		o.fail(ctx, err)
	}
	return false
}

// newVerifier builds the identity provider of cfg, if any (fetching its
// discovery document: a provider that cannot be reached stops the start),
// and the verifier of every mode cfg turns on.
func newVerifier(ctx context.Context, cfg *config.Config, tokens *auth.Tokens, subjects auth.SubjectStore) (*auth.Provider, *auth.Verifier, error) {
	var provider *auth.Provider
	if cfg.AuthProvider() {
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		var err error
		provider, err = auth.NewProvider(dctx, auth.ProviderConfig{
			Issuer: cfg.AuthIssuer, JWKSURL: cfg.AuthJWKSURL, Audience: cfg.AuthAudience, AdminClaim: cfg.AuthAdminClaim,
			Leeway: cfg.AuthLeeway, MinRefetch: cfg.AuthMinRefetch, KeyMaxAge: cfg.AuthKeyMaxAge,
			VerifiedSize: cfg.AuthCacheSize, SubjectSize: cfg.AuthSubjectCacheSize,
		}, subjects)
		if err != nil {
			return nil, nil, fmt.Errorf("SECKILL_AUTH_ISSUER / SECKILL_AUTH_JWKS_URL: %w", err)
		}
		if err := discoveredKeys(cfg, provider); err != nil {
			return nil, nil, err
		}
	}
	hs := tokens
	if !cfg.AuthHS256 {
		hs = nil
	}
	v, err := auth.NewVerifier(hs, provider)
	return provider, v, err
}

// discoveredKeys refuses, in production, a key set URL that the provider's
// discovery names over plain http to another host: config refuses the same
// in SECKILL_AUTH_JWKS_URL, and keys fetched that way can be swapped on
// the way.
func discoveredKeys(cfg *config.Config, p *auth.Provider) error {
	d := p.Discovery()
	if cfg.Dev() || d == nil {
		return nil
	}
	var meta struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := d.Claims(&meta); err != nil || !config.SecureURL(meta.JWKSURL) {
		return fmt.Errorf("SECKILL_AUTH_ISSUER: the provider's discovery names the key set %q: production fetches keys only over https:// (http:// only on a loopback host)", meta.JWKSURL)
	}
	return nil
}

func openDB(ctx context.Context, cfg *config.Config) (*bun.DB, error) {
	return store.Open(ctx, cfg.DatabaseURL, 2)
}
