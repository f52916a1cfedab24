package admission

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/lua"
)

var liveScript = newScript(lua.Live)

// LiveCounts returns, for each campaign, the units left and the admissions
// pending (admitted, not yet persisted), read by one script a campaign so the
// two agree: an admission moves a unit from one to the other atomically. Every
// valid id is in the map; Known is false for a campaign Redis does not hold.
func (a *Admitter) LiveCounts(ctx context.Context, voucherIDs []int64) (map[int64]seckill.LiveCounts, error) {
	out := make(map[int64]seckill.LiveCounts, len(voucherIDs))
	ids := make([]int64, 0, len(voucherIDs))
	for _, id := range voucherIDs {
		if validVoucherID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	// A campaign of several shards is read one script a shard: each
	// shard's counts agree, a unit on its way between shards counts as left
	// in its donor, and the sums are what the shards held at nearly one
	// instant.
	refs, err := a.allShards(ctx, ids)
	if err != nil {
		return nil, err
	}
	calls := make([]scriptCall, len(refs))
	sharded := make(map[int64]bool)
	for _, r := range refs {
		sharded[r.voucherID] = sharded[r.voucherID] || r.shard > 0
	}
	for i, r := range refs {
		calls[i] = scriptCall{keys: []string{r.base + "campaign", r.base + "pending"}}
		if sharded[r.voucherID] {
			calls[i].keys = append(calls[i].keys, moves(r.base))
		}
	}
	cmds := make([]*redis.Cmd, len(refs))
	runScripts(ctx, a.rdb, liveScript, calls, cmds)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return nil, redisError("live counts", err, nil)
		}
	}
	for i, r := range refs {
		v, err := cmds[i].Int64Slice()
		if err != nil || len(v) != 4 {
			return nil, fmt.Errorf("admission: live counts of campaign %d: reply %v, %v", r.voucherID, cmds[i].Val(), err)
		}
		c := out[r.voucherID]
		c.Queued += v[1]
		if v[0] >= 0 {
			c.Remaining += v[0]
			c.Known = c.Known || r.shard == 0
		}
		if sharded[r.voucherID] {
			s := seckill.ShardLive{Queued: v[1], Epoch: v[2], Admitted: v[3], Known: v[0] >= 0}
			if s.Known {
				s.Remaining = v[0]
			}
			c.Shards = append(c.Shards, s)
		}
		out[r.voucherID] = c
	}
	return out, nil
}
