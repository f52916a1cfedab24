package admission

import "math"

// Voucher ids and order ids as Redis holds them: an order id is the voucher
// id in its high 32 bits and, in its low 32 bits, the epoch and sequence
// (seckill.OrderID); the pending hash is keyed by the low 32 bits.

// maxSeq is the highest order sequence: it must fit the low 32 bits of an
// order id.
const maxSeq = 1<<32 - 1

// validVoucherID reports whether id can own order ids: OrderID shifts it by
// 32 bits into a positive int64.
func validVoucherID(id int64) bool { return id > 0 && id <= math.MaxInt32 }
