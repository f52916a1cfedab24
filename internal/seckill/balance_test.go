package seckill

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// totals is Postgres's side of a campaign of initial units with awaiting
// and paid orders holding a unit, and stock units left.
func totals(initial, stock, awaiting, paid int64) CampaignTotals {
	return CampaignTotals{InitialStock: initial, Stock: stock, Awaiting: awaiting, Paid: paid, Orders: awaiting + paid}
}

func TestCheckBalance(t *testing.T) {
	held := func(remaining, queued int64) LiveCounts {
		return LiveCounts{Remaining: remaining, Queued: queued, Known: true}
	}
	tests := []struct {
		name  string
		live  LiveCounts
		t     CampaignTotals
		want  Balance // without Live and Totals, which are the inputs
		drift int64
	}{
		{"balanced", held(4, 1), totals(10, 5, 3, 2), Balance{State: BalanceOK}, 0},
		{"nothing sold", held(10, 0), totals(10, 10, 0, 0), Balance{State: BalanceOK}, 0},
		{"sold out and all paid", held(0, 0), totals(10, 0, 0, 10), Balance{State: BalanceOK}, 0},
		{"one persisted between the reads", held(4, 2), totals(10, 5, 4, 1),
			Balance{State: BalanceSettling, Reason: BalanceInFlight, Diff: 1}, 0},
		{"every queued one persisted between the reads", held(4, 2), totals(10, 4, 4, 2),
			Balance{State: BalanceSettling, Reason: BalanceInFlight, Diff: 2}, 0},
		{"more than the queued count over", held(5, 1), totals(10, 4, 4, 2),
			Balance{State: BalanceMismatch, Reason: BalanceSurplus, Diff: 2}, 2},
		{"over with nothing queued", held(1, 0), totals(10, 0, 10, 0),
			Balance{State: BalanceMismatch, Reason: BalanceSurplus, Diff: 1}, 1},
		{"units missing", held(3, 0), totals(10, 5, 3, 2),
			Balance{State: BalanceMismatch, Reason: BalanceShortfall, Diff: -2}, 2},
		{"an expiry given back in Postgres, not yet in Redis", held(4, 0), totals(10, 5, 3, 2),
			Balance{State: BalanceMismatch, Reason: BalanceShortfall, Diff: -1}, 1},
		{"units of a shard rebuilt alone, to count back", LiveCounts{Remaining: 3, Known: true, Recount: true}, totals(10, 5, 3, 2),
			Balance{State: BalanceSettling, Reason: BalanceRecount, Diff: -2}, 0},
		{"a surplus is a mismatch, recount or not", LiveCounts{Remaining: 6, Known: true, Recount: true}, totals(10, 5, 3, 2),
			Balance{State: BalanceMismatch, Reason: BalanceSurplus, Diff: 1}, 1},
		{"Postgres's stock says more are taken than its orders hold", held(4, 1), totals(10, 3, 3, 2),
			Balance{State: BalanceMismatch, Reason: BalancePostgres, Skew: -2}, 2},
		{"Postgres's orders hold more than its stock says", held(2, 0), totals(10, 8, 6, 2),
			Balance{State: BalanceMismatch, Reason: BalancePostgres, Skew: 6}, 6},
		{"Postgres off and the equation off: the larger", held(0, 0), totals(10, 5, 2, 1),
			Balance{State: BalanceMismatch, Reason: BalancePostgres, Diff: -7, Skew: -2}, 7},
		{"not in Redis", LiveCounts{}, totals(10, 5, 3, 2), Balance{State: BalanceUnknown, Reason: BalanceNotHeld}, 0},
		{"not in Redis, whatever its zero counts say", LiveCounts{Remaining: 99}, totals(10, 5, 3, 2),
			Balance{State: BalanceUnknown, Reason: BalanceNotHeld}, 0},
		{"not in Redis, and Postgres off", LiveCounts{}, totals(10, 5, 3, 1),
			Balance{State: BalanceMismatch, Reason: BalancePostgres, Skew: -1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Live, tt.want.Totals = tt.live, tt.t
			got := CheckBalance(tt.live, tt.t)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CheckBalance (-want +got):\n%s", diff)
			}
			if d := got.Drift(); d != tt.drift {
				t.Errorf("Drift() = %d, want %d", d, tt.drift)
			}
		})
	}
}

