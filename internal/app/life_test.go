package app

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/jobs"
)

// The order's life after the purchase, against real Postgres and Redis:
// payment, cancellation, expiry, and units going back on sale exactly once.

// newLifeEnv starts a seckill with its workers and a campaign on sale now
// of stock units with the given pay window (0: the default).
func newLifeEnv(t *testing.T, stock int64, window time.Duration) (*testEnv, int64) {
	t.Helper()
	e := newTestEnv(t, "")
	e.worker()
	v, err := e.app.Catalog.AddSeckillVoucher(asUser(e.ctx, 1, true), seckill.NewSeckillVoucher{
		ShopID: 1, Title: "100 off 200", PayValue: 100, ActualValue: 200, Stock: stock,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour), PayWindow: window,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, v.ID
}

// buyCreated buys one unit for user and waits until the order is CREATED.
func (e *testEnv) buyCreated(voucherID, userID int64) int64 {
	e.t.Helper()
	return e.buyAllCreated(voucherID, userID, 1)[0]
}

// buyAllCreated buys one unit for each of n users from firstUser on, then
// waits until every order is CREATED.
func (e *testEnv) buyAllCreated(voucherID, firstUser int64, n int) []int64 {
	e.t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		res, err := e.app.Purchases.Purchase(asUser(e.ctx, firstUser+int64(i), false), voucherID)
		if err != nil || res.Outcome != seckill.OutcomeAccepted {
			e.t.Fatalf("purchase by %d: %+v, %v", firstUser+int64(i), res, err)
		}
		ids[i] = res.OrderID
	}
	for _, id := range ids {
		eventually(e.t, 20*time.Second, "order CREATED", func() bool { return e.status(id) == seckill.OrderCreated })
	}
	return ids
}

// buyAllPending buys as buyAllCreated does and opens each order's payment.
func (e *testEnv) buyAllPending(voucherID, firstUser int64, n int) ([]int64, []*seckill.Payment) {
	e.t.Helper()
	orders := e.buyAllCreated(voucherID, firstUser, n)
	payments := make([]*seckill.Payment, n)
	for i, id := range orders {
		payments[i] = e.createPayment(id, firstUser+int64(i))
	}
	return orders, payments
}

func (e *testEnv) status(orderID int64) seckill.OrderStatus {
	e.t.Helper()
	o, err := e.app.Store.Order(e.ctx, orderID)
	if seckill.ErrorCode(err) == seckill.ENOTFOUND {
		return seckill.OrderQueued
	} else if err != nil {
		e.t.Fatal(err)
	}
	return o.Status
}

// makeDue moves an order's pay_by into the past.
func (e *testEnv) makeDue(orderID int64) {
	e.t.Helper()
	if _, err := e.app.DB.ExecContext(e.ctx, `UPDATE voucher_order SET pay_by = now() - interval '1 second' WHERE id = ?`, orderID); err != nil {
		e.t.Fatal(err)
	}
}

var eventSeq atomic.Int64

// paymentEvent returns a succeeded event for the payment, with a fresh id.
func paymentEvent(p *seckill.Payment, typ string) seckill.PaymentEvent {
	return seckill.PaymentEvent{ID: fmt.Sprintf("evt_%d_%d", time.Now().UnixNano(), eventSeq.Add(1)), Type: typ,
		PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}
}

func (e *testEnv) createPayment(orderID, userID int64) *seckill.Payment {
	e.t.Helper()
	p, err := e.app.Life.CreatePayment(asUser(e.ctx, userID, false), orderID)
	if err != nil {
		e.t.Fatalf("createPayment(%d): %v", orderID, err)
	}
	return p
}

