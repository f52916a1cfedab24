package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/pprof"
	"time"
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
	srv := &http.Server{Addr: a.Config.PprofAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	a.Logger.Info("pprof listening", "addr", a.Config.PprofAddr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.Logger.Error("pprof server", "err", err)
	}
}
