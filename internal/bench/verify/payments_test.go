package verify

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
	"seckill/internal/seckill"
)

func TestTally(t *testing.T) {
	accepted := []load.Acceptance{
		{OrderID: 1, User: 0}, {OrderID: 2, User: 1}, {OrderID: 3, User: 2}, {OrderID: 4, User: 3},
		{OrderID: 5, User: 1}, // buyer 1 again after order 2 expired: fine
		{OrderID: 6, User: 0}, // buyer 0 again while order 1 is PAID: a duplicate
		{OrderID: 3, User: 2}, // an order id answered twice: a duplicate
		{OrderID: 7, User: 4}, // in no status: lost
	}
	statuses := map[int64]seckill.OrderStatus{
		1: seckill.OrderPaid, 2: seckill.OrderExpired, 3: seckill.OrderCreated, 4: seckill.OrderPaid,
		5: seckill.OrderCancelled, 6: seckill.OrderCreated,
	}
	confirmed := map[int64]bool{1: true, 3: true} // 4 PAID unconfirmed, 3 confirmed yet CREATED
	var got report.Payments
	dup := Tally(&got, accepted, statuses, confirmed, 5)
	want := report.Payments{Paid: 2, Awaiting: 2, Expired: 1, Cancelled: 1, Unaccounted: 1, Resold: 2,
		PaidUnconfirmed: 1, ConfirmedUnpaid: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tally (-want +got):\n%s", diff)
	}
	if dup != 2 {
		t.Errorf("duplicate answers %d, want 2", dup)
	}
}
