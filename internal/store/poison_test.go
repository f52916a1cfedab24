package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/batch"
	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// One poison member among many good ones, per batcher of the store: the
// good ones get their own answers, the poison one its own error.

// holdOrders locks the orders ids in a transaction of its own until the
// returned func is called (or the test ends), so that a batch that needs
// one of them waits.
func holdOrders(t *testing.T, db *bun.DB, ids ...int64) (release func()) {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.NewRaw(`SELECT id FROM voucher_order WHERE id IN (?) FOR UPDATE`, bun.In(ids)).Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback() }) }
	t.Cleanup(release)
	return release
}

// waitFor polls cond until it holds, or fails the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// lockWaiters returns how many of the database's sessions wait for a lock.
func lockWaiters(t *testing.T, db *bun.DB) int {
	var n int
	err := db.NewRaw(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(t.Context(), &n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// inOneBatch runs the first of calls alone, then the second, each blocked
// on the orders held, then the others at once, so that they wait together
// for the same batch (waiting counts them), and lets them go.
func inOneBatch(t *testing.T, db *bun.DB, held []int64, waiting func() int, calls []func()) {
	t.Helper()
	release := holdOrders(t, db, held...)
	var wg sync.WaitGroup
	for i, call := range calls[:2] {
		wg.Go(call)
		waitFor(t, fmt.Sprintf("commit %d to wait for the held orders", i+1), func() bool { return lockWaiters(t, db) >= i+1 })
	}
	for _, call := range calls[2:] {
		wg.Go(call)
	}
	waitFor(t, "the calls to wait for one batch", func() bool { return waiting() >= len(calls)-2 })
	release()
	wg.Wait()
}

// TestPoisonSubject: a subject Postgres cannot store (a NUL byte, text that
// is not UTF-8, too long) is EINVALID, never an internal error; and among
// 30 new subjects looked up through one group commit that isolates
// EINVALID (as internal/auth's does), only the poison one fails.
func TestPoisonSubject(t *testing.T) {
	_, s := newStore(t)
	ctx := t.Context()
	const iss = "https://idp.example"
	for _, bad := range []seckill.Subject{
		{Issuer: iss, Subject: "user\x00evil"},
		{Issuer: iss, Subject: "\xff\xfe"},
		{Issuer: iss, Subject: ""},
		{Issuer: iss, Subject: strings.Repeat("é", 1025)},
		{Issuer: strings.Repeat("i", 1025), Subject: "fine"},
	} {
		subjects := []seckill.Subject{{Issuer: iss, Subject: "good-1"}, bad, {Issuer: iss, Subject: "good-2"}}
		if _, err := s.UserIDsForSubjects(ctx, subjects); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("subjects with %q of %q: %v, want EINVALID", bad.Subject, bad.Issuer, err)
		}
	}

	lookup := func(ctx context.Context, items []seckill.Subject, out []int64) error {
		ids, err := s.UserIDsForSubjects(ctx, items)
		copy(out, ids)
		return err
	}
	gate, entered := make(chan struct{}), make(chan struct{})
	held := func(ctx context.Context, items []seckill.Subject, out []int64) error {
		if items[0].Subject == "holder" {
			close(entered)
			<-gate
		}
		return lookup(ctx, items, out)
	}
	c := batch.New(held, batch.Options{MaxBatch: 500, Flushes: 1, Backlog: 1000,
		Isolate: func(err error) bool { return seckill.ErrorCode(err) == seckill.EINVALID }})
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := c.Do(ctx, seckill.Subject{Issuer: iss, Subject: "holder"}); err != nil {
			t.Error(err)
		}
	})
	<-entered // the holder's lookup holds the only slot
	const buyers = 30
	ids := make([]int64, buyers)
	errs := make([]error, buyers)
	var poisonErr error
	for i := range buyers {
		wg.Go(func() {
			got, err := c.Do(ctx, seckill.Subject{Issuer: iss, Subject: fmt.Sprintf("buyer-%d", i)})
			if err == nil {
				ids[i] = got[0]
			}
			errs[i] = err
		})
		if i == buyers/2 {
			wg.Go(func() { _, poisonErr = c.Do(ctx, seckill.Subject{Issuer: iss, Subject: "buyer\x00"}) })
		}
	}
	waitFor(t, "the buyers to share a batch", func() bool { return c.Waiting() == buyers+1 })
	close(gate)
	wg.Wait()
	if seckill.ErrorCode(poisonErr) != seckill.EINVALID {
		t.Errorf("the poison subject: %v, want EINVALID", poisonErr)
	}
	seen := map[int64]int{}
	for i, err := range errs {
		if err != nil {
			t.Errorf("buyer %d: %v", i, err)
			continue
		}
		if j, ok := seen[ids[i]]; ok || !seckill.IsExternalUserID(ids[i]) {
			t.Errorf("buyer %d got id %d (buyer %d has it: %v)", i, ids[i], j, ok)
		}
		seen[ids[i]] = i
		// Its own: the same id when asked again.
		if again, err := s.UserIDForSubject(ctx, iss, fmt.Sprintf("buyer-%d", i)); err != nil || again != ids[i] {
			t.Errorf("buyer %d asked again: %d, %v; want %d", i, again, err, ids[i])
		}
	}
}

