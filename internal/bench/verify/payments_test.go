package verify

import (
	"context"
	"testing"
	"time"

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

// books is a campaign's two sides: Redis's counts read in turn (the last
// one again when they run out), and Postgres's totals.
type books struct {
	live   []seckill.LiveCounts
	totals seckill.CampaignTotals
	reads  int
}

func (b *books) LiveCounts(_ context.Context, ids []int64) (map[int64]seckill.LiveCounts, error) {
	lc := b.live[min(b.reads, len(b.live)-1)]
	b.reads++
	return map[int64]seckill.LiveCounts{ids[0]: lc}, nil
}

func (b *books) CampaignTotals(context.Context, int64) (seckill.CampaignTotals, error) {
	return b.totals, nil
}

func TestBooks(t *testing.T) {
	// 10 units: 3 awaiting payment, 2 paid, 5 left.
	pg := seckill.CampaignTotals{InitialStock: 10, Stock: 5, Awaiting: 3, Paid: 2, Orders: 5}
	left := func(n int64) seckill.LiveCounts { return seckill.LiveCounts{Remaining: n, Known: true} }
	for _, tc := range []struct {
		name  string
		live  []seckill.LiveCounts // nil: no Redis
		want  report.Books
		reads int
	}{
		{"balanced", []seckill.LiveCounts{left(5)},
			report.Books{Initial: 10, Remaining: 5, Awaiting: 3, Paid: 2, Taken: 5, Known: true, Balanced: true}, 1},
		// An expiry given back in Postgres that Redis takes a moment later.
		{"balanced once Redis takes the unit back", []seckill.LiveCounts{left(4), left(4), left(5)},
			report.Books{Initial: 10, Remaining: 5, Awaiting: 3, Paid: 2, Taken: 5, Known: true, Balanced: true}, 3},
		{"a unit missing until the timeout", []seckill.LiveCounts{left(4)},
			report.Books{Initial: 10, Remaining: 4, Awaiting: 3, Paid: 2, Taken: 5, Known: true}, -1},
		{"no Redis: Postgres alone", nil,
			report.Books{Initial: 10, Awaiting: 3, Paid: 2, Taken: 5}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &books{live: tc.live, totals: pg}
			var live seckill.LiveCounter
			if tc.live != nil {
				live = src
			}
			// Long enough for three readings on a loaded machine, except
			// where the timeout is what the case is about.
			timeout := 10 * time.Second
			if tc.reads < 0 {
				timeout = 250 * time.Millisecond
			}
			got, err := Books(t.Context(), live, src, 1, timeout)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("books (-want +got):\n%s", diff)
			}
			if tc.reads >= 0 && src.reads != tc.reads {
				t.Errorf("%d readings, want %d", src.reads, tc.reads)
			}
			if tc.reads < 0 && src.reads < 2 {
				t.Errorf("%d readings within the timeout, want it read again", src.reads)
			}
		})
	}
}
