package app

import (
	"net/http"
	"testing"

	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
)

// TestStripeServesNoBuiltinWebhook: with Stripe as the provider the built-in
// webhook is not served, so an event signed with the built-in scheme (here
// with the development secret, which development used to give Stripe too)
// cannot mark an order paid around Stripe's signature.
func TestStripeServesNoBuiltinWebhook(t *testing.T) {
	e, v, _ := newStripeEnv(t, 2)
	id := e.buyCreated(v, 41)
	p := e.createPaymentAPI(id, 41)
	ev := seckill.PaymentEvent{ID: "evt_builtin_1", Type: seckill.EventPaymentSucceeded, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}
	status, body, err := payhook.Send(e.ctx, http.DefaultClient, e.url+"/webhooks/payments", []byte(config.DevWebhookSecret), ev)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusNotFound {
		t.Errorf("POST /webhooks/payments beside Stripe: %d %s, want 404", status, body)
	}
	if st := e.status(id); st != seckill.OrderCreated {
		t.Fatalf("order %s after a built-in event beside Stripe, want CREATED", st)
	}
}
