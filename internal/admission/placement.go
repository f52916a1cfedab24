package admission

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Tags are identity: every key of a campaign's shard carries its tag
// (shardTag), which depends only on the voucher id and the number of
// shards, so no process ever has to agree with another about where a shard
// is. They spread the shards over the slot space in equal parts, which
// spreads them over the masters when the masters own equal, contiguous
// ranges of slots (redis-cli --cluster create). A cluster resharded since
// may own them otherwise, and put two shards of a campaign on one master
// while another has none: the campaign still sells correctly, on fewer
// cores. Placement tells the operator, who can move a shard's slot to an
// idle master (CLUSTER SETSLOT, or redis-cli --cluster reshard) without
// touching any key name.

// ShardPlacement is where one stock shard of a campaign lives.
type ShardPlacement struct {
	Shard  int
	Tag    string // the shard's hash tag, as in its keys: v42, v42.1.7
	Slot   int    // the tag's Redis Cluster slot
	Master string // the address of the master serving Slot; "" when Redis is not a cluster
}

// Placement is where the stock shards of a campaign live.
type Placement struct {
	VoucherID int64
	Shards    []ShardPlacement
	// Masters is how many masters the cluster has (0: Redis is not a
	// cluster, and every shard is on its one server).
	Masters int
}

// Used is how many masters hold at least one shard.
func (p Placement) Used() int {
	used := map[string]bool{}
	for _, s := range p.Shards {
		used[s.Master] = true
	}
	return len(used)
}

// Uneven reports whether the shards sit on fewer masters than they could:
// on a cluster of M masters a campaign of N shards should use min(N, M) of
// them, with at most ⌈N/M⌉ shards on any one. Always false off a cluster.
func (p Placement) Uneven() bool {
	n, m := len(p.Shards), p.Masters
	if m == 0 || n <= 1 {
		return false
	}
	per := map[string]int{}
	most := 0
	for _, s := range p.Shards {
		per[s.Master]++
		most = max(most, per[s.Master])
	}
	return len(per) < min(n, m) || most > (n+m-1)/m
}

// String lists the shards as "shard:tag:slot@master", one after another.
func (p Placement) String() string {
	var b strings.Builder
	for i, s := range p.Shards {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:{%s}:%d@%s", s.Shard, s.Tag, s.Slot, cmp.Or(s.Master, "-"))
	}
	return b.String()
}

// Placement reads where the stock shards of each campaign of ids live: the
// number of shards as Redis (or Postgres, see Options.CampaignShards)
// knows it, and, on a cluster, the slot map, read once (CLUSTER SLOTS). A
// campaign Redis does not hold counts as one shard.
func (a *Admitter) Placement(ctx context.Context, ids []int64) ([]Placement, error) {
	n, err := a.shardCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	masters, count, err := a.slotMasters(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Placement, 0, len(ids))
	for _, id := range ids {
		if validVoucherID(id) {
			out = append(out, placement(id, n[id], masters, count))
		}
	}
	return out, nil
}

// placement places the shards of a campaign of n shards by a slot map
// (masters, of count masters; nil off a cluster).
func placement(voucherID int64, n int, masters func(slot int) string, count int) Placement {
	p := Placement{VoucherID: voucherID, Masters: count, Shards: make([]ShardPlacement, max(n, 1))}
	for i := range p.Shards {
		tag := shardTag(voucherID, i, n)
		s := ShardPlacement{Shard: i, Tag: tag, Slot: int(keySlot("{" + tag + "}"))}
		if masters != nil {
			s.Master = masters(s.Slot)
		}
		p.Shards[i] = s
	}
	return p
}

// slotMasters reads the cluster's slot map: the master of each slot ("?"
// for a slot no master serves) and how many masters serve slots. Off a
// cluster it returns nil and 0.
func (a *Admitter) slotMasters(ctx context.Context) (func(slot int) string, int, error) {
	cc, ok := a.rdb.(*redis.ClusterClient)
	if !ok {
		return nil, 0, nil
	}
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, 0, redisError("cluster slots", err, nil)
	}
	all := map[string]bool{}
	for _, r := range ranges {
		if len(r.Nodes) > 0 {
			all[r.Nodes[0].Addr] = true
		}
	}
	return func(slot int) string {
		for _, r := range ranges {
			if slot >= r.Start && slot <= r.End && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
		return "?"
	}, len(all), nil
}

// warnPlacement logs a warning when the shards of a campaign of n shards
// share masters they need not share (Placement.Uneven). It is advice: a
// failure to read the slot map is logged, never returned.
func (a *Admitter) warnPlacement(ctx context.Context, voucherID int64, n int) {
	masters, count, err := a.slotMasters(ctx)
	if err != nil {
		a.logger.WarnContext(ctx, "read the cluster's slot map to check where the stock shards are", "voucher_id", voucherID, "err", err)
		return
	}
	if p := placement(voucherID, n, masters, count); p.Uneven() {
		a.logger.WarnContext(ctx, "stock shards of a campaign share Redis masters: the cluster's slots are not split evenly, so its "+
			"admissions run on fewer masters than they could (seckill shards <voucher id> shows where; docs/design.md \"Stock shards\")",
			"voucher_id", voucherID, "shards", n, "masters", count, "masters_used", p.Used(), "placement", p.String())
	}
}
