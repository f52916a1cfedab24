package stripepay_test

import (
	"context"
	"encoding/hex"
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
// event id as the domain applies them, and, as the domain does, sets aside
// (mismatched) those whose PaymentIntent is not the one recorded for their
// payment (refs; a payment not in it was opened as pi_1), or whose amount
// is not its 1234 CNY.
type recorder struct {
	mu         sync.Mutex
	events     []seckill.PaymentEvent
	mismatched []seckill.PaymentEvent
	seen       map[string]bool
	refs       map[string]string
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
	ref, ok := r.refs[ev.PaymentID]
	if !ok {
		ref = "pi_1"
	}
	if why := ev.Mismatch(ref, 1234, "CNY"); why != "" && r.refs != nil {
		r.mismatched = append(r.mismatched, ev)
		return seckill.PaymentResult{Outcome: seckill.AppliedMismatch, Mismatch: why,
			Payment: seckill.Payment{ID: ev.PaymentID, Status: seckill.PaymentPending}}, nil
	}
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
		"metadata": meta, "status": status, "failure_reason": "lost_or_stolen_card", "payment_intent": "pi_1"}
}

func withID(object map[string]any, id string) map[string]any {
	object["id"] = id
	return object
}

func withIntent(object map[string]any, pi string) map[string]any {
	object["payment_intent"] = pi
	return object
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
			&seckill.PaymentEvent{ID: "evt_1", Type: seckill.EventPaymentSucceeded, PaymentID: payID, Amount: 1234, Currency: "CNY",
				ProviderRef: "pi_1"}},
		{"yen, zero decimals", stripeEvent("evt_2", "payment_intent.succeeded", intent(500, "jpy", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_2", Type: seckill.EventPaymentSucceeded, PaymentID: payID, Amount: 500, Currency: "JPY", ProviderRef: "pi_1"}},
		{"ISK, two decimals at Stripe", stripeEvent("evt_3", "payment_intent.succeeded", intent(500, "isk", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_3", Type: seckill.EventPaymentSucceeded, PaymentID: payID, Amount: 5, Currency: "ISK", ProviderRef: "pi_1"}},
		{"payment failed", stripeEvent("evt_4", "payment_intent.payment_failed", intent(1234, "cny", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_4", Type: seckill.EventPaymentFailed, PaymentID: payID, Amount: 1234, Currency: "CNY",
				Reason: "Your card was declined.", ProviderRef: "pi_1"}},
		{"refund succeeded", stripeEvent("evt_5", "refund.updated", refund("succeeded", 1234, "cny", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_5", Type: seckill.EventRefundSucceeded, PaymentID: payID, Amount: 1234, Currency: "CNY",
				ProviderRef: "pi_1"}},
		{"refund failed", stripeEvent("evt_6", "refund.failed", refund("failed", 1234, "cny", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_6", Type: seckill.EventRefundFailed, PaymentID: payID, Amount: 1234, Currency: "CNY",
				Reason: "Stripe: refund failed: lost_or_stolen_card", ProviderRef: "pi_1"}},
		{"refund still pending: ignored", stripeEvent("evt_7", "refund.created", refund("pending", 1234, "cny", ours)), 200, nil},
		{"another type: ignored", stripeEvent("evt_8", "customer.created", map[string]any{"id": "cus_1", "object": "customer"}), 200, nil},
		{"not our PaymentIntent: ignored", stripeEvent("evt_9", "payment_intent.succeeded", intent(1234, "cny", nil)), 200, nil},
		{"MGA, zero decimals at Stripe", stripeEvent("evt_10", "payment_intent.succeeded", intent(5050, "mga", ours)), 200,
			&seckill.PaymentEvent{ID: "evt_10", Type: seckill.EventPaymentSucceeded, PaymentID: payID, Amount: 505000, Currency: "MGA", ProviderRef: "pi_1"}},
		{"malformed payment id", stripeEvent("evt_11", "payment_intent.succeeded",
			intent(1234, "cny", map[string]string{stripepay.MetaPaymentID: "pay_x"})), 400, nil},
		{"a PaymentIntent without an id", stripeEvent("evt_12", "payment_intent.succeeded",
			withID(intent(1234, "cny", ours), "")), 400, nil},
		{"a refund names its PaymentIntent", stripeEvent("evt_13", "charge.refund.updated",
			withIntent(refund("succeeded", 1234, "cny", ours), "pi_9")), 200,
			&seckill.PaymentEvent{ID: "evt_13", Type: seckill.EventRefundSucceeded, PaymentID: payID, Amount: 1234, Currency: "CNY",
				ProviderRef: "pi_9"}},
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

// sig is the hex v1 signature of body at unix time ts with secret.
func sig(body []byte, secret string, ts int64) string {
	return hex.EncodeToString(webhook.ComputeSignature(time.Unix(ts, 0), body, secret))
}

// TestWebhookSignatureHeader: one parse of Stripe-Signature decides both
// the signature and the timestamp: exactly one t, canonical unix seconds,
// within the tolerance either way, signed by one of the v1's.
func TestWebhookSignatureHeader(t *testing.T) {
	body := stripeEvent("evt_1", "payment_intent.succeeded", intent(1234, "cny", map[string]string{stripepay.MetaPaymentID: payID}))
	now := time.Now().Unix()
	future := now + int64(stripepay.Tolerance/time.Second) + 60
	old := now - int64(stripepay.Tolerance/time.Second) - 60
	good := sig(body, whsec, now)
	wrong := sig(body, "whsec_forged_secret", now)
	tests := []struct {
		name   string
		header string
		ok     bool
	}{
		{"valid", fmt.Sprintf("t=%d,v1=%s", now, good), true},
		{"valid, v1 first", fmt.Sprintf("v1=%s,t=%d", good, now), true},
		{"valid beside a v0 (another scheme, ignored)", fmt.Sprintf("t=%d,v1=%s,v0=%s", now, good, wrong), true},
		{"unknown scheme with odd value ignored", fmt.Sprintf("t=%d,v1=%s,v2=a=b", now, good), true},
		{"two v1, the second right (secret rotation)", fmt.Sprintf("t=%d,v1=%s,v1=%s", now, wrong, good), true},
		{"two v1, the first right (secret rotation)", fmt.Sprintf("t=%d,v1=%s,v1=%s", now, good, wrong), true},
		{"upper-case hex", fmt.Sprintf("t=%d,v1=%s", now, strings.ToUpper(good)), true},

		// The attack: a t we check and another t that is signed.
		{"repeated t: now then future (signed)", fmt.Sprintf("t=%d,t=%d,v1=%s", now, future, sig(body, whsec, future)), false},
		{"repeated t: future (signed) then now", fmt.Sprintf("t=%d,t=%d,v1=%s", future, now, sig(body, whsec, future)), false},
		{"repeated t: both now", fmt.Sprintf("t=%d,t=%d,v1=%s", now, now, good), false},
		{"repeated t: old (signed) then now", fmt.Sprintf("t=%d,t=%d,v1=%s", old, now, sig(body, whsec, old)), false},
		{"missing t", "v1=" + good, false},
		{"empty t", "t=,v1=" + good, false},
		{"non-numeric t", "t=abc,v1=" + good, false},
		{"t with a sign", fmt.Sprintf("t=+%d,v1=%s", now, good), false},
		{"t with a leading zero", fmt.Sprintf("t=0%d,v1=%s", now, good), false},
		{"negative t", fmt.Sprintf("t=-%d,v1=%s", now, good), false},
		{"t in milliseconds", fmt.Sprintf("t=%d000,v1=%s", now, good), false},
		{"future t, signed", fmt.Sprintf("t=%d,v1=%s", future, sig(body, whsec, future)), false},
		{"old t, signed", fmt.Sprintf("t=%d,v1=%s", old, sig(body, whsec, old)), false},
		{"no v1", fmt.Sprintf("t=%d", now), false},
		{"only a v0", fmt.Sprintf("t=%d,v0=%s", now, good), false},
		{"wrong v1", fmt.Sprintf("t=%d,v1=%s", now, wrong), false},
		{"v1 of another t", fmt.Sprintf("t=%d,v1=%s", now, sig(body, whsec, now-1)), false},
		{"v1 not hex", fmt.Sprintf("t=%d,v1=zz%s", now, good[2:]), false},
		{"v1 too short", fmt.Sprintf("t=%d,v1=%s", now, good[:62]), false},
		{"v1 beside a malformed v1", fmt.Sprintf("t=%d,v1=%s,v1=xyz", now, good), false},
		{"space after the comma", fmt.Sprintf("t=%d, v1=%s", now, good), false},
		{"space before the comma", fmt.Sprintf("t=%d ,v1=%s", now, good), false},
		{"space around =", fmt.Sprintf("t = %d,v1=%s", now, good), false},
		{"space in t", fmt.Sprintf("t= %d,v1=%s", now, good), false},
		{"tab after the comma", fmt.Sprintf("t=%d,\tv1=%s", now, good), false},
		{"empty item", fmt.Sprintf("t=%d,,v1=%s", now, good), false},
		{"trailing comma", fmt.Sprintf("t=%d,v1=%s,", now, good), false},
		{"item without =", fmt.Sprintf("t=%d,v1=%s,v1", now, good), false},
		{"semicolons", fmt.Sprintf("t=%d;v1=%s", now, good), false},
		{"upper-case T", fmt.Sprintf("T=%d,v1=%s", now, good), false},
		{"no header", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{seen: map[string]bool{}}
			h, err := stripepay.NewHandler(rec, whsec, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			status, answer := post(t, h, body, tc.header)
			if tc.ok {
				if status != http.StatusOK || len(rec.events) != 1 {
					t.Fatalf("%q = %d %s, %d applied; want 200, applied", tc.header, status, answer, len(rec.events))
				}
				return
			}
			if status != http.StatusBadRequest || len(rec.events) != 0 {
				t.Fatalf("%q = %d %s, %d applied; want 400, nothing applied", tc.header, status, answer, len(rec.events))
			}
		})
	}
}

// TestWebhookForeignPaymentIntent: a correctly signed success that names
// one of our payments in its metadata but a PaymentIntent other than the
// one opened for it (or another amount) is handed to the domain with its
// PaymentIntent, which sets it aside: Stripe gets a 2xx (it would retry
// for days) saying mismatch, and nothing is applied. The right
// PaymentIntent's success is applied.
func TestWebhookForeignPaymentIntent(t *testing.T) {
	rec := &recorder{seen: map[string]bool{}, refs: map[string]string{payID: "pi_ours"}}
	h, err := stripepay.NewHandler(rec, whsec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{stripepay.MetaPaymentID: payID}
	foreign := withID(intent(1234, "cny", ours), "pi_foreign")
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"another PaymentIntent's success", stripeEvent("evt_f1", "payment_intent.succeeded", foreign)},
		{"another PaymentIntent's failure", stripeEvent("evt_f2", "payment_intent.payment_failed", foreign)},
		{"our PaymentIntent, another amount", stripeEvent("evt_f3", "payment_intent.succeeded", withID(intent(1, "cny", ours), "pi_ours"))},
		{"another PaymentIntent's refund", stripeEvent("evt_f4", "refund.updated", withIntent(refund("succeeded", 1234, "cny", ours), "pi_foreign"))},
	} {
		status, answer := post(t, h, tc.body, signed(tc.body, whsec, time.Now()))
		if status != http.StatusOK || !strings.Contains(answer, `"mismatch"`) {
			t.Errorf("%s: %d %s, want 200 mismatch", tc.name, status, answer)
		}
	}
	if len(rec.events) != 0 || len(rec.mismatched) != 4 {
		t.Fatalf("applied %+v, set aside %d; want nothing applied, 4 set aside", rec.events, len(rec.mismatched))
	}
	if got := rec.mismatched[0].ProviderRef; got != "pi_foreign" {
		t.Errorf("the domain was told PaymentIntent %q, want pi_foreign", got)
	}
	body := stripeEvent("evt_ok", "payment_intent.succeeded", withID(intent(1234, "cny", ours), "pi_ours"))
	if status, answer := post(t, h, body, signed(body, whsec, time.Now())); status != http.StatusOK || !strings.Contains(answer, `"applied"`) {
		t.Errorf("our PaymentIntent's success: %d %s, want 200 applied", status, answer)
	}
	if len(rec.events) != 1 {
		t.Errorf("applied %d events, want 1", len(rec.events))
	}
}
