package store_test

import (
	"testing"
	"time"

	"seckill/internal/seckill"
	"seckill/internal/store/storetest"
)

// owe persists an order for user, opens its payment, cancels the order and
// confirms the payment: a payment owed back.
func owe(t *testing.T, s interface {
	seckill.OrderStore
	seckill.OrderLife
}, voucherID, seq, user int64) *seckill.Payment {
	t.Helper()
	ctx := t.Context()
	a := adm(voucherID, seq, user)
	a.AdmittedAt = time.Now() // within its pay window
	if _, err := s.PersistOrders(ctx, []seckill.Admission{a}); err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePayment(ctx, a.OrderID, user, "CNY", paymentID(seq))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CloseOrder(ctx, a.OrderID, seckill.OrderCancelled, user); err != nil {
		t.Fatal(err)
	}
	res, err := s.ApplyPaymentEvent(ctx, seckill.PaymentEvent{ID: "evt_" + p.ID, Type: seckill.EventPaymentSucceeded,
		PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency})
	if err != nil || res.Outcome != seckill.AppliedOwed {
		t.Fatalf("late success: %+v, %v", res, err)
	}
	return p
}

func paymentID(n int64) string {
	const hex = "0123456789abcdef"
	b := []byte("pay_00000000000000000000000000000000")
	for i := len(b) - 1; n > 0; i-- {
		b[i] = hex[n%16]
		n /= 16
	}
	return string(b)
}

// TestRefunds walks refunds through the store: the sweep finds the ones
// whose send is due, the counts add up, a retry after a refusal moves to a
// new key and one after a send that was only unconfirmed keeps its key.
func TestRefunds(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 10)
	owed := owe(t, s, v.ID, 1, 11)
	sent := owe(t, s, v.ID, 2, 12)
	refused := owe(t, s, v.ID, 3, 13)

	for _, p := range []*seckill.Payment{sent, refused} {
		st, err := s.BeginRefund(ctx, p.ID, 3)
		if err != nil || !st.Send || st.Sends != 1 || st.Generation != 1 || st.Status != seckill.PaymentRefunding {
			t.Fatalf("begin refund of %s: %+v, %v", p.ID, st, err)
		}
	}
	if ok, err := s.SettleRefund(ctx, refused.ID, 1, false, true, "card closed"); err != nil || !ok {
		t.Fatalf("refuse: %v, %v", ok, err)
	}
	// A verdict on an earlier generation, or after the verdict, changes
	// nothing.
	if ok, err := s.SettleRefund(ctx, refused.ID, 1, true, false, ""); err != nil || ok {
		t.Errorf("a second verdict: %v, %v", ok, err)
	}

	// Due: the one owed and never sent (owed before the cutoff), and the
	// one sent before its cutoff; the refused one is not.
	later := time.Now().Add(time.Hour)
	due, err := s.DueRefunds(ctx, later, later, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 2 || due[0].PaymentID != owed.ID || due[1].PaymentID != sent.ID || due[1].Sends != 1 {
		t.Errorf("due refunds %+v", due)
	}
	if due, err := s.DueRefunds(ctx, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour), 10); err != nil || len(due) != 0 {
		t.Errorf("due an hour ago: %+v, %v", due, err)
	}

	stats, err := s.RefundStats(ctx, v.ID, later)
	if err != nil {
		t.Fatal(err)
	}
	for st, n := range map[seckill.PaymentStatus]int64{seckill.PaymentRefundNeeded: 1, seckill.PaymentRefunding: 1, seckill.PaymentRefundFailed: 1} {
		if got := stats.ByStatus[st]; got.Count != n || got.Amounts["CNY"] != n*owed.Amount {
			t.Errorf("%s: %+v", st, got)
		}
	}
	if stats.Stuck != 2 {
		t.Errorf("stuck %d, want the 2 owed or sent", stats.Stuck)
	}
	if other, err := s.RefundStats(ctx, v.ID+1, later); err != nil || len(other.ByStatus) != 0 {
		t.Errorf("another campaign's refunds: %+v, %v", other, err)
	}

	// Retries: a refused refund takes a new key; only a failed one can be
	// retried.
	st, err := s.RetryRefund(ctx, refused.ID)
	if err != nil || st.Generation != 2 || st.Round != 1 || st.Sends != 0 || st.Status != seckill.PaymentRefundNeeded {
		t.Errorf("retry after a refusal: %+v, %v", st, err)
	}
	if _, err := s.RetryRefund(ctx, owed.ID); seckill.ErrorCode(err) != seckill.ECONFLICT {
		t.Errorf("retry of a refund not failed: %v", err)
	}
	// A refund sent until its sends ran out failed unconfirmed: it keeps
	// its key.
	for range 2 {
		if _, err := s.BeginRefund(ctx, sent.ID, 3); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := s.BeginRefund(ctx, sent.ID, 3); err != nil || st.Send || st.Status != seckill.PaymentRefundFailed {
		t.Fatalf("send past the last: %+v, %v", st, err)
	}
	if st, err := s.RetryRefund(ctx, sent.ID); err != nil || st.Generation != 1 || st.Round != 1 {
		t.Errorf("retry after no confirmation: %+v, %v", st, err)
	}
	rs, err := s.Refunds(ctx, seckill.RefundFilter{VoucherID: v.ID})
	if err != nil || len(rs) != 3 || rs[0].PaymentID != owed.ID || rs[0].UserID != 11 || rs[0].Amount != owed.Amount {
		t.Errorf("refunds %+v, %v", rs, err)
	}
}
