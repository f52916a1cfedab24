package app

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
)

// swappable is a handler that can be set after its server started: the
// provider needs the server's webhook URL, the server the provider's.
type swappable struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *swappable) set(h http.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	if h == nil {
		http.Error(w, "not yet", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

// paymentOwed buys a unit, opens its payment, cancels the order, then has
// the provider confirm the payment: a payment owed back.
func (e *testEnv) paymentOwed(voucherID, user int64) *seckill.Payment {
	e.t.Helper()
	id := e.buyPersisted(voucherID, user)
	p := e.createPayment(id, user)
	if _, err := e.app.Life.CancelOrder(asUser(e.ctx, user, false), id); err != nil {
		e.t.Fatal(err)
	}
	res, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(p, seckill.EventPaymentSucceeded))
	if err != nil || res.Payment.Status != seckill.PaymentRefundNeeded {
		e.t.Fatalf("late success: %+v, %v", res, err)
	}
	return p
}

func (e *testEnv) paymentStatus(id string) seckill.PaymentStatus {
	e.t.Helper()
	var st string
	if err := e.app.DB.NewRaw(`SELECT status FROM payment WHERE id = ?`, id).Scan(e.ctx, &st); err != nil {
		e.t.Fatal(err)
	}
	return seckill.PaymentStatus(st)
}

// TestRefundThroughProvider: a payment owed back is refunded end to end,
// as in production: the worker's task sends the signed refund call to the
// development provider, which confirms it through the signed webhook.
func TestRefundThroughProvider(t *testing.T) {
	front := &swappable{}
	prov := httptest.NewServer(front)
	t.Cleanup(prov.Close)
	e, v := newLifeEnvWith(t, 5, func(m map[string]string) {
		m["SECKILL_PAYMENT_REFUND_URL"] = prov.URL + "/refunds"
	})
	dev, err := payhook.NewDevProvider(payhook.DevProviderOptions{Secret: config.DevWebhookSecret,
		Webhook: e.url + "/webhooks/payments", Delay: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	front.set(dev)
	go dev.Run(e.ctx)

	p := e.paymentOwed(v, 31)
	eventually(t, 20*time.Second, "the refund confirmed", func() bool { return e.paymentStatus(p.ID) == seckill.PaymentRefunded })
	res, err := http.Get(prov.URL + "/refunds")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var made []struct {
		ID   string             `json:"refund_id"`
		Call payhook.RefundCall `json:"call"`
	}
	if err := json.NewDecoder(res.Body).Decode(&made); err != nil {
		t.Fatal(err)
	}
	if len(made) != 1 || made[0].Call.PaymentID != p.ID || made[0].Call.Amount != p.Amount ||
		made[0].Call.IdempotencyKey != seckill.RefundKey(p.ID, 1) {
		t.Fatalf("the provider refunded %+v", made)
	}
	st, err := e.app.Refunds.Stats(e.ctx, v)
	if err != nil || st.ByStatus[seckill.PaymentRefunded].Count != 1 || st.ByStatus[seckill.PaymentRefunded].Amounts["CNY"] != p.Amount {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// newLifeEnvWith is newLifeEnv with options for the server.
func newLifeEnvWith(t *testing.T, stock int64, opts ...envOption) (*testEnv, int64) {
	t.Helper()
	e := newTestEnv(t, "", opts...)
	e.worker()
	v, err := e.app.Catalog.AddSeckillVoucher(asUser(e.ctx, 1, true), seckill.NewSeckillVoucher{
		ShopID: 1, Title: "100 off 200", PayValue: 100, ActualValue: 200, Stock: stock,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, v.ID
}

// TestRefundProviderFailsTimesOutAndAnswersTwice: a refund is sent until the
// provider takes it, through a failure and a timeout (after which the
// provider had refunded already), under one key, so the buyer is paid back
// once; the provider's confirmation, sent twice, makes it REFUNDED once;
// and a confirmation for a payment that is not owed back changes nothing.
func TestRefundProviderFailsTimesOutAndAnswersTwice(t *testing.T) {
	// No workers: the test runs the refund's task by hand.
	flaky, e := newRefundEnv(t, func(m map[string]string) {
		m["SECKILL_PAYMENT_REFUND_TIMEOUT"], m["SECKILL_REFUND_MAX_SENDS"] = "300ms", "6"
	})
	flaky.script = []providerAnswer{answerDown, answerHang, answerPending}
	refunds := e.app.Refunds
	v, err := e.app.Catalog.AddSeckillVoucher(asUser(e.ctx, 1, true), seckill.NewSeckillVoucher{
		ShopID: 1, Title: "refunds", PayValue: 100, ActualValue: 200, Stock: 5,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	p := e.paymentOwed(v.ID, 51)
	if _, ok := e.scheduled(seckill.RefundSend{PaymentID: p.ID, Generation: 1}); !ok {
		t.Fatal("no send scheduled when the payment became owed")
	}
	// The task's tries: 500, then a timeout, then accepted; then its
	// follow-up finds it unconfirmed and sends it again.
	for i, wantErr := range []bool{true, true, false, false} {
		err := refunds.Send(e.ctx, p.ID, false)
		if (err != nil) != wantErr {
			t.Fatalf("send %d: %v", i+1, err)
		}
	}
	if st := e.paymentStatus(p.ID); st != seckill.PaymentRefunding {
		t.Fatalf("after the sends: %s", st)
	}
	if n := flaky.callsSoFar(); n != 4 {
		t.Errorf("%d calls reached the provider, want 4", n)
	}
	if back, keys := flaky.paidBack(p.ID); keys != 1 || back != p.Amount {
		t.Errorf("the provider paid back %d under %d keys, want %d once", back, keys, p.Amount)
	}

	// The provider confirms twice, with two event ids.
	for i := range 2 {
		res, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(p, seckill.EventRefundSucceeded))
		want := seckill.AppliedRefunded
		if i == 1 {
			want = seckill.AppliedIgnored
		}
		if err != nil || res.Outcome != want || res.Payment.Status != seckill.PaymentRefunded {
			t.Fatalf("confirmation %d: %+v, %v", i+1, res, err)
		}
	}
	// Sent again after that, it is not sent at all.
	if err := refunds.Send(e.ctx, p.ID, false); err != nil || flaky.callsSoFar() != 4 {
		t.Errorf("send after the confirmation: %v, %d calls", err, flaky.callsSoFar())
	}

	// A paid order's payment is not owed back: a refund confirmation for
	// it changes nothing.
	id := e.buyPersisted(v.ID, 52)
	paid := e.createPayment(id, 52)
	if _, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(paid, seckill.EventPaymentSucceeded)); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{seckill.EventRefundSucceeded, seckill.EventRefundFailed} {
		res, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(paid, typ))
		if err != nil || res.Outcome != seckill.AppliedIgnored || res.Payment.Status != seckill.PaymentSucceeded || res.Order.Status != seckill.OrderPaid {
			t.Errorf("%s of a paid order's payment: %+v, %v", typ, res, err)
		}
	}
}

// TestSimulateLatePayment tries the refund as a developer would with make
// run: open a payment, cancel the order, and have the provider's success
// come late with `payments simulate --payment`; the development provider
// refunds it. The order's payments tell the buyer where the money stands.
func TestSimulateLatePayment(t *testing.T) {
	front := &swappable{}
	prov := httptest.NewServer(front)
	t.Cleanup(prov.Close)
	e, v := newLifeEnvWith(t, 5, func(m map[string]string) { m["SECKILL_PAYMENT_REFUND_URL"] = prov.URL + "/refunds" })
	dev, err := payhook.NewDevProvider(payhook.DevProviderOptions{Secret: config.DevWebhookSecret,
		Webhook: e.url + "/webhooks/payments", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	front.set(dev)
	go dev.Run(e.ctx)

	id := e.buyCreated(v, 71)
	p := e.createPayment(id, 71)
	if _, err := e.app.Life.CancelOrder(asUser(e.ctx, 71, false), id); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := SimulatePayment(e.ctx, e.app.Config, SimulateOptions{URL: e.url, OrderID: id, PaymentID: p.ID}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "1.00 CNY, CANCELLED") || !strings.Contains(out.String(), `"result":"REFUND_NEEDED"`) {
		t.Errorf("simulate printed:\n%s", out.String())
	}
	eventually(t, 20*time.Second, "the late payment refunded", func() bool { return e.paymentStatus(p.ID) == seckill.PaymentRefunded })
	// The buyer reads it on the order.
	var got struct {
		Order struct {
			Status   string
			Payments []struct{ ID, Status, Currency string }
		}
	}
	res, err := e.gql(nil, e.token(71, false), `query($id: ID!) { order(id: $id) { status payments { id status currency } } }`,
		map[string]any{"id": strconv.FormatInt(id, 10)}, &got)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("order query: %v %+v", err, res)
	}
	if got.Order.Status != "CANCELLED" || len(got.Order.Payments) != 1 || got.Order.Payments[0].ID != p.ID ||
		got.Order.Payments[0].Status != "REFUNDED" || got.Order.Payments[0].Currency != "CNY" {
		t.Errorf("the order reads %+v", got.Order)
	}
	// A payment the order does not have is refused, and nothing sent.
	err = SimulatePayment(e.ctx, e.app.Config, SimulateOptions{URL: e.url, OrderID: id, PaymentID: "pay_" + strings.Repeat("1", 32)}, &out)
	if err == nil || !strings.Contains(err.Error(), "has no payment") {
		t.Errorf("unknown payment: %v", err)
	}
}
