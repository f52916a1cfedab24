package admission_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// shardedCampaign is liveCampaign with shards stock shards.
func shardedCampaign(voucherID, stock int64, shards int) seckill.Campaign {
	c := liveCampaign(voucherID, stock)
	c.Shards = shards
	return c
}

// shardStocks reads each shard's stock.
func shardStocks(t *testing.T, a *admission.Admitter, rdb redis.UniversalClient, voucherID int64, shards int) []int64 {
	t.Helper()
	out := make([]int64, shards)
	for i := range out {
		n, err := rdb.HGet(context.Background(), admission.ShardCampaignKey(a, voucherID, i, shards), "stock").Int64()
		if err != nil {
			t.Fatalf("stock of shard %d: %v", i, err)
		}
		out[i] = n
	}
	return out
}

// usersOn returns n user ids, from `from` up, that fall on shard of shards.
func usersOn(from int64, n, shard, shards int) []int64 {
	var out []int64
	for u := from; len(out) < n; u++ {
		if seckill.ShardOf(u, shards) == shard {
			out = append(out, u)
		}
	}
	return out
}

// TestShardTags: a campaign of N shards puts them in N different N-ths of
// the slot space, shard 0 keeps the campaign's own tag, and on a cluster
// our slot of a key is CLUSTER KEYSLOT's.
func TestShardTags(t *testing.T) {
	t.Parallel()
	a, rdb := newAdmitter(t, admission.Options{})
	if got, want := admission.ShardCampaignKey(a, 42, 0, 3), admission.CampaignKey(a, 42); got != want {
		t.Errorf("shard 0's key %q, want the campaign's own %q", got, want)
	}
	for _, v := range []int64{1, 42, 4711, seckill.MaxShardedVoucherID} {
		for _, n := range []int{2, 3, 4, 5, 8, 16, 64} {
			cells := map[int]bool{}
			for s := range n {
				cell := int(admission.KeySlot(admission.ShardCampaignKey(a, v, s, n))) * n / 16384
				if cells[cell] {
					t.Fatalf("voucher %d of %d shards: shard %d in the same N-th of the slots (%d) as another", v, n, s, cell)
				}
				cells[cell] = true
			}
		}
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	ctx := context.Background()
	for _, key := range []string{admission.ShardCampaignKey(a, 42, 2, 3), admission.CampaignKey(a, 7), "plain", "a{}b", "{x}{y}", "{v9.1.3}:z"} {
		want, err := cc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := admission.KeySlot(key); int64(got) != want {
			t.Errorf("slot of %q: %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
	}
	// Three shards on a cluster of three masters that split the slots
	// evenly: one on each.
	masters := map[string]bool{}
	for s := range 3 {
		masters[shardOf(t, cc, admission.ShardCampaignKey(a, 42, s, 3))[0]] = true
	}
	if len(masters) != 3 {
		t.Errorf("3 shards on %d masters, want 3", len(masters))
	}
}

// TestShardedWarm: the stock is spread over the shards, each buyer is in
// their shard, and only shard 0 says how many there are.
func TestShardedWarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	const v = 501
	buyers := []int64{3, 4, 5, 6, 7, 8, 9}
	mustWarm(t, a, seckill.WarmState{Campaign: shardedCampaign(v, 10, 3), Buyers: buyers})
	if got := shardStocks(t, a, rdb, v, 3); !slices.Equal(got, []int64{4, 3, 3}) {
		t.Errorf("shard stocks %v, want [4 3 3]", got)
	}
	for _, u := range buyers {
		s := seckill.ShardOf(u, 3)
		for i := range 3 {
			in, err := rdb.SIsMember(ctx, admission.ShardBuyersKey(a, v, i, 3), u).Result()
			if err != nil {
				t.Fatal(err)
			}
			if in != (i == s) {
				t.Errorf("buyer %d (shard %d) in shard %d's buyers: %v", u, s, i, in)
			}
		}
		wantOutcome(t, a, v, u, seckill.OutcomeAlreadyPurchased, "a buyer of the warm state")
	}
	if n, _ := rdb.HGet(ctx, admission.CampaignKey(a, v), "shards").Result(); n != "3" {
		t.Errorf("shard 0 says %q shards, want 3", n)
	}
	if ok, err := a.Warm(ctx, seckill.WarmState{Campaign: shardedCampaign(v, 99, 3)}); err != nil || ok {
		t.Errorf("second warm: %v, %v; want nothing installed", ok, err)
	}
	rem, err := a.Remaining(ctx, []int64{v})
	if err != nil || rem[v] != 10 {
		t.Errorf("remaining %v, %v; want 10", rem, err)
	}
	if _, err := a.Warm(ctx, seckill.WarmState{Campaign: shardedCampaign(seckill.MaxShardedVoucherID+1, 5, 2)}); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("sharded campaign of a voucher id beyond 24 bits: %v, want INVALID", err)
	}
}

// attempt is one purchase attempt as a buyer saw it.
type attempt struct {
	user          int64
	outcome       seckill.Outcome
	orderID       int64
	start, finish time.Time
}

// buyAll has every user of users try twice (TRY_AGAIN is retried at once,
// and not counted as a try) at once through the admitters, round robin,
// from workers goroutines.
func buyAll(t *testing.T, as []*admission.Admitter, voucherID int64, users []int64, workers int) []attempt {
	t.Helper()
	var (
		mu   sync.Mutex
		all  []attempt
		next atomic.Int64
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := as[w%len(as)]
			for {
				i := next.Add(1) - 1
				if i >= int64(len(users)) {
					return
				}
				u := users[i]
				for try := 0; try < 2; {
					start := time.Now()
					o, adm, err := a.Admit(context.Background(), voucherID, u, seckill.Ticket{})
					if err != nil {
						if errs.Add(1) < 5 {
							t.Errorf("admit user %d: %v", u, err)
						}
						return
					}
					if o == seckill.OutcomeTryAgain {
						time.Sleep(time.Millisecond)
						continue
					}
					try++
					mu.Lock()
					all = append(all, attempt{user: u, outcome: o, orderID: adm.OrderID, start: start, finish: time.Now()})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return all
}

// checkSale checks a sale of stock units to the attempts: exactly stock
// accepted, one per user, distinct order ids, and no SOLD_OUT answered
// before an acceptance that started after it (with nothing returned, that
// SOLD_OUT was false: a unit remained somewhere).
func checkSale(t *testing.T, atts []attempt, stock int) {
	t.Helper()
	accepted := map[int64]int64{}
	ids := map[int64]bool{}
	var lastAcceptStart, firstSoldOut time.Time
	for _, at := range atts {
		switch at.outcome {
		case seckill.OutcomeAccepted:
			if _, dup := accepted[at.user]; dup {
				t.Errorf("user %d accepted twice", at.user)
			}
			accepted[at.user] = at.orderID
			if ids[at.orderID] {
				t.Errorf("order id %d handed out twice", at.orderID)
			}
			ids[at.orderID] = true
			if at.start.After(lastAcceptStart) {
				lastAcceptStart = at.start
			}
		case seckill.OutcomeSoldOut:
			if firstSoldOut.IsZero() || at.finish.Before(firstSoldOut) {
				firstSoldOut = at.finish
			}
		case seckill.OutcomeAlreadyPurchased:
		default:
			t.Errorf("user %d: outcome %s", at.user, at.outcome)
		}
	}
	if len(accepted) != stock {
		t.Errorf("%d accepted, want exactly the stock, %d", len(accepted), stock)
	}
	if !firstSoldOut.IsZero() && lastAcceptStart.After(firstSoldOut) {
		t.Errorf("SOLD_OUT answered at %v, yet a purchase that started %v later was accepted: a unit remained",
			firstSoldOut.Format(time.StampMicro), lastAcceptStart.Sub(firstSoldOut))
	}
}

// TestShardedUnevenBuyers: 2,000 buyers, 1,500 units, 3 shards, buyers
// fall 70/20/10 on the shards, each tries twice through one of two
// Admitters (two API processes): exactly 1,500 accepted, one each, 0 left
// in every shard, nothing left on its way, and no SOLD_OUT while a unit
// remained anywhere.
func TestShardedUnevenBuyers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a1, rdb := newAdmitter(t, admission.Options{})
	a2 := admission.New(rdb, admission.Options{Prefix: admission.Prefix(a1)})
	const v, stock, shards = 502, 1500, 3
	mustWarm(t, a1, seckill.WarmState{Campaign: shardedCampaign(v, stock, shards)})
	users := append(append(usersOn(1, 1400, 0, shards), usersOn(1, 400, 1, shards)...), usersOn(1, 200, 2, shards)...)
	atts := buyAll(t, []*admission.Admitter{a1, a2}, v, users, 200)
	checkSale(t, atts, stock)
	if got := shardStocks(t, a1, rdb, v, shards); !slices.Equal(got, []int64{0, 0, 0}) {
		t.Errorf("shard stocks after the sale %v, want all 0", got)
	}
	for s := range shards {
		if n, err := rdb.HLen(ctx, admission.ShardMovesKey(a1, v, s, shards)).Result(); err != nil || n != 0 {
			t.Errorf("shard %d: %d moves left recorded (%v)", s, n, err)
		}
	}
	q, err := a1.Queued(ctx, []int64{v})
	if err != nil || q[v] != stock {
		t.Errorf("queued %v (%v), want %d", q, err, stock)
	}
	// Every pending admission is found, in its shard.
	pend, err := a2.PendingOf(ctx, v)
	if err != nil || len(pend) != stock {
		t.Fatalf("PendingOf: %d (%v), want %d", len(pend), err, stock)
	}
	for _, p := range pend[:10] {
		got, err := a2.Pending(ctx, p.OrderID)
		if err != nil || got.UserID != p.UserID {
			t.Errorf("Pending(%d) = %+v, %v; want user %d", p.OrderID, got, err, p.UserID)
		}
		_, shard, _ := seckill.SplitShardOrderID(p.OrderID)
		if want := seckill.ShardOf(p.UserID, shards); shard != want {
			t.Errorf("order %d of user %d in shard %d, want the user's %d", p.OrderID, p.UserID, shard, want)
		}
	}
	if err := a1.Ack(ctx, pend); err != nil {
		t.Fatal(err)
	}
	if q, _ := a1.Queued(ctx, []int64{v}); q[v] != 0 {
		t.Errorf("queued after Ack: %d", q[v])
	}
}

// TestShardedRaceEven is the seed's race on a campaign of 3 shards: many
// buyers, few units, two Admitters.
func TestShardedRaceEven(t *testing.T) {
	t.Parallel()
	a1, rdb := newAdmitter(t, admission.Options{})
	a2 := admission.New(rdb, admission.Options{Prefix: admission.Prefix(a1)})
	const v, stock = 503, 200
	mustWarm(t, a1, seckill.WarmState{Campaign: shardedCampaign(v, stock, 3)})
	users := make([]int64, 1000)
	for i := range users {
		users[i] = int64(i + 1)
	}
	checkSale(t, buyAll(t, []*admission.Admitter{a1, a2}, v, users, 300), stock)
	if got := shardStocks(t, a1, rdb, v, 3); !slices.Equal(got, []int64{0, 0, 0}) {
		t.Errorf("shard stocks after the sale %v, want all 0", got)
	}
	if o, ok := admission.SoldOutMark(a1, v); ok && o != seckill.OutcomeSoldOut {
		t.Errorf("local mark %s", o)
	}
}

// TestShardedMoveInterrupted: a move stopped after its first step, and one
// stopped after its second, lose no unit and count none twice once the
// reconciler finished them, however often it runs; a move of an epoch the
// campaign left is dropped.
func TestShardedMoveInterrupted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	admission.FinishMovesNow(a)
	const v, shards = 504, 3
	mustWarm(t, a, seckill.WarmState{Campaign: shardedCampaign(v, 30, shards)})
	total := func() int64 {
		c, err := a.LiveCounts(ctx, []int64{v})
		if err != nil {
			t.Fatal(err)
		}
		return c[v].Remaining
	}

	// Killed after move_out: the units are in the record, counted as left.
	_, n1, epoch, err := admission.MoveOut(ctx, a, v, shards, 0, 1, 6)
	if err != nil || n1 != 6 {
		t.Fatalf("move out: %d, %v", n1, err)
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{4, 10, 10}) {
		t.Errorf("after move_out: %v, want [4 10 10]", got)
	}
	if got := total(); got != 30 {
		t.Errorf("live remaining with a move on its way: %d, want 30", got)
	}
	// Killed after move_in, before the record is cleared.
	id2, n2, _, err := admission.MoveOut(ctx, a, v, shards, 2, 0, 5)
	if err != nil || n2 != 5 {
		t.Fatalf("move out: %d, %v", n2, err)
	}
	if r, err := admission.MoveIn(ctx, a, v, shards, 0, id2, n2, epoch); err != nil || r != 1 {
		t.Fatalf("move in: %d, %v", r, err)
	}
	if r, err := admission.MoveIn(ctx, a, v, shards, 0, id2, n2, epoch); err != nil || r != 0 {
		t.Fatalf("move in again: %d, %v; want 0 (applied before)", r, err)
	}
	for range 3 {
		if _, err := a.FinishMoves(ctx, []int64{v}); err != nil {
			t.Fatal(err)
		}
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{9, 16, 5}) {
		t.Errorf("after reconciling: %v, want [9 16 5]", got)
	}
	if got := total(); got != 30 {
		t.Errorf("live remaining after reconciling: %d, want 30", got)
	}
	for s := range shards {
		if n, _ := rdb.HLen(ctx, admission.ShardMovesKey(a, v, s, shards)).Result(); n != 0 {
			t.Errorf("shard %d keeps %d move records", s, n)
		}
	}

	// A move of an earlier epoch: the rebuild that moved on counted its
	// units from Postgres; it is dropped, not applied.
	_, n3, _, err := admission.MoveOut(ctx, a, v, shards, 1, 2, 3)
	if err != nil || n3 != 3 {
		t.Fatalf("move out: %d, %v", n3, err)
	}
	if err := rdb.HIncrBy(ctx, admission.ShardCampaignKey(a, v, 2, shards), "epoch", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HIncrBy(ctx, admission.ShardCampaignKey(a, v, 1, shards), "epoch", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.FinishMoves(ctx, []int64{v}); err != nil {
		t.Fatal(err)
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{9, 13, 5}) {
		t.Errorf("after a void move: %v, want [9 13 5] (nothing applied)", got)
	}
	if n, _ := rdb.HLen(ctx, admission.ShardMovesKey(a, v, 1, shards)).Result(); n != 0 {
		t.Errorf("the void move is still recorded")
	}
}

// TestShardedLiveMidMove: the live counts of a campaign whose move stopped
// between its second step (the recipient has the units) and its third (the
// donor's record is cleared) count the units once, in the recipient, so the
// stock balance holds exactly at that moment, and again once the record is
// gone.
func TestShardedLiveMidMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newAdmitter(t, admission.Options{})
	admission.FinishMovesNow(a)
	const v, shards, initial = 505, 3, 30
	mustWarm(t, a, seckill.WarmState{Campaign: shardedCampaign(v, initial, shards)})
	// Two admitted, not yet persisted: queued in Redis, not in Postgres.
	for _, u := range []int64{usersOn(1, 1, 1, shards)[0], usersOn(1, 1, 2, shards)[0]} {
		if o, _ := mustAdmit(t, a, v, u); o != seckill.OutcomeAccepted {
			t.Fatalf("user %d: %s", u, o)
		}
	}
	// Postgres as it stands: nothing persisted, so nothing taken.
	pg := seckill.CampaignTotals{InitialStock: initial, Stock: initial}
	balance := func(when string, remaining []int64) {
		t.Helper()
		live, err := a.LiveCounts(ctx, []int64{v})
		if err != nil {
			t.Fatal(err)
		}
		if b := seckill.CheckBalance(live[v], pg); b.State != seckill.BalanceOK || b.Diff != 0 {
			t.Errorf("%s: balance %s %s, diff %d; live %+v", when, b.State, b.Reason, b.Diff, live[v])
		}
		var got []int64
		for _, s := range live[v].Shards {
			got = append(got, s.Remaining)
		}
		if !slices.Equal(got, remaining) {
			t.Errorf("%s: shards' remaining %v, want %v", when, got, remaining)
		}
	}
	balance("before any move", []int64{10, 9, 9})

	// Step 1 of two moves: shard 2 -> 0 and shard 1 -> 2, recorded in
	// their donors, counted there.
	id1, n1, epoch, err := admission.MoveOut(ctx, a, v, shards, 2, 0, 4)
	if err != nil || n1 != 4 {
		t.Fatalf("move out: %d, %v", n1, err)
	}
	id2, n2, _, err := admission.MoveOut(ctx, a, v, shards, 1, 2, 3)
	if err != nil || n2 != 3 {
		t.Fatalf("move out: %d, %v", n2, err)
	}
	balance("after step 1", []int64{10, 9, 9})

	// Step 2 of both: the units are in the recipients' stock and still
	// recorded in the donors'. Counted in the recipients only.
	for _, m := range []struct {
		to int
		id string
		n  int64
	}{{0, id1, n1}, {2, id2, n2}} {
		if r, err := admission.MoveIn(ctx, a, v, shards, m.to, m.id, m.n, epoch); err != nil || r != 1 {
			t.Fatalf("move in %s: %d, %v", m.id, r, err)
		}
	}
	balance("between steps 2 and 3", []int64{14, 6, 8})

	// Step 3, as the reconciler does it.
	if k, err := a.FinishMoves(ctx, []int64{v}); err != nil || k != 2 {
		t.Fatalf("finish moves: %d, %v", k, err)
	}
	balance("after step 3", []int64{14, 6, 8})
}

// TestShardedReturnsAndRelease: a unit given back (cancel, expiry, a failed
// admission) goes back to its order's shard, and frees its buyer there.
func TestShardedReturnsAndRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	const v, shards = 505, 3
	mustWarm(t, a, seckill.WarmState{Campaign: shardedCampaign(v, 30, shards)})
	u1, u2 := usersOn(1, 1, 2, shards)[0], usersOn(1, 1, 1, shards)[0]
	o1, adm1 := mustAdmit(t, a, v, u1)
	o2, adm2 := mustAdmit(t, a, v, u2)
	if o1 != seckill.OutcomeAccepted || o2 != seckill.OutcomeAccepted {
		t.Fatalf("outcomes %s, %s", o1, o2)
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{10, 9, 9}) {
		t.Fatalf("after two admissions: %v", got)
	}
	if err := a.Ack(ctx, []seckill.Admission{adm1}); err != nil {
		t.Fatal(err)
	}
	ok, err := a.ReturnUnit(ctx, seckill.UnitReturn{OrderID: adm1.OrderID, VoucherID: v, UserID: u1, Epoch: 0})
	if err != nil || !ok {
		t.Fatalf("return unit: %v, %v", ok, err)
	}
	if ok, err := a.Release(ctx, adm2, false); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{10, 10, 10}) {
		t.Errorf("after the return and the release: %v, want [10 10 10]", got)
	}
	wantOutcome(t, a, v, u1, seckill.OutcomeAccepted, "a buyer whose order was returned")
	wantOutcome(t, a, v, u2, seckill.OutcomeAccepted, "a buyer whose admission was released")
	taken, err := a.ReturnUnits(ctx, []seckill.UnitReturn{{OrderID: adm1.OrderID, VoucherID: v, UserID: u1}})
	if err != nil || len(taken) != 1 {
		t.Errorf("return units again: %v, %v", taken, err)
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{10, 9, 9}) {
		t.Errorf("a unit returned twice: %v, want [10 9 9]", got)
	}
}

// TestShardedRebuildSome: a shard that lost its state (stopped, as after
// its master failed over) is rebuilt alone while the others keep selling:
// it starts again in a new epoch with its buyers and no units, and buyers
// who fall on it get units moved from the others. Once nothing is left
// anywhere, the campaign is rebuilt whole (the recount), which counts
// back the units the lost shard held, instead of answering SOLD_OUT.
func TestShardedRebuildSome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	const v, shards = 506, 3
	c := shardedCampaign(v, 30, shards)
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	if err := rdb.HSet(ctx, admission.ShardCampaignKey(a, v, 2, shards), "state", "stale").Err(); err != nil {
		t.Fatal(err)
	}
	if need, err := a.NeedsRebuild(ctx, []int64{v}); err != nil || !slices.Equal(need, []int64{v}) {
		t.Fatalf("needs rebuild: %v, %v", need, err)
	}
	onTwo := usersOn(1, 3, 2, shards)
	if _, _, err := a.Admit(ctx, v, onTwo[0], seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("a buyer of the stopped shard: %v, want ErrRebuildNeeded", err)
	}
	lock, ok, err := a.BeginRebuild(ctx, v)
	if err != nil || !ok || !slices.Equal(lock.Shards, []int{2}) {
		t.Fatalf("begin rebuild: %+v, %v, %v; want a lock for shard 2", lock, ok, err)
	}
	if lock.Reason != "shard 2 stale" {
		t.Errorf("the rebuild's reason %q, want shard 2 stale", lock.Reason)
	}
	if _, ok, err := a.BeginRebuild(ctx, v); err != nil || ok {
		t.Errorf("second begin rebuild: %v, %v; want the lock taken", ok, err)
	}
	onOne := usersOn(1, 1, 1, shards)[0]
	if o, adm := mustAdmit(t, a, v, onOne); o != seckill.OutcomeAccepted || seckill.OrderEpoch(adm.OrderID) != 0 {
		t.Fatalf("a buyer of another shard during the rebuild: %s, order %d; want ACCEPTED in epoch 0", o, adm.OrderID)
	}
	if _, _, err := a.Admit(ctx, v, onTwo[1], seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("a buyer of the shard being rebuilt: %v, want ErrRebuildNeeded", err)
	}
	// Postgres moved shard 2 to epoch 1; onTwo[0] holds an order there.
	next := c
	next.Epoch = 1
	some := seckill.WarmState{Campaign: next, Buyers: []int64{onTwo[0]}, Shards: []int{2}}
	if ok, err := a.FinishRebuild(ctx, "not the token", some); err != nil || ok {
		t.Fatalf("finish the rebuild with a foreign token: %v, %v; want false", ok, err)
	}
	if _, _, err := a.Admit(ctx, v, onTwo[1], seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("a buyer of shard 2 after a foreign token's finish: %v, want ErrRebuildNeeded (still stopped)", err)
	}
	ok, err = a.FinishRebuild(ctx, lock.Token, some)
	if err != nil || !ok {
		t.Fatalf("finish rebuild: %v, %v", ok, err)
	}
	if need, err := a.NeedsRebuild(ctx, []int64{v}); err != nil || len(need) != 0 {
		t.Errorf("needs rebuild after it: %v, %v", need, err)
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{10, 9, 0}) {
		t.Errorf("shards after the rebuild of shard 2: %v, want [10 9 0]", got)
	}
	if e := rdb.HGet(ctx, admission.ShardCampaignKey(a, v, 1, shards), "epoch").Val(); e != "0" {
		t.Errorf("shard 1's epoch %q, want 0: it was not rebuilt", e)
	}
	lc := liveOf(t, a, v)
	if !lc.Recount || lc.Remaining != 19 {
		t.Errorf("live counts %+v, want 19 remaining and a recount owed", lc)
	}
	wantOutcome(t, a, v, onTwo[0], seckill.OutcomeAlreadyPurchased, "a buyer Postgres knows")
	o, adm := mustAdmit(t, a, v, onTwo[2])
	if _, shard, _ := seckill.SplitShardOrderID(adm.OrderID); o != seckill.OutcomeAccepted || shard != 2 || seckill.OrderEpoch(adm.OrderID) != 1 {
		t.Fatalf("a buyer of the rebuilt shard: %s, order %d; want ACCEPTED in shard 2, epoch 1", o, adm.OrderID)
	}

	// Sell what is left; then the next buyer hears of the recount, not
	// SOLD_OUT.
	for i, u := range usersOn(100, 18, 0, shards) {
		if o, _ := mustAdmit(t, a, v, u); o != seckill.OutcomeAccepted {
			t.Fatalf("buyer %d of the 18 units left: %s", i, o)
		}
	}
	last := usersOn(1000, 1, 1, shards)[0]
	if _, _, err := a.Admit(ctx, v, last, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Fatalf("a buyer once nothing is left but a recount is owed: %v, want ErrRebuildNeeded", err)
	}
	if need, err := a.NeedsRebuild(ctx, []int64{v}); err != nil || !slices.Equal(need, []int64{v}) {
		t.Fatalf("needs rebuild for the recount: %v, %v", need, err)
	}
	lock, ok, err = a.BeginRebuild(ctx, v)
	if err != nil || !ok || lock.Shards != nil {
		t.Fatalf("begin the recount: %+v, %v, %v; want a rebuild of the whole campaign", lock, ok, err)
	}
	if want := "units to count back, none left to sell"; lock.Reason != want {
		t.Errorf("the recount's reason %q, want %q", lock.Reason, want)
	}
	// Postgres still counts the 10 units shard 2 lost.
	whole := c
	whole.Stock, whole.Epoch = 10, 2
	if ok, err := a.FinishRebuild(ctx, lock.Token, seckill.WarmState{Campaign: whole}); err != nil || !ok {
		t.Fatalf("finish the recount: %v, %v", ok, err)
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{4, 3, 3}) {
		t.Errorf("shards after the recount: %v, want [4 3 3]", got)
	}
	if lc := liveOf(t, a, v); lc.Recount || lc.Remaining != 10 {
		t.Errorf("live counts after the recount %+v, want 10 remaining, no recount", lc)
	}
	wantOutcome(t, a, v, last, seckill.OutcomeAccepted, "the buyer after the recount")
}

