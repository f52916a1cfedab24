package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
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
	if _, err := a.Purchases.RestoreCampaigns(ctx); err != nil {
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
	if cfg.MetricsAddr != "" {
		wg.Add(1)
		go func() { defer wg.Done(); a.runMetrics(workerCtx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = a.RunDashboard(workerCtx) }()
	wg.Add(1)
	go func() { defer wg.Done(); a.RunConsistencyCheck(workerCtx) }()

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
	if cfg.MetricsAddr != "" {
		go a.runMetrics(ctx)
	}
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
	host := localAddr(addr)
	admin, _ := a.Tokens.Issue(1, true, 24*time.Hour)
	user, _ := a.Tokens.Issue(1001, false, 24*time.Hour)
	fmt.Fprintf(w, `
seckill is running (development mode)
  GraphQL endpoint   http://%[1]s/graphql   (POST, GET, WebSocket)
  Playground         http://%[1]s/playground
  Metrics            http://%[7]s/metrics
  Health             http://%[1]s/healthz   http://%[1]s/readyz
  Dashboard          http://%[1]s/admin   %[4]s
  Admin token (user 1, 24h):
    %[2]s
  User token (user 1001, 24h):
    %[3]s
  More tokens        %[5]s./bin/seckill token --user 1002   (--admin for an admin)
  A sale to try      %[5]s./bin/seckill demo%[6]s   (it prints the sale page's link too)
  Sale page          http://%[1]s/sale/VOUCHER_ID#token=%[3]s
  Pay an order       %[5]s%[8]s./bin/seckill payments simulate --order ORDER_ID%[6]s   (--fail: a failed payment)
  Refunds            %[9]s
`, host, admin, user, dashboardLogin(a.Config), cliEnv(a.Config), demoURL(host), cmp.Or(a.Config.MetricsAddr, host), webhookEnv(a.Config),
		refundsLine(a.Config))
}

// refundsLine says where payments owed back are refunded.
func refundsLine(cfg *config.Config) string {
	if cfg.PaymentProvider == config.PaymentStripe {
		return "through Stripe's Refunds API (" + cmp.Or(cfg.StripeAPIBase, "https://api.stripe.com") + "); Stripe's events come to POST /webhooks/stripe"
	}
	if cfg.PaymentRefundURL == "" {
		return "not sent: no provider (SECKILL_PAYMENT_REFUND_URL; ./bin/seckill payments provider is one for development)"
	}
	return "sent to " + cfg.PaymentRefundURL + "   (make run's development provider: ./bin/seckill payments provider)"
}

// cliEnv is what a plain shell must put before ./bin/seckill so that its
// tokens verify on this server. In development the server signs with the
// development secret, which the commands use only when SECKILL_ENV=dev
// (production stays strict: no secret, no tokens).
func cliEnv(cfg *config.Config) string {
	if cfg.JWTSecret == config.DevJWTSecret {
		return "SECKILL_ENV=dev "
	}
	return "SECKILL_ENV=dev SECKILL_JWT_SECRET=<this server's secret> "
}

// webhookEnv is what a plain shell must add so that simulated payment
// events verify on this server.
func webhookEnv(cfg *config.Config) string {
	if cfg.PaymentWebhookSecret == config.DevWebhookSecret {
		return ""
	}
	return "SECKILL_PAYMENT_WEBHOOK_SECRET=<this server's secret> "
}

// demoURL is the --url the demo needs to find a server at host, if any.
func demoURL(host string) string {
	if host == localAddr(":8080") {
		return ""
	}
	return " --url http://" + host
}

// dashboardLogin tells a developer how to sign in to the dashboard.
func dashboardLogin(cfg *config.Config) string {
	if cfg.AdminUser == "" {
		return "(create an operator: ./bin/seckill admin create --user NAME)"
	}
	return fmt.Sprintf("(user %s, password %s)", cfg.AdminUser, cfg.AdminPassword)
}
