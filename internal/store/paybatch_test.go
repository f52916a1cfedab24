package store_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// TestPaymentStorm delivers the payments of 200 orders from hundreds of
// goroutines at once: each event twice, a second payment of some orders
// succeeding too, some buyers cancelling meanwhile, and events that must be
// refused. Every order is paid by one payment at most (a second success is
// owed back, a cancelled order's success too; a payment still open when
// another pays is cancelled), every event id is applied
// once and its redelivery reads as a duplicate with the same outcome, the
// refused events change nothing, and the events were gathered: far fewer
// statements recorded them than events.
func TestPaymentStorm(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	const orders = 200
	v := storetest.CreateCampaign(t, db, orders)
	adms := sold(t, s, v.ID, orders)

	type delivery struct {
		ev    seckill.PaymentEvent
		order int64
		want  string // an error code, or "" for applied
	}
	var deliveries []delivery
	var cancels []int64
	n := int64(0)
	open := func(o seckill.Admission) *seckill.Payment {
		n++
		p, err := s.CreatePayment(ctx, o.OrderID, 0, "CNY", paymentID(n))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	succeeded := func(p *seckill.Payment, id string) seckill.PaymentEvent {
		return seckill.PaymentEvent{ID: id, Type: seckill.EventPaymentSucceeded, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}
	}
	// fail makes a payment FAILED, so that its order can open another.
	fail := func(p *seckill.Payment) {
		if _, err := s.ApplyPaymentEvent(ctx, seckill.PaymentEvent{ID: "evt_failed_first_" + p.ID, Type: seckill.EventPaymentFailed,
			PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}); err != nil {
			t.Fatal(err)
		}
	}
	for i, o := range adms {
		p := open(o)
		ev := succeeded(p, "evt_"+p.ID)
		deliveries = append(deliveries, delivery{ev: ev, order: o.OrderID}, delivery{ev: ev, order: o.OrderID})
		switch i % 10 {
		case 1: // it failed, a second payment opened, and both succeed: one is owed back
			fail(p)
			p2 := open(o)
			deliveries = append(deliveries, delivery{ev: succeeded(p2, "evt_"+p2.ID), order: o.OrderID})
		case 5: // it failed and a second payment opened, but it succeeds: the second is cancelled
			fail(p)
			open(o)
		case 2: // the buyer cancels meanwhile
			cancels = append(cancels, o.OrderID)
		case 3: // a wrong amount, and an unknown payment: refused
			bad := succeeded(p, "evt_bad_"+p.ID)
			bad.Amount++
			deliveries = append(deliveries, delivery{ev: bad, order: o.OrderID, want: seckill.EINVALID})
			unknown := succeeded(p, "evt_unknown_"+p.ID)
			unknown.PaymentID = paymentID(1<<40 + int64(i))
			deliveries = append(deliveries, delivery{ev: unknown, order: o.OrderID, want: seckill.ENOTFOUND})
		case 4: // the payment fails first, or after
			deliveries = append(deliveries, delivery{ev: seckill.PaymentEvent{ID: "evt_failed_" + p.ID, Type: seckill.EventPaymentFailed,
				PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}, order: o.OrderID})
		}
	}
	statements := countTriggered(t, db, "payment_event", "INSERT", "STATEMENT")

	var (
		mu       sync.Mutex
		outcomes = map[string][]seckill.PaymentResult{} // by event id
		wg       sync.WaitGroup
	)
	for _, d := range deliveries {
		wg.Go(func() {
			res, err := s.ApplyPaymentEvent(ctx, d.ev)
			if d.want != "" {
				if seckill.ErrorCode(err) != d.want {
					t.Errorf("event %s: %+v, %v; want %s", d.ev.ID, res, err, d.want)
				}
				return
			}
			if err != nil {
				t.Errorf("event %s: %v", d.ev.ID, err)
				return
			}
			if res.Payment.ID != d.ev.PaymentID || res.Order == nil || res.Order.ID != d.order {
				t.Errorf("event %s: %+v", d.ev.ID, res)
			}
			mu.Lock()
			outcomes[d.ev.ID] = append(outcomes[d.ev.ID], res)
			mu.Unlock()
		})
	}
	for _, id := range cancels {
		wg.Go(func() {
			if _, err := s.CloseOrder(ctx, id, seckill.OrderCancelled, 0); err != nil {
				t.Errorf("cancel %d: %v", id, err)
			}
		})
	}
	wg.Wait()

	paidBy := map[int64]int{}
	for id, rs := range outcomes {
		fresh := 0
		for _, r := range rs {
			if !r.Duplicate {
				fresh++
			}
			if r.Outcome != rs[0].Outcome {
				t.Errorf("event %s: outcomes %+v", id, rs)
			}
		}
		if fresh != 1 {
			t.Errorf("event %s applied %d times", id, fresh)
		}
		if rs[0].Outcome == seckill.AppliedPaid {
			paidBy[rs[0].Order.ID]++
		}
	}
	for i, o := range adms {
		got, err := s.Order(ctx, o.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		pays, err := s.OrderPayments(ctx, o.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		var succeeded, owed int
		for _, p := range pays {
			switch {
			case p.Status == seckill.PaymentSucceeded:
				succeeded++
			case p.Status.Owed():
				owed++
			case p.Status == seckill.PaymentPending && got.Status != seckill.OrderCreated:
				t.Errorf("order %d is %s, and its payment %s still PENDING", o.OrderID, got.Status, p.ID)
			}
		}
		if got.Status == seckill.OrderPaid && (i%10 == 1 && succeeded+owed != 2 || i%10 == 5 && (succeeded != 1 || owed != 0)) {
			t.Errorf("order %d (case %d) paid: %d payments succeeded, %d owed", o.OrderID, i%10, succeeded, owed)
		}
		if got.Status == seckill.OrderPaid && (paidBy[o.OrderID] != 1 || succeeded != 1) ||
			got.Status != seckill.OrderPaid && (got.Status != seckill.OrderCancelled && got.Status != seckill.OrderCreated || paidBy[o.OrderID] != 0 || succeeded != 0) {
			t.Errorf("order %d %s: paid by %d events, %d payments succeeded, %d owed", o.OrderID, got.Status, paidBy[o.OrderID], succeeded, owed)
		}
	}
	var recorded, bad int
	if err := db.NewRaw(`SELECT count(*), count(*) FILTER (WHERE id LIKE 'evt_bad_%' OR id LIKE 'evt_unknown_%') FROM payment_event
			WHERE id NOT LIKE 'evt_failed_first_%'`).Scan(ctx, &recorded, &bad); err != nil {
		t.Fatal(err)
	}
	if recorded != len(outcomes) || bad != 0 {
		t.Errorf("%d events recorded (%d refused among them), want %d", recorded, bad, len(outcomes))
	}
	// The second successes, the successes of cancelled orders and the
	// failures beside a success of their payment go alone, by design: a
	// statement each, at most. The plain successes and failures go
	// together.
	inserts := statements()
	alone := 3 * orders / 10
	t.Logf("%d deliveries, %d events recorded in %d statements", len(deliveries), recorded, inserts)
	if inserts > int64(alone+(recorded-alone)/5) {
		t.Errorf("%d events recorded by %d statements, %d of them alone by design: the others not gathered", recorded, inserts, alone)
	}
}

// BenchmarkApplyPaymentEvent delivers the payment.succeeded events of
// persisted orders from 32 goroutines per GOMAXPROCS at once: a sale's
// buyers paying.
func BenchmarkApplyPaymentEvent(b *testing.B) {
	db := storetest.NewDB(b)
	s := store.New(db)
	ctx := b.Context()
	v := storetest.CreateCampaign(b, db, int64(b.N))
	adms := sold(b, s, v.ID, b.N)
	evs := make([]seckill.PaymentEvent, b.N)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				p, err := s.CreatePayment(ctx, adms[i].OrderID, 0, "CNY", paymentID(i+1))
				if err != nil {
					b.Error(err)
					return
				}
				evs[i] = seckill.PaymentEvent{ID: "evt_" + p.ID, Type: seckill.EventPaymentSucceeded,
					PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}
			}
		})
	}
	wg.Wait()
	next.Store(0)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ev := evs[next.Add(1)-1]
			if res, err := s.ApplyPaymentEvent(ctx, ev); err != nil || res.Outcome != seckill.AppliedPaid {
				b.Errorf("pay %s: %+v, %v", ev.PaymentID, res, err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "payments/s")
}

