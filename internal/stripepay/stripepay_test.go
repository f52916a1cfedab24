package stripepay_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
	"seckill/internal/stripepay"
	"seckill/internal/testenv"
)

func newClient(t *testing.T) (*stripepay.Client, *testenv.StripeMock) {
	t.Helper()
	mock := testenv.StartStripeMock(t)
	c, err := stripepay.NewClient(stripepay.Options{APIKey: "sk_test_123", APIBase: mock.URL,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return c, mock
}

const payID = "pay_0123456789abcdef0123456789abcdef"

func TestOpenPayment(t *testing.T) {
	c, mock := newClient(t)
	ctx := context.Background()
	tests := []struct {
		name             string
		amount           int64
		currency         string
		wantAmount       string
		wantCurrency     string
		wantErr, wantMsg string
	}{
		{"two decimals", 1234, "CNY", "1234", "cny", "", ""},
		{"zero decimals", 500, "JPY", "500", "jpy", "", ""},
		{"zero decimals at Stripe, two in ISO 4217", 5000, "MGA", "50", "mga", "", ""},
		{"a fraction Stripe cannot take", 5050, "MGA", "", "", seckill.EINVALID, "in steps of 1.00 MGA"},
		{"ISK two decimals at Stripe", 5, "ISK", "500", "isk", "", ""},
		{"three decimals ending in 0", 1230, "KWD", "1230", "kwd", "", ""},
		{"three decimals not ending in 0", 1234, "KWD", "", "", seckill.EINVALID, "must end in 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(mock.Requests("/v1/payment_intents"))
			opened, err := c.OpenPayment(ctx, seckill.Payment{ID: payID, OrderID: 42, Amount: tc.amount, Currency: tc.currency})
			reqs := mock.Requests("/v1/payment_intents")[before:]
			if tc.wantErr != "" {
				if seckill.ErrorCode(err) != tc.wantErr || !strings.Contains(seckill.ErrorMessage(err), tc.wantMsg) {
					t.Fatalf("OpenPayment = %v, want %s saying %q", err, tc.wantErr, tc.wantMsg)
				}
				if len(reqs) != 0 {
					t.Errorf("sent %d requests for a refused amount", len(reqs))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(opened.ClientSecret, "_secret_") || !strings.HasPrefix(opened.Ref, "pi_") {
				t.Errorf("opened = %+v, want a client secret and the PaymentIntent's id", opened)
			}
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			got := map[string]string{"method": r.Method, "path": r.Path, "key": r.IdempotencyKey,
				"amount": r.Form.Get("amount"), "currency": r.Form.Get("currency"),
				"payment": r.Form.Get("metadata[seckill_payment_id]"), "order": r.Form.Get("metadata[seckill_order_id]")}
			want := map[string]string{"method": "POST", "path": "/v1/payment_intents", "key": stripepay.IntentKey(payID),
				"amount": tc.wantAmount, "currency": tc.wantCurrency, "payment": payID, "order": "42"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefund(t *testing.T) {
	c, mock := newClient(t)
	key := seckill.RefundKey(payID, 1)
	ans, err := c.Refund(context.Background(), seckill.RefundRequest{PaymentID: payID, OrderID: 42, Amount: 1234,
		Currency: "CNY", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	// stripe-mock's refund fixture has succeeded.
	if ans.State != seckill.RefundSucceeded || !strings.HasPrefix(ans.ProviderID, "re_") {
		t.Errorf("answer = %+v, want succeeded with a refund id", ans)
	}
	search := mock.Requests("/v1/payment_intents/search")
	if len(search) != 1 || search[0].Form.Get("query") != "metadata['seckill_payment_id']:'"+payID+"'" {
		t.Fatalf("search requests = %+v", search)
	}
	refunds := mock.Requests("/v1/refunds")
	if len(refunds) != 1 {
		t.Fatalf("%d refund requests, want 1", len(refunds))
	}
	r := refunds[0]
	got := map[string]string{"key": r.IdempotencyKey, "amount": r.Form.Get("amount"),
		"payment": r.Form.Get("metadata[seckill_payment_id]"), "intent_set": boolString(strings.HasPrefix(r.Form.Get("payment_intent"), "pi_"))}
	want := map[string]string{"key": stripepay.RefundKey(key), "amount": "1234", "payment": payID, "intent_set": "true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refund request (-want +got):\n%s", diff)
	}

	// The same refund sent again carries the same key: Stripe refunds once.
	if _, err := c.Refund(context.Background(), seckill.RefundRequest{PaymentID: payID, OrderID: 42, Amount: 1234,
		Currency: "CNY", Key: key}); err != nil {
		t.Fatal(err)
	}
	if refunds = mock.Requests("/v1/refunds"); len(refunds) != 2 || refunds[1].IdempotencyKey != refunds[0].IdempotencyKey {
		t.Errorf("second send's key = %+v, want the first's", refunds)
	}

	// A payment whose PaymentIntent we know is refunded by it, without a
	// search (Stripe's lags, and is not offered everywhere).
	searches := len(mock.Requests("/v1/payment_intents/search"))
	if _, err := c.Refund(context.Background(), seckill.RefundRequest{PaymentID: payID, OrderID: 42, Amount: 1234,
		Currency: "CNY", Key: key, ProviderRef: "pi_known"}); err != nil {
		t.Fatal(err)
	}
	refunds = mock.Requests("/v1/refunds")
	if n := len(mock.Requests("/v1/payment_intents/search")); n != searches || refunds[len(refunds)-1].Form.Get("payment_intent") != "pi_known" {
		t.Errorf("with the reference: %d searches (want %d), refund of %q (want pi_known)", n, searches, refunds[len(refunds)-1].Form.Get("payment_intent"))
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestNewClientNeedsAKey(t *testing.T) {
	if _, err := stripepay.NewClient(stripepay.Options{Logger: slog.New(slog.DiscardHandler)}); err == nil || !strings.Contains(err.Error(), "STRIPE_API_KEY") {
		t.Errorf("NewClient without a key = %v", err)
	}
}

// TestStripeUnreachable: with Stripe away nothing is decided: opening a
// payment is UNAVAILABLE (the buyer asks again, under the same key) and a
// refund's send is an error (sent again), never a refusal.
func TestStripeUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := stripepay.NewClient(stripepay.Options{APIKey: "sk_test_123", APIBase: "http://" + addr,
		Timeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.OpenPayment(ctx, seckill.Payment{ID: payID, OrderID: 42, Amount: 100, Currency: "CNY"}); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Errorf("OpenPayment = %v, want UNAVAILABLE", err)
	}
	ans, err := c.Refund(ctx, seckill.RefundRequest{PaymentID: payID, OrderID: 42, Amount: 100, Currency: "CNY",
		Key: seckill.RefundKey(payID, 1)})
	if err == nil {
		t.Errorf("Refund = %+v, want an error", ans)
	}
}
