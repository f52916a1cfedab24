package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
	"seckill/internal/stripepay"
)

// SimulateOptions says which order SimulatePayment pays, where.
type SimulateOptions struct {
	// URL is the running server, e.g. http://localhost:8080; empty means
	// the configured SECKILL_HTTP_ADDR on this machine.
	URL     string
	OrderID int64
	// PaymentID, when set, is the payment of the order the event is about,
	// opened before: no payment is opened, so that a success can come late,
	// as a provider's may, after the order was cancelled or expired.
	PaymentID string
	// Fail sends a payment.failed event instead of payment.succeeded.
	Fail bool
}

// SimulatePayment plays the payment provider for one order: it opens the
// order's payment (createPayment, as an admin: user 1, signed with cfg's
// JWT secret) or finds the open one, then signs an event with
// SECKILL_PAYMENT_WEBHOOK_SECRET and posts it to /webhooks/payments, as a
// provider would. It writes what it did to out.
func SimulatePayment(ctx context.Context, cfg *config.Config, opts SimulateOptions, out io.Writer) error {
	base, err := serverURL("payments simulate", cfg, opts.URL)
	if err != nil {
		return err
	}
	if opts.OrderID <= 0 {
		return errors.New("payments simulate: --order must be an order id")
	}
	if cfg.PaymentWebhookSecret == "" {
		return errors.New("payments simulate: SECKILL_PAYMENT_WEBHOOK_SECRET is not set (the server's secret)")
	}
	admin, err := auth.NewTokens([]byte(cfg.JWTSecret), cfg.JWTIssuer).Issue(1, true, 10*time.Minute)
	if err != nil {
		return err
	}
	p, err := simulatedPayment(ctx, base.String()+"/graphql", admin, opts)
	if err != nil {
		return fmt.Errorf("payments simulate: nothing sent: %w", err)
	}
	fmt.Fprintf(out, "payment %s: %s, %s, pay by %s\n", p.ID, seckill.FormatAmount(p.Amount, p.Currency), p.Status, p.PayBy)
	typ := seckill.EventPaymentSucceeded
	if opts.Fail {
		typ = seckill.EventPaymentFailed
	}
	evID, err := seckill.NewPaymentID() // any unique id does; a provider has its own
	if err != nil {
		return err
	}
	ev := seckill.PaymentEvent{ID: "evt_" + evID[4:], Type: typ, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, body, err := payhook.Send(ctx, http.DefaultClient, base.String()+"/webhooks/payments", []byte(cfg.PaymentWebhookSecret), ev)
	if err != nil {
		return fmt.Errorf("payments simulate: %w", err)
	}
	fmt.Fprintf(out, "event %s %s: %d %s\n", ev.ID, ev.Type, status, strings.TrimSpace(string(body)))
	if status != http.StatusOK {
		return fmt.Errorf("payments simulate: the webhook answered %d", status)
	}
	return nil
}

// apiPayment is a payment as the API answers it.
type apiPayment struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Status   string `json:"status"`
	PayBy    string `json:"payBy"`
}

// simulatedPayment is the payment the simulated event is about: the one
// opts names among the order's, or the order's open one, opened now if
// need be.
func simulatedPayment(ctx context.Context, endpoint, admin string, opts SimulateOptions) (apiPayment, error) {
	vars := map[string]any{"id": fmt.Sprint(opts.OrderID)}
	if opts.PaymentID == "" {
		var data struct {
			CreatePayment apiPayment `json:"createPayment"`
		}
		err := demoGraphQL(ctx, endpoint, admin, `mutation($id: ID!) {
  createPayment(orderId: $id) { id amount currency status payBy }
}`, vars, &data)
		return data.CreatePayment, err
	}
	var data struct {
		Order *struct {
			Payments []apiPayment `json:"payments"`
		} `json:"order"`
	}
	err := demoGraphQL(ctx, endpoint, admin, `query($id: ID!) {
  order(id: $id) { payments { id amount currency status payBy } }
}`, vars, &data)
	if err != nil {
		return apiPayment{}, err
	}
	if data.Order == nil {
		return apiPayment{}, fmt.Errorf("there is no order %d", opts.OrderID)
	}
	for _, p := range data.Order.Payments {
		if p.ID == opts.PaymentID {
			return p, nil
		}
	}
	return apiPayment{}, fmt.Errorf("order %d has no payment %s", opts.OrderID, opts.PaymentID)
}

