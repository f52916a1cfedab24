package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

var ignoreOrderTimes = cmpopts.IgnoreFields(seckill.Order{}, "CreatedAt", "PayBy", "Amount") // life_test.go checks the last two

func TestOrders(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v1 := storetest.CreateCampaign(t, db, 1)
	v2 := storetest.CreateCampaign(t, db, 5)

	const user = 42
	bought := adm(v1.ID, 1, user)
	lost := adm(v1.ID, 2, 43) // no stock left for it
	second := adm(v2.ID, 3, user)
	holds := adm(v2.ID, 4, user) // the user already holds second
	outs := persist(t, s, bought, lost, second, holds)

	created := func(a seckill.Admission) *seckill.Order {
		return &seckill.Order{ID: a.OrderID, VoucherID: a.VoucherID, UserID: a.UserID, Status: seckill.OrderCreated}
	}
	failed := func(a seckill.Admission, reason string) *seckill.Order {
		return &seckill.Order{ID: a.OrderID, VoucherID: a.VoucherID, UserID: a.UserID, Status: seckill.OrderFailed, FailureReason: reason}
	}

	for i, tt := range []struct {
		name string
		id   int64
		want *seckill.Order
	}{
		{"created", bought.OrderID, created(bought)},
		{"failed, no stock", lost.OrderID, failed(lost, store.ReasonNoStock)},
		{"created, other campaign", second.OrderID, created(second)},
		{"failed, user holds one", holds.OrderID, failed(holds, store.ReasonUserHasOrder)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Order(ctx, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, ignoreOrderTimes); diff != "" {
				t.Errorf("Order(%d) (-want +got):\n%s", tt.id, diff)
			}
			// The order's time is the one PersistOrders reported.
			if !got.CreatedAt.Equal(outs[i].CreatedAt) || got.CreatedAt.Location() != time.UTC {
				t.Errorf("CreatedAt = %v, PersistOrders said %v", got.CreatedAt, outs[i].CreatedAt)
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		_, err := s.Order(ctx, seckill.OrderID(v1.ID, 99))
		if code := seckill.ErrorCode(err); code != seckill.ENOTFOUND {
			t.Errorf("code = %q (err %v)", code, err)
		}
	})

	for _, tt := range []struct {
		name  string
		user  int64
		limit int
		want  []*seckill.Order
	}{
		// Newest admission first: holds, second, bought.
		{"all", user, 10, []*seckill.Order{failed(holds, store.ReasonUserHasOrder), created(second), created(bought)}},
		{"default limit", user, 0, []*seckill.Order{failed(holds, store.ReasonUserHasOrder), created(second), created(bought)}},
		{"limited", user, 2, []*seckill.Order{failed(holds, store.ReasonUserHasOrder), created(second)}},
		{"only a failure", 43, 10, []*seckill.Order{failed(lost, store.ReasonNoStock)}},
		{"none", 44, 10, []*seckill.Order{}},
	} {
		t.Run("by user/"+tt.name, func(t *testing.T) {
			got, err := s.OrdersByUser(ctx, tt.user, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, ignoreOrderTimes); diff != "" {
				t.Errorf("OrdersByUser(%d, %d) (-want +got):\n%s", tt.user, tt.limit, diff)
			}
		})
	}
}

func TestRebuildCampaign(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	past := func(v *seckill.Voucher) {
		v.Campaign.BeginTime = v.Campaign.BeginTime.Add(-3 * time.Hour)
		v.Campaign.EndTime = v.Campaign.EndTime.Add(-2 * time.Hour)
	}
	future := func(v *seckill.Voucher) {
		v.Campaign.BeginTime = v.Campaign.BeginTime.Add(2 * time.Hour)
		v.Campaign.EndTime = v.Campaign.EndTime.Add(2 * time.Hour)
	}
	paused := func(v *seckill.Voucher) { v.Campaign.Paused = true }

	live := storetest.CreateCampaign(t, db, 3)
	ended := storetest.CreateCampaign(t, db, 10, past)
	scheduled := storetest.CreateCampaign(t, db, 10, future, paused)
	untouched := storetest.CreateCampaign(t, db, 10)

	persist(t, s,
		adm(live.ID, 5, 30), adm(live.ID, 2, 10), adm(live.ID, 9, 20),
		adm(live.ID, 11, 40), // no stock: fails
		adm(live.ID, 12, 10), // the user holds an order: fails too
		adm(ended.ID, 70, 1),
		adm(scheduled.ID, 3, 5),
	)

	ids, err := s.LiveCampaigns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{live.ID, scheduled.ID, untouched.ID}, ids); diff != "" {
		t.Errorf("LiveCampaigns (-want +got):\n%s", diff)
	}
	ids, err = s.CampaignsEndingAfter(ctx, time.Now().Add(-48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{live.ID, ended.ID, scheduled.ID, untouched.ID}, ids); diff != "" {
		t.Errorf("CampaignsEndingAfter (-want +got):\n%s", diff)
	}

	campaign := func(v *seckill.Voucher, stock, epoch int64) seckill.Campaign {
		c := *v.Campaign
		c.Stock, c.Epoch = stock, epoch
		return c
	}
	for _, tc := range []struct {
		v    *seckill.Voucher
		want seckill.WarmState
	}{
		{live, seckill.WarmState{Campaign: campaign(live, 0, 1), Buyers: []int64{10, 20, 30}}},
		{scheduled, seckill.WarmState{Campaign: campaign(scheduled, 9, 1), Buyers: []int64{5}}},
		{untouched, seckill.WarmState{Campaign: campaign(untouched, 10, 1)}},
		{untouched, seckill.WarmState{Campaign: campaign(untouched, 10, 2)}},
	} {
		got, err := s.RebuildCampaign(ctx, tc.v.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("RebuildCampaign(%d) (-want +got):\n%s", tc.v.ID, diff)
		}
		if e, err := s.CampaignEpochs(ctx, tc.v.ID); err != nil || e.Campaign != tc.want.Campaign.Epoch || e.Shards != nil {
			t.Errorf("CampaignEpochs(%d) = %+v, %v; want %d", tc.v.ID, e, err, tc.want.Campaign.Epoch)
		}
	}

	// An order of an epoch the campaign has left takes no unit: the
	// rebuilt Redis state sells that unit again.
	old := adm(untouched.ID, 1<<22|7, 77) // epoch 1
	cur := adm(untouched.ID, 2<<22|1, 78) // epoch 2
	outs := persist(t, s, old, cur)
	if outs[0].Status != seckill.OrderFailed || outs[0].Reason != seckill.FailureLost {
		t.Errorf("order of a past epoch: %+v, want FAILED %q", outs[0], seckill.FailureLost)
	}
	if outs[1].Status != seckill.OrderCreated {
		t.Errorf("order of the current epoch: %+v, want CREATED", outs[1])
	}
	if got := stateOf(t, db, untouched.ID).Stock; got != 9 {
		t.Errorf("stock = %d, want 9", got)
	}

	// A campaign on its last epoch cannot be rebuilt again: it stops selling
	// rather than reuse an epoch.
	if _, err := db.NewUpdate().Table("seckill_campaign").Set("epoch = ?", seckill.MaxEpoch).
		Where("voucher_id = ?", scheduled.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RebuildCampaign(ctx, scheduled.ID, nil); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Errorf("RebuildCampaign on the last epoch = %v, want UNAVAILABLE", err)
	}
	if e, _ := s.CampaignEpochs(ctx, scheduled.ID); e.Campaign != seckill.MaxEpoch {
		t.Errorf("epoch after the refused rebuild = %d, want %d", e.Campaign, seckill.MaxEpoch)
	}

	for _, id := range []int64{0, 1 << 40} {
		if _, err := s.RebuildCampaign(ctx, id, nil); seckill.ErrorCode(err) != seckill.ENOTFOUND {
			t.Errorf("RebuildCampaign(%d) = %v, want NOT_FOUND", id, err)
		}
		if _, err := s.CampaignEpochs(ctx, id); seckill.ErrorCode(err) != seckill.ENOTFOUND {
			t.Errorf("CampaignEpochs(%d) = %v, want NOT_FOUND", id, err)
		}
	}
}

// TestRebuildFencesPersist runs a rebuild while hundreds of goroutines
// persist orders of the epoch it closes: every order that took a unit must
// be in the rebuilt state (stock and buyers), and none may take one after.
func TestRebuildFencesPersist(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	const n = 300
	v := storetest.CreateCampaign(t, db, n)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created = map[int64]bool{}
		lost    int
		state   seckill.WarmState
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			a := adm(v.ID, int64(i+1), int64(1000+i))
			outs, err := s.PersistOrders(ctx, []seckill.Admission{a})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch outs[0].Status {
			case seckill.OrderCreated:
				created[a.UserID] = true
			case seckill.OrderFailed:
				if outs[0].Reason != seckill.FailureLost {
					t.Errorf("order %d failed: %s", a.OrderID, outs[0].Reason)
				}
				lost++
			}
		})
	}
	wg.Go(func() {
		<-start
		time.Sleep(5 * time.Millisecond)
		st, err := s.RebuildCampaign(ctx, v.ID, nil)
		if err != nil {
			t.Error(err)
		}
		state = st
	})
	close(start)
	wg.Wait()

	if len(created)+lost != n {
		t.Fatalf("created %d + lost %d != %d", len(created), lost, n)
	}
	if got := int64(len(state.Buyers)); got != int64(len(created)) {
		t.Errorf("rebuilt buyers = %d, want the %d created orders", got, len(created))
	}
	for _, u := range state.Buyers {
		if !created[u] {
			t.Errorf("rebuilt buyer %d holds no order", u)
		}
	}
	if want := int64(n - len(created)); state.Campaign.Stock != want {
		t.Errorf("rebuilt stock = %d, want %d", state.Campaign.Stock, want)
	}
	if got := stateOf(t, db, v.ID).Stock; got != state.Campaign.Stock {
		t.Errorf("stock after = %d, want the rebuilt %d: an order of the old epoch took a unit", got, state.Campaign.Stock)
	}
	t.Logf("created %d before the rebuild, %d lost after it", len(created), lost)
}
