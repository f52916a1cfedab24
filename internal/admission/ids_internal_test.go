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
		{"highest", seckill.OrderID(math.MaxInt32, maxSeq), split{math.MaxInt32, maxSeq, true}},
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