// TestShardedRebuildWhole: when every shard lost its state, the rebuild
// stops the whole campaign and installs every shard from Postgres's state
// in the new epoch; an admission then gets an id of that epoch and its
// buyer's shard.
func TestShardedRebuildWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	const v, shards = 510, 3
	c := shardedCampaign(v, 30, shards)
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	u := usersOn(1, 1, 1, shards)[0]
	for s := range shards {
		if err := rdb.HSet(ctx, admission.ShardCampaignKey(a, v, s, shards), "state", "stale").Err(); err != nil {
			t.Fatal(err)
		}
	}
	wantStale := usersOn(1, 1, 2, shards)[0]
	lock, ok, err := a.BeginRebuild(ctx, v)
	if err != nil || !ok || lock.Shards != nil {
		t.Fatalf("begin rebuild: %+v, %v, %v", lock, ok, err)
	}
	if want := "shard 0 stale; shard 1 stale; shard 2 stale"; lock.Reason != want {
		t.Errorf("the rebuild's reason %q, want %q", lock.Reason, want)
	}
	if _, _, err := a.Admit(ctx, v, u, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("a buyer during the rebuild: %v, want ErrRebuildNeeded", err)
	}
	c.Stock, c.Epoch = 20, 1
	ok, err = a.FinishRebuild(ctx, lock.Token, seckill.WarmState{Campaign: c, Buyers: []int64{wantStale}})
	if err != nil || !ok {
		t.Fatalf("finish rebuild: %v, %v", ok, err)
	}
	if need, err := a.NeedsRebuild(ctx, []int64{v}); err != nil || len(need) != 0 {
		t.Errorf("needs rebuild after it: %v, %v", need, err)
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{7, 7, 6}) {
		t.Errorf("rebuilt shards %v, want [7 7 6]", got)
	}
	wantOutcome(t, a, v, wantStale, seckill.OutcomeAlreadyPurchased, "a buyer Postgres knows")
	o, adm := mustAdmit(t, a, v, u)
	if o != seckill.OutcomeAccepted {
		t.Fatalf("after the rebuild: %s", o)
	}
	if _, shard, _ := seckill.SplitShardOrderID(adm.OrderID); shard != 1 || seckill.OrderEpoch(adm.OrderID) != 1 {
		t.Errorf("order %d: shard %d epoch %d, want shard 1 epoch 1", adm.OrderID, shard, seckill.OrderEpoch(adm.OrderID))
	}
}

