package app

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/clientaddr"
	"seckill/internal/sampler"
	"seckill/internal/seckill"
	"seckill/jobs"
	"seckill/web"
)

// dashboard is the web edge's parts that live as long as the App: the
// handler, the sampler behind its charts, and the per-instance outcome
// counter the purchase path feeds.
type dashboard struct {
	handler  *web.Handler
	sampler  *sampler.Sampler
	outcomes *sampler.OutcomeCounter
	queues   *jobs.QueueStats // also read by the queue metrics
}

// newDashboard builds the dashboard on the app's connections. The Asynq
// monitor and the queue numbers share the app's Redis client, so there is
// nothing of theirs to close.
func (a *App) newDashboard() *dashboard {
	inspector := asynq.NewInspectorFromRedisClient(a.Redis)
	queues := jobs.NewQueueStats(inspector, []string{jobs.QueueOrders}, jobs.DefaultQueueTTL)
	d := &dashboard{outcomes: a.outcomes, queues: queues}
	d.sampler = sampler.New(sampler.Config{
		Campaigns: a.Store, Live: a.Admitter, Queues: queues, Outcomes: a.outcomes, Logger: a.Logger.With("component", "sampler"),
	})
	monitor := asynqmon.New(asynqmon.Options{RootPath: "/admin/queues", RedisConnOpt: sharedRedis{a.Redis}})
	cfg := web.Config{
		Campaigns: a.Catalog,
		Orders:    orders{a.Purchases, a.Life},
		Records:   a.Store,
		Sessions:  a.Operators,
		Live:      a.Admitter,
		Rooms:     a.Rooms,
		Refunds:   a.Refunds,
		Events:    a.Store,
		Currency:  a.Config.PaymentCurrency,
		Limiter:   admission.NewLoginLimiter(a.Redis, "", web.DefaultLoginLimits),
		Queues:    queueFigures{queues},
		History:   history{d.sampler},
		Monitor:   monitor,
		Logger:    a.Logger.With("component", "dashboard"),

		UserRate:     a.Config.UserRate,
		UserBurst:    a.Config.UserBurst,
		AddressRate:  a.Config.AddressRate,
		AddressBurst: a.Config.AddressBurst,
		ClientAddr:   clientaddr.New(a.Config.TrustedProxies),
	}
	if a.SignIn != nil {
		cfg.SSO, cfg.ProviderAdmins, cfg.SSOName = a.SignIn, a.Operators, providerName(a.Config.AuthIssuer)
	}
	d.handler = web.New(cfg)
	return d
}

// RunDashboard samples the campaigns for the dashboard's charts until ctx
// ends. Serve runs it; without it the pages show no history.
func (a *App) RunDashboard(ctx context.Context) error {
	return a.dashboard.sampler.Run(ctx)
}

// EnsureConfiguredAdmin creates the operator named by SECKILL_ADMIN_USER with
// SECKILL_ADMIN_PASSWORD, or resets its password, when they are set (a
// development convenience; production operators use `seckill admin create`).
func (a *App) EnsureConfiguredAdmin(ctx context.Context) error {
	if a.Config.AdminUser == "" {
		return nil
	}
	changed, err := a.Operators.EnsureAdmin(ctx, a.Config.AdminUser, a.Config.AdminPassword)
	if err != nil {
		return adminConfigError(err)
	}
	if changed {
		a.Logger.Info("dashboard admin set from the environment", "admin", a.Config.AdminUser)
	}
	return nil
}

func adminConfigError(err error) error {
	switch seckill.ErrorField(err) {
	case "user":
		return configErr("SECKILL_ADMIN_USER", err)
	case "password":
		return configErr("SECKILL_ADMIN_PASSWORD", err)
	}
	return err
}

func configErr(name string, err error) error {
	return errors.New(name + ": " + seckill.ErrorMessage(err))
}

// sharedRedis hands asynqmon the app's Redis client instead of a new pool.
// asynqmon's Close would close it, so the monitor is never closed: the app
// closes the client.
type sharedRedis struct{ c redis.UniversalClient }

func (s sharedRedis) MakeRedisClient() any { return s.c }

// orders are what the dashboard does with orders: read them (Purchases)
// and cancel them (Life).
type orders struct {
	*seckill.Purchases
	*seckill.Life
}

// mountDashboard adds the dashboard to the app's routes.
func (a *App) mountDashboard(mux *http.ServeMux) {
	mux.Handle("/admin", a.dashboard.handler)
	mux.Handle("/admin/", a.dashboard.handler)
}

// providerName is how the sign-in page names the identity provider: its
// issuer's host.
func providerName(issuer string) string {
	if u, err := url.Parse(issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return "your identity provider"
}
