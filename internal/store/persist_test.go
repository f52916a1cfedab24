package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/uptrace/bun"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

var admittedAt = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// adm is the admission of order seq of a campaign, by user.
func adm(voucherID, seq, user int64) seckill.Admission {
	return seckill.Admission{
		OrderID:    seckill.OrderID(voucherID, seq),
		VoucherID:  voucherID,
		UserID:     user,
		AdmittedAt: admittedAt.Add(time.Duration(seq) * time.Millisecond),
	}
}

func createdOutcome(a seckill.Admission) seckill.PersistOutcome {
	return seckill.PersistOutcome{Admission: a, Status: seckill.OrderCreated}
}

func failedOutcome(a seckill.Admission, reason string) seckill.PersistOutcome {
	return seckill.PersistOutcome{Admission: a, Status: seckill.OrderFailed, Reason: reason}
}

// ignoreTimes leaves CreatedAt out of comparisons; checkTimes checks it.
// ignoreTimes leaves out what differs between deliveries; TestPersistOrdersInserted
// checks Inserted.
var ignoreTimes = cmpopts.IgnoreFields(seckill.PersistOutcome{}, "CreatedAt", "PayBy", "Inserted")

func persist(t *testing.T, s *store.Store, adms ...seckill.Admission) []seckill.PersistOutcome {
	t.Helper()
	outs, err := s.PersistOrders(t.Context(), adms)
	if err != nil {
		t.Fatalf("PersistOrders: %v", err)
	}
	for _, o := range outs {
		if o.CreatedAt.IsZero() {
			t.Errorf("outcome of order %d has no time", o.Admission.OrderID)
		}
	}
	return outs
}

