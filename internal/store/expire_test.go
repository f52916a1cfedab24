package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"

	"seckill/internal/seckill"
	"seckill/internal/store/storetest"
)

// TestExpireDue expires a storm of due orders of two campaigns with four
// expirers at once: each order once, each unit back in its campaign's stock
// once, open payments cancelled, and orders not due or paid left alone.
func TestExpireDue(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	const perCampaign = 1200
	var due []int64
	campaigns := []*seckill.Voucher{storetest.CreateCampaign(t, db, perCampaign+2), storetest.CreateCampaign(t, db, perCampaign+2)}
	for _, v := range campaigns {
		var adms []seckill.Admission
		for i := range int64(perCampaign + 2) {
			a := adm(v.ID, i+1, 100+i)
			a.AdmittedAt = time.Now()
			adms = append(adms, a)
		}
		if _, err := s.PersistOrders(ctx, adms); err != nil {
			t.Fatal(err)
		}
		for _, a := range adms[:perCampaign] {
			due = append(due, a.OrderID)
		}
		// One not due, one paid: both stay.
		if _, err := s.CreatePayment(ctx, adms[perCampaign].OrderID, 0, "CNY", paymentID(v.ID*10+1)); err != nil {
			t.Fatal(err)
		}
		paid, err := s.CreatePayment(ctx, adms[perCampaign+1].OrderID, 0, "CNY", paymentID(v.ID*10+2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ApplyPaymentEvent(ctx, seckill.PaymentEvent{ID: "evt_" + paid.ID, Type: seckill.EventPaymentSucceeded,
			PaymentID: paid.ID, Amount: paid.Amount, Currency: paid.Currency}); err != nil {
			t.Fatal(err)
		}
	}
	// An open payment on a due order: cancelled with it.
	if _, err := s.CreatePayment(ctx, due[0], 0, "CNY", paymentID(999)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE voucher_order SET pay_by = now() - interval '1 second' WHERE id = ANY(?)`, pgdialect.Array(due)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE voucher_order SET pay_by = now() - interval '1 second' WHERE status = 'PAID'`); err != nil {
		t.Fatal(err)
	}

	orderUpdates := countTriggered(t, db, "voucher_order", "UPDATE", "ROW")
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		wg   sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				got, err := s.ExpireDue(ctx, 300)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, e := range got {
					seen[e.Return.OrderID]++
					if e.Return.Epoch != 0 || e.Return.UserID == 0 || e.At.IsZero() {
						t.Errorf("expired %+v", e)
					}
				}
				mu.Unlock()
				if len(got) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != len(due) {
		t.Fatalf("%d orders expired, want %d", len(seen), len(due))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("order %d expired %d times", id, n)
		}
	}
	// One row version per order expired, its unit's epoch written with it.
	if n := orderUpdates(); n != int64(len(due)) {
		t.Errorf("%d orders expired with %d updates of their rows", len(due), n)
	}
	for _, v := range campaigns {
		var stock, expired, holding int64
		if err := db.NewRaw(`SELECT stock FROM seckill_campaign WHERE voucher_id = ?`, v.ID).Scan(ctx, &stock); err != nil {
			t.Fatal(err)
		}
		if err := db.NewRaw(`SELECT count(*) FILTER (WHERE status = 'EXPIRED' AND return_epoch = 0 AND closed_at IS NOT NULL),
				count(*) FILTER (WHERE status IN ('CREATED', 'PAID')) FROM voucher_order WHERE voucher_id = ?`, v.ID).Scan(ctx, &expired, &holding); err != nil {
			t.Fatal(err)
		}
		if stock != perCampaign || expired != perCampaign || holding != 2 {
			t.Errorf("campaign %d: stock %d, expired %d, holding %d; want %d, %d, 2", v.ID, stock, expired, holding, perCampaign, perCampaign)
		}
	}
	var st string
	if err := db.NewRaw(`SELECT status FROM payment WHERE id = ?`, paymentID(999)).Scan(ctx, &st); err != nil || st != "CANCELLED" {
		t.Errorf("the due order's open payment is %s, %v; want CANCELLED", st, err)
	}
	if got, err := s.ExpireDue(ctx, 100); err != nil || len(got) != 0 {
		t.Errorf("nothing left due: %d, %v", len(got), err)
	}
	// Their units go back to Redis once; the store marks them.
	if err := s.UnitsReturned(ctx, due); err != nil {
		t.Fatal(err)
	}
	if left, err := s.Unreturned(ctx, 10); err != nil || len(left) != 0 {
		t.Errorf("unreturned after marking: %v, %v", left, err)
	}
}
