package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/lua"
)

var returnUnitsScript = newScript(lua.ReturnUnits)

// maxReturnBatch bounds the orders of one return_units.lua call.
const maxReturnBatch = 1000

var _ seckill.UnitReturner = (*Admitter)(nil)

// ReturnUnit gives a cancelled or expired order's unit back to its campaign
// and frees its buyer's slot, once per order, and tells every process that
// the campaign may admit again; see seckill.UnitReturner.
//
// Concurrent calls are group-committed (internal/batch) into calls of
// lua/return_units.lua, one per campaign, shard and epoch, all in one round
// trip, and one stock_returned message per campaign: a storm of
// cancellations costs Redis a script call and a message per batch, not per
// order. A lone call on an idle Admitter goes at once.
func (a *Admitter) ReturnUnit(ctx context.Context, r seckill.UnitReturn) (bool, error) {
	if _, err := a.returnCall(ctx, r); err != nil {
		return false, err
	}
	out, err := a.returns.Do(ctx, r)
	if err != nil {
		return false, redisError("return", err, nil)
	}
	return out[0].taken, out[0].err
}

// Bounds of ReturnUnit's group commit.
const (
	returnFlushes = 2                   // round trips at once
	returnBacklog = 10 * maxReturnBatch // calls waiting for one
	returnTimeout = 5 * time.Second     // how long a round trip may take
)

// returnOutcome is one order's answer from returnUnits.
type returnOutcome struct {
	taken bool // admission holds the unit now: returned now, before, or counted by a rebuild
	err   error
}

// returnBatch is ReturnUnit's commit: returnUnits within returnTimeout.
func (a *Admitter) returnBatch(ctx context.Context, rs []seckill.UnitReturn, out []returnOutcome) error {
	ctx, cancel := context.WithTimeout(ctx, returnTimeout)
	defer cancel()
	return a.returnUnits(ctx, rs, out)
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
	out := make([]returnOutcome, len(rs))
	if err := a.returnUnits(ctx, rs, out); err != nil {
		return nil, err
	}
	// The units taken are the caller's to record, errors or not; those in
	// error are returned by a later sweep, as units admission could not
	// take now.
	var taken []int64
	var errs []error
	for i, o := range out {
		if o.taken {
			taken = append(taken, rs[i].OrderID)
		} else if o.err != nil && (len(errs) == 0 || errs[len(errs)-1] != o.err) {
			errs = append(errs, o.err)
		}
	}
	return taken, errors.Join(errs...)
}

// returnCall checks r and returns its campaign's shard key and the
// script's arguments for it: its order's shard, its buyer's.
func (a *Admitter) returnCall(ctx context.Context, r seckill.UnitReturn) (returnKey, error) {
	voucherID, shard, low, base, err := a.orderBase(ctx, r.OrderID)
	if err != nil && !errors.Is(err, errMalformedID) {
		return returnKey{}, err
	}
	if err != nil || voucherID != r.VoucherID || r.UserID <= 0 || r.Epoch < 0 || r.Epoch > seckill.MaxEpoch {
		return returnKey{}, seckill.Invalidf("orderId", "order %d of user %d cannot be returned: malformed", r.OrderID, r.UserID)
	}
	return returnKey{voucherID: voucherID, shard: shard, epoch: r.Epoch, low: low, base: base}, nil
}

// returnKey is where an order's unit goes back: its campaign's stock shard
// (base its keys' prefix) in an epoch, and the low bits of its id.
type returnKey struct {
	voucherID int64
	shard     int
	epoch     int64
	low       int64
	base      string
}

// returnUnits gives the units of rs back, one script call per campaign,
// shard and epoch (of at most maxReturnBatch orders), all in one round
// trip, and tells every process once per campaign that took units back. It
// sets out[i] to rs[i]'s outcome, a malformed return's being its own
// EINVALID (the others are still tried); an error means none was tried
// (Redis's shard counts out of reach).
func (a *Admitter) returnUnits(ctx context.Context, rs []seckill.UnitReturn, out []returnOutcome) error {
	type group struct {
		voucherID int64
		items     []int // indexes into rs
		call      scriptCall
	}
	var groups []*group
	byKey := map[[3]int64]*group{}
	for i, r := range rs {
		k, err := a.returnCall(ctx, r)
		if seckill.ErrorCode(err) == seckill.EINVALID {
			out[i] = returnOutcome{err: err}
			continue
		} else if err != nil {
			return err
		}
		key := [3]int64{k.voucherID, int64(k.shard), k.epoch}
		g := byKey[key]
		if g == nil || len(g.items) == maxReturnBatch {
			g = &group{voucherID: k.voucherID, call: scriptCall{
				keys: []string{k.base + "campaign", k.base + "buyers", k.base + "returned"},
				args: []any{k.epoch}}}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.items = append(g.items, i)
		g.call.args = append(g.call.args, k.low, r.UserID)
	}
	if len(groups) == 0 {
		return nil
	}
	calls := make([]scriptCall, len(groups))
	for i, g := range groups {
		calls[i] = g.call
	}
	cmds := make([]*redis.Cmd, len(calls))
	runScripts(ctx, a.rdb, returnUnitsScript, calls, cmds)
	notify := map[int64]bool{}
	for i, g := range groups {
		var o returnOutcome
		res, err := cmds[i].Int64Slice()
		switch {
		case err != nil:
			o.err = redisError("return units", err, nil)
		case len(res) == 2 && res[0] == returnUnitsDone:
			o.taken = true
			if res[1] > 0 {
				notify[g.voucherID] = true
			}
		case len(res) == 1 && res[0] == returnUnitsCounted:
			o.taken = true
		case len(res) == 1 && res[0] == returnUnitsNotNow:
		default:
			o.err = fmt.Errorf("admission: return units of campaign %d: unexpected script reply %v", g.voucherID, res)
		}
		for _, j := range g.items {
			out[j] = o
		}
	}
	for id := range notify {
		a.stockReturned(ctx, id)
	}
	return nil
}