// TestShardedLookDuringWarm: a rebuild's first look can catch a new
// campaign's shards half installed (Warm installs them one by one, shard 0
// last; the reconciler looks at every live campaign), and then find them
// all there under the lock, or fail to look again. Either way it takes
// nothing: no lock held, no shard stopped, and no "recount" mark left on
// shard 0, which would have rebuilt the whole campaign, stopping it, when
// it sold out (UNAVAILABLE to every buyer until the rebuild ended, with
// no fault).
func TestShardedLookDuringWarm(t *testing.T) {
	t.Parallel()
	lookFailed := errors.New("the second look fails")
	for _, tc := range []struct {
		name    string
		second  error // what the second look answers
		wantErr bool
	}{
		{"every shard there", nil, false},
		{"the second look fails", lookFailed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
			const v, shards = 512, 3
			mustWarm(t, a, seckill.WarmState{Campaign: shardedCampaign(v, 3, shards)})
			// Shard 1 not installed yet at the first look; installed right after it.
			one := admission.ShardCampaignKey(a, v, 1, shards)
			fields, err := rdb.HGetAll(ctx, one).Result()
			if err != nil || len(fields) == 0 {
				t.Fatalf("shard 1's hash: %v, %v", fields, err)
			}
			if err := rdb.Del(ctx, one).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.AddHook(afterLook(func(n int) error {
				switch n {
				case 1:
					if err := rdb.HSet(ctx, one, fields).Err(); err != nil {
						t.Error(err)
					}
				case 2:
					return tc.second
				}
				return nil
			}))
			lock, ok, err := a.BeginRebuild(ctx, v)
			if ok || (err != nil) != tc.wantErr {
				t.Fatalf("begin rebuild: %+v, %v, %v; want no lock, error %v", lock, ok, err, tc.wantErr)
			}
			if n, err := rdb.HExists(ctx, admission.ShardCampaignKey(a, v, 0, shards), "recount").Result(); err != nil || n {
				t.Fatalf("shard 0 marked recount (%v, %v) by a rebuild that did not go on", n, err)
			}
			if n, err := rdb.Exists(ctx, admission.RebuildKey(a, v)).Result(); err != nil || n != 0 {
				t.Errorf("the rebuild lock is held (%d, %v) by a rebuild that did not go on", n, err)
			}
			for i := range shards {
				if st := rdb.HGet(ctx, admission.ShardCampaignKey(a, v, i, shards), "state").Val(); st != "" {
					t.Errorf("shard %d has state %q", i, st)
				}
			}
			// Sold out: nothing to rebuild, and the last buyer is told SOLD_OUT.
			var sold int
			for u := int64(1); sold < 3 && u < 100; u++ {
				if o, _ := mustAdmit(t, a, v, u); o == seckill.OutcomeAccepted {
					sold++
				}
			}
			if need, err := a.NeedsRebuild(ctx, []int64{v}); err != nil || len(need) != 0 {
				t.Errorf("sold out, needs rebuild: %v, %v; want none", need, err)
			}
			if o, _, err := a.Admit(ctx, v, 1000, seckill.Ticket{}); err != nil || o != seckill.OutcomeSoldOut {
				t.Errorf("after the sell-out: %s, %v; want SOLD_OUT", o, err)
			}
		})
	}
}