// TestPoisonPaymentEvent: payment events of 100 orders are delivered at
// once, in one batch, beside one event whose id is longer than
// payment_event's CHECK (for the payment of a 101st order). Through
// ApplyPaymentEvent the poison event is EINVALID before the batch; sent
// into the batch itself (as an event only Postgres could refuse), the
// batch meets the CHECK and each event goes alone, so only the poison
// one's caller gets an error. Either way the 100 orders are PAID and the
// poison one's is not.
func TestPoisonPaymentEvent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		apply func(s *store.Store, ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error)
		want  func(err error) bool
	}{
		{"validated", func(s *store.Store, ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error) {
			return s.ApplyPaymentEvent(ctx, ev)
		}, func(err error) bool { return seckill.ErrorCode(err) == seckill.EINVALID }},
		{"constraint", func(s *store.Store, ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error) {
			res, done, err := store.ApplyPaymentBatched(s, ctx, ev)
			if err == nil && !done {
				return s.ApplyPaymentEvent(ctx, ev)
			}
			return res, err
		}, func(err error) bool { return err != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, s := newStore(t)
			ctx := t.Context()
			const orders = 100
			v := storetest.CreateCampaign(t, db, orders+3)
			adms := sold(t, s, v.ID, orders+3)
			events := make([]seckill.PaymentEvent, len(adms))
			for i, a := range adms {
				p, err := s.CreatePayment(ctx, a.OrderID, 0, "CNY", paymentID(int64(i+1)))
				if err != nil {
					t.Fatal(err)
				}
				events[i] = seckill.PaymentEvent{ID: "evt_" + p.ID, Type: seckill.EventPaymentSucceeded, PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}
			}
			poison := orders + 2
			// Longer than payment_event's CHECK allows. (The driver drops a
			// NUL byte and turns bytes that are not UTF-8 into U+FFFD
			// silently, so text never fails a statement: it becomes
			// another text, which only the validation stops.)
			events[poison].ID = "evt_" + strings.Repeat("x", seckill.MaxEventIDLen)
			results := make([]seckill.PaymentResult, len(events))
			errs := make([]error, len(events))
			calls := make([]func(), 0, len(events))
			for i, ev := range events {
				calls = append(calls, func() { results[i], errs[i] = tc.apply(s, ctx, ev) })
			}
			// The first two (orders+0, orders+1) wait on their held orders:
			// the rest gather behind them.
			calls[0], calls[orders] = calls[orders], calls[0]
			calls[1], calls[orders+1] = calls[orders+1], calls[1]
			if tc.name == "validated" {
				// The poison one never joins a batch.
				inOneBatch(t, db, []int64{adms[orders].OrderID, adms[orders+1].OrderID},
					func() int { return store.BatchWaiting(s, "payments") + 1 }, calls)
			} else {
				inOneBatch(t, db, []int64{adms[orders].OrderID, adms[orders+1].OrderID},
					func() int { return store.BatchWaiting(s, "payments") }, calls)
			}
			for i, a := range adms {
				o, err := s.Order(ctx, a.OrderID)
				if err != nil {
					t.Fatal(err)
				}
				if i == poison {
					if !tc.want(errs[i]) {
						t.Errorf("the poison event: %v", errs[i])
					}
					if o.Status != seckill.OrderCreated {
						t.Errorf("the poison event's order is %s, want CREATED", o.Status)
					}
					continue
				}
				if errs[i] != nil {
					t.Errorf("event %d: %v", i, errs[i])
					continue
				}
				if results[i].Outcome != seckill.AppliedPaid || results[i].Order == nil || results[i].Order.ID != a.OrderID {
					t.Errorf("event %d: %+v, want its own order PAID", i, results[i])
				}
				if o.Status != seckill.OrderPaid {
					t.Errorf("order %d is %s, want PAID", i, o.Status)
				}
			}
		})
	}
}

