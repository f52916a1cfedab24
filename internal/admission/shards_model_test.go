package admission_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

// The stock shards of a campaign against a model (STYLE.md: every state
// machine gets one). The model is what docs/design.md promises of a campaign
// of N shards, with no shard in sight: it has units (the stock, less what
// was admitted, plus what came back), each user holds at most one, and a
// buyer who holds none is ACCEPTED while the campaign has a unit left
// anywhere, in a shard's stock or on its way between shards (a move its
// mover left halfway, which the buyer's process then finishes), and
// SOLD_OUT only when none is left. (TRY_AGAIN needs concurrent buyers: a
// unit on its way that another process is moving.) Random sequences of
// purchases, returns, moves left after their first or second step (a mover
// killed), reconciler passes, and losses of one shard's state (its master
// failed over to a replica that missed writes: the shard is stale, with
// any stock, and may have lost its records of moves) followed by the
// rebuild run against real Redis.
//
// After every step the units Redis holds (every shard's stock and every
// move recorded and not yet applied) must be the model's less those
// stranded by a loss, and so must the units left that LiveCounts (the
// consistency panel's read) answers. A rebuild of the lost shard alone
// may strand units (the model's Postgres still counts them): never more
// units in Redis than the model has, never SOLD_OUT while any is left,
// and once nothing is left in Redis the buyer's answer asks for the
// recount, the rebuild of the whole campaign, after which Redis holds
// exactly the model's units again.

var modelVoucher atomic.Int64

type shardModel struct {
	a      *admission.Admitter
	rdb    redis.UniversalClient
	ctx    context.Context
	v      int64
	shards int
	units  int64           // units left: in a shard's stock or on their way
	orders map[int64]int64 // user -> order id, for the users holding a unit
	moves  []modelMove     // moves left after their first or second step

	// Shard losses: Postgres's epoch of each shard, the shards that lost
	// their state and are not rebuilt yet, the units Redis lost that only
	// Postgres counts (until the recount), and whether one is owed.
	epochs   []int64
	stale    map[int]bool
	stranded int64
	recount  bool
	c        seckill.Campaign
}

type modelMove struct {
	id       string
	to       int
	n, epoch int64
}

func TestShardsModel(t *testing.T) {
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	admission.FinishMovesNow(a)
	rapid.Check(t, func(rt *rapid.T) {
		m := &shardModel{a: a, rdb: rdb, ctx: context.Background(), v: 9000 + modelVoucher.Add(1),
			shards: rapid.IntRange(2, 4).Draw(rt, "shards"), orders: map[int64]int64{}, stale: map[int]bool{}}
		m.units = rapid.Int64Range(0, 12).Draw(rt, "stock")
		m.epochs = make([]int64, m.shards)
		m.c = liveCampaign(m.v, m.units)
		m.c.Shards = m.shards
		if _, err := a.Warm(m.ctx, seckill.WarmState{Campaign: m.c}); err != nil {
			rt.Fatal(err)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"buy":     m.buy,
			"return":  m.giveBack,
			"moveOut": m.moveOut,
			"moveIn":  m.moveIn,
			"finish":  m.finish,
			"lose":    m.lose,
			"rebuild": m.rebuild,
			"":        m.check,
		})
	})
}

// buy admits a user; the answer must be what the model allows.
func (m *shardModel) buy(rt *rapid.T) {
	m.buyAs(rt, rapid.Int64Range(1, 20).Draw(rt, "user"))
}

