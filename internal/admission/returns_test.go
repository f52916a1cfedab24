package admission_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

// TestReturnUnit gives closed orders' units back: once per order however
// many callers race, not into a state that counts it already (a later
// epoch, or none), and not yet into one that is behind Postgres or being
// rebuilt.
func TestReturnUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := seckill.WarmState{Campaign: liveCampaign(1, 0), Buyers: []int64{5, 6, 7}}
	st.Campaign.Epoch = 2
	a, rdb := newAdmitter(t, admission.Options{})
	mustWarm(t, a, st)
	stock := func() string { return rdb.HGet(ctx, admission.CampaignKey(a, 1), "stock").Val() }
	order := func(seq int64) int64 { return seckill.OrderID(1, 2<<22|seq) }

	// 200 callers return one order at once: one unit comes back.
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			ok, err := a.ReturnUnit(ctx, seckill.UnitReturn{OrderID: order(1), VoucherID: 1, UserID: 5, Epoch: 2})
			if err != nil || !ok {
				t.Errorf("ReturnUnit = %v, %v", ok, err)
			}
		})
	}
	wg.Wait()
	if stock() != "1" {
		t.Fatalf("stock %s after 200 returns of one order, want 1", stock())
	}
	if o, _ := mustAdmit(t, a, 1, 5); o != seckill.OutcomeAccepted {
		t.Fatalf("the returning buyer buys again: %s", o)
	}

	// Postgres returned it in a later epoch than Redis holds: not now.
	if ok, err := a.ReturnUnit(ctx, seckill.UnitReturn{OrderID: order(2), VoucherID: 1, UserID: 6, Epoch: 3}); err != nil || ok {
		t.Fatalf("return into an earlier epoch = %v, %v; want false", ok, err)
	}
	// In an earlier epoch than Redis holds: the rebuild counted it.
	if ok, err := a.ReturnUnit(ctx, seckill.UnitReturn{OrderID: order(3), VoucherID: 1, UserID: 7, Epoch: 1}); err != nil || !ok {
		t.Fatalf("return counted by a rebuild = %v, %v; want true", ok, err)
	}
	if stock() != "0" {
		t.Fatalf("stock %s, want 0: nothing came back", stock())
	}
	// While the campaign is rebuilt: not now.
	stopCampaign(t, a, rdb, 1)
	lock, ok, err := a.BeginRebuild(ctx, 1)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := a.ReturnUnit(ctx, seckill.UnitReturn{OrderID: order(2), VoucherID: 1, UserID: 6, Epoch: 2}); err != nil || ok {
		t.Fatalf("return while rebuilding = %v, %v; want false", ok, err)
	}
	next := st
	next.Campaign.Epoch = 3
	if ok, err := a.FinishRebuild(ctx, lock.Token, next); err != nil || !ok {
		t.Fatal(ok, err)
	}
	// Redis holds none: whatever installs it reads Postgres.
	if ok, err := a.ReturnUnit(ctx, seckill.UnitReturn{OrderID: seckill.OrderID(9, 1), VoucherID: 9, UserID: 1, Epoch: 0}); err != nil || !ok {
		t.Fatalf("return to a campaign Redis lacks = %v, %v; want true", ok, err)
	}
	// Malformed: refused before Redis.
	for _, r := range []seckill.UnitReturn{{OrderID: 0, VoucherID: 1, UserID: 1}, {OrderID: order(4), VoucherID: 2, UserID: 1},
		{OrderID: order(4), VoucherID: 1, UserID: 0}, {OrderID: order(4), VoucherID: 1, UserID: 1, Epoch: 1024}} {
		if _, err := a.ReturnUnit(ctx, r); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("ReturnUnit(%+v) = %v, want INVALID", r, err)
		}
	}
}