// TestShardedRebuildDuringWarm: a reconciler (another process) that looks
// at a new campaign of several shards while Warm has installed every shard
// but shard 0 leaves it alone, and Warm installs it whole: no shard
// rebuilt in a new epoch with no units, no recount owed at the sell-out.
func TestShardedRebuildDuringWarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testenv.MustOpenRedis(t)
	const v, shards, stock = 513, 3, 6
	c := shardedCampaign(v, stock, shards)
	a := admission.New(rdb, admission.Options{Prefix: prefix, SoldOutTTL: -1})
	// The reconciler learns the number of shards from Postgres while
	// shard 0 is missing.
	other := admission.New(rdb, admission.Options{Prefix: prefix, SoldOutTTL: -1,
		CampaignShards: func(context.Context, []int64) (map[int64]int, error) {
			return map[int64]int{v: shards}, nil
		}})
	zero := admission.ShardCampaignKey(a, v, 0, shards)
	var looked atomic.Bool
	rdb.AddHook(beforeScriptOn(zero, func() {
		if !looked.CompareAndSwap(false, true) {
			return
		}
		for i := 1; i < shards; i++ {
			if n, _ := rdb.Exists(ctx, admission.ShardCampaignKey(a, v, i, shards)).Result(); n != 1 {
				t.Errorf("shard %d not installed before shard 0", i)
			}
		}
		if need, err := other.NeedsRebuild(ctx, []int64{v}); err != nil || len(need) != 1 {
			t.Errorf("half warmed, needs rebuild: %v, %v; want the campaign", need, err)
		}
		if lock, ok, err := other.BeginRebuild(ctx, v); ok || err != nil {
			t.Errorf("a rebuild began during Warm: %+v, %v, %v", lock, ok, err)
		}
	}))
	if ok, err := a.Warm(ctx, seckill.WarmState{Campaign: c}); !ok || err != nil {
		t.Fatalf("warm: %v, %v", ok, err)
	}
	if !looked.Load() {
		t.Fatal("the hook never ran before shard 0's install")
	}
	if n, err := rdb.Exists(ctx, admission.RebuildKey(a, v)).Result(); err != nil || n != 0 {
		t.Errorf("the rebuild lock is held (%d, %v) after Warm", n, err)
	}
	if got := shardStocks(t, a, rdb, v, shards); got[0]+got[1]+got[2] != stock {
		t.Errorf("shards' stock %v; want %d in all", got, stock)
	}
	if n, err := rdb.HExists(ctx, zero, "recount").Result(); err != nil || n {
		t.Errorf("shard 0 marked recount (%v, %v)", n, err)
	}
	if need, err := other.NeedsRebuild(ctx, []int64{v}); err != nil || len(need) != 0 {
		t.Errorf("warmed, needs rebuild: %v, %v; want none", need, err)
	}
	var sold int
	for u := int64(1); sold < stock && u < 200; u++ {
		if o, _ := mustAdmit(t, a, v, u); o == seckill.OutcomeAccepted {
			sold++
		}
	}
	if sold != stock {
		t.Errorf("sold %d; want %d", sold, stock)
	}
	if need, err := other.NeedsRebuild(ctx, []int64{v}); err != nil || len(need) != 0 {
		t.Errorf("sold out, needs rebuild: %v, %v; want none", need, err)
	}
	if o, _, err := a.Admit(ctx, v, 1000, seckill.Ticket{}); err != nil || o != seckill.OutcomeSoldOut {
		t.Errorf("after the sell-out: %s, %v; want SOLD_OUT", o, err)
	}
}

