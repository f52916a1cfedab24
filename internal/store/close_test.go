package store_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// TestCloseOrderStorm closes the orders of two campaigns from hundreds of
// goroutines at once, each order by its buyer twice, by another user and as
// an expiry that is not due, while payments of some of them succeed: every
// order closed by exactly one call, or paid and not closed; the others find
// it as it is; each unit back in its campaign's stock once; an open payment
// cancelled with its order; a payment that lost the race owed back; the
// campaigns' rows updated (locked) far fewer times than orders closed; and
// each order's row updated once.
func TestCloseOrderStorm(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	const perCampaign = 150
	campaigns := []*seckill.Voucher{storetest.CreateCampaign(t, db, perCampaign), storetest.CreateCampaign(t, db, perCampaign)}
	var orders []seckill.Admission
	for _, v := range campaigns {
		var adms []seckill.Admission
		for i := range int64(perCampaign) {
			a := adm(v.ID, i+1, 1000*v.ID+i)
			a.AdmittedAt = time.Now()
			adms = append(adms, a)
		}
		if _, err := s.PersistOrders(ctx, adms); err != nil {
			t.Fatal(err)
		}
		orders = append(orders, adms...)
	}
	// Every fifth order has an open payment; every tenth's succeeds
	// while its buyer cancels.
	payments := map[int64]*seckill.Payment{}
	for i, a := range orders {
		if i%5 != 0 {
			continue
		}
		p, err := s.CreatePayment(ctx, a.OrderID, 0, "CNY", paymentID(int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		payments[a.OrderID] = p
	}
	owner := map[int64]int64{}
	for _, a := range orders {
		owner[a.OrderID] = a.UserID
	}
	updates := countTriggered(t, db, "seckill_campaign", "UPDATE", "ROW")
	orderUpdates := countTriggered(t, db, "voucher_order", "UPDATE", "ROW")

	type call struct {
		id, user int64
		to       seckill.OrderStatus
	}
	var calls []call
	for _, a := range orders {
		calls = append(calls,
			call{a.OrderID, a.UserID, seckill.OrderCancelled},
			call{a.OrderID, a.UserID, seckill.OrderCancelled},
			call{a.OrderID, a.UserID + 1, seckill.OrderCancelled}, // someone else's
			call{a.OrderID, 0, seckill.OrderExpired})              // not due
	}
	var (
		mu     sync.Mutex
		closed = map[int64]int{}
		paid   = map[int64]bool{}
		wg     sync.WaitGroup
	)
	for _, c := range calls {
		wg.Go(func() {
			res, err := s.CloseOrder(ctx, c.id, c.to, c.user)
			switch {
			case c.user != 0 && c.user != owner[c.id]:
				if seckill.ErrorCode(err) != seckill.ENOTFOUND {
					t.Errorf("user %d closing order %d of another: %+v, %v; want ENOTFOUND", c.user, c.id, res, err)
				}
				return
			case err != nil:
				t.Errorf("close %d: %v", c.id, err)
				return
			case res.Order == nil || res.Order.ID != c.id:
				t.Errorf("close %d: order %+v", c.id, res.Order)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.Closed {
				closed[c.id]++
				if c.to != seckill.OrderCancelled || res.Order.Status != seckill.OrderCancelled || res.Return.OrderID != c.id || res.Return.UserID != res.Order.UserID {
					t.Errorf("close %d as %s: %+v", c.id, c.to, res)
				}
			} else if st := res.Order.Status; st != seckill.OrderCancelled && st != seckill.OrderPaid && st != seckill.OrderCreated {
				t.Errorf("close %d: left %s", c.id, st)
			}
		})
	}
	for i, a := range orders {
		if i%10 != 0 {
			continue
		}
		p := payments[a.OrderID]
		wg.Go(func() {
			res, err := s.ApplyPaymentEvent(ctx, seckill.PaymentEvent{ID: "evt_" + p.ID, Type: seckill.EventPaymentSucceeded,
				PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			paid[a.OrderID] = res.Outcome == seckill.AppliedPaid
			mu.Unlock()
		})
	}
	wg.Wait()

	for _, a := range orders {
		if n := closed[a.OrderID]; paid[a.OrderID] && n != 0 || !paid[a.OrderID] && n != 1 {
			t.Errorf("order %d (paid %v) closed by %d calls", a.OrderID, paid[a.OrderID], n)
		}
	}
	for _, v := range campaigns {
		var stock, cancelled, holding int64
		if err := db.NewRaw(`SELECT stock FROM seckill_campaign WHERE voucher_id = ?`, v.ID).Scan(ctx, &stock); err != nil {
			t.Fatal(err)
		}
		if err := db.NewRaw(`SELECT count(*) FILTER (WHERE status = 'CANCELLED' AND return_epoch = 0 AND closed_at IS NOT NULL),
				count(*) FILTER (WHERE status IN ('CREATED', 'PAID')) FROM voucher_order WHERE voucher_id = ?`, v.ID).Scan(ctx, &cancelled, &holding); err != nil {
			t.Fatal(err)
		}
		if stock != cancelled || cancelled+holding != perCampaign {
			t.Errorf("campaign %d: stock %d, cancelled %d, holding %d of %d", v.ID, stock, cancelled, holding, perCampaign)
		}
	}
	var wrong []string
	err := db.NewRaw(`SELECT p.id || ' ' || p.status || ' of a ' || o.status || ' order' FROM payment AS p JOIN voucher_order AS o ON o.id = p.order_id
		WHERE NOT (o.status = 'CANCELLED' AND p.status IN ('CANCELLED', 'REFUND_NEEDED') OR o.status = 'PAID' AND p.status = 'SUCCEEDED')
			AND p.order_id = ANY(?)`, pgdialect.Array(slices.Collect(maps.Keys(payments)))).Scan(ctx, &wrong)
	if err != nil || len(wrong) > 0 {
		t.Errorf("payments: %v, %v", wrong, err)
	}
	n := updates()
	t.Logf("%d calls closed %d orders with %d updates of the campaigns' rows", len(calls), len(closed), n)
	if n > int64(len(closed)/10) {
		t.Errorf("%d orders closed with %d updates of the campaigns' rows: a lock per order", len(closed), n)
	}
	// Each order is written once, closed or paid: a row version per
	// order, not one to close it and one to record its unit's epoch.
	var paidN int64
	for _, ok := range paid {
		if ok {
			paidN++
		}
	}
	if n := orderUpdates(); n != int64(len(closed))+paidN {
		t.Errorf("%d orders closed and %d paid with %d updates of their rows", len(closed), paidN, n)
	}
	if _, err := s.CloseOrder(ctx, 0, seckill.OrderCancelled, 0); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("order 0: %v", err)
	}
	if _, err := s.CloseOrder(ctx, orders[0].OrderID, seckill.OrderPaid, 0); err == nil {
		t.Errorf("close to PAID: %v", err)
	}
}

// TestCloseOrderBacklogFull holds the campaign's row while two closes
// wait for it (both commit slots taken), fills the backlog behind them
// with calls for orders that do not exist, and checks that one more call
// gets EUNAVAILABLE when its deadline ends, its order left as it was; and
// that once the row is free every waiting call is answered and the order
// of the refused call can be cancelled.
func TestCloseOrderBacklogFull(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 10)
	var adms []seckill.Admission
	for i := range int64(3) {
		a := adm(v.ID, i+1, 7000+i)
		a.AdmittedAt = time.Now()
		adms = append(adms, a)
	}
	if _, err := s.PersistOrders(ctx, adms); err != nil {
		t.Fatal(err)
	}
	hold, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.ExecContext(ctx, `SELECT 1 FROM seckill_campaign WHERE voucher_id = ? FOR UPDATE`, v.ID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	codes := make(chan string, 2)
	for _, a := range adms[:2] { // each takes a commit slot and waits for the row
		wg.Go(func() {
			_, err := s.CloseOrder(ctx, a.OrderID, seckill.OrderCancelled, a.UserID)
			codes <- seckill.ErrorCode(err)
		})
	}
	// Both commits wait for the row before the backlog fills: each is the
	// lone call it began with.
	for waiting := 0; waiting < 2; {
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	const backlog = store.CloseBacklog
	var missing atomic.Int64
	for i := range int64(backlog) {
		wg.Go(func() {
			if _, err := s.CloseOrder(ctx, 1<<40+i, seckill.OrderCancelled, 1); seckill.ErrorCode(err) == seckill.ENOTFOUND {
				missing.Add(1)
			}
		})
	}
	// Until the backlog is full, a call whose deadline ends waits in it
	// and may still be committed: probe with orders that do not exist.
	closeWithin := func(id, user int64) error {
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := s.CloseOrder(cctx, id, seckill.OrderCancelled, user)
		return err
	}
	for probe, deadline := int64(1<<41), time.Now().Add(30*time.Second); seckill.ErrorCode(closeWithin(probe, 1)) != seckill.EUNAVAILABLE; probe++ {
		if time.Now().After(deadline) {
			t.Fatal("the backlog never filled")
		}
	}
	last := adms[2]
	if err := closeWithin(last.OrderID, last.UserID); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Fatalf("with the backlog full: %v, want EUNAVAILABLE", err)
	}
	var status string
	if err := db.QueryRowContext(ctx, `SELECT status FROM voucher_order WHERE id = ?`, last.OrderID).Scan(&status); err != nil || status != "CREATED" {
		t.Fatalf("the refused call's order is %s (%v), want CREATED", status, err)
	}
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != "" {
			t.Errorf("a close that waited for the row: %s", code)
		}
	}
	if n := missing.Load(); n != backlog {
		t.Errorf("%d of %d calls for missing orders answered ENOTFOUND", n, backlog)
	}
	if res, err := s.CloseOrder(ctx, last.OrderID, seckill.OrderCancelled, last.UserID); err != nil || !res.Closed {
		t.Errorf("the refused call's order afterwards: %+v, %v", res, err)
	}
}

// countTriggered counts, from now on, the rows (level ROW) or statements
// (STATEMENT) that event (INSERT, UPDATE) touches in table, outside any
// transaction (a sequence), and returns a func that reads the count. It
// changes the schema: the test's database is not used again.
func countTriggered(t testing.TB, db *bun.DB, table, event, level string) func() int64 {
	t.Helper()
	seq := "count_" + strings.ToLower(table+"_"+event+"_"+level)
	for _, q := range []string{
		`CREATE SEQUENCE ` + seq,
		`CREATE FUNCTION ` + seq + `() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN PERFORM nextval('` + seq + `'); RETURN NULL; END $$`,
		`CREATE TRIGGER ` + seq + ` AFTER ` + event + ` ON ` + table + ` FOR EACH ` + level + ` EXECUTE FUNCTION ` + seq + `()`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	return func() int64 {
		var n int64
		if err := db.NewRaw(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM `+seq).Scan(t.Context(), &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// sold persists the orders of n buyers (users 1 to n) of campaign
// voucherID, in batches of 1,000, and returns their admissions.
func sold(tb testing.TB, s *store.Store, voucherID int64, n int) []seckill.Admission {
	tb.Helper()
	adms := make([]seckill.Admission, n)
	for i := range adms {
		adms[i] = adm(voucherID, int64(i+1), int64(i+1))
		adms[i].AdmittedAt = time.Now()
	}
	for chunk := range slices.Chunk(adms, 1000) {
		if _, err := s.PersistOrders(tb.Context(), chunk); err != nil {
			tb.Fatal(err)
		}
	}
	return adms
}

// BenchmarkCloseOrder cancels persisted orders of one campaign from 32
// goroutines per GOMAXPROCS at once, a storm of cancellations, while the
// same campaign's sale goes on: batches of 150 new orders persisted one
// after another, whose mean time it reports (persist-ms), as the storm
// holds the campaign's row.
func BenchmarkCloseOrder(b *testing.B) {
	db := storetest.NewDB(b)
	s := store.New(db)
	ctx := b.Context()
	v := storetest.CreateCampaign(b, db, int64(b.N)+1_000_000)
	adms := sold(b, s, v.ID, b.N)
	var next atomic.Int64
	stop := make(chan struct{})
	var persisted, batches atomic.Int64
	var sale sync.WaitGroup
	sale.Go(func() {
		seq := int64(b.N)
		for {
			select {
			case <-stop:
				return
			default:
			}
			batch := make([]seckill.Admission, 150)
			for i := range batch {
				seq++
				batch[i] = adm(v.ID, seq, seq)
				batch[i].AdmittedAt = time.Now()
			}
			start := time.Now()
			if _, err := s.PersistOrders(ctx, batch); err != nil {
				b.Error(err)
				return
			}
			persisted.Add(int64(time.Since(start)))
			batches.Add(1)
		}
	})
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a := adms[next.Add(1)-1]
			if res, err := s.CloseOrder(ctx, a.OrderID, seckill.OrderCancelled, a.UserID); err != nil || !res.Closed {
				b.Errorf("cancel %d: %+v, %v", a.OrderID, res, err)
				return
			}
		}
	})
	b.StopTimer()
	close(stop)
	sale.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cancels/s")
	if n := batches.Load(); n > 0 {
		b.ReportMetric(float64(persisted.Load())/float64(n)/1e6, "persist-ms")
	}
}
