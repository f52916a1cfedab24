package admission_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

// The stock shards of a campaign against a model (STYLE.md: every state
// machine gets one). The model is what the README promises of a campaign
// of N shards, with no shard in sight: it has units (the stock, less what
// was admitted, plus what came back), each user holds at most one, and a
// buyer who holds none is ACCEPTED while the campaign has a unit left
// anywhere, in a shard's stock or on its way between shards (a move its
// mover left halfway, which the buyer's process then finishes), and
// SOLD_OUT only when none is left. (TRY_AGAIN needs concurrent buyers: a
// unit on its way that another process is moving.) Random sequences of purchases, returns, moves left after
// their first or second step (a mover killed) and reconciler passes run
// against real Redis, and after every step the units Redis holds (every
// shard's stock and every move recorded and not yet applied) must be the
// model's, and so must the units left that LiveCounts (the consistency
// panel's read) answers.

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
			shards: rapid.IntRange(2, 4).Draw(rt, "shards"), orders: map[int64]int64{}}
		m.units = rapid.Int64Range(0, 12).Draw(rt, "stock")
		c := liveCampaign(m.v, m.units)
		c.Shards = m.shards
		if _, err := a.Warm(m.ctx, seckill.WarmState{Campaign: c}); err != nil {
			rt.Fatal(err)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"buy":     m.buy,
			"return":  m.giveBack,
			"moveOut": m.moveOut,
			"moveIn":  m.moveIn,
			"finish":  m.finish,
			"":        m.check,
		})
	})
}

// buy admits a user; the answer must be what the model allows.
func (m *shardModel) buy(rt *rapid.T) {
	u := rapid.Int64Range(1, 20).Draw(rt, "user")
	o, adm, err := m.a.Admit(m.ctx, m.v, u, seckill.Ticket{})
	if err != nil {
		rt.Fatalf("admit user %d: %v", u, err)
	}
	_, holds := m.orders[u]
	switch {
	case holds:
		if o != seckill.OutcomeAlreadyPurchased {
			rt.Fatalf("user %d holds a unit: %s", u, o)
		}
	case m.units > 0:
		if o != seckill.OutcomeAccepted {
			rt.Fatalf("user %d, %d units left: %s", u, m.units, o)
		}
		// The moves on their way may have been finished meanwhile.
		m.moves = m.moves[:0]
	default:
		if o != seckill.OutcomeSoldOut {
			rt.Fatalf("user %d, nothing left: %s, want SOLD_OUT", u, o)
		}
	}
	if o == seckill.OutcomeAccepted {
		m.units--
		m.orders[u] = adm.OrderID
		if _, shard, _ := seckill.SplitShardOrderID(adm.OrderID); shard != seckill.ShardOf(u, m.shards) {
			rt.Fatalf("order %d of user %d in shard %d, want the user's", adm.OrderID, u, shard)
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
	r := seckill.UnitReturn{OrderID: m.orders[u], VoucherID: m.v, UserID: u}
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

// finish is a reconciler pass.
func (m *shardModel) finish(rt *rapid.T) {
	if _, err := m.a.FinishMoves(m.ctx, []int64{m.v}); err != nil {
		rt.Fatal(err)
	}
	m.moves = nil
}

// onTheWay is how many units are in moves recorded and not yet applied,
// as Redis holds them.
func (m *shardModel) onTheWay(rt *rapid.T) int64 {
	var n int64
	for s := range m.shards {
		recs, err := m.rdb.HGetAll(m.ctx, admission.ShardMovesKey(m.a, m.v, s, m.shards)).Result()
		if err != nil {
			rt.Fatal(err)
		}
		for id, rec := range recs {
			f := strings.Split(rec, ":")
			if len(f) != 4 {
				rt.Fatalf("move record %q", rec)
			}
			to := int(f[0][0] - '0')
			applied, err := m.rdb.SIsMember(m.ctx, admission.ShardMovedInKey(m.a, m.v, to, m.shards), id).Result()
			if err != nil {
				rt.Fatal(err)
			}
			if !applied {
				var k int64
				for _, c := range f[1] {
					k = 10*k + int64(c-'0')
				}
				n += k
			}
		}
	}
	return n
}

// check holds Redis's units to the model's.
func (m *shardModel) check(rt *rapid.T) {
	var stock int64
	for s := range m.shards {
		n, err := m.rdb.HGet(m.ctx, admission.ShardCampaignKey(m.a, m.v, s, m.shards), "stock").Int64()
		if err != nil {
			rt.Fatal(err)
		}
		if n < 0 {
			rt.Fatalf("shard %d holds %d units", s, n)
		}
		stock += n
	}
	if got := stock + m.onTheWay(rt); got != m.units {
		rt.Fatalf("Redis holds %d units (%d in stock), the model %d", got, stock, m.units)
	}
	// The live read (the consistency panel's) counts each unit once too,
	// with moves stopped after either step.
	live, err := m.a.LiveCounts(m.ctx, []int64{m.v})
	if err != nil {
		rt.Fatal(err)
	}
	if got := live[m.v].Remaining; got != m.units {
		rt.Fatalf("LiveCounts: %d units left, the model %d", got, m.units)
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