// TestShardedWarmWhileRebuilding: a rebuild that holds the lock (it found
// the new campaign missing in Redis) installs it from Postgres itself:
// Warm installs no shard and leaves the rebuild's lock alone.
func TestShardedWarmWhileRebuilding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	const v, shards = 514, 3
	if err := rdb.Set(ctx, admission.RebuildKey(a, v), "the rebuild's token", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Warm(ctx, seckill.WarmState{Campaign: shardedCampaign(v, 6, shards)}); ok || err != nil {
		t.Fatalf("warm during a rebuild: %v, %v; want nothing installed, no error", ok, err)
	}
	for i := range shards {
		if n, err := rdb.Exists(ctx, admission.ShardCampaignKey(a, v, i, shards)).Result(); err != nil || n != 0 {
			t.Errorf("shard %d installed (%d, %v) during a rebuild", i, n, err)
		}
	}
	if got, err := rdb.Get(ctx, admission.RebuildKey(a, v)).Result(); err != nil || got != "the rebuild's token" {
		t.Errorf("the rebuild's lock after Warm: %q, %v", got, err)
	}
}

// beforeScriptOn returns a go-redis hook that calls f before each script
// call sent alone (EVALSHA or EVAL) whose first key is key.
func beforeScriptOn(key string, f func()) redis.Hook { return scriptHook{key: key, f: f} }