// TestPaymentBatchFallsBack makes every statement that marks more than one
// payment SUCCEEDED fail, as a batch's does and a single event's never
// does. With a constraint's error the batch's events are applied one by
// one instead, and all are paid; with any other error each delivery in a
// batch gets it, nothing is applied twice, and delivering again pays.
func TestPaymentBatchFallsBack(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	const orders = 60
	v := storetest.CreateCampaign(t, db, 2*orders)
	adms := sold(t, s, v.ID, 2*orders)
	evs := make([]seckill.PaymentEvent, len(adms))
	for i, a := range adms {
		p, err := s.CreatePayment(ctx, a.OrderID, 0, "CNY", paymentID(int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		evs[i] = seckill.PaymentEvent{ID: "evt_" + p.ID, Type: seckill.EventPaymentSucceeded, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}
	}
	refuseBatches := func(code string) {
		t.Helper()
		_, err := db.ExecContext(ctx, `CREATE OR REPLACE FUNCTION refuse_batch() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF (SELECT count(*) FROM changed WHERE status = 'SUCCEEDED') > 1 THEN
					RAISE EXCEPTION 'a batch' USING ERRCODE = '`+code+`';
				END IF;
				RETURN NULL;
			END $$`)
		if err != nil {
			t.Fatal(err)
		}
	}
	refuseBatches("23514") // check_violation
	if _, err := db.ExecContext(ctx, `CREATE TRIGGER refuse_batch AFTER UPDATE ON payment REFERENCING NEW TABLE AS changed
		FOR EACH STATEMENT EXECUTE FUNCTION refuse_batch()`); err != nil {
		t.Fatal(err)
	}
	deliver := func(evs []seckill.PaymentEvent) (failed int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, ev := range evs {
			wg.Go(func() {
				res, err := s.ApplyPaymentEvent(ctx, ev)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
				} else if res.Outcome != seckill.AppliedPaid {
					t.Errorf("event %s: %+v", ev.ID, res)
				}
			})
		}
		wg.Wait()
		return failed
	}
	paid := func() (n int) {
		if err := db.NewRaw(`SELECT count(*) FROM voucher_order WHERE status = 'PAID'`).Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if failed := deliver(evs[:orders]); failed != 0 || paid() != orders {
		t.Fatalf("batches rolled back by a constraint: %d deliveries failed, %d orders paid; want 0, %d", failed, paid(), orders)
	}

	refuseBatches("XX000") // internal_error: not the batch's own doing
	failed := deliver(evs[orders:])
	if failed == 0 {
		t.Fatalf("no delivery failed: no batch of more than one was tried")
	}
	if got := paid(); got != 2*orders-failed {
		t.Errorf("%d deliveries failed, %d orders paid; want %d", failed, got, 2*orders-failed)
	}
	for _, ev := range evs[orders:] { // the provider delivers again, one at a time
		if res, err := s.ApplyPaymentEvent(ctx, ev); err != nil || res.Outcome != seckill.AppliedPaid {
			t.Fatalf("redelivery of %s: %+v, %v", ev.ID, res, err)
		}
	}
	if got := paid(); got != 2*orders {
		t.Errorf("%d orders paid after redelivery, want %d", got, 2*orders)
	}
	var events int
	if err := db.NewRaw(`SELECT count(*) FROM payment_event`).Scan(ctx, &events); err != nil || events != 2*orders {
		t.Errorf("%d events recorded, want %d (%v)", events, 2*orders, err)
	}
}
