package admission

import (
	"math"

	"seckill/internal/seckill"
)

// Voucher ids and order ids as Redis holds them: an order id is the voucher
// id in its high 32 bits and, in its low 32 bits, the epoch and sequence
// (seckill.OrderID); the pending hash is keyed by the low 32 bits.

// maxSeq is the highest order sequence: it must fit the low 32 bits of an
// order id.
const maxSeq = 1<<32 - 1

// validVoucherID reports whether id can own order ids: OrderID shifts it by
// 32 bits into a positive int64.
func validVoucherID(id int64) bool { return id > 0 && id <= math.MaxInt32 }

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