type scriptHook struct {
	key string
	f   func()
}

func (h scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 3 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") && args[3] == h.key {
			h.f()
		}
		return next(ctx, cmd)
	}
}
func (h scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// afterLook is a go-redis hook that calls f with n after the n-th pipeline
// that reads shards' states for a rebuild (HMGET of stock, epoch, state,
// seq and recount); an error f returns is that pipeline's.
type afterLook func(n int) error

func (f afterLook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (f afterLook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (f afterLook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	var looks atomic.Int64
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if len(cmds) > 0 && cmds[0].Name() == "hmget" && slices.Contains(cmds[0].Args(), any("seq")) {
			if ferr := f(int(looks.Add(1))); ferr != nil {
				return ferr
			}
		}
		return err
	}
}

// liveOf reads one campaign's live counts.
func liveOf(t *testing.T, a *admission.Admitter, v int64) seckill.LiveCounts {
	t.Helper()
	m, err := a.LiveCounts(context.Background(), []int64{v})
	if err != nil {
		t.Fatal(err)
	}
	return m[v]
}

func TestShardedForget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	const v = 507
	mustWarm(t, a, seckill.WarmState{Campaign: shardedCampaign(v, 9, 3)})
	if err := a.Forget(ctx, v); err != nil {
		t.Fatal(err)
	}
	for s := range 3 {
		if n, _ := rdb.Exists(ctx, admission.ShardCampaignKey(a, v, s, 3)).Result(); n != 0 {
			t.Errorf("shard %d left after Forget", s)
		}
	}
}

// TestShardedChanges: a window, a pause, a guard, a retirement apply to
// every shard; the brake is split between them.
func TestShardedChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	const v, shards = 508, 3
	c := shardedCampaign(v, 30, shards)
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	users := []int64{usersOn(1, 1, 0, shards)[0], usersOn(1, 1, 1, shards)[0], usersOn(1, 1, 2, shards)[0]}
	if err := a.UpdateCampaign(ctx, v, c.BeginTime, c.EndTime, true); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		wantOutcome(t, a, v, u, seckill.OutcomePaused, "paused")
	}
	if err := a.UpdateGuard(ctx, v, seckill.ChallengeQuiz, 10); err != nil {
		t.Fatal(err)
	}
	for s := range shards {
		key := strings.TrimSuffix(admission.ShardCampaignKey(a, v, s, shards), "campaign") + "guard"
		g, err := rdb.HGetAll(ctx, key).Result()
		if err != nil || g["challenge"] != "QUIZ" || g["brake"] != "3" {
			t.Errorf("shard %d's guard %v (%v), want QUIZ and a brake of 3 (10 / 3)", s, g, err)
		}
	}
	if err := a.UpdateGuard(ctx, v, seckill.ChallengeNone, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.UpdateCampaign(ctx, v, c.BeginTime, c.EndTime, false); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		wantOutcome(t, a, v, u, seckill.OutcomeAccepted, "resumed")
	}
	// Ended long ago, nothing pending: every shard's buyers go.
	pend, err := a.PendingOf(ctx, v)
	if err != nil || len(pend) != 3 {
		t.Fatalf("pending %d, %v", len(pend), err)
	}
	if err := a.Ack(ctx, pend); err != nil {
		t.Fatal(err)
	}
	if err := a.UpdateCampaign(ctx, v, c.BeginTime.Add(-3*time.Hour), c.BeginTime.Add(-2*time.Hour), false); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Retire(ctx, []int64{v}, time.Hour); err != nil || n != 1 {
		t.Fatalf("retire: %d, %v", n, err)
	}
	for s := range shards {
		if n, _ := rdb.Exists(ctx, admission.ShardBuyersKey(a, v, s, shards)).Result(); n != 0 {
			t.Errorf("shard %d kept its buyers", s)
		}
	}
	wantOutcome(t, a, v, users[2], seckill.OutcomeEnded, "retired")
}

