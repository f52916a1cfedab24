package stripepay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"seckill/internal/seckill"
	"seckill/internal/stripepay"
)

const whsec = "whsec_test_0123456789abcdef"

// recorder stands for the domain: it records the events applied, once per
// event id as the domain applies them.
type recorder struct {
	mu     sync.Mutex
	events []seckill.PaymentEvent
	seen   map[string]bool
}

func (r *recorder) ApplyPaymentEvent(_ context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error) {
	if err := ev.Validate(); err != nil {
		return seckill.PaymentResult{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[ev.ID] {
		return seckill.PaymentResult{Duplicate: true}, nil
	}
	r.seen[ev.ID] = true
	r.events = append(r.events, ev)
	return seckill.PaymentResult{Payment: seckill.Payment{ID: ev.PaymentID, Status: seckill.PaymentSucceeded}}, nil
}

// stripeEvent is a Stripe event's JSON as Stripe sends it.
func stripeEvent(id, typ string, object map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "api_version": stripe.APIVersion,
		"created": time.Now().Unix(), "data": map[string]any{"object": object}})
	if err != nil {
		panic(err)
	}
	return b
}

func intent(amount int64, currency string, meta map[string]string) map[string]any {
	return map[string]any{"id": "pi_1", "object": "payment_intent", "amount": amount, "amount_received": amount,
		"currency": currency, "metadata": meta, "status": "succeeded",
		"last_payment_error": map[string]any{"message": "Your card was declined."}}
}

func refund(status string, amount int64, currency string, meta map[string]string) map[string]any {
	return map[string]any{"id": "re_1", "object": "refund", "amount": amount, "currency": currency,
		"metadata": meta, "status": status, "failure_reason": "lost_or_stolen_card"}
}