// TestPoisonCloseOrder: 100 orders of one campaign are cancelled in one
// batch beside the order of a campaign whose stock an operator's repair
// left at its initial stock, so that its unit cannot come back
// (seckill_campaign_stock_initial_check). The batch is split: the 100 are
// CANCELLED with their own results, the poison order's caller gets the
// error and its order stays CREATED.
func TestPoisonCloseOrder(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	const orders = 100
	good := storetest.CreateCampaign(t, db, orders+2)
	bad := storetest.CreateCampaign(t, db, 5)
	adms := sold(t, s, good.ID, orders+2)
	poison := adm(bad.ID, 1, 1)
	poison.AdmittedAt = time.Now()
	if _, err := s.PersistOrders(ctx, []seckill.Admission{poison}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.NewRaw(`UPDATE seckill_campaign SET stock = initial_stock WHERE voucher_id = ?`, bad.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	all := append(adms, poison)
	results := make([]seckill.CloseResult, len(all))
	errs := make([]error, len(all))
	calls := make([]func(), len(all))
	for i, a := range all {
		calls[i] = func() { results[i], errs[i] = s.CloseOrder(ctx, a.OrderID, seckill.OrderCancelled, a.UserID) }
	}
	// The last good two wait on their held orders, the rest gather.
	calls[0], calls[orders] = calls[orders], calls[0]
	calls[1], calls[orders+1] = calls[orders+1], calls[1]
	inOneBatch(t, db, []int64{adms[orders].OrderID, adms[orders+1].OrderID},
		func() int { return store.BatchWaiting(s, "closes") }, calls)
	for i, a := range all {
		o, err := s.Order(ctx, a.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		if a == poison {
			if errs[i] == nil || results[i].Closed {
				t.Errorf("the poison order: %+v, %v; want an error", results[i], errs[i])
			}
			if o.Status != seckill.OrderCreated {
				t.Errorf("the poison order is %s, want CREATED", o.Status)
			}
			continue
		}
		if errs[i] != nil || !results[i].Closed || results[i].Order == nil || results[i].Order.ID != a.OrderID {
			t.Errorf("order %d: %+v, %v; want its own order closed", i, results[i], errs[i])
		}
		if o.Status != seckill.OrderCancelled {
			t.Errorf("order %d is %s, want CANCELLED", i, o.Status)
		}
	}
	var stock int64
	if err := db.NewRaw(`SELECT stock FROM seckill_campaign WHERE voucher_id = ?`, good.ID).Scan(ctx, &stock); err != nil {
		t.Fatal(err)
	}
	if stock != orders+2 {
		t.Errorf("the good campaign's stock is %d, want %d: every unit back once", stock, orders+2)
	}
}

// TestUnitsReturnedTakesAnyIDs: UnitsReturned's batch holds ints and sets
// one flag guarded by the order's status, so no member can fail it: ids
// that name no order (0, negative, unknown) beside closed orders change
// nothing and fail nothing.
func TestUnitsReturnedTakesAnyIDs(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 50)
	adms := sold(t, s, v.ID, 50)
	ids := []int64{0, -5, 1 << 62}
	for _, a := range adms {
		if _, err := s.CloseOrder(ctx, a.OrderID, seckill.OrderCancelled, a.UserID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.OrderID)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if err := s.UnitsReturned(ctx, []int64{id}); err != nil {
				t.Errorf("UnitsReturned(%d): %v", id, err)
			}
		})
	}
	wg.Wait()
	if left, err := s.Unreturned(ctx, 100); err != nil || len(left) != 0 {
		t.Errorf("Unreturned: %v, %v; want none", left, err)
	}
}

