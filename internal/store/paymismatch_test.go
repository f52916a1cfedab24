package store_test

import (
	"fmt"
	"sync"
	"testing"

	"seckill/internal/seckill"
	"seckill/internal/store/storetest"
)

// TestPaymentMismatch: an event that names a provider's object other than
// the one recorded for its payment (Stripe's PaymentIntent), or another
// amount, is recorded under its event id with what it named and why, and
// changes nothing, whether it arrives alone or among many (the batch of
// plain events leaves it to the single path); its redelivery is a
// duplicate of the mismatch. The payment's own object's events apply.
func TestPaymentMismatch(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	const orders = 120
	v := storetest.CreateCampaign(t, db, orders)
	adms := sold(t, s, v.ID, orders)
	pays := make([]*seckill.Payment, orders)
	for i, o := range adms {
		p, err := s.CreatePayment(ctx, o.OrderID, 0, "CNY", paymentID(int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if i != 0 { // the first keeps no reference, as one opened before references were
			if err := s.SetPaymentRef(ctx, p.ID, ref(p)); err != nil {
				t.Fatal(err)
			}
		}
		pays[i] = p
	}
	event := func(id, typ string, p *seckill.Payment, pi string) seckill.PaymentEvent {
		return seckill.PaymentEvent{ID: id, Type: typ, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency, ProviderRef: pi}
	}
	// Every order gets mismatching events at once; the second half also
	// the right success, among them, and so does the first payment, which
	// has no reference to match.
	type delivery struct {
		ev       seckill.PaymentEvent
		mismatch bool
	}
	var deliveries []delivery
	for i, p := range pays {
		wrongAmount := event("evt_amount_"+p.ID, seckill.EventPaymentSucceeded, p, ref(p))
		wrongAmount.Amount++
		deliveries = append(deliveries,
			delivery{event("evt_foreign_"+p.ID, seckill.EventPaymentSucceeded, p, "pi_foreign"), true},
			delivery{event("evt_foreign_failed_"+p.ID, seckill.EventPaymentFailed, p, "pi_foreign"), true},
			delivery{wrongAmount, true})
		if i >= orders/2 || i == 0 {
			deliveries = append(deliveries, delivery{event("evt_ours_"+p.ID, seckill.EventPaymentSucceeded, p, ref(p)), i == 0})
		}
	}
	var wg sync.WaitGroup
	for _, d := range deliveries {
		wg.Go(func() {
			for range 2 { // and redelivered
				res, err := s.ApplyPaymentEvent(ctx, d.ev)
				if err != nil {
					t.Errorf("event %s: %v", d.ev.ID, err)
					return
				}
				if got := res.Outcome == seckill.AppliedMismatch; got != d.mismatch {
					t.Errorf("event %s: outcome %s, want mismatch %v", d.ev.ID, res.Outcome, d.mismatch)
				}
			}
		})
	}
	wg.Wait()

	for i, p := range pays {
		want := seckill.PaymentPending
		if i >= orders/2 {
			want = seckill.PaymentSucceeded
		}
		var status string
		if err := db.NewRaw(`SELECT status FROM payment WHERE id = ?`, p.ID).Scan(ctx, &status); err != nil {
			t.Fatal(err)
		}
		if status != string(want) {
			t.Errorf("payment %d (%s) is %s, want %s", i, p.ID, status, want)
		}
	}
	var rows []struct {
		ID          string `bun:"id"`
		Outcome     string `bun:"outcome"`
		ProviderRef string `bun:"provider_ref"`
		Mismatch    string `bun:"mismatch"`
	}
	if err := db.NewRaw(`SELECT id, outcome, coalesce(provider_ref, '') AS provider_ref, coalesce(mismatch, '') AS mismatch
		FROM payment_event`).Scan(ctx, &rows); err != nil {
		t.Fatal(err)
	}
	mismatches := 0
	for _, r := range rows {
		// Every event above names an object; only a mismatch records it.
		if (r.Outcome == string(seckill.AppliedMismatch)) != (r.Mismatch != "") || (r.Mismatch != "") != (r.ProviderRef != "") {
			t.Errorf("event row %+v", r)
		}
		if r.Mismatch != "" {
			mismatches++
		}
	}
	if want := 3*orders + 1; mismatches != want || len(rows) != 3*orders+orders/2+1 {
		t.Errorf("%d event rows, %d mismatches; want %d, %d", len(rows), mismatches, 3*orders+orders/2+1, want)
	}

	// An event that names no provider's object (the built-in webhook's)
	// does not settle a payment opened at the provider.
	builtin := event("evt_builtin", seckill.EventPaymentSucceeded, pays[3], "")
	if res, err := s.ApplyPaymentEvent(ctx, builtin); err != nil || res.Outcome != seckill.AppliedMismatch ||
		res.Payment.Status != seckill.PaymentPending || res.Order.Status != seckill.OrderCreated {
		t.Errorf("the built-in webhook's success for a payment opened at the provider: %+v, %v; want a mismatch", res, err)
	}

	// A payment owed back takes the refund of its own object only.
	owed := pays[2]
	if _, err := s.CloseOrder(ctx, adms[2].OrderID, seckill.OrderCancelled, 0); err != nil {
		t.Fatal(err)
	}
	res, err := s.ApplyPaymentEvent(ctx, event("evt_late", seckill.EventPaymentSucceeded, owed, ref(owed)))
	if err != nil || res.Payment.Status != seckill.PaymentRefundNeeded {
		t.Fatalf("a late success: %+v, %v; want REFUND_NEEDED", res, err)
	}
	res, err = s.ApplyPaymentEvent(ctx, event("evt_refund_foreign", seckill.EventRefundSucceeded, owed, "pi_foreign"))
	if err != nil || res.Outcome != seckill.AppliedMismatch || res.Payment.Status != seckill.PaymentRefundNeeded {
		t.Errorf("another object's refund: %+v, %v; want a mismatch, REFUND_NEEDED", res, err)
	}
	res, err = s.ApplyPaymentEvent(ctx, event("evt_refund", seckill.EventRefundSucceeded, owed, ref(owed)))
	if err != nil || res.Payment.Status != seckill.PaymentRefunded {
		t.Errorf("its own refund: %+v, %v; want REFUNDED", res, err)
	}
}

// ref is the reference the provider answered for p.
func ref(p *seckill.Payment) string { return fmt.Sprintf("pi_%s", p.ID[len(p.ID)-8:]) }