func (e *testEnv) count(query string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.app.DB.NewRaw(query, args...).Scan(e.ctx, &n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// checkUnitsBack waits until Redis has the campaign's n returned units on
// sale again, then checks that every unit is in one place.
func (e *testEnv) checkUnitsBack(voucherID int64, n int) {
	e.t.Helper()
	eventually(e.t, 10*time.Second, "units back in Redis", func() bool { return e.remaining(voucherID) == int64(n) })
	e.checkUnits(voucherID)
}

// checkUnits checks, once nothing is in flight, that every unit is in one
// place: initial = remaining + awaiting payment + paid, in Postgres and in
// Redis, and that Redis's buyers are exactly the users holding a unit.
func (e *testEnv) checkUnits(voucherID int64) {
	e.t.Helper()
	initial := e.count(`SELECT initial_stock FROM seckill_campaign WHERE voucher_id = ?`, voucherID)
	holding := e.count(`SELECT count(*) FROM voucher_order WHERE voucher_id = ? AND status IN ('CREATED', 'PAID')`, voucherID)
	if stock := e.pgStock(voucherID); initial != stock+holding {
		e.t.Errorf("Postgres: initial %d != stock %d + awaiting payment or paid %d", initial, stock, holding)
	}
	if rem := e.remaining(voucherID); rem != e.pgStock(voucherID) {
		e.t.Errorf("Redis remaining %d, Postgres stock %d", rem, e.pgStock(voucherID))
	}
	buyers, err := e.app.Redis.SCard(e.ctx, fmt.Sprintf("seckill:{v%d}:buyers", voucherID)).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	if buyers != holding {
		e.t.Errorf("Redis holds %d buyers, Postgres %d orders holding a unit", buyers, holding)
	}
}

// TestPayAndExpireRace pays and expires each of many due orders at the same
// instant: exactly one of the two wins, and a payment that lost is flagged
// for a refund without reviving the order or taking a unit.
func TestPayAndExpireRace(t *testing.T) {
	const n = 40
	e, v := newLifeEnv(t, n, 0)
	orders, payments := e.buyAllPending(v, 100, n)
	for _, id := range orders {
		e.makeDue(id)
	}
	var wg sync.WaitGroup
	for i := range orders {
		wg.Go(func() {
			if _, err := e.app.Life.ExpireOrder(e.ctx, orders[i]); err != nil {
				t.Errorf("expire %d: %v", orders[i], err)
			}
		})
		wg.Go(func() {
			if _, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(payments[i], seckill.EventPaymentSucceeded)); err != nil {
				t.Errorf("pay %d: %v", orders[i], err)
			}
		})
	}
	wg.Wait()
	var paid, expired int
	for i, id := range orders {
		o, err := e.app.Store.Order(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var pst string
		if err := e.app.DB.NewRaw(`SELECT status FROM payment WHERE id = ?`, payments[i].ID).Scan(e.ctx, &pst); err != nil {
			t.Fatal(err)
		}
		switch {
		case o.Status == seckill.OrderPaid && pst == "SUCCEEDED" && !o.PaidAt.IsZero():
			paid++
		case o.Status == seckill.OrderExpired && pst == "REFUND_NEEDED":
			expired++
		default:
			t.Errorf("order %d: %s with payment %s", id, o.Status, pst)
		}
	}
	t.Logf("%d paid, %d expired (refund needed)", paid, expired)
	if got := e.count(`SELECT count(*) FROM payment_event`); got != n {
		t.Errorf("%d events recorded, want %d", got, n)
	}
	e.checkUnitsBack(v, expired)
	// The metrics tell the same story.
	m := e.app.Metrics
	for _, c := range []struct {
		name string
		got  float64
		want int
	}{
		{`seckill_orders_closed_total{status="PAID"}`, testutil.ToFloat64(m.OrdersClosed.WithLabelValues("PAID")), paid},
		{`seckill_orders_closed_total{status="EXPIRED"}`, testutil.ToFloat64(m.OrdersClosed.WithLabelValues("EXPIRED")), expired},
		{`seckill_payment_events_total{result="paid"}`, testutil.ToFloat64(m.PaymentEvents.WithLabelValues("paid")), paid},
		{`seckill_payment_events_total{result="refund_needed"}`, testutil.ToFloat64(m.PaymentEvents.WithLabelValues("refund_needed")), expired},
	} {
		if int(c.got) != c.want {
			t.Errorf("%s = %v, want %d", c.name, c.got, c.want)
		}
	}
}

// TestSameEventConcurrently applies one event 20 times at once: one PAID,
// one event row.
func TestSameEventConcurrently(t *testing.T) {
	e, v := newLifeEnv(t, 5, 0)
	id := e.buyCreated(v, 7)
	ev := paymentEvent(e.createPayment(id, 7), seckill.EventPaymentSucceeded)
	e.deliverTwenty(id, ev.ID, func() (string, error) {
		res, err := e.app.Life.ApplyPaymentEvent(e.ctx, ev)
		switch {
		case err != nil:
			return "", err
		case res.Paid():
			return "applied", nil
		case res.Duplicate:
			return "duplicate", nil
		}
		return fmt.Sprintf("%+v", res), nil
	})
}

// deliverTwenty makes 20 deliveries of one payment event for orderID at
// once; deliver makes one and says how it ended ("applied", "duplicate").
// One delivery must apply the event and 19 see a duplicate, one event row
// be recorded and the order be PAID.
func (e *testEnv) deliverTwenty(orderID int64, eventID string, deliver func() (string, error)) {
	e.t.Helper()
	var mu sync.Mutex
	ended := map[string]int{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			how, err := deliver()
			if err != nil {
				e.t.Error(err)
				return
			}
			mu.Lock()
			ended[how]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if ended["applied"] != 1 || ended["duplicate"] != 19 || len(ended) != 2 {
		e.t.Errorf("deliveries ended %v; want 1 applied and 19 duplicates", ended)
	}
	if got := e.count(`SELECT count(*) FROM payment_event WHERE id = ?`, eventID); got != 1 {
		e.t.Errorf("%d event rows", got)
	}
	if st := e.status(orderID); st != seckill.OrderPaid {
		e.t.Errorf("order %s", st)
	}
}

// TestCancelAndPayRace cancels and pays each of many orders at once.
func TestCancelAndPayRace(t *testing.T) {
	const n = 30
	e, v := newLifeEnv(t, n, 0)
	orders, payments := e.buyAllPending(v, 200, n)
	var wg sync.WaitGroup
	for i := range orders {
		wg.Go(func() {
			_, err := e.app.Life.CancelOrder(asUser(e.ctx, int64(200+i), false), orders[i])
			if err != nil && seckill.ErrorCode(err) != seckill.ECONFLICT {
				t.Errorf("cancel %d: %v", orders[i], err)
			}
		})
		wg.Go(func() {
			if _, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(payments[i], seckill.EventPaymentSucceeded)); err != nil {
				t.Errorf("pay %d: %v", orders[i], err)
			}
		})
	}
	wg.Wait()
	cancelled := 0
	for i, id := range orders {
		var pst string
		if err := e.app.DB.NewRaw(`SELECT status FROM payment WHERE id = ?`, payments[i].ID).Scan(e.ctx, &pst); err != nil {
			t.Fatal(err)
		}
		switch st := e.status(id); {
		case st == seckill.OrderPaid && pst == "SUCCEEDED":
		case st == seckill.OrderCancelled && pst == "REFUND_NEEDED":
			cancelled++
		default:
			t.Errorf("order %d: %s with payment %s", id, st, pst)
		}
	}
	t.Logf("%d cancelled", cancelled)
	e.checkUnitsBack(v, cancelled)
}

// TestCancelOtherUsersOrder: someone else's order is not found, and stays.
func TestCancelOtherUsersOrder(t *testing.T) {
	e, v := newLifeEnv(t, 2, 0)
	id := e.buyCreated(v, 11)
	_, err := e.app.Life.CancelOrder(asUser(e.ctx, 12, false), id)
	if seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Fatalf("cancel by another user: %v, want NOT_FOUND", err)
	}
	if _, err := e.app.Life.CreatePayment(asUser(e.ctx, 12, false), id); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Fatalf("createPayment by another user: %v, want NOT_FOUND", err)
	}
	if st := e.status(id); st != seckill.OrderCreated {
		t.Fatalf("status %s", st)
	}
	// The buyer may cancel, once (a second time is CONFLICT); then buy
	// again.
	o, err := e.app.Life.CancelOrder(asUser(e.ctx, 11, false), id)
	if err != nil || o.Status != seckill.OrderCancelled || o.ClosedAt.IsZero() {
		t.Fatalf("cancel: %+v, %v", o, err)
	}
	if _, err := e.app.Life.CancelOrder(asUser(e.ctx, 11, false), id); seckill.ErrorCode(err) != seckill.ECONFLICT {
		t.Fatalf("second cancel: %v, want CONFLICT", err)
	}
	e.checkUnits(v)
	again := e.buyCreated(v, 11)
	if again == id {
		t.Fatal("same id")
	}
	if _, err := e.app.Life.CreatePayment(asUser(e.ctx, 11, false), id); seckill.ErrorCode(err) != seckill.ECONFLICT {
		t.Fatalf("createPayment of a cancelled order: %v, want CONFLICT", err)
	}
	e.checkUnits(v)
}

