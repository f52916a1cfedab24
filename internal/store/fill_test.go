package store_test

import (
	"strings"
	"testing"
	"time"

	"seckill/internal/seckill"
	"seckill/internal/store/storetest"
)

// TestPersistFillsOrdersItself: the seckill's own INSERT gives an order its
// amount (the voucher's pay value) and pay_by (admitted_at + the campaign's
// pay window) without the voucher_order_fill trigger, which is replaced here
// by a function that fails: a batch and a lone order both persist, with the
// right values. An INSERT that leaves them out (an earlier version's
// worker) still reaches the trigger.
func TestPersistFillsOrdersItself(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 10, func(v *seckill.Voucher) {
		v.PayValue, v.ActualValue = 4321, 5000
		v.Campaign.PayWindow = 77 * time.Second
	})
	if _, err := db.ExecContext(ctx, `CREATE OR REPLACE FUNCTION voucher_order_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'voucher_order_fill ran';
END $$`); err != nil {
		t.Fatal(err)
	}
	batch := []seckill.Admission{adm(v.ID, 1, 101), adm(v.ID, 2, 102), adm(v.ID, 3, 103)}
	if _, err := s.PersistOrders(ctx, batch); err != nil {
		t.Fatalf("batch: %v", err)
	}
	lone := adm(v.ID, 4, 104)
	if _, err := s.PersistOrders(ctx, []seckill.Admission{lone}); err != nil {
		t.Fatalf("lone order: %v", err)
	}
	for _, a := range append(batch, lone) {
		o, err := s.Order(ctx, a.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		if o.Amount != 4321 || !o.PayBy.Equal(a.AdmittedAt.Add(77*time.Second)) {
			t.Errorf("order %d: amount %d, pay_by %s; want 4321 and %s", a.OrderID, o.Amount, o.PayBy, a.AdmittedAt.Add(77*time.Second))
		}
	}
	_, err := db.ExecContext(ctx, `INSERT INTO voucher_order (id, voucher_id, user_id, admitted_at) VALUES (?, ?, 105, now())`,
		seckill.OrderID(v.ID, 5), v.ID)
	if err == nil || !strings.Contains(err.Error(), "voucher_order_fill ran") {
		t.Fatalf("an insert without amount and pay_by: %v, want the trigger's error", err)
	}
}