// books is a campaign's two sides, each reading the next of its values
// (the last one again when they run out).
type books struct {
	live   []LiveCounts
	totals []CampaignTotals
	err    error
	reads  int
}

func (b *books) LiveCounts(_ context.Context, ids []int64) (map[int64]LiveCounts, error) {
	if b.err != nil {
		return nil, b.err
	}
	lc := b.live[min(b.reads, len(b.live)-1)]
	return map[int64]LiveCounts{ids[0]: lc}, nil
}

func (b *books) CampaignTotals(context.Context, int64) (CampaignTotals, error) {
	t := b.totals[min(b.reads, len(b.totals)-1)]
	b.reads++
	return t, nil
}

func TestReadBalance(t *testing.T) {
	ok := totals(10, 5, 3, 2)
	settling := LiveCounts{Remaining: 4, Queued: 2, Known: true} // with ok: one persisted between the reads
	short := totals(10, 6, 2, 2)                                 // an expiry given back in Postgres first
	tests := []struct {
		name   string
		live   []LiveCounts
		totals []CampaignTotals
		reads  BalanceReads
		want   BalanceState
		n      int // readings made
	}{
		{"ok at once", []LiveCounts{{Remaining: 5, Known: true}}, []CampaignTotals{ok}, DefaultBalanceReads, BalanceOK, 1},
		{"unknown at once", []LiveCounts{{}}, []CampaignTotals{ok}, DefaultBalanceReads, BalanceUnknown, 1},
		{"settling, then ok", []LiveCounts{settling, {Remaining: 5, Known: true}}, []CampaignTotals{ok}, DefaultBalanceReads, BalanceOK, 2},
		{"settling throughout: the last reading", []LiveCounts{settling}, []CampaignTotals{ok}, DefaultBalanceReads, BalanceSettling, 3},
		{"a shortfall until Redis takes the unit back", []LiveCounts{{Remaining: 5, Known: true}, {Remaining: 5, Known: true}, {Remaining: 6, Known: true}},
			[]CampaignTotals{short}, DefaultBalanceReads, BalanceOK, 3},
		{"Postgres off: read once", []LiveCounts{{Remaining: 5, Known: true}}, []CampaignTotals{totals(10, 4, 3, 2)}, DefaultBalanceReads, BalanceMismatch, 1},
		{"the zero reads read once", []LiveCounts{settling}, []CampaignTotals{ok}, BalanceReads{}, BalanceSettling, 1},
		{"within a time", []LiveCounts{settling}, []CampaignTotals{ok}, BalanceReads{Every: time.Millisecond, Within: 30 * time.Millisecond}, BalanceSettling, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &books{live: tt.live, totals: tt.totals}
			b, err := ReadBalance(t.Context(), src, src, 7, tt.reads)
			if err != nil {
				t.Fatal(err)
			}
			if b.State != tt.want {
				t.Errorf("state %s (%+v), want %s", b.State, b, tt.want)
			}
			if tt.n > 0 && src.reads != tt.n {
				t.Errorf("%d readings, want %d", src.reads, tt.n)
			}
			if tt.n < 0 && src.reads < 2 {
				t.Errorf("%d readings within 30 ms, 1 ms apart; want several", src.reads)
			}
		})
	}

	t.Run("a failed read", func(t *testing.T) {
		down := errors.New("redis down")
		src := &books{live: []LiveCounts{{}}, totals: []CampaignTotals{ok}, err: down}
		if _, err := ReadBalance(t.Context(), src, src, 7, DefaultBalanceReads); !errors.Is(err, down) {
			t.Errorf("err %v, want %v", err, down)
		}
	})
	t.Run("ctx ends while settling: the last reading", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		src := &books{live: []LiveCounts{settling}, totals: []CampaignTotals{ok}}
		b, err := ReadBalance(ctx, src, src, 7, BalanceReads{Every: time.Hour, Count: 5})
		if err != nil || b.State != BalanceSettling || src.reads != 1 {
			t.Errorf("got %s after %d readings, err %v; want settling after 1", b.State, src.reads, err)
		}
	})
}