func (m *shardModel) buyAs(rt *rapid.T, u int64) {
	o, adm, err := m.a.Admit(m.ctx, m.v, u, seckill.Ticket{})
	inRedis := m.units - m.stranded
	switch {
	case m.stale[seckill.ShardOf(u, m.shards)]:
		if !errors.Is(err, seckill.ErrRebuildNeeded) {
			rt.Fatalf("user %d of a stale shard: %s, %v; want ErrRebuildNeeded", u, o, err)
		}
		return
	case errors.Is(err, seckill.ErrRebuildNeeded) && m.recount && inRedis == 0 && len(m.stale) == 0:
		// Nothing left in Redis, units to count back: the Service
		// rebuilds the whole campaign and asks again.
		m.rebuildNow(rt, true)
		m.buyAs(rt, u)
		return
	case err != nil:
		rt.Fatalf("admit user %d (%d units, %d stranded): %v", u, m.units, m.stranded, err)
	}
	_, holds := m.orders[u]
	switch {
	case holds:
		if o != seckill.OutcomeAlreadyPurchased {
			rt.Fatalf("user %d holds a unit: %s", u, o)
		}
	case len(m.stale) > 0:
		// Another shard is stopped: its units may be the only ones left.
		if o != seckill.OutcomeAccepted && o != seckill.OutcomeTryAgain {
			rt.Fatalf("user %d while a shard is stale: %s, want ACCEPTED or TRY_AGAIN", u, o)
		}
	case inRedis > 0:
		if o != seckill.OutcomeAccepted {
			rt.Fatalf("user %d, %d units left: %s", u, m.units, o)
		}
		// The moves on their way may have been finished meanwhile.
		m.moves = m.moves[:0]
	case m.recount:
		rt.Fatalf("user %d, nothing left in Redis, a recount owed: %s, want ErrRebuildNeeded", u, o)
	default:
		if o != seckill.OutcomeSoldOut {
			rt.Fatalf("user %d, nothing left: %s, want SOLD_OUT", u, o)
		}
	}
	if o == seckill.OutcomeAccepted {
		m.units--
		m.orders[u] = adm.OrderID
		m.moves = m.moves[:0]
		_, shard, _ := seckill.SplitShardOrderID(adm.OrderID)
		if shard != seckill.ShardOf(u, m.shards) || seckill.OrderEpoch(adm.OrderID) != m.epochs[shard] {
			rt.Fatalf("order %d of user %d in shard %d, epoch %d; want the user's shard, in its epoch %d",
				adm.OrderID, u, shard, seckill.OrderEpoch(adm.OrderID), m.epochs[shard])
		}
	}
}

// giveBack returns a held unit (a cancel or an expiry), once or twice.
func (m *shardModel) giveBack(rt *rapid.T) {
	if len(m.orders) == 0 {
		rt.Skip("nobody holds a unit")
	}
	var users []int64
	for u := range m.orders {
		users = append(users, u)
	}
	u := rapid.SampledFrom(sortInt64(users)).Draw(rt, "holder")
	_, shard, _ := seckill.SplitShardOrderID(m.orders[u])
	if m.stale[shard] {
		rt.Skip("the holder's shard is stale: the sweep returns the unit after the rebuild")
	}
	// Postgres takes the unit back in the epoch the order's shard is in.
	r := seckill.UnitReturn{OrderID: m.orders[u], VoucherID: m.v, UserID: u, Epoch: m.epochs[shard]}
	for range rapid.IntRange(1, 2).Draw(rt, "times") {
		if ok, err := m.a.ReturnUnit(m.ctx, r); err != nil || !ok {
			rt.Fatalf("return the unit of user %d: %v, %v", u, ok, err)
		}
	}
	delete(m.orders, u)
	m.units++
}

// moveOut is a move whose mover died after its first step.
func (m *shardModel) moveOut(rt *rapid.T) {
	from := rapid.IntRange(0, m.shards-1).Draw(rt, "from")
	to := (from + rapid.IntRange(1, m.shards-1).Draw(rt, "offset")) % m.shards
	id, n, epoch, err := admission.MoveOut(m.ctx, m.a, m.v, m.shards, from, to, rapid.Int64Range(1, 5).Draw(rt, "n"))
	if err != nil {
		rt.Fatal(err)
	}
	if n > 0 {
		m.moves = append(m.moves, modelMove{id: id, to: to, n: n, epoch: epoch})
	}
}