// TestExpiryWhileRedisUnreachable expires an order while Redis cannot be
// reached: Postgres takes the unit back, and once Redis is back the sweep
// gives it back there exactly once, however many sweeps run.
func TestExpiryWhileRedisUnreachable(t *testing.T) {
	// The workers' own expiry runs at their start and then not for a
	// minute: it would otherwise expire the orders made due below (with
	// Redis at hand) before the process whose Redis is away does, as it
	// can on a loaded machine.
	e, v := newLifeEnvWith(t, 3, func(m map[string]string) { m["SECKILL_EXPIRY_INTERVAL"] = "1m" })
	ids := e.buyAllCreated(v, 21, 3)
	if r := e.remaining(v); r != 0 {
		t.Fatalf("remaining %d", r)
	}
	// A process whose Redis is away: connections are refused.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer dead.Close()
	away, err := seckill.NewLife(seckill.LifeDeps{Store: e.app.Store, Returner: admission.New(dead, admission.Options{}),
		Orders: e.app.Purchases, Bus: e.app.Bus, Refunds: e.app.Refunds, Opener: seckill.NoPaymentOpener{}, Auditor: e.app.Store, Logger: e.app.Logger})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:2] {
		e.makeDue(id)
		if done, err := away.ExpireOrder(e.ctx, id); err != nil || !done {
			t.Fatalf("expire %d: %v, %v", id, done, err)
		}
	}
	if got := e.pgStock(v); got != 2 {
		t.Fatalf("Postgres stock %d, want 2", got)
	}
	if r := e.remaining(v); r != 0 {
		t.Fatalf("Redis took a unit while away: remaining %d", r)
	}
	if n := e.count(`SELECT count(*) FROM voucher_order WHERE voucher_id = ? AND NOT unit_returned AND status = 'EXPIRED'`, v); n != 2 {
		t.Fatalf("%d units marked for return, want 2", n)
	}
	// A sweep from the process that still cannot reach Redis changes nothing.
	if _, _, err := away.SweepOrders(e.ctx, 100); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Fatalf("sweep while away: %v, want UNAVAILABLE", err)
	}
	// Redis is back: sweeps run at once, in several processes.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, _, err := e.app.Life.SweepOrders(e.ctx, 100); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if r := e.remaining(v); r != 2 {
		t.Fatalf("remaining %d after the sweeps, want 2", r)
	}
	if n := e.count(`SELECT count(*) FROM voucher_order WHERE voucher_id = ? AND NOT unit_returned AND status = 'EXPIRED'`, v); n != 0 {
		t.Fatalf("%d units still marked for return", n)
	}
	e.checkUnits(v)
	// The expired buyers may buy again.
	e.buyCreated(v, 21)
	e.checkUnits(v)
}

