package admission

import (
	"context"
	"errors"

	"seckill/internal/seckill"
)

// Voucher ids and order ids as Redis holds them: an order id is the voucher
// id in its high 32 bits and, in its low 32 bits, the epoch and sequence
// (seckill.OrderID); the pending hash is keyed by the low 32 bits.

// maxSeq is the highest order sequence: it must fit the low 32 bits of an
// order id.
const maxSeq = 1<<32 - 1

// validVoucherID reports whether id can own order ids: OrderID shifts it by
// 32 bits into a positive int64 whose bit 62 is clear (seckill.OrderID).
func validVoucherID(id int64) bool { return id > 0 && id <= seckill.MaxOrderVoucherID }

// validSeq reports whether seq can be the low 32 bits (epoch and sequence)
// of an order id: the admit script hands out sequences from 1.
func validSeq(seq int64) bool { return seq > 0 && seq <= maxSeq }

// splitOrderID returns the campaign of an order id and its low 32 bits, the
// field of the campaign's pending hash. ok is false for an id that no
// admission can have: not positive, of a voucher id out of range, or with
// nothing in its low 32 bits.
func splitOrderID(orderID int64) (voucherID, seq int64, ok bool) {
	voucherID, seq = seckill.SplitOrderID(orderID)
	return voucherID, seq, orderID > 0 && validVoucherID(voucherID) && validSeq(seq)
}

// splitShardOrderID is splitOrderID with the id's stock shard.
func splitShardOrderID(orderID int64) (voucherID int64, shard int, seq int64, ok bool) {
	voucherID, shard, seq = seckill.SplitShardOrderID(orderID)
	return voucherID, shard, seq, orderID > 0 && validVoucherID(voucherID) && validSeq(seq)
}

// shardRef is one shard of a campaign: the voucher, the shard's index and
// its key base (keys.shardBase).
type shardRef struct {
	voucherID int64
	shard     int
	shards    int // the campaign's
	base      string
}

// allShards returns every shard of each valid campaign of ids, in order.
func (a *Admitter) allShards(ctx context.Context, ids []int64) ([]shardRef, error) {
	n, err := a.shardCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]shardRef, 0, len(ids))
	for _, id := range ids {
		if !validVoucherID(id) {
			continue
		}
		for i, b := range a.bases(id, n[id]) {
			out = append(out, shardRef{voucherID: id, shard: i, shards: n[id], base: b})
		}
	}
	return out, nil
}

// orderBase returns the key base of the shard of an order id; ok is false
// for an id no admission can have (malformed, or of a shard the campaign
// does not have).
func (a *Admitter) orderBase(ctx context.Context, orderID int64) (voucherID int64, shard int, seq int64, base string, err error) {
	voucherID, shard, seq, ok := splitShardOrderID(orderID)
	if !ok {
		return 0, 0, 0, "", errMalformedID
	}
	if shard == 0 {
		if st := a.local.get(voucherID); st != nil && st.call != nil {
			return voucherID, 0, seq, st.call.base, nil // the same string, made once
		}
		return voucherID, 0, seq, a.keys.shardBase(voucherID, 0, 1), nil
	}
	n, err := a.shardCounts(ctx, []int64{voucherID})
	if err != nil {
		return 0, 0, 0, "", err
	}
	if shard >= n[voucherID] {
		return 0, 0, 0, "", errMalformedID
	}
	return voucherID, shard, seq, a.keys.shardBase(voucherID, shard, n[voucherID]), nil
}

// errMalformedID is orderBase's error for an id no admission has.
var errMalformedID = errors.New("admission: malformed order id")