// moveIn is a move whose mover died after its second step: the units
// arrived, the donor's record stays.
func (m *shardModel) moveIn(rt *rapid.T) {
	if len(m.moves) == 0 {
		rt.Skip("no move on its way")
	}
	i := rapid.IntRange(0, len(m.moves)-1).Draw(rt, "move")
	mv := m.moves[i]
	if _, err := admission.MoveIn(m.ctx, m.a, m.v, m.shards, mv.to, mv.id, mv.n, mv.epoch); err != nil {
		rt.Fatal(err)
	}
	m.moves = append(m.moves[:i], m.moves[i+1:]...) // its units are in a stock now
}

// lose is a failover of one shard's master to a replica that missed its
// last writes: the new server's guard marks the shard stale
// (ConnectHook), whatever stock it holds, and the replica may lack the
// shard's records of moves and of moves applied.
func (m *shardModel) lose(rt *rapid.T) {
	s := rapid.IntRange(0, m.shards-1).Draw(rt, "lost shard")
	base := admission.ShardCampaignKey(m.a, m.v, s, m.shards)
	stock := rapid.Int64Range(0, 6).Draw(rt, "stale stock")
	if err := m.rdb.HSet(m.ctx, base, "state", "stale", "stock", stock).Err(); err != nil {
		rt.Fatal(err)
	}
	if rapid.Bool().Draw(rt, "records lost") {
		if err := m.rdb.Del(m.ctx, admission.ShardMovesKey(m.a, m.v, s, m.shards),
			admission.ShardMovedInKey(m.a, m.v, s, m.shards)).Err(); err != nil {
			rt.Fatal(err)
		}
	}
	m.stale[s] = true
	m.moves = m.moves[:0] // the model no longer knows which of them still count
}

// rebuild is the reconciler restoring the campaign.
func (m *shardModel) rebuild(rt *rapid.T) {
	if len(m.stale) == 0 {
		rt.Skip("no shard lost its state")
	}
	m.rebuildNow(rt, false)
}

// rebuildNow rebuilds the campaign as the Service does, with the model as
// Postgres (its units are Postgres's stock: every admission is persisted),
// and checks that the rebuild is the one the state calls for: the lost
// shards alone while others admit, the whole campaign for the recount or
// when every shard was lost.
func (m *shardModel) rebuildNow(rt *rapid.T, recount bool) {
	need, err := m.a.NeedsRebuild(m.ctx, []int64{m.v})
	if err != nil || len(need) != 1 {
		rt.Fatalf("needs rebuild: %v, %v", need, err)
	}
	lock, ok, err := m.a.BeginRebuild(m.ctx, m.v)
	if err != nil || !ok {
		rt.Fatalf("begin rebuild: %v, %v", ok, err)
	}
	whole := recount || len(m.stale) == m.shards
	if whole != (lock.Shards == nil) {
		rt.Fatalf("rebuild of shards %v; %d stale of %d, recount %v", lock.Shards, len(m.stale), m.shards, recount)
	}
	for _, s := range lock.Shards {
		if !m.stale[s] {
			rt.Fatalf("rebuild of shards %v: shard %d did not lose its state (stale %v)", lock.Shards, s, m.stale)
		}
	}
	next := slices.Max(m.epochs) + 1
	var buyers []int64
	for u := range m.orders {
		buyers = append(buyers, u)
	}
	c := m.c
	c.Stock, c.Epoch = m.units, next
	if ok, err := m.a.FinishRebuild(m.ctx, lock.Token, seckill.WarmState{Campaign: c, Buyers: sortInt64(buyers), Shards: lock.Shards}); err != nil || !ok {
		rt.Fatalf("finish rebuild: %v, %v", ok, err)
	}
	m.moves = m.moves[:0]
	if whole {
		for s := range m.epochs {
			m.epochs[s] = next
		}
		clear(m.stale)
		m.stranded, m.recount = 0, false
		return
	}
	for _, s := range lock.Shards {
		m.epochs[s] = next
		delete(m.stale, s)
	}
	m.recount = true
	// What Redis holds now is what it sells; the rest is stranded until
	// the recount, and never more than the model has.
	held := m.redisUnits(rt)
	if held > m.units {
		rt.Fatalf("after rebuilding shards %v Redis holds %d units, the model %d", lock.Shards, held, m.units)
	}
	m.stranded = m.units - held
}

