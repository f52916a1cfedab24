package verify

import (
	"testing"

	"seckill/internal/bench/load"
)

func TestDiffOrders(t *testing.T) {
	accepted := []load.Acceptance{{OrderID: 1}, {OrderID: 2}, {OrderID: 3}, {OrderID: 4}}
	rows := []int64{1, 2, 9} // 3 and 4 missing; 9 accepted by nobody
	failed := []int64{4}     // 4 was recorded as FAILED: not lost
	lost, unexpected := DiffOrders(accepted, rows, failed)
	if lost != 1 || unexpected != 1 {
		t.Errorf("lost %d, unexpected %d; want 1 and 1", lost, unexpected)
	}
}
