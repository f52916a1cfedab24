package admission

import (
	"context"
	"fmt"

	"seckill/internal/seckill"
	"seckill/lua"
)

var returnScript = newScript(lua.Return)

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
	voucherID, low, ok := splitOrderID(r.OrderID)
	if !ok || voucherID != r.VoucherID {
		return false, seckill.Invalidf("orderId", "order id %d is malformed", r.OrderID)
	}
	if r.UserID <= 0 || r.Epoch < 0 || r.Epoch > seckill.MaxEpoch {
		return false, seckill.Invalidf("userId", "user id and epoch must be valid")
	}
	keys := []string{a.keys.campaign(voucherID), a.keys.buyers(voucherID), a.keys.returned(voucherID)}
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
