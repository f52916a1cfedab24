package admission

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
)

// LiveCounts returns, for each campaign, the units left and the admissions
// pending (admitted, not yet persisted), read in one MULTI/EXEC so the two
// agree: an admission moves a unit from one to the other atomically. Every
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
	stocks := make([]*redis.StringCmd, len(ids))
	queued := make([]*redis.IntCmd, len(ids))
	_, err := a.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			stocks[i] = p.HGet(ctx, a.keys.campaign(id), "stock")
			queued[i] = p.HLen(ctx, a.keys.pending(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisError("live counts", err, nil)
	}
	for i, id := range ids {
		c := seckill.LiveCounts{Queued: queued[i].Val()}
		n, err := stocks[i].Int64()
		switch {
		case err == nil:
			c.Remaining, c.Known = n, true
		case !errors.Is(err, redis.Nil):
			return nil, redisError("live counts", err, nil)
		}
		out[id] = c
	}
	return out, nil
}