// ProviderOptions say where the development payment provider listens and
// what it does.
type ProviderOptions struct {
	Listen string // the address to serve the refund call on
	// Webhook is the server's payment webhook; empty: the configured
	// SECKILL_HTTP_ADDR on this machine.
	Webhook string
	Refuse  bool          // refuse every refund
	Delay   time.Duration // from a refund call to its confirmation
}

// RunDevProvider serves the development payment provider until ctx ends: it
// answers the server's refund calls (SECKILL_PAYMENT_REFUND_URL) and
// confirms each refund with a webhook event signed with
// SECKILL_PAYMENT_WEBHOOK_SECRET, as a real provider would. It prints where
// it listens to out once it does.
func RunDevProvider(ctx context.Context, cfg *config.Config, opts ProviderOptions, logger *slog.Logger, out io.Writer) error {
	if cfg.PaymentWebhookSecret == "" {
		return errors.New("payments provider: SECKILL_PAYMENT_WEBHOOK_SECRET is not set (the server's secret)")
	}
	webhook := opts.Webhook
	if webhook == "" {
		base, err := serverURL("payments provider", cfg, "")
		if err != nil {
			return err
		}
		webhook = base.String() + "/webhooks/payments"
	}
	p, err := payhook.NewDevProvider(payhook.DevProviderOptions{Secret: cfg.PaymentWebhookSecret, Webhook: webhook,
		Refuse: opts.Refuse, Delay: opts.Delay, Logger: logger})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("payments provider: %w", err)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	go p.Run(ctx)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprint(out, payhook.DevProviderBanner(localAddr(ln.Addr().String()), webhook, opts.Refuse))
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("payments provider: %w", err)
	}
	return nil
}

// payments are the payment provider's two ports: where payments are opened
// and where refunds are sent.
type payments struct {
	opener   seckill.PaymentOpener
	provider seckill.PaymentProvider
}

// newPayments builds the configured payment provider
// (SECKILL_PAYMENT_PROVIDER): the built-in one, whose refund call is
// SECKILL_PAYMENT_REFUND_URL (none: refunds are not sent), or Stripe.
func newPayments(cfg *config.Config, logger *slog.Logger) (payments, error) {
	switch cfg.PaymentProvider {
	case config.PaymentStripe:
		c, err := stripepay.NewClient(stripepay.Options{APIKey: cfg.StripeAPIKey, APIBase: cfg.StripeAPIBase,
			Timeout: cfg.PaymentRefundTimeout, Logger: logger})
		if err != nil {
			return payments{}, err
		}
		return payments{opener: c, provider: c}, nil
	case config.PaymentBuiltin, "":
		if cfg.PaymentRefundURL == "" {
			logger.Warn("SECKILL_PAYMENT_REFUND_URL is not set: payments owed back are not refunded through the provider (they stay REFUND_NEEDED and alert after an hour)")
			return payments{opener: seckill.NoPaymentOpener{}, provider: seckill.NoPaymentProvider{}}, nil
		}
		return payments{opener: seckill.NoPaymentOpener{},
			provider: payhook.NewRefundClient(cfg.PaymentRefundURL, cfg.PaymentWebhookSecret, cfg.PaymentRefundTimeout)}, nil
	}
	return payments{}, fmt.Errorf("SECKILL_PAYMENT_PROVIDER: unknown provider %q", cfg.PaymentProvider)
}
