package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"seckill/internal/config"
	"seckill/migrations"
)

// Serve runs the HTTP API and, when withWorker is set, the persistence
// workers in this process, plus the reconciler. It returns once ctx ends
// and everything has stopped: HTTP first (no new admissions), then workers.
func Serve(ctx context.Context, cfg *config.Config, logger *slog.Logger, withWorker bool, banner io.Writer) error {
	a, err := New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	if _, err := a.Service.RestoreCampaigns(ctx); err != nil {
		// Not fatal: purchases and the reconciler restore them later.
		logger.Error("restore campaigns from Postgres", "err", err)
	}
	if err := a.EnsureConfiguredAdmin(ctx); err != nil {
		return err
	}
	// The sold-out marks listen for returned stock until the process stops.
	if err := a.Admitter.Start(ctx); err != nil {
		return err
	}
	logger.Info("http server listening", "addr", ln.Addr().String(), "worker", withWorker)
	if cfg.Dev() && banner != nil {
		a.printBanner(banner, ln.Addr().String())
	}

	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	if withWorker {
		wg.Add(1)
		go func() { defer wg.Done(); errc <- a.RunWorker(workerCtx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); a.RunReconciler(workerCtx) }()
	if cfg.PprofAddr != "" {
		wg.Add(1)
		go func() { defer wg.Done(); a.runPprof(workerCtx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = a.RunDashboard(workerCtx) }()

	httpErr := a.RunHTTP(ctx, ln)
	stopWorker()
	wg.Wait()
	close(errc)
	if httpErr != nil {
		return httpErr
	}
	for err := range errc {
		if err != nil {
			return err
		}
	}
	logger.Info("stopped")
	return nil
}

// Worker runs only the persistence workers and the reconciler.
func Worker(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	a, err := New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	go a.RunReconciler(ctx)
	return a.RunWorker(ctx)
}

// Migrate runs a migration command (up, down, status) against the database.
func Migrate(ctx context.Context, cfg *config.Config, cmd string, out io.Writer) error {
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrations.Migrate(ctx, db, cmd, out)
}

func (a *App) printBanner(w io.Writer, addr string) {
	host := addr
	if strings.HasPrefix(host, "[::]") || strings.HasPrefix(host, "0.0.0.0") || strings.HasPrefix(host, ":") {
		_, port, _ := net.SplitHostPort(addr)
		host = "localhost:" + port
	}
	admin, _ := a.Tokens.Issue(1, true, 24*time.Hour)
	user, _ := a.Tokens.Issue(1001, false, 24*time.Hour)
	fmt.Fprintf(w, `
seckill is running (development mode)
  GraphQL endpoint   http://%[1]s/graphql   (POST, GET, WebSocket)
  Playground         http://%[1]s/playground
  Metrics            http://%[1]s/metrics
  Health             http://%[1]s/healthz   http://%[1]s/readyz
  Dashboard          http://%[1]s/admin   %[4]s
  Admin token (user 1, 24h):
    %[2]s
  User token (user 1001, 24h):
    %[3]s
  More tokens: ./bin/seckill token --user ID [--admin]
`, host, admin, user, dashboardLogin(a.Config))
}

// dashboardLogin tells a developer how to sign in to the dashboard.
func dashboardLogin(cfg *config.Config) string {
	if cfg.AdminUser == "" {
		return "(create an operator: ./bin/seckill admin create --user NAME)"
	}
	return fmt.Sprintf("(user %s, password %s)", cfg.AdminUser, cfg.AdminPassword)
}