// TestExpiryCostsRedisNothing: an order awaiting payment has no expiry task
// (nor anything else of its own in Redis for its expiry): the workers find
// it in Postgres when it is due, and so does the sweep.
func TestExpiryCostsRedisNothing(t *testing.T) {
	e, v := newLifeEnv(t, 2, time.Hour)
	id := e.buyCreated(v, 31)
	insp := asynq.NewInspectorFromRedisClient(e.app.Redis)
	// The process persisted its own purchase (direct.go): the queue may
	// not even exist.
	queues, err := insp.Queues()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(queues, jobs.QueueOrders) {
		if q, err := insp.GetQueueInfo(jobs.QueueOrders); err != nil || q.Scheduled != 0 {
			t.Fatalf("scheduled tasks %+v, %v; want none", q, err)
		}
	}
	if expired, _, err := e.app.Life.SweepOrders(e.ctx, 100); err != nil || expired != 0 {
		t.Fatalf("sweep before pay_by: %d, %v", expired, err)
	}
	e.makeDue(id)
	if expired, returned, err := e.app.Life.SweepOrders(e.ctx, 100); err != nil || expired+returned == 0 && e.status(id) != seckill.OrderExpired {
		t.Fatalf("sweep: expired %d, returned %d, %v", expired, returned, err)
	}
	eventually(t, 10*time.Second, "the order EXPIRED", func() bool { return e.status(id) == seckill.OrderExpired })
	eventually(t, 10*time.Second, "its unit back", func() bool { return e.remaining(v) == 2 })
	e.checkUnits(v)
}