func post(t *testing.T, h http.Handler, body []byte, header string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe", strings.NewReader(string(body)))
	if header != "" {
		req.Header.Set("Stripe-Signature", header)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func signed(body []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
}

func TestWebhookMapsEvents(t *testing.T) {
	ours := map[string]string{stripepay.MetaPaymentID: payID}
	tests := []struct {
		name   string
		body   []byte
		status int
		want   *seckill.PaymentEvent // nil: nothing applied
	}{
		{"payment succeeded", stripeEvent("evt_1", "payment_intent.succeeded", intent(1234, "cny", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_1", Type: seckill.EventPaymentSucceeded, PaymentID: payID, Amount: 1234, Currency: "CNY"}},
		{"yen, zero decimals", stripeEvent("evt_2", "payment_intent.succeeded", intent(500, "jpy", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_2", Type: seckill.EventPaymentSucceeded, PaymentID: payID, Amount: 500, Currency: "JPY"}},
		{"ISK, two decimals at Stripe", stripeEvent("evt_3", "payment_intent.succeeded", intent(500, "isk", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_3", Type: seckill.EventPaymentSucceeded, PaymentID: payID, Amount: 5, Currency: "ISK"}},
		{"payment failed", stripeEvent("evt_4", "payment_intent.payment_failed", intent(1234, "cny", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_4", Type: seckill.EventPaymentFailed, PaymentID: payID, Amount: 1234, Currency: "CNY",
				Reason: "Your card was declined."}},
		{"refund succeeded", stripeEvent("evt_5", "refund.updated", refund("succeeded", 1234, "cny", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_5", Type: seckill.EventRefundSucceeded, PaymentID: payID, Amount: 1234, Currency: "CNY"}},
		{"refund failed", stripeEvent("evt_6", "refund.failed", refund("failed", 1234, "cny", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_6", Type: seckill.EventRefundFailed, PaymentID: payID, Amount: 1234, Currency: "CNY",
				Reason: "Stripe: refund failed: lost_or_stolen_card"}},
		{"refund still pending: ignored", stripeEvent("evt_7", "refund.created", refund("pending", 1234, "cny", ours)), 200, nil},
		{"another type: ignored", stripeEvent("evt_8", "customer.created", map[string]any{"id": "cus_1", "object": "customer"}), 200, nil},
		{"not our PaymentIntent: ignored", stripeEvent("evt_9", "payment_intent.succeeded", intent(1234, "cny", nil)), 200, nil},
		{"MGA, zero decimals at Stripe", stripeEvent("evt_10", "payment_intent.succeeded", intent(5050, "mga", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_10", Type: seckill.EventPaymentSucceeded, PaymentID: payID, Amount: 505000, Currency: "MGA"}},
		{"malformed payment id", stripeEvent("evt_11", "payment_intent.succeeded",
			intent(1234, "cny", map[string]string{stripepay.MetaPaymentID: "pay_x"})), 400, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{seen: map[string]bool{}}
			h, err := stripepay.NewHandler(rec, whsec, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			status, body := post(t, h, tc.body, signed(tc.body, whsec, time.Now()))
			if status != tc.status {
				t.Fatalf("status = %d %s, want %d", status, body, tc.status)
			}
			var want []seckill.PaymentEvent
			if tc.want != nil {
				want = append(want, *tc.want)
			}
			if diff := cmp.Diff(want, rec.events); diff != "" {
				t.Errorf("events applied (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWebhookRefusesForgedAndReplayed(t *testing.T) {
	rec := &recorder{seen: map[string]bool{}}
	h, err := stripepay.NewHandler(rec, whsec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	body := stripeEvent("evt_1", "payment_intent.succeeded", intent(1234, "cny", map[string]string{stripepay.MetaPaymentID: payID}))
	now := time.Now()
	other := stripeEvent("evt_2", "payment_intent.succeeded", intent(1, "cny", map[string]string{stripepay.MetaPaymentID: payID}))
	_, sigOfOther, _ := strings.Cut(signed(other, whsec, now), ",")
	refused := []struct {
		name   string
		header string
	}{
		{"no signature", ""},
		{"another secret", signed(body, "whsec_forged_secret", now)},
		{"another body's signature", fmt.Sprintf("t=%d,%s", now.Unix(), sigOfOther)},
		{"timestamp moved", strings.Replace(signed(body, whsec, now), fmt.Sprintf("t=%d", now.Unix()), fmt.Sprintf("t=%d", now.Unix()+1), 1)},
		{"replayed after the tolerance", signed(body, whsec, now.Add(-stripepay.Tolerance-time.Minute))},
		{"from the future", signed(body, whsec, now.Add(stripepay.Tolerance+time.Minute))},
		{"garbage", "t=abc,v1=zz"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			if status, answer := post(t, h, body, tc.header); status != http.StatusBadRequest {
				t.Errorf("status = %d %s, want 400", status, answer)
			}
		})
	}
	if len(rec.events) != 0 {
		t.Fatalf("applied %+v from refused calls", rec.events)
	}
	// Within the tolerance, a replayed call is Stripe's redelivery of the
	// same event: the domain applies its id once.
	header := signed(body, whsec, now)
	for i, want := range []string{`"applied"`, `"duplicate"`} {
		status, answer := post(t, h, body, header)
		if status != http.StatusOK || !strings.Contains(answer, want) {
			t.Errorf("call %d = %d %s, want 200 %s", i+1, status, answer, want)
		}
	}
	if len(rec.events) != 1 {
		t.Errorf("applied %d events, want 1", len(rec.events))
	}
}

func TestWebhookMethodAndSize(t *testing.T) {
	h, _ := stripepay.NewHandler(&recorder{seen: map[string]bool{}}, whsec, slog.New(slog.DiscardHandler))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/webhooks/stripe", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET = %d, want 405", rec.Code)
	}
	big := make([]byte, stripepay.MaxBody+1)
	if status, _ := post(t, h, big, signed(big, whsec, time.Now())); status != http.StatusRequestEntityTooLarge {
		t.Errorf("big body = %d, want 413", status)
	}
	if _, err := stripepay.NewHandler(&recorder{}, "", slog.New(slog.DiscardHandler)); err == nil {
		t.Error("NewHandler without a secret built a handler")
	}
}
