package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// runPprof serves the Go profiler on its own loopback listener (never on the
// API's) until ctx ends.
func (a *App) runPprof(ctx context.Context) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	a.serveAside(ctx, "pprof", a.Config.PprofAddr, mux)
}

// runMetrics serves /metrics on SECKILL_METRICS_ADDR until ctx ends.
func (a *App) runMetrics(ctx context.Context) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metricsHandler())
	a.serveAside(ctx, "metrics", a.Config.MetricsAddr, mux)
}

func (a *App) metricsHandler() http.Handler {
	return promhttp.HandlerFor(a.Metrics.Registry, promhttp.HandlerOpts{})
}

// serveAside serves h on a listener of its own, beside the API, until ctx
// ends.
func (a *App) serveAside(ctx context.Context, name, addr string, h http.Handler) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	a.Logger.Info(name+" listening", "addr", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.Logger.Error(name+" server", "err", err)
	}
}