// TestReturnUnitGathers returns the units of 300 orders of one campaign
// from 300 callers at once, each order twice: every unit back once and its
// buyer freed, with far fewer script calls and stock_returned messages than
// orders (the calls that arrive while one runs go in the next).
func TestReturnUnitGathers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const orders = 300
	st := seckill.WarmState{Campaign: liveCampaign(1, 0)}
	for u := range int64(orders) {
		st.Buyers = append(st.Buyers, 100+u)
	}
	a, rdb := newAdmitter(t, admission.Options{})
	mustWarm(t, a, st)
	sub, err := admission.SubscribeStock(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var wg sync.WaitGroup
	for i := range int64(2 * orders) {
		seq := i%orders + 1
		wg.Go(func() {
			ok, err := a.ReturnUnit(ctx, seckill.UnitReturn{OrderID: seckill.OrderID(1, seq), VoucherID: 1, UserID: 99 + seq})
			if err != nil || !ok {
				t.Errorf("ReturnUnit(%d) = %v, %v", seq, ok, err)
			}
		})
	}
	wg.Wait()
	if got := rdb.HGet(ctx, admission.CampaignKey(a, 1), "stock").Val(); got != strconv.Itoa(orders) {
		t.Fatalf("stock %s after returning %d orders twice each, want %d", got, orders, orders)
	}
	if n := rdb.SCard(ctx, admission.BuyersKey(a, 1)).Val(); n != 0 {
		t.Fatalf("%d buyers still hold a unit", n)
	}
	// The last message went out before its caller returned.
	messages := messagesHeld(ctx, sub)
	t.Logf("%d returns, %d stock_returned messages", 2*orders, messages)
	if messages == 0 || messages > orders/5 {
		t.Errorf("%d stock_returned messages for %d orders returned at once: want some, and far fewer", messages, orders)
	}
}

// TestReturnUnits gives many orders' units back in one round trip: once per
// order however often a batch comes again (or races ReturnUnit), each
// campaign as its epoch allows, and reports which units admission holds.
func TestReturnUnits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	for _, v := range []int64{1, 2} {
		st := seckill.WarmState{Campaign: liveCampaign(v, 0)}
		st.Campaign.Epoch = 2
		for u := range int64(1500) {
			st.Buyers = append(st.Buyers, 1000+u)
		}
		mustWarm(t, a, st)
	}
	stock := func(v int64) string { return rdb.HGet(ctx, admission.CampaignKey(a, v), "stock").Val() }
	var rs []seckill.UnitReturn
	for u := range int64(1500) { // more than one script call's worth for campaign 1
		rs = append(rs, seckill.UnitReturn{OrderID: seckill.OrderID(1, 2<<22|(u+1)), VoucherID: 1, UserID: 1000 + u, Epoch: 2})
	}
	for u := range int64(3) {
		rs = append(rs, seckill.UnitReturn{OrderID: seckill.OrderID(2, 2<<22|(u+1)), VoucherID: 2, UserID: 1000 + u, Epoch: 2})
	}
	// Campaign 9 is not in Redis: counted already. An epoch ahead of
	// Redis: not now.
	rs = append(rs, seckill.UnitReturn{OrderID: seckill.OrderID(9, 1), VoucherID: 9, UserID: 1, Epoch: 0},
		seckill.UnitReturn{OrderID: seckill.OrderID(2, 3<<22|1), VoucherID: 2, UserID: 2000, Epoch: 3})

	var wg sync.WaitGroup
	for range 20 { // the same batch twenty times at once
		wg.Go(func() {
			taken, err := a.ReturnUnits(ctx, rs)
			if err != nil || len(taken) != len(rs)-1 {
				t.Errorf("ReturnUnits = %d taken, %v; want %d", len(taken), err, len(rs)-1)
			}
		})
	}
	wg.Wait()
	if stock(1) != "1500" || stock(2) != "3" {
		t.Fatalf("stock %s and %s after the batches, want 1500 and 3", stock(1), stock(2))
	}
	if o, _ := mustAdmit(t, a, 1, 1000); o != seckill.OutcomeAccepted {
		t.Errorf("a buyer whose unit came back buys again: %s", o)
	}
	if o, _ := mustAdmit(t, a, 2, 1499); o != seckill.OutcomeAlreadyPurchased {
		t.Errorf("a buyer whose unit did not come back: %s", o)
	}
	// ReturnUnit of one of them afterwards: returned before.
	if ok, err := a.ReturnUnit(ctx, rs[0]); err != nil || !ok || stock(1) != "1499" {
		t.Errorf("ReturnUnit after the batch = %v, %v, stock %s", ok, err, stock(1))
	}
	if _, err := a.ReturnUnits(ctx, []seckill.UnitReturn{{OrderID: 0, VoucherID: 1, UserID: 1}}); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("a malformed return: %v, want INVALID", err)
	}
}