// TestPoisonAdmission: a batch of 100 admissions with one whose time
// Postgres cannot hold (Go's year 0, which timestamptz refuses) decides the
// 100 CREATED and the poison one FAILED (ReasonInvalid): validated before
// the batch through PersistOrders; found by splitting the batch when it
// reaches the statements. Nothing is left for a retry to fail on again.
func TestPoisonAdmission(t *testing.T) {
	for _, checked := range []bool{true, false} {
		t.Run(fmt.Sprintf("validated=%v", checked), func(t *testing.T) {
			db, s := newStore(t)
			ctx := t.Context()
			const n = 101
			v := storetest.CreateCampaign(t, db, n)
			adms := make([]seckill.Admission, n)
			for i := range adms {
				adms[i] = adm(v.ID, int64(i+1), int64(i+1))
			}
			const poison = 57
			adms[poison].AdmittedAt = time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC)
			got := map[int64][2]string{}
			if checked {
				out, err := s.PersistOrders(ctx, adms)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range out {
					got[o.Admission.OrderID] = [2]string{string(o.Status), o.Reason}
				}
			} else {
				var err error
				if got, err = store.PersistUnchecked(s, ctx, adms); err != nil {
					t.Fatal(err)
				}
			}
			for i, a := range adms {
				want := [2]string{string(seckill.OrderCreated), ""}
				if i == poison {
					want = [2]string{string(seckill.OrderFailed), store.ReasonInvalid}
				}
				if got[a.OrderID] != want {
					t.Errorf("admission %d: %v, want %v", i, got[a.OrderID], want)
				}
				o, err := s.Order(ctx, a.OrderID)
				switch {
				case i == poison && seckill.ErrorCode(err) != seckill.ENOTFOUND:
					t.Errorf("the poison order: %+v, %v; want none written", o, err)
				case i != poison && (err != nil || o.Status != seckill.OrderCreated):
					t.Errorf("order %d: %+v, %v; want CREATED", i, o, err)
				}
			}
			var stock int64
			if err := db.NewRaw(`SELECT stock FROM seckill_campaign WHERE voucher_id = ?`, v.ID).Scan(ctx, &stock); err != nil {
				t.Fatal(err)
			}
			if stock != 1 {
				t.Errorf("stock %d, want 1: one unit taken per order written", stock)
			}
		})
	}
}

// TestPoisonExpireDue: 100 due orders of one campaign beside a due order
// of a campaign whose stock an operator's repair left at its initial stock
// (its unit cannot come back: seckill_campaign_stock_initial_check), the
// oldest, so that every sweep takes it. The 100 expire; the poison order
// stays CREATED, and the sweep does not fail.
func TestPoisonExpireDue(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	const orders = 100
	good := storetest.CreateCampaign(t, db, orders)
	bad := storetest.CreateCampaign(t, db, 5)
	adms := sold(t, s, good.ID, orders)
	poison := adm(bad.ID, 1, 1)
	poison.AdmittedAt = time.Now()
	if _, err := s.PersistOrders(ctx, []seckill.Admission{poison}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE seckill_campaign SET stock = initial_stock WHERE voucher_id = ?`,
		`UPDATE voucher_order SET pay_by = now() - interval '1 hour' WHERE voucher_id = ?`,
	} {
		if _, err := db.NewRaw(q, bad.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.NewRaw(`UPDATE voucher_order SET pay_by = now() - interval '1 second' WHERE voucher_id = ?`, good.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	expired, err := s.ExpireDue(ctx, 1000)
	if err != nil {
		t.Fatalf("ExpireDue: %v", err)
	}
	if len(expired) != orders {
		t.Errorf("%d orders expired, want %d", len(expired), orders)
	}
	for _, e := range expired {
		if e.Return.OrderID == poison.OrderID {
			t.Errorf("the poison order expired")
		}
	}
	for i, a := range append(adms, poison) {
		o, err := s.Order(ctx, a.OrderID)
		switch {
		case err != nil:
			t.Fatal(err)
		case a == poison && o.Status != seckill.OrderCreated:
			t.Errorf("the poison order is %s, want CREATED", o.Status)
		case a != poison && o.Status != seckill.OrderExpired:
			t.Errorf("order %d is %s, want EXPIRED", i, o.Status)
		}
	}
	// The next sweep finds only the poison order, and still does not fail.
	if expired, err := s.ExpireDue(ctx, 1000); err != nil || len(expired) != 0 {
		t.Errorf("the next sweep: %d expired, %v; want none, no error", len(expired), err)
	}
}
