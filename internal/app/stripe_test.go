package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"seckill/internal/payhook"
	"seckill/internal/seckill"
	"seckill/internal/stripepay"
	"seckill/internal/testenv"
)

const stripeWhsec = "whsec_test_seckill_0123456789"

// newStripeEnv is a running seckill with SECKILL_PAYMENT_PROVIDER=stripe,
// its client pointed at a private stripe-mock, and a campaign of stock
// units at 1.00 CNY.
func newStripeEnv(t *testing.T, stock int64) (*testEnv, int64, *testenv.StripeMock) {
	t.Helper()
	mock := testenv.StartStripeMock(t)
	e, v := newLifeEnvWith(t, stock, func(m map[string]string) {
		m["SECKILL_PAYMENT_PROVIDER"] = "stripe"
		m["STRIPE_API_KEY"] = "sk_test_123"
		m["STRIPE_WEBHOOK_SECRET"] = stripeWhsec
		m["STRIPE_API_BASE"] = mock.URL
	})
	return e, v, mock
}

// stripePayment is createPayment's answer through the API.
type stripePayment struct {
	ID           string `json:"id"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	Status       string `json:"status"`
	ClientSecret string `json:"clientSecret"`
}

func (e *testEnv) createPaymentAPI(orderID, userID int64) stripePayment {
	e.t.Helper()
	var data struct {
		CreatePayment stripePayment `json:"createPayment"`
	}
	res, err := e.gql(nil, e.token(userID, false), `mutation($id: ID!) {
  createPayment(orderId: $id) { id amount currency status clientSecret }
}`, map[string]any{"id": fmt.Sprint(orderID)}, &data)
	if err != nil || len(res.Errors) > 0 {
		e.t.Fatalf("createPayment(%d): %+v, %v", orderID, res, err)
	}
	return data.CreatePayment
}

// postStripe signs a Stripe event of typ about object at `at` with secret,
// as Stripe does, and posts it to /webhooks/stripe.
func (e *testEnv) postStripe(body []byte, secret string, at time.Time) (int, string) {
	e.t.Helper()
	sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.url+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Stripe-Signature", sig.Header)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

func stripeEventJSON(id, typ string, object map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": stripe.APIVersion,
		"created": time.Now().Unix(), "data": map[string]any{"object": object}})
	return b
}

// succeededIntent is a succeeded PaymentIntent pi carrying our payment's id
// in its metadata.
func succeededIntent(pi, paymentID string, amount int64, currency string) map[string]any {
	return map[string]any{"id": pi, "object": "payment_intent", "amount": amount, "amount_received": amount,
		"currency": strings.ToLower(currency), "status": "succeeded",
		"metadata": map[string]string{stripepay.MetaPaymentID: paymentID}}
}

// providerRef is the PaymentIntent createPayment recorded for a payment
// (stripe-mock answers its fixture's id).
func (e *testEnv) providerRef(paymentID string) string {
	e.t.Helper()
	var ref string
	if err := e.app.DB.NewRaw(`SELECT provider_ref FROM payment WHERE id = ?`, paymentID).Scan(e.ctx, &ref); err != nil || !strings.HasPrefix(ref, "pi_") {
		e.t.Fatalf("the payment's provider_ref %q (%v), want the PaymentIntent's id", ref, err)
	}
	return ref
}

// TestStripePurchasePaid: a buyer's payment is opened as a PaymentIntent
// at stripe-mock (our payment id in its metadata, its key derived from the
// id, the amount in Stripe's unit) with its client secret in the answer;
// Stripe's signed payment_intent.succeeded pays the order once; forged and
// replayed calls change nothing.
func TestStripePurchasePaid(t *testing.T) {
	e, v, mock := newStripeEnv(t, 2)
	id := e.buyCreated(v, 41)
	p := e.createPaymentAPI(id, 41)
	if !strings.Contains(p.ClientSecret, "_secret_") || p.Amount != 100 || p.Currency != "CNY" || p.Status != "PENDING" {
		t.Fatalf("payment %+v", p)
	}
	again := e.createPaymentAPI(id, 41)
	reqs := mock.Requests("/v1/payment_intents")
	if again.ID != p.ID || len(reqs) != 2 {
		t.Fatalf("asked again: %+v, %d requests", again, len(reqs))
	}
	for _, r := range reqs {
		if r.IdempotencyKey != stripepay.IntentKey(p.ID) || r.Form.Get("amount") != "100" || r.Form.Get("currency") != "cny" ||
			r.Form.Get("metadata[seckill_payment_id]") != p.ID || r.Form.Get("metadata[seckill_order_id]") != fmt.Sprint(id) {
			t.Errorf("PaymentIntent request %+v", r)
		}
	}

	body := stripeEventJSON("evt_paid_1", "payment_intent.succeeded", succeededIntent(e.providerRef(p.ID), p.ID, 100, "CNY"))
	now := time.Now()
	for _, tc := range []struct {
		name   string
		secret string
		at     time.Time
	}{
		{"forged", "whsec_someone_else", now},
		{"replayed after the tolerance", stripeWhsec, now.Add(-stripepay.Tolerance - time.Minute)},
	} {
		if status, answer := e.postStripe(body, tc.secret, tc.at); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, status, answer)
		}
	}
	if st := e.status(id); st != seckill.OrderCreated {
		t.Fatalf("after refused calls the order is %s", st)
	}
	if status, answer := e.postStripe(body, stripeWhsec, now); status != 200 || !strings.Contains(answer, `"applied"`) {
		t.Fatalf("signed event: %d %s", status, answer)
	}
	// Stripe redelivers an event under its id: applied once.
	if status, answer := e.postStripe(body, stripeWhsec, time.Now()); status != 200 || !strings.Contains(answer, `"duplicate"`) {
		t.Fatalf("redelivered event: %d %s", status, answer)
	}
	if st := e.status(id); st != seckill.OrderPaid {
		t.Fatalf("order %s, want PAID", st)
	}
	if n := e.count(`SELECT count(*) FROM payment_event`); n != 1 {
		t.Errorf("%d events recorded, want 1", n)
	}
	// An event we do not act on is taken and ignored.
	other := stripeEventJSON("evt_other", "customer.created", map[string]any{"id": "cus_1", "object": "customer"})
	if status, answer := e.postStripe(other, stripeWhsec, time.Now()); status != 200 || !strings.Contains(answer, `"ignored"`) {
		t.Errorf("unhandled event: %d %s", status, answer)
	}
}

// TestStripeRefund: a success Stripe confirms for an order cancelled
// meanwhile is owed back; the worker refunds it through stripe-mock's
// Refunds API (the PaymentIntent createPayment recorded, the refund's key
// derived from ours), whose answer (succeeded) makes it REFUNDED; Stripe's
// refund event afterwards changes nothing.
func TestStripeRefund(t *testing.T) {
	e, v, mock := newStripeEnv(t, 2)
	id := e.buyCreated(v, 31)
	p := e.createPaymentAPI(id, 31)
	if _, err := e.app.Life.CancelOrder(asUser(e.ctx, 31, false), id); err != nil {
		t.Fatal(err)
	}
	ref := e.providerRef(p.ID)
	body := stripeEventJSON("evt_late_1", "payment_intent.succeeded", succeededIntent(ref, p.ID, 100, "CNY"))
	if status, answer := e.postStripe(body, stripeWhsec, time.Now()); status != 200 || !strings.Contains(answer, string(seckill.PaymentRefundNeeded)) {
		t.Fatalf("late success: %d %s", status, answer)
	}
	eventually(t, 20*time.Second, "the refund done", func() bool { return e.paymentStatus(p.ID) == seckill.PaymentRefunded })
	refunds := mock.Requests("/v1/refunds")
	if len(refunds) != 1 {
		t.Fatalf("%d refund requests, want 1", len(refunds))
	}
	r := refunds[0]
	if r.IdempotencyKey != stripepay.RefundKey(seckill.RefundKey(p.ID, 1)) || r.Form.Get("amount") != "100" ||
		!strings.HasPrefix(r.Form.Get("payment_intent"), "pi_") || r.Form.Get("metadata[seckill_payment_id]") != p.ID {
		t.Errorf("refund request %+v", r)
	}
	// The PaymentIntent createPayment opened is recorded with the payment
	// and named by the refund: no search.
	if r.Form.Get("payment_intent") != ref {
		t.Errorf("refund of %q, want the recorded %q", r.Form.Get("payment_intent"), ref)
	}
	if s := mock.Requests("/v1/payment_intents/search"); len(s) != 0 {
		t.Errorf("search requests %+v, want none", s)
	}
	rf := map[string]any{"id": "re_1", "object": "refund", "amount": 100, "currency": "cny", "status": "succeeded",
		"payment_intent": ref, "metadata": map[string]string{stripepay.MetaPaymentID: p.ID}}
	ev := stripeEventJSON("evt_refund_1", "refund.updated", rf)
	if status, answer := e.postStripe(ev, stripeWhsec, time.Now()); status != 200 || !strings.Contains(answer, string(seckill.PaymentRefunded)) {
		t.Fatalf("refund event: %d %s", status, answer)
	}
	if st := e.paymentStatus(p.ID); st != seckill.PaymentRefunded {
		t.Errorf("payment %s", st)
	}
}

// TestStripeForeignPaymentIntent: a correctly signed payment_intent.succeeded
// that carries our payment's id in its metadata but is not the
// PaymentIntent createPayment opened for it (or is for another amount)
// leaves the order unpaid and sends no refund: it is answered 2xx
// (recorded, so that Stripe stops), written to payment_event as a
// mismatch with the PaymentIntent it named, and counted in
// seckill_payment_mismatch_total. The PaymentIntent opened for the payment
// pays the order.
func TestStripeForeignPaymentIntent(t *testing.T) {
	e, v, mock := newStripeEnv(t, 2)
	id := e.buyCreated(v, 51)
	p := e.createPaymentAPI(id, 51)
	ref := e.providerRef(p.ID)
	mismatches := func() float64 {
		return testutil.ToFloat64(e.app.Metrics.PaymentMismatch.WithLabelValues(seckill.EventPaymentSucceeded))
	}
	foreign := stripeEventJSON("evt_foreign_1", "payment_intent.succeeded", succeededIntent("pi_foreign", p.ID, 100, "CNY"))
	underpaid := stripeEventJSON("evt_underpaid_1", "payment_intent.succeeded", succeededIntent(ref, p.ID, 1, "CNY"))
	for i, body := range [][]byte{foreign, foreign, underpaid} { // the foreign one redelivered
		if status, answer := e.postStripe(body, stripeWhsec, time.Now()); status != http.StatusOK || !strings.Contains(answer, `"mismatch"`) {
			t.Fatalf("call %d: %d %s, want 200 mismatch", i+1, status, answer)
		}
	}
	if st := e.status(id); st != seckill.OrderCreated {
		t.Fatalf("after a foreign PaymentIntent's success the order is %s, want CREATED", st)
	}
	if st := e.paymentStatus(p.ID); st != seckill.PaymentPending {
		t.Fatalf("payment %s, want PENDING", st)
	}
	if n := e.count(`SELECT count(*) FROM payment_event WHERE outcome = 'mismatch' AND payment_id = ? AND mismatch IS NOT NULL
		AND ((id = 'evt_foreign_1' AND provider_ref = 'pi_foreign') OR (id = 'evt_underpaid_1' AND provider_ref = ?))`, p.ID, ref); n != 2 {
		t.Errorf("%d mismatches recorded, want 2", n)
	}
	if got := mismatches(); got != 2 {
		t.Errorf("seckill_payment_mismatch_total{type=\"payment.succeeded\"} = %v, want 2 (the redelivery not counted)", got)
	}
	if r := mock.Requests("/v1/refunds"); len(r) != 0 {
		t.Errorf("refund requests %+v, want none", r)
	}

	// Nor does the built-in webhook's event, signed with its secret, pay a
	// payment opened at Stripe (where that webhook is still served).
	builtin, _ := json.Marshal(seckill.PaymentEvent{ID: "evt_builtin_1", Type: seckill.EventPaymentSucceeded, PaymentID: p.ID,
		Amount: 100, Currency: "CNY"})
	status, answer := e.postWebhook(http.MethodPost, payhook.Sign([]byte(e.app.Config.PaymentWebhookSecret), time.Now(), builtin), builtin)
	if status == http.StatusOK && !strings.Contains(answer, `"mismatch"`) {
		t.Errorf("the built-in webhook's success: %d %s, want a mismatch or a refusal", status, answer)
	}
	if st := e.status(id); st != seckill.OrderCreated {
		t.Fatalf("after the built-in webhook's success the order is %s, want CREATED", st)
	}

	ours := stripeEventJSON("evt_ours_1", "payment_intent.succeeded", succeededIntent(ref, p.ID, 100, "CNY"))
	if status, answer := e.postStripe(ours, stripeWhsec, time.Now()); status != http.StatusOK || !strings.Contains(answer, `"applied"`) {
		t.Fatalf("our PaymentIntent's success: %d %s", status, answer)
	}
	if st := e.status(id); st != seckill.OrderPaid {
		t.Fatalf("order %s, want PAID", st)
	}
	if got := mismatches(); got != 2 && got != 3 { // 3: the built-in webhook's was taken and set aside
		t.Errorf("seckill_payment_mismatch_total = %v after our success, want 2 or 3", got)
	}
}
