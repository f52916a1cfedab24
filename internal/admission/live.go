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
	calls := make([]scriptCall, len(ids))
	for i, id := range ids {
		calls[i] = scriptCall{keys: []string{a.keys.campaign(id), a.keys.pending(id)}}
	}
	cmds := make([]*redis.Cmd, len(ids))
	runScripts(ctx, a.rdb, liveScript, calls, cmds)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return nil, redisError("live counts", err, nil)
		}
	}
	for i, id := range ids {
		v, err := cmds[i].Int64Slice()
		if err != nil || len(v) != 2 {
			return nil, fmt.Errorf("admission: live counts of campaign %d: reply %v, %v", id, cmds[i].Val(), err)
		}
		c := seckill.LiveCounts{Queued: v[1]}
		if v[0] >= 0 {
			c.Remaining, c.Known = v[0], true
		}
		out[id] = c
	}
	return out, nil
}
