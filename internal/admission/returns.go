package admission

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/lua"
)

var (
	returnScript      = newScript(lua.Return)
	returnUnitsScript = newScript(lua.ReturnUnits)
)

// maxReturnBatch bounds the orders of one return_units.lua call.
const maxReturnBatch = 1000

var _ seckill.UnitReturner = (*Admitter)(nil)

// Replies of lua/return.lua.
const (
	returnDone    = 1
	returnBefore  = 0
	returnCounted = 2
	returnNotNow  = -1
)

// ReturnUnit gives a cancelled or expired order's unit back to its campaign
// and frees its buyer's slot, once per order, and tells every process that
// the campaign may admit again; see seckill.UnitReturner.
func (a *Admitter) ReturnUnit(ctx context.Context, r seckill.UnitReturn) (bool, error) {
	voucherID, _, low, base, err := a.orderBase(ctx, r.OrderID)
	if errors.Is(err, errMalformedID) || err == nil && voucherID != r.VoucherID {
		return false, seckill.Invalidf("orderId", "order id %d is malformed", r.OrderID)
	} else if err != nil {
		return false, err
	}
	if r.UserID <= 0 || r.Epoch < 0 || r.Epoch > seckill.MaxEpoch {
		return false, seckill.Invalidf("userId", "user id and epoch must be valid")
	}
	// The unit goes back to the order's shard, its buyer's.
	keys := []string{base + "campaign", base + "buyers", base + "returned"}
	n, err := runScript(ctx, a.rdb, returnScript, keys, low, r.UserID, r.Epoch).Int64()
	if err != nil {
		return false, redisError("return", err, nil)
	}
	switch n {
	case returnDone:
		a.stockReturned(ctx, voucherID)
		return true, nil
	case returnBefore, returnCounted:
		return true, nil
	case returnNotNow:
		return false, nil
	}
	return false, fmt.Errorf("admission: return unit of order %d: unexpected script reply %d", r.OrderID, n)
}

// Replies of lua/return_units.lua.
const (
	returnUnitsDone    = 1
	returnUnitsCounted = 2
	returnUnitsNotNow  = -1
)

// ReturnUnits gives many orders' units back, one script call per campaign
// and epoch (of at most maxReturnBatch orders), all in one round trip, and
// tells every process once per campaign that took units back; see
// seckill.UnitReturner.
func (a *Admitter) ReturnUnits(ctx context.Context, rs []seckill.UnitReturn) ([]int64, error) {
	type group struct {
		voucherID, epoch int64
		ids              []int64
		call             scriptCall
	}
	var groups []*group
	byKey := map[[3]int64]*group{}
	for _, r := range rs {
		voucherID, shard, low, base, err := a.orderBase(ctx, r.OrderID)
		if err != nil && !errors.Is(err, errMalformedID) {
			return nil, err
		}
		if err != nil || voucherID != r.VoucherID || r.UserID <= 0 || r.Epoch < 0 || r.Epoch > seckill.MaxEpoch {
			return nil, seckill.Invalidf("orderId", "order %d of user %d cannot be returned: malformed", r.OrderID, r.UserID)
		}
		// Each unit goes back to its order's shard, its buyer's.
		k := [3]int64{voucherID, int64(shard), r.Epoch}
		g := byKey[k]
		if g == nil || len(g.ids) == maxReturnBatch {
			g = &group{voucherID: voucherID, epoch: r.Epoch, call: scriptCall{
				keys: []string{base + "campaign", base + "buyers", base + "returned"},
				args: []any{r.Epoch}}}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, r.OrderID)
		g.call.args = append(g.call.args, low, r.UserID)
	}
	if len(groups) == 0 {
		return nil, nil
	}
	calls := make([]scriptCall, len(groups))
	for i, g := range groups {
		calls[i] = g.call
	}
	cmds := make([]*redis.Cmd, len(calls))
	runScripts(ctx, a.rdb, returnUnitsScript, calls, cmds)
	var taken []int64
	var errs []error
	notify := map[int64]bool{}
	for i, g := range groups {
		res, err := cmds[i].Int64Slice()
		if err != nil {
			errs = append(errs, redisError("return units", err, nil))
			continue
		}
		switch {
		case len(res) == 2 && res[0] == returnUnitsDone:
			taken = append(taken, g.ids...)
			if res[1] > 0 {
				notify[g.voucherID] = true
			}
		case len(res) == 1 && res[0] == returnUnitsCounted:
			taken = append(taken, g.ids...)
		case len(res) == 1 && res[0] == returnUnitsNotNow:
		default:
			errs = append(errs, fmt.Errorf("admission: return units of campaign %d: unexpected script reply %v", g.voucherID, res))
		}
	}
	for id := range notify {
		a.stockReturned(ctx, id)
	}
	// The units taken are the caller's to record, errors or not; those in
	// error are returned by a later sweep, as units admission could not
	// take now.
	return taken, errors.Join(errs...)
}
