package store_test

import (
	"slices"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// shardAdm is the admission of order seq (in epoch) of one stock shard of a
// campaign, by user.
func shardAdm(voucherID int64, shard int, epoch, seq, user int64) seckill.Admission {
	return seckill.Admission{
		OrderID:    seckill.ShardOrderID(voucherID, shard, epoch<<22|seq),
		VoucherID:  voucherID,
		UserID:     user,
		AdmittedAt: admittedAt.Add(time.Duration(seq) * time.Millisecond),
	}
}

// TestRebuildSomeShards: a rebuild of some stock shards of a campaign (the
// shards a failover lost) moves only them to a new epoch: orders of their
// old epoch fail as lost, orders of the other shards keep taking stock in
// theirs, and the units of cancelled and expired orders come back in the
// epoch of their own shard. A rebuild of the whole campaign moves every
// shard on again.
func TestRebuildSomeShards(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := newVoucher("shards", 10, now().Add(-time.Minute), now().Add(time.Hour))
	v.Campaign.Shards = 3
	if err := s.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	id := v.ID
	before := shardAdm(id, 2, 0, 1, 100) // shard 2, persisted before the loss
	if outs := persist(t, s, before); outs[0].Status != seckill.OrderCreated {
		t.Fatalf("before the rebuild: %+v", outs[0])
	}

	st, err := s.RebuildCampaign(ctx, id, []int{2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Campaign.Epoch != 1 || !slices.Equal(st.Shards, []int{2}) || !slices.Equal(st.Buyers, []int64{100}) {
		t.Errorf("rebuild of shard 2: epoch %d, shards %v, buyers %v; want 1, [2], [100]", st.Campaign.Epoch, st.Shards, st.Buyers)
	}
	if e, err := s.CampaignEpochs(ctx, id); err != nil || e.Campaign != 1 || !slices.Equal(e.Shards, []int64{0, 0, 1}) {
		t.Errorf("epochs: %+v, %v; want 1, [0 0 1]", e, err)
	}

	lost := shardAdm(id, 2, 0, 2, 101)  // shard 2's old epoch
	kept0 := shardAdm(id, 0, 0, 1, 102) // shard 0 was not rebuilt
	kept1 := shardAdm(id, 1, 0, 1, 103) // nor shard 1
	fresh := shardAdm(id, 2, 1, 1, 104) // shard 2's new epoch
	early := shardAdm(id, 1, 1, 2, 105) // an epoch shard 1 has not reached
	outs := persist(t, s, lost, kept0, kept1, fresh, early)
	want := map[int64]string{lost.OrderID: seckill.FailureLost, early.OrderID: seckill.FailureLost}
	for _, o := range outs {
		switch reason, failed := want[o.Admission.OrderID]; {
		case failed && (o.Status != seckill.OrderFailed || o.Reason != reason):
			t.Errorf("order %d: %s %q, want FAILED %q", o.Admission.OrderID, o.Status, o.Reason, reason)
		case !failed && o.Status != seckill.OrderCreated:
			t.Errorf("order %d: %s %q, want CREATED", o.Admission.OrderID, o.Status, o.Reason)
		}
	}
	// A batch of the shards' current epochs takes its units in one go.
	batch := []seckill.Admission{shardAdm(id, 0, 0, 2, 106), shardAdm(id, 1, 0, 3, 107), shardAdm(id, 2, 1, 2, 108)}
	for _, o := range persist(t, s, batch...) {
		if o.Status != seckill.OrderCreated {
			t.Errorf("batch order %d: %s %q", o.Admission.OrderID, o.Status, o.Reason)
		}
	}
	if got := stateOf(t, db, id); got.Stock != 10-7 {
		t.Errorf("stock %d, want 3: 7 orders hold a unit", got.Stock)
	}

	// Units come back in the epoch of the order's shard.
	res, err := s.CloseOrder(ctx, before.OrderID, seckill.OrderCancelled, 0)
	if err != nil || !res.Closed || res.Return.Epoch != 1 {
		t.Errorf("cancel the shard-2 order: %+v, %v; want its unit back in epoch 1", res.Return, err)
	}
	res, err = s.CloseOrder(ctx, kept1.OrderID, seckill.OrderCancelled, 0)
	if err != nil || !res.Closed || res.Return.Epoch != 0 {
		t.Errorf("cancel the shard-1 order: %+v, %v; want its unit back in epoch 0", res.Return, err)
	}
	// The other five were admitted long enough ago to be due.
	expired, err := s.ExpireDue(ctx, 10)
	if err != nil || len(expired) != 5 {
		t.Fatalf("expire: %+v, %v", expired, err)
	}
	for _, e := range expired {
		_, shard, _ := seckill.SplitShardOrderID(e.Return.OrderID)
		if want := []int64{0, 0, 1}[shard]; e.Return.Epoch != want {
			t.Errorf("expired order %d of shard %d came back in epoch %d, want %d", e.Return.OrderID, shard, e.Return.Epoch, want)
		}
	}
	unret, err := s.Unreturned(ctx, 10)
	if err != nil || len(unret) != 7 {
		t.Fatalf("unreturned: %+v, %v", unret, err)
	}
	for _, u := range unret {
		_, shard, _ := seckill.SplitShardOrderID(u.OrderID)
		if want := []int64{0, 0, 1}[shard]; u.Epoch != want {
			t.Errorf("unreturned order %d of shard %d: epoch %d, want %d", u.OrderID, shard, u.Epoch, want)
		}
	}

	// Another loss of shard 0 alone: its new epoch is above every shard's.
	if st, err := s.RebuildCampaign(ctx, id, []int{0}); err != nil || st.Campaign.Epoch != 2 {
		t.Fatalf("rebuild of shard 0: %+v, %v", st.Campaign, err)
	}
	if e, _ := s.CampaignEpochs(ctx, id); !slices.Equal(e.Shards, []int64{2, 0, 1}) {
		t.Errorf("epochs after shard 0's rebuild: %v, want [2 0 1]", e.Shards)
	}
	// The whole campaign: every shard in one epoch again.
	st, err = s.RebuildCampaign(ctx, id, nil)
	if err != nil || st.Campaign.Epoch != 3 || st.Shards != nil {
		t.Fatalf("rebuild of the whole campaign: epoch %d, shards %v, %v", st.Campaign.Epoch, st.Shards, err)
	}
	if e, _ := s.CampaignEpochs(ctx, id); e.Campaign != 3 || e.Shards != nil {
		t.Errorf("epochs after the whole rebuild: %+v, want 3 for every shard", e)
	}
	if outs := persist(t, s, shardAdm(id, 1, 0, 9, 120)); outs[0].Reason != seckill.FailureLost {
		t.Errorf("an order of shard 1's old epoch after the whole rebuild: %+v, want FAILED lost", outs[0])
	}
	// Naming every shard is the whole campaign; naming one it lacks is
	// refused and changes nothing.
	if st, err := s.RebuildCampaign(ctx, id, []int{2, 0, 1}); err != nil || st.Shards != nil || st.Campaign.Epoch != 4 {
		t.Errorf("rebuild naming every shard: %v, %v, %v", st.Campaign.Epoch, st.Shards, err)
	}
	if _, err := s.RebuildCampaign(ctx, id, []int{3}); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("rebuild of shard 3 of 3: %v, want INVALID", err)
	}
	if e, _ := s.CampaignEpochs(ctx, id); e.Campaign != 4 {
		t.Errorf("epoch after a refused rebuild: %d, want 4", e.Campaign)
	}
}
