package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

var ignoreOrderTimes = cmpopts.IgnoreFields(seckill.Order{}, "CreatedAt")

func TestOrders(t *testing.T) {
	db := storetest.NewDB(t)
	s := store.New(db)
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

func TestWarmStates(t *testing.T) {
	db := storetest.NewDB(t)
	s := store.New(db)
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
		adm(live.ID, 11, 40), // no stock: fails, but its sequence counts
		adm(live.ID, 12, 10), // the user holds an order: fails too
		adm(ended.ID, 70, 1),
		adm(scheduled.ID, 3, 5),
	)

	campaign := func(v *seckill.Voucher, stock int64) seckill.Campaign {
		c := *v.Campaign
		c.Stock = stock
		return c
	}
	want := []seckill.WarmState{
		{Campaign: campaign(live, 0), Buyers: []int64{10, 20, 30}, MaxSeq: 12},
		{Campaign: campaign(scheduled, 9), Buyers: []int64{5}, MaxSeq: 3},
		{Campaign: campaign(untouched, 10)},
	}
	got, err := s.WarmStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WarmStates (-want +got):\n%s", diff)
	}

	t.Run("none live", func(t *testing.T) {
		s := store.New(storetest.NewDB(t))
		got, err := s.WarmStates(ctx)
		if err != nil || len(got) != 0 {
			t.Errorf("WarmStates = %v, %v", got, err)
		}
	})
}