// TestShardedAddStock: units added go to shard 0, and a buyer of another
// shard gets them once its own run out.
func TestShardedAddStock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	const v, shards = 509, 3
	mustWarm(t, a, seckill.WarmState{Campaign: shardedCampaign(v, 0, shards)})
	buyer := usersOn(1, 1, 2, shards)[0]
	wantOutcome(t, a, v, buyer, seckill.OutcomeSoldOut, "nothing on sale")
	if err := a.AddStock(ctx, v, 4); err != nil {
		t.Fatal(err)
	}
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{4, 0, 0}) {
		t.Errorf("after adding 4: %v, want [4 0 0]", got)
	}
	wantOutcome(t, a, v, buyer, seckill.OutcomeAccepted, "units added to shard 0")
	if got := shardStocks(t, a, rdb, v, shards); !slices.Equal(got, []int64{2, 0, 1}) {
		t.Errorf("after a buyer of shard 2: %v, want [2 0 1] (half of shard 0's moved, one sold)", got)
	}
}

// commandCounter counts the commands a client sends, by name.
type commandCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}
func (c *commandCounter) count(cmd redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[strings.ToLower(cmd.Name())]++
}
func (c *commandCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	return n
}

// TestFirstPurchaseOneRoundTrip: a process that never saw a campaign sends
// its first purchase of a campaign of one shard as one script call, as
// before shards; of a campaign of several, shard 0 says how many and the
// purchase goes to the buyer's shard (two calls, once per process).
func TestFirstPurchaseOneRoundTrip(t *testing.T) {
	t.Parallel()
	warmer, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	const one, three = 510, 511
	mustWarm(t, warmer, seckill.WarmState{Campaign: liveCampaign(one, 5)})
	mustWarm(t, warmer, seckill.WarmState{Campaign: shardedCampaign(three, 6, 3)})
	var counter commandCounter
	rdb.AddHook(&counter)
	a := admission.New(rdb, admission.Options{Prefix: admission.Prefix(warmer), SoldOutTTL: -1})
	counter.take()

	wantOutcome(t, a, one, 1, seckill.OutcomeAccepted, "first purchase of a campaign of one shard")
	if got := counter.take(); got["evalsha"]+got["eval"] != 1 || len(got) > 2 {
		t.Errorf("first purchase of a campaign of one shard sent %v, want one script call", got)
	}
	wantOutcome(t, a, one, 2, seckill.OutcomeAccepted, "second purchase")
	if got := counter.take(); got["evalsha"]+got["eval"] != 1 || len(got) > 2 {
		t.Errorf("second purchase sent %v, want one script call", got)
	}
	u := usersOn(1, 1, 2, 3)[0]
	o, adm := mustAdmit(t, a, three, u)
	if got := counter.take(); got["evalsha"]+got["eval"] != 2 || len(got) > 2 {
		t.Errorf("first purchase of a campaign of 3 shards sent %v, want two script calls", got)
	}
	if _, shard, _ := seckill.SplitShardOrderID(adm.OrderID); o != seckill.OutcomeAccepted || shard != 2 {
		t.Errorf("first purchase of a campaign of 3 shards: %s in shard %d, want ACCEPTED in shard 2", o, shard)
	}
	wantOutcome(t, a, three, usersOn(1, 1, 1, 3)[0], seckill.OutcomeAccepted, "second purchase of it")
	if got := counter.take(); got["evalsha"]+got["eval"] != 1 || len(got) > 2 {
		t.Errorf("second purchase of a campaign of 3 shards sent %v, want one script call", got)
	}
}