func checkOutcomes(t *testing.T, want, got []seckill.PersistOutcome) {
	t.Helper()
	if diff := cmp.Diff(want, got, ignoreTimes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

// campaignState is what Postgres holds for a campaign.
type campaignState struct {
	Stock    int64
	Orders   map[int64]int64  // order id -> user id
	Failures map[int64]string // order id -> reason
}

func stateOf(t *testing.T, db *bun.DB, voucherID int64) campaignState {
	t.Helper()
	ctx := t.Context()
	var st campaignState
	if err := db.NewSelect().Table("seckill_campaign").Column("stock").Where("voucher_id = ?", voucherID).Scan(ctx, &st.Stock); err != nil {
		t.Fatalf("stock of %d: %v", voucherID, err)
	}
	st.Orders = columnByID[int64](t, db, "voucher_order", "user_id", voucherID)
	st.Failures = columnByID[string](t, db, "order_failure", "reason", voucherID)
	return st
}

// columnByID reads one column of a campaign's rows in table, by row id.
func columnByID[V any](t *testing.T, db *bun.DB, table, column string, voucherID int64) map[int64]V {
	t.Helper()
	var ids []int64
	var values []V
	if err := db.NewSelect().Table(table).Column("id", column).Where("voucher_id = ?", voucherID).Scan(t.Context(), &ids, &values); err != nil {
		t.Fatalf("%s of %d: %v", table, voucherID, err)
	}
	m := make(map[int64]V, len(ids))
	for i, id := range ids {
		m[id] = values[i]
	}
	return m
}

func checkState(t *testing.T, db *bun.DB, voucherID int64, want campaignState) {
	t.Helper()
	if want.Orders == nil {
		want.Orders = map[int64]int64{}
	}
	if want.Failures == nil {
		want.Failures = map[int64]string{}
	}
	if diff := cmp.Diff(want, stateOf(t, db, voucherID)); diff != "" {
		t.Errorf("campaign %d in Postgres (-want +got):\n%s", voucherID, diff)
	}
}

func TestPersistOrders(t *testing.T) {
	db, s := newStore(t)
	v := storetest.CreateCampaign(t, db, 10)
	a, b, c := adm(v.ID, 1, 101), adm(v.ID, 2, 102), adm(v.ID, 3, 103)

	t.Run("batch", func(t *testing.T) {
		got := persist(t, s, c, a, b)
		checkOutcomes(t, []seckill.PersistOutcome{createdOutcome(c), createdOutcome(a), createdOutcome(b)}, got)
		checkState(t, db, v.ID, campaignState{Stock: 7, Orders: map[int64]int64{a.OrderID: 101, b.OrderID: 102, c.OrderID: 103}})
	})

	t.Run("same batch again", func(t *testing.T) {
		first, err := s.Order(t.Context(), a.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		got := persist(t, s, c, a, b)
		checkOutcomes(t, []seckill.PersistOutcome{createdOutcome(c), createdOutcome(a), createdOutcome(b)}, got)
		if !got[1].CreatedAt.Equal(first.CreatedAt) {
			t.Errorf("re-delivered order created at %v, first at %v", got[1].CreatedAt, first.CreatedAt)
		}
		checkState(t, db, v.ID, campaignState{Stock: 7, Orders: map[int64]int64{a.OrderID: 101, b.OrderID: 102, c.OrderID: 103}})
	})

	t.Run("duplicates inside a batch", func(t *testing.T) {
		d, e := adm(v.ID, 4, 104), adm(v.ID, 5, 105)
		got := persist(t, s, d, e, d, a, d)
		checkOutcomes(t, []seckill.PersistOutcome{
			createdOutcome(d), createdOutcome(e), createdOutcome(d), createdOutcome(a), createdOutcome(d),
		}, got)
		if !got[0].CreatedAt.Equal(got[2].CreatedAt) || !got[0].CreatedAt.Equal(got[4].CreatedAt) {
			t.Errorf("one order, three times: %v %v %v", got[0].CreatedAt, got[2].CreatedAt, got[4].CreatedAt)
		}
		checkState(t, db, v.ID, campaignState{Stock: 5, Orders: map[int64]int64{
			a.OrderID: 101, b.OrderID: 102, c.OrderID: 103, d.OrderID: 104, e.OrderID: 105,
		}})
	})

	t.Run("empty", func(t *testing.T) {
		got, err := s.PersistOrders(t.Context(), nil)
		if err != nil || len(got) != 0 {
			t.Errorf("PersistOrders(nil) = %v, %v", got, err)
		}
	})
}

// TestPersistOrdersInserted: only the call that inserts a row says so, so
// per-order figures (the ACCEPTED-to-CREATED lag) are counted once.
func TestPersistOrdersInserted(t *testing.T) {
	db, s := newStore(t)
	v := storetest.CreateCampaign(t, db, 10)
	a, b := adm(v.ID, 1, 101), adm(v.ID, 2, 102)
	first := persist(t, s, a, a)
	if !first[0].Inserted || !first[1].Inserted {
		t.Fatalf("first delivery: %+v", first)
	}
	again := persist(t, s, a, b)
	if again[0].Inserted || !again[1].Inserted {
		t.Fatalf("second delivery: %+v, want only the new order inserted", again)
	}
}

func TestPersistOrdersUserHoldsOrder(t *testing.T) {
	db, s := newStore(t)
	v := storetest.CreateCampaign(t, db, 10)
	first, second := adm(v.ID, 1, 7), adm(v.ID, 2, 7)
	persist(t, s, first)

	t.Run("in a later batch", func(t *testing.T) {
		other := adm(v.ID, 3, 8)
		got := persist(t, s, second, other)
		checkOutcomes(t, []seckill.PersistOutcome{failedOutcome(second, store.ReasonUserHasOrder), createdOutcome(other)}, got)
		checkState(t, db, v.ID, campaignState{
			Stock:    8,
			Orders:   map[int64]int64{first.OrderID: 7, other.OrderID: 8},
			Failures: map[int64]string{second.OrderID: store.ReasonUserHasOrder},
		})
	})

	t.Run("re-delivered", func(t *testing.T) {
		before, err := s.Order(t.Context(), second.OrderID)
		if err != nil {
			t.Fatal(err)
		}
		got := persist(t, s, second, first)
		checkOutcomes(t, []seckill.PersistOutcome{failedOutcome(second, store.ReasonUserHasOrder), createdOutcome(first)}, got)
		if !got[0].CreatedAt.Equal(before.CreatedAt) {
			t.Errorf("failure time %v, recorded %v", got[0].CreatedAt, before.CreatedAt)
		}
		if st := stateOf(t, db, v.ID); st.Stock != 8 || len(st.Orders) != 2 || len(st.Failures) != 1 {
			t.Errorf("state changed: %+v", st)
		}
	})

	t.Run("in the same batch", func(t *testing.T) {
		x, y := adm(v.ID, 10, 9), adm(v.ID, 11, 9)
		got := persist(t, s, y, x)
		checkOutcomes(t, []seckill.PersistOutcome{failedOutcome(y, store.ReasonUserHasOrder), createdOutcome(x)}, got)
		st := stateOf(t, db, v.ID)
		if st.Stock != 7 || st.Orders[x.OrderID] != 9 || st.Failures[y.OrderID] != store.ReasonUserHasOrder {
			t.Errorf("state %+v", st)
		}
	})
}

func TestPersistOrdersNoStock(t *testing.T) {
	db, s := newStore(t)
	scarce := storetest.CreateCampaign(t, db, 3)
	plenty := storetest.CreateCampaign(t, db, 100)

	var want []seckill.PersistOutcome
	var adms []seckill.Admission
	for seq := int64(1); seq <= 5; seq++ {
		a, p := adm(scarce.ID, seq, seq), adm(plenty.ID, seq, seq)
		adms = append(adms, a, p)
		if seq <= 3 {
			want = append(want, createdOutcome(a), createdOutcome(p))
		} else {
			want = append(want, failedOutcome(a, store.ReasonNoStock), createdOutcome(p))
		}
	}
	checkOutcomes(t, want, persist(t, s, adms...))
	checkState(t, db, scarce.ID, campaignState{
		Stock:    0,
		Orders:   map[int64]int64{adms[0].OrderID: 1, adms[2].OrderID: 2, adms[4].OrderID: 3},
		Failures: map[int64]string{adms[6].OrderID: store.ReasonNoStock, adms[8].OrderID: store.ReasonNoStock},
	})
	if st := stateOf(t, db, plenty.ID); st.Stock != 95 || len(st.Orders) != 5 || len(st.Failures) != 0 {
		t.Errorf("plenty: %+v", st)
	}

	// Re-delivered, the batch gets the same answers and changes nothing.
	checkOutcomes(t, want, persist(t, s, adms...))
	if st := stateOf(t, db, scarce.ID); st.Stock != 0 || len(st.Orders) != 3 || len(st.Failures) != 2 {
		t.Errorf("scarce after re-delivery: %+v", st)
	}
}

// A failed order stays failed even once it could be written, and its user,
// whose slot the failure freed, may buy again.
func TestPersistOrdersFailedStaysFailed(t *testing.T) {
	db, s := newStore(t)
	v := storetest.CreateCampaign(t, db, 1)
	taken, lost := adm(v.ID, 1, 1), adm(v.ID, 2, 2)
	persist(t, s, taken, lost)

	// An operator adds stock; the lost admission arrives again together
	// with the same user's new purchase.
	if _, err := db.ExecContext(t.Context(), "UPDATE seckill_campaign SET initial_stock = 3, stock = 2 WHERE voucher_id = ?", v.ID); err != nil {
		t.Fatal(err)
	}
	again := adm(v.ID, 3, 2)
	got := persist(t, s, lost, again)
	checkOutcomes(t, []seckill.PersistOutcome{failedOutcome(lost, store.ReasonNoStock), createdOutcome(again)}, got)
	checkState(t, db, v.ID, campaignState{
		Stock:    1,
		Orders:   map[int64]int64{taken.OrderID: 1, again.OrderID: 2},
		Failures: map[int64]string{lost.OrderID: store.ReasonNoStock},
	})
}

func TestPersistOrdersMissingCampaign(t *testing.T) {
	db, s := newStore(t)
	v := storetest.CreateCampaign(t, db, 10)
	normal := &seckill.Voucher{ShopID: 1, Title: "plain", PayValue: 1, ActualValue: 1, Type: seckill.VoucherNormal}
	if err := s.CreateVoucher(t.Context(), normal); err != nil {
		t.Fatal(err)
	}
	ok := adm(v.ID, 1, 1)
	noCampaign := adm(normal.ID, 1, 1)
	noVoucher := adm(v.ID+1000, 1, 1)

	want := []seckill.PersistOutcome{
		createdOutcome(ok),
		failedOutcome(noCampaign, store.ReasonNoCampaign),
		failedOutcome(noVoucher, store.ReasonNoCampaign),
	}
	for i := range 2 { // the second time is a re-delivery
		t.Run(fmt.Sprint("delivery ", i+1), func(t *testing.T) {
			checkOutcomes(t, want, persist(t, s, ok, noCampaign, noVoucher))
			checkState(t, db, v.ID, campaignState{Stock: 9, Orders: map[int64]int64{ok.OrderID: 1}})
			// A voucher without a campaign has a failure on record; a
			// voucher that does not exist cannot have one (the foreign key).
			for _, tt := range []struct {
				id   int64
				want string
			}{{noCampaign.OrderID, ""}, {noVoucher.OrderID, seckill.ENOTFOUND}} {
				o, err := s.Order(t.Context(), tt.id)
				if code := seckill.ErrorCode(err); code != tt.want {
					t.Errorf("Order(%d): code %q (err %v), want %q", tt.id, code, err, tt.want)
				} else if err == nil && (o.Status != seckill.OrderFailed || o.FailureReason != store.ReasonNoCampaign) {
					t.Errorf("Order(%d) = %+v", tt.id, o)
				}
			}
		})
	}
}

func TestPersistOrdersInvalid(t *testing.T) {
	db, s := newStore(t)
	v := storetest.CreateCampaign(t, db, 10)
	ok := adm(v.ID, 1, 1)
	noUser := adm(v.ID, 2, 0)
	wrongVoucher := adm(v.ID, 3, 3)
	wrongVoucher.OrderID = seckill.OrderID(v.ID+1, 3)
	noSeq := adm(v.ID, 0, 4)
	got := persist(t, s, noUser, ok, wrongVoucher, noSeq)
	checkOutcomes(t, []seckill.PersistOutcome{
		failedOutcome(noUser, store.ReasonInvalid),
		createdOutcome(ok),
		failedOutcome(wrongVoucher, store.ReasonInvalid),
		failedOutcome(noSeq, store.ReasonInvalid),
	}, got)
	checkState(t, db, v.ID, campaignState{Stock: 9, Orders: map[int64]int64{ok.OrderID: 1}})
}

// Workers persist overlapping batches at once, each with duplicates and in
// its own order: every order is written once and takes one unit.
func TestPersistOrdersConcurrent(t *testing.T) {
	db, s := newStore(t)
	const perCampaign, workers, batches = 300, 64, 4
	v1 := storetest.CreateCampaign(t, db, 1000)
	v2 := storetest.CreateCampaign(t, db, 1000)
	var all []seckill.Admission
	for seq := int64(1); seq <= perCampaign; seq++ {
		all = append(all, adm(v1.ID, seq, seq), adm(v2.ID, seq, 10_000+seq))
	}

	var wg sync.WaitGroup
	errs := make(chan error, workers*batches)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for range batches {
				n := 1 + rng.IntN(150)
				batch := make([]seckill.Admission, n)
				for i := range batch {
					batch[i] = all[rng.IntN(len(all))]
				}
				outs, err := s.PersistOrders(t.Context(), batch)
				if err != nil {
					errs <- err
					return
				}
				for i, o := range outs {
					if o.Admission != batch[i] || o.Status != seckill.OrderCreated {
						errs <- fmt.Errorf("outcome %d of %+v: %+v", i, batch[i], o)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// One last pass writes what no worker drew, and must change nothing
	// else.
	for _, o := range persist(t, s, all...) {
		if o.Status != seckill.OrderCreated {
			t.Errorf("final pass: %+v", o)
		}
	}
	for _, v := range []*seckill.Voucher{v1, v2} {
		st := stateOf(t, db, v.ID)
		if st.Stock != 1000-perCampaign || len(st.Orders) != perCampaign || len(st.Failures) != 0 {
			t.Errorf("campaign %d: stock %d, %d orders, %d failures; want stock %d, %d orders",
				v.ID, st.Stock, len(st.Orders), len(st.Failures), 1000-perCampaign, perCampaign)
		}
	}
}

// With fewer units in Postgres than admissions, concurrent workers write
// exactly as many orders as there are units; every other admission fails,
// and all workers agree on each order's fate.
func TestPersistOrdersConcurrentScarce(t *testing.T) {
	db, s := newStore(t)
	const stock, admissions, workers = 100, 300, 50
	v := storetest.CreateCampaign(t, db, stock)
	var all []seckill.Admission
	for seq := int64(1); seq <= admissions; seq++ {
		all = append(all, adm(v.ID, seq, seq))
	}

	var (
		mu     sync.Mutex
		status = map[int64]seckill.OrderStatus{}
		wg     sync.WaitGroup
	)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			start := rng.IntN(admissions)
			batch := slices.Clone(all[start:min(start+120, admissions)])
			rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			outs, err := s.PersistOrders(t.Context(), batch)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, o := range outs {
				id := o.Admission.OrderID
				if prev, ok := status[id]; ok && prev != o.Status {
					errs <- fmt.Errorf("order %d reported %s and %s", id, prev, o.Status)
				}
				status[id] = o.Status
				if o.Status == seckill.OrderFailed && o.Reason != store.ReasonNoStock {
					errs <- fmt.Errorf("order %d failed: %q", id, o.Reason)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	persist(t, s, all...) // decide what no worker drew

	st := stateOf(t, db, v.ID)
	if st.Stock != 0 || len(st.Orders) != stock || len(st.Failures) != admissions-stock {
		t.Errorf("stock %d, %d orders, %d failures; want 0, %d, %d", st.Stock, len(st.Orders), len(st.Failures), stock, admissions-stock)
	}
	for id := range st.Orders {
		if _, ok := st.Failures[id]; ok {
			t.Errorf("order %d is both created and failed", id)
		}
		if s, ok := status[id]; ok && s != seckill.OrderCreated {
			t.Errorf("order %d created but reported %s", id, s)
		}
	}
	for id := range st.Failures {
		if s, ok := status[id]; ok && s != seckill.OrderFailed {
			t.Errorf("order %d failed but reported %s", id, s)
		}
	}
}

func BenchmarkPersistOrders(b *testing.B) {
	db := storetest.NewDB(b)
	s := store.New(db)
	const batchSize = 100
	v := storetest.CreateCampaign(b, db, int64(b.N*batchSize+1))
	batch := make([]seckill.Admission, batchSize)
	seq := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range batch {
			seq++
			batch[i] = adm(v.ID, seq, seq)
		}
		if _, err := s.PersistOrders(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "orders/s")
}

// TestPersistConflictingID: an id that Postgres holds for another buyer is
// never acknowledged as this admission's: it fails with FailureConflict (in
// a batch and alone), the other buyer's order stays, and no unit is taken.
func TestPersistConflictingID(t *testing.T) {
	db, s := newStore(t)
	v := storetest.CreateCampaign(t, db, 10)
	first := adm(v.ID, 1, 100)
	persist(t, s, first)

	for name, batch := range map[string][]seckill.Admission{
		"alone":    {adm(v.ID, 1, 200)},
		"in batch": {adm(v.ID, 1, 300), adm(v.ID, 2, 301)},
	} {
		t.Run(name, func(t *testing.T) {
			outs := persist(t, s, batch...)
			if outs[0].Status != seckill.OrderFailed || outs[0].Reason != seckill.FailureConflict {
				t.Errorf("conflicting admission: %+v, want FAILED %q", outs[0], seckill.FailureConflict)
			}
			if got := stateOf(t, db, v.ID).Orders[first.OrderID]; got != first.UserID {
				t.Errorf("order %d belongs to %d now, want %d", first.OrderID, got, first.UserID)
			}
		})
	}
	if got := stateOf(t, db, v.ID).Stock; got != 8 {
		t.Errorf("stock = %d, want 8 (orders 1 and 2)", got)
	}
	// The same buyer's re-delivery is still the same order.
	outs := persist(t, s, first)
	if outs[0].Status != seckill.OrderCreated {
		t.Errorf("re-delivery: %+v, want CREATED", outs[0])
	}
}

// TestPersistAfterConnectionsDropped: the persistence statements (the
// INSERTs, the failure read, the stock take) are prepared once per
// connection; when Postgres ends every connection (a restart, a
// failover), batches go on through new ones, which prepare them again, and
// every order is written once.
func TestPersistAfterConnectionsDropped(t *testing.T) {
	db, s := newStore(t)
	v := storetest.CreateCampaign(t, db, 100)
	// Several batches at once, so that the statements are prepared on
	// several connections of the pool.
	var wg sync.WaitGroup
	for b := range 4 {
		wg.Go(func() {
			if _, err := s.PersistOrders(t.Context(), []seckill.Admission{adm(v.ID, int64(b+1), int64(b+1))}); err != nil {
				t.Errorf("PersistOrders: %v", err)
			}
		})
	}
	wg.Wait()

	_, err := db.ExecContext(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = db.ExecContext(t.Context(), `SELECT pg_terminate_backend(pg_backend_pid())`)

	// A batch may fail on a connection the pool did not know was gone
	// (an error means: retry); it must go through again, on new ones.
	batch := []seckill.Admission{adm(v.ID, 5, 5), adm(v.ID, 6, 6), adm(v.ID, 7, 7)}
	var outs []seckill.PersistOutcome
	for attempt := 0; ; attempt++ {
		if outs, err = s.PersistOrders(t.Context(), batch); err == nil {
			break
		} else if attempt == 20 {
			t.Fatalf("PersistOrders after the connections were dropped: %v", err)
		}
	}
	for _, o := range outs {
		if o.Status != seckill.OrderCreated {
			t.Errorf("order %d: %+v, want CREATED", o.Admission.OrderID, o)
		}
	}
	st := stateOf(t, db, v.ID)
	if len(st.Orders) != 7 || st.Stock != 93 {
		t.Errorf("%d orders, stock %d; want 7 and 93", len(st.Orders), st.Stock)
	}
}
