package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
)

// SimulateOptions says which order SimulatePayment pays, where.
type SimulateOptions struct {
	// URL is the running server, e.g. http://localhost:8080; empty means
	// the configured SECKILL_HTTP_ADDR on this machine.
	URL     string
	OrderID int64
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
	var data struct {
		CreatePayment struct {
			ID       string `json:"id"`
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
			Status   string `json:"status"`
			PayBy    string `json:"payBy"`
		} `json:"createPayment"`
	}
	err = demoGraphQL(ctx, base.String()+"/graphql", admin, `mutation($id: ID!) {
  createPayment(orderId: $id) { id amount currency status payBy }
}`, map[string]any{"id": fmt.Sprint(opts.OrderID)}, &data)
	if err != nil {
		return fmt.Errorf("payments simulate: %w", err)
	}
	p := data.CreatePayment
	fmt.Fprintf(out, "payment %s: %d %s, %s, pay by %s\n", p.ID, p.Amount, p.Currency, p.Status, p.PayBy)
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
