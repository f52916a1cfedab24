package seckill

import (
	"math"
	"testing"
)

// TestShardOrderIDs holds the id layout of order.go: ids of shard 0 are
// the layout before shards, bit for bit, and every (voucher, shard, epoch,
// sequence) has its own id, which parses back.
func TestShardOrderIDs(t *testing.T) {
	// Ids as they were issued before shards: voucherID<<32 | epoch<<22 | seq.
	for _, v := range []int64{1, 42, MaxShardedVoucherID, MaxShardedVoucherID + 1, MaxOrderVoucherID} {
		for _, low := range []int64{1, MaxEpochSeq, 3<<epochSeqBits | 7, int64(MaxEpoch)<<epochSeqBits | MaxEpochSeq} {
			old := v<<32 | low
			if got := OrderID(v, low); got != old {
				t.Fatalf("OrderID(%d, %d) = %d, want the old layout %d", v, low, got, old)
			}
			gv, shard, gl := SplitShardOrderID(old)
			if gv != v || shard != 0 || gl != low {
				t.Fatalf("SplitShardOrderID(%d) = %d, %d, %d; want %d, 0, %d", old, gv, shard, gl, v, low)
			}
		}
	}
	seen := map[int64][4]int64{}
	for _, v := range []int64{1, 2, 77, MaxShardedVoucherID} {
		for shard := range MaxShards {
			for _, epoch := range []int64{0, 1, MaxEpoch} {
				for _, seq := range []int64{1, 2, MaxEpochSeq} {
					low := epoch<<epochSeqBits | seq
					id := ShardOrderID(v, shard, low)
					if id <= 0 {
						t.Fatalf("ShardOrderID(%d, %d, %d) = %d, not positive", v, shard, low, id)
					}
					if prev, ok := seen[id]; ok {
						t.Fatalf("id %d of %v issued again for %v", id, prev, [4]int64{v, int64(shard), epoch, seq})
					}
					seen[id] = [4]int64{v, int64(shard), epoch, seq}
					gv, gs, gl := SplitShardOrderID(id)
					if gv != v || gs != shard || gl != low || OrderEpoch(id) != epoch {
						t.Fatalf("SplitShardOrderID(%d) = %d, %d, %d; want %d, %d, %d", id, gv, gs, gl, v, shard, low)
					}
					if sv, sl := SplitOrderID(id); sv != v || sl != low {
						t.Fatalf("SplitOrderID(%d) = %d, %d", id, sv, sl)
					}
				}
			}
		}
	}
	if ShardOrderID(MaxShardedVoucherID, MaxShards-1, math.MaxUint32) > math.MaxInt64 {
		t.Fatal("unreachable")
	}
}

func TestShardOfIsStableAndEven(t *testing.T) {
	const shards, users = 3, 30000
	var n [shards]int
	for u := int64(1); u <= users; u++ {
		s := ShardOf(u, shards)
		if s != ShardOf(u, shards) || s < 0 || s >= shards {
			t.Fatalf("ShardOf(%d) = %d", u, s)
		}
		n[s]++
	}
	for s, c := range n {
		if c < users/shards*9/10 || c > users/shards*11/10 {
			t.Errorf("shard %d holds %d of %d users: uneven", s, c, users)
		}
	}
	if ShardOf(12345, 1) != 0 || ShardOf(12345, 0) != 0 {
		t.Error("one shard: every user in shard 0")
	}
}

func TestSplitStock(t *testing.T) {
	for _, tc := range []struct {
		stock  int64
		shards int
		want   []int64
	}{{10, 1, []int64{10}}, {10, 3, []int64{4, 3, 3}}, {2, 3, []int64{1, 1, 0}}, {1500, 3, []int64{500, 500, 500}}} {
		got := SplitStock(tc.stock, tc.shards)
		if len(got) != len(tc.want) {
			t.Fatalf("SplitStock(%d, %d) = %v", tc.stock, tc.shards, got)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("SplitStock(%d, %d) = %v, want %v", tc.stock, tc.shards, got, tc.want)
			}
		}
	}
}
