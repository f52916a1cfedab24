package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"seckill/graph"
	"seckill/internal/clientaddr"
	"seckill/internal/payhook"
	"seckill/playground"
	"seckill/salepage"
)

// Handler returns the HTTP API: /graphql, /webhooks/payments (or
// /webhooks/stripe with Stripe), the sale page /sale/{voucherId} with
// /time, /playground (when enabled), /healthz, /readyz and /metrics
// (in development, unless it has an address of its own), and the
// dashboard under /admin;
// every request gets an id, a span and its
// request metrics (observe).
func (a *App) Handler(ready *atomic.Bool) http.Handler {
	mux := http.NewServeMux()
	gql := graph.NewHandler(graph.Domain{Catalog: a.Catalog, Purchases: a.Purchases, Challenges: a.Challenges, Life: a.Life, Rooms: a.Rooms}, a.Verifier, graph.Options{
		Logger:         a.Logger,
		AllowedOrigins: a.Config.AllowedOrigins,
		Introspection:  a.Config.Dev() || a.Config.Playground,
		ClientAddr:     clientaddr.New(a.Config.TrustedProxies),
	})
	mux.Handle("/graphql", a.shed(gql))
	if a.stripeHook != nil {
		// Stripe's events, signed with Stripe's own scheme (internal/stripepay).
		// The built-in webhook is not served beside it: it would be a second
		// way to mark an order paid, around Stripe's signature.
		mux.Handle("/webhooks/stripe", a.stripeHook)
	} else {
		// The payment provider's calls; see internal/payhook for the signature.
		mux.Handle("/webhooks/payments", payhook.NewHandler(a.Life, a.Config.PaymentWebhookSecret, a.Logger))
	}
	// The buyers' sale page and its stock (the same bytes for everyone: a
	// CDN may cache them) and the clock its countdown follows.
	mux.Handle("GET /sale/", salepage.Handler("/sale", salepage.Deps{Vouchers: a.Catalog, Logger: a.Logger,
		FrameAncestors: a.Config.SaleFrameAncestors, Currency: a.Config.PaymentCurrency}))
	mux.Handle("GET /time", salepage.TimeHandler())
	if a.Config.Playground {
		pg := playground.Handler("/playground", "/graphql")
		mux.Handle("GET /playground", pg)
		mux.Handle("GET /playground/", pg)
		mux.Handle("GET /{$}", http.RedirectHandler("/playground", http.StatusFound))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, code := map[string]string{"postgres": "ok", "redis": "ok"}, http.StatusOK
		if ready != nil && !ready.Load() {
			status["server"], code = "shutting down", http.StatusServiceUnavailable
		}
		if err := a.DB.PingContext(ctx); err != nil {
			status["postgres"], code = "unreachable", http.StatusServiceUnavailable
		}
		if err := a.Redis.Ping(ctx).Err(); err != nil {
			status["redis"], code = "unreachable", http.StatusServiceUnavailable
		}
		writeJSON(w, code, status)
	})
	// Else on its own address (runMetrics). Production never serves it on
	// the public port: the series tell anyone the sale's traffic, stock and
	// failures, and a scraper is a machine, not an operator to sign in.
	if a.Config.MetricsAddr == "" && a.Config.Dev() {
		mux.Handle("GET /metrics", a.metricsHandler())
	}
	a.mountDashboard(mux)
	return a.observe(mux)
}

// shed answers 503 at once when more than MaxInFlight requests are being
// served, so that an overload costs the excess callers a fast refusal rather
// than everyone a timeout. Long-lived WebSocket connections do not count.
func (a *App) shed(next http.Handler) http.Handler {
	var inFlight atomic.Int64
	limit := int64(a.Config.MaxInFlight)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			next.ServeHTTP(w, r)
			return
		}
		if inFlight.Add(1) > limit {
			inFlight.Add(-1)
			a.Metrics.Overloaded.Inc()
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"errors": []any{map[string]any{
				"message": "server overloaded; try again", "extensions": map[string]string{"code": "UNAVAILABLE"}}}})
			return
		}
		defer inFlight.Add(-1)
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// RunHTTP serves the API on the configured address until ctx ends, then
// stops accepting, ends subscriptions and drains requests in flight.
func (a *App) RunHTTP(ctx context.Context, ln net.Listener) error {
	var ready atomic.Bool
	ready.Store(true)
	// Subscriptions live on hijacked connections that Shutdown does not wait
	// for; cancelling the base context ends them.
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           a.Handler(&ready),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	ready.Store(false)
	a.Logger.Info("http server draining")
	sctx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	cancelBase()
	if errors.Is(err, context.DeadlineExceeded) {
		// Requests still running after the budget (or connections that
		// never sent one) are cut; their admissions, if any, are pending
		// in Redis and the reconciler hands them to the workers.
		a.Logger.Warn("http drain exceeded the shutdown timeout; closing the rest", "timeout", a.Config.ShutdownTimeout)
		_ = srv.Close()
		return nil
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http shutdown: %w", err)
	}
	return nil
}