// finish is a reconciler pass.
func (m *shardModel) finish(rt *rapid.T) {
	if _, err := m.a.FinishMoves(m.ctx, []int64{m.v}); err != nil {
		rt.Fatal(err)
	}
	m.moves = nil
}

// redisUnits is how many units Redis can sell, as it holds them: the
// stock of every shard that admits, and the units of every move recorded
// and not yet applied that its recipient can still take (in the epoch the
// move was recorded for, from a donor in the epoch it was taken in).
func (m *shardModel) redisUnits(rt *rapid.T) int64 {
	epochs := make([]int64, m.shards)
	var n int64
	for s := range m.shards {
		c, err := m.rdb.HMGet(m.ctx, admission.ShardCampaignKey(m.a, m.v, s, m.shards), "stock", "epoch", "state").Result()
		if err != nil {
			rt.Fatal(err)
		}
		epochs[s] = parseInt(rt, c[1])
		if c[2] == nil {
			k := parseInt(rt, c[0])
			if k < 0 {
				rt.Fatalf("shard %d holds %d units", s, k)
			}
			n += k
		}
	}
	for s := range m.shards {
		recs, err := m.rdb.HGetAll(m.ctx, admission.ShardMovesKey(m.a, m.v, s, m.shards)).Result()
		if err != nil {
			rt.Fatal(err)
		}
		for id, rec := range recs {
			f := strings.Split(rec, ":")
			if len(f) != 5 {
				rt.Fatalf("move record %q", rec)
			}
			to, units, from, toEpoch := parseInt(rt, f[0]), parseInt(rt, f[1]), parseInt(rt, f[2]), parseInt(rt, f[4])
			if from != epochs[s] || toEpoch != epochs[to] || m.stale[int(to)] {
				continue // void: the donor or the recipient was rebuilt, or is to be
			}
			applied, err := m.rdb.SIsMember(m.ctx, admission.ShardMovedInKey(m.a, m.v, int(to), m.shards), id).Result()
			if err != nil {
				rt.Fatal(err)
			}
			if !applied {
				n += units
			}
		}
	}
	return n
}

func parseInt(rt *rapid.T, v any) int64 {
	s, _ := v.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		rt.Fatalf("not an integer: %v", v)
	}
	return n
}

// check holds Redis's units to the model's.
func (m *shardModel) check(rt *rapid.T) {
	if len(m.stale) > 0 {
		return // until the rebuild, the stale shard's count means nothing
	}
	if got := m.redisUnits(rt); got != m.units-m.stranded {
		rt.Fatalf("Redis holds %d units, the model %d (%d stranded)", got, m.units-m.stranded, m.stranded)
	}
	// The live read (the consistency panel's) counts each unit once too,
	// with moves stopped after either step, and says when units are to be
	// counted back.
	live, err := m.a.LiveCounts(m.ctx, []int64{m.v})
	if err != nil {
		rt.Fatal(err)
	}
	if got := live[m.v]; got.Remaining != m.units-m.stranded || got.Recount != m.recount {
		rt.Fatalf("LiveCounts: %d units left, recount %v; the model %d (%d stranded), recount %v",
			got.Remaining, got.Recount, m.units-m.stranded, m.stranded, m.recount)
	}
}

func sortInt64(s []int64) []int64 {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}
