package admission

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
)

// TestSplitOrderID: the one check of an order id that Pending, Ack, Release
// and ReturnUnit make.
func TestSplitOrderID(t *testing.T) {
	type split struct {
		VoucherID, Seq int64
		OK             bool
	}
	tests := []struct {
		name string
		id   int64
		want split
	}{
		{"first of epoch 0", seckill.OrderID(3, 1), split{3, 1, true}},
		{"epoch 5", seckill.OrderID(3, 5<<22|7), split{3, 5<<22 | 7, true}},
		{"highest", seckill.OrderID(seckill.MaxOrderVoucherID, maxSeq), split{seckill.MaxOrderVoucherID, maxSeq, true}},
		// Bit 62 marks an id of a shard other than 0 (seckill.ShardOrderID):
		// voucher ids of 2^30 and more own no order ids.
		{"voucher beyond 30 bits", math.MaxInt32 << 32, split{math.MaxInt32 & seckill.MaxShardedVoucherID, 0, false}},
		{"shard 3", seckill.ShardOrderID(9, 3, 5<<22|7), split{9, 5<<22 | 7, true}},
		{"zero", 0, split{0, 0, false}},
		{"negative", -seckill.OrderID(3, 1), split{-4, 1<<32 - 1, false}},
		{"no sequence", seckill.OrderID(3, 0), split{3, 0, false}},
		{"no voucher", 1, split{0, 1, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got split
			got.VoucherID, got.Seq, got.OK = splitOrderID(tt.id)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("splitOrderID(%d) (-want +got):\n%s", tt.id, diff)
			}
		})
	}
}