// TestUnpaidUnitsResold sells out 10 units; 4 buyers never pay. After the
// pay window (a real one: the expiry tasks run), exactly 4 more buyers get
// units, and once they pay the campaign ends 10 paid, 0 remaining.
func TestUnpaidUnitsResold(t *testing.T) {
	e, v := newLifeEnv(t, 10, 2*time.Second)
	e.reconciler()
	var unpaid []int64
	for i := range int64(10) {
		id := e.buyCreated(v, 300+i)
		if i < 6 {
			p := e.createPayment(id, 300+i)
			if _, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(p, seckill.EventPaymentSucceeded)); err != nil {
				t.Fatal(err)
			}
		} else {
			unpaid = append(unpaid, id)
		}
	}
	if res, err := e.app.Purchases.Purchase(asUser(e.ctx, 399, false), v); err != nil || res.Outcome != seckill.OutcomeSoldOut {
		t.Fatalf("sold out campaign: %+v, %v", res, err)
	}
	eventually(t, 30*time.Second, "unpaid orders expired", func() bool {
		for _, id := range unpaid {
			if e.status(id) != seckill.OrderExpired {
				return false
			}
		}
		return true
	})
	eventually(t, 10*time.Second, "units back on sale", func() bool { return e.remaining(v) == 4 })

	var accepted []int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range int64(40) {
		wg.Go(func() {
			res, err := e.app.Purchases.Purchase(asUser(e.ctx, 500+i, false), v)
			if err != nil {
				t.Error(err)
				return
			}
			if res.Outcome == seckill.OutcomeAccepted {
				mu.Lock()
				accepted = append(accepted, res.OrderID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(accepted) != 4 {
		t.Fatalf("%d more buyers got units, want 4", len(accepted))
	}
	for _, id := range accepted {
		eventually(t, 20*time.Second, "order CREATED", func() bool { return e.status(id) == seckill.OrderCreated })
		o, err := e.app.Store.Order(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		p := e.createPayment(id, o.UserID)
		if _, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(p, seckill.EventPaymentSucceeded)); err != nil {
			t.Fatal(err)
		}
	}
	if paid := e.count(`SELECT count(*) FROM voucher_order WHERE voucher_id = ? AND status = 'PAID'`, v); paid != 10 {
		t.Errorf("%d paid, want 10", paid)
	}
	if r, s := e.remaining(v), e.pgStock(v); r != 0 || s != 0 {
		t.Errorf("remaining %d in Redis, %d in Postgres; want 0", r, s)
	}
	e.checkUnits(v)
}

// payOrder pays a CREATED order of user as the provider would.
func (e *testEnv) payOrder(orderID string, userID int64) {
	e.t.Helper()
	id, err := seckill.ParseID("orderId", orderID)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(e.createPayment(id, userID), seckill.EventPaymentSucceeded)); err != nil {
		e.t.Fatal(err)
	}
}

// TestPayAndBatchExpireRace: the workers' batch expiry and the provider's
// successes race over many due orders: each order is PAID or EXPIRED, a
// success that lost is owed back, and every expired unit is back once.
func TestPayAndBatchExpireRace(t *testing.T) {
	const n = 60
	e := newTestEnv(t, "") // no workers: the test runs the expiry
	v := e.createCampaign(n)
	var orders []int64
	var payments []*seckill.Payment
	for i := range int64(n) {
		id := e.buyPersisted(v, 800+i)
		orders = append(orders, id)
		payments = append(payments, e.createPayment(id, 800+i))
	}
	for _, id := range orders {
		e.makeDue(id)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			done, err := e.app.Life.ExpireDue(e.ctx, 7)
			if err != nil {
				t.Error(err)
				return
			}
			if done == 0 {
				return
			}
		}
	})
	for _, p := range payments {
		wg.Go(func() {
			if _, err := e.app.Life.ApplyPaymentEvent(e.ctx, paymentEvent(p, seckill.EventPaymentSucceeded)); err != nil {
				t.Errorf("pay %d: %v", p.OrderID, err)
			}
		})
	}
	wg.Wait()
	if _, err := e.app.Life.ExpireDue(e.ctx, n); err != nil { // whatever the race left due
		t.Fatal(err)
	}
	paid, expired := 0, 0
	for i, id := range orders {
		switch st, pst := e.status(id), e.paymentStatus(payments[i].ID); {
		case st == seckill.OrderPaid && pst == seckill.PaymentSucceeded:
			paid++
		case st == seckill.OrderExpired && pst == seckill.PaymentRefundNeeded:
			expired++
		default:
			t.Errorf("order %d: %s with payment %s", id, st, pst)
		}
	}
	t.Logf("%d paid, %d expired", paid, expired)
	e.checkUnitsBack(v, expired)
}

// TestExpiryStorm: two thousand orders reach pay_by together; the workers
// expire them in batches (no task, no row lock per order) and every unit
// is back on sale once.
func TestExpiryStorm(t *testing.T) {
	const n = 2000
	e := newTestEnv(t, "", func(m map[string]string) { m["SECKILL_EXPIRY_BATCH"] = "500" })
	v := e.createCampaign(n)
	var adms []seckill.Admission
	for i := range int64(n) {
		_, adm, err := e.app.Admitter.Admit(e.ctx, v, 5000+i, seckill.Ticket{})
		if err != nil {
			t.Fatal(err)
		}
		adms = append(adms, adm)
	}
	if err := e.app.Purchases.PersistAdmissions(e.ctx, adms); err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.DB.ExecContext(e.ctx, `UPDATE voucher_order SET pay_by = now() - interval '1 second' WHERE voucher_id = ?`, v); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.worker()
	eventually(t, 30*time.Second, "every order expired", func() bool {
		return e.count(`SELECT count(*) FROM voucher_order WHERE voucher_id = ? AND status = 'EXPIRED'`, v) == n
	})
	t.Logf("%d orders expired in %v", n, time.Since(start).Round(time.Millisecond))
	e.checkUnitsBack(v, n)
	if got := testutil.ToFloat64(e.app.Metrics.OrdersClosed.WithLabelValues("EXPIRED")); got != n {
		t.Errorf(`seckill_orders_closed_total{status="EXPIRED"} = %v, want %d`, got, n)
	}
}
