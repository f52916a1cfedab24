package seckill

import (
	"context"
	"fmt"
	"time"
)

// The stock balance: every unit put on sale is in exactly one place.
//
//	initial = remaining (Redis) + queued (Redis) + awaiting payment + paid (Postgres)
//
// and Postgres agrees with itself: its orders holding a unit (awaiting
// payment or paid) are the units its stock says are taken (initial − stock).
// A failed, cancelled or expired order holds no unit: its unit went back to
// remaining. The dashboard, the consistency metric and the load test's
// verifier all judge a campaign's books with CheckBalance.

// BalanceState is where a campaign's stock balance stands.
type BalanceState string

const (
	// BalanceOK: the equation holds and Postgres agrees with itself.
	BalanceOK BalanceState = "ok"
	// BalanceSettling: the sum is above the initial stock by at most the
	// queued count, so orders persisted between the two reads count as
	// queued and awaiting payment at once (BalanceInFlight).
	BalanceSettling BalanceState = "settling"
	// BalanceMismatch: the books do not hold (BalancePostgres,
	// BalanceSurplus or BalanceShortfall).
	BalanceMismatch BalanceState = "mismatch"
	// BalanceUnknown: Redis does not hold the campaign (BalanceNotHeld), so
	// only Postgres's side is known; Postgres's own check still applies.
	BalanceUnknown BalanceState = "unknown"
)

// BalanceStates lists every BalanceState, ok first.
var BalanceStates = []BalanceState{BalanceOK, BalanceSettling, BalanceMismatch, BalanceUnknown}

// BalanceReason says why a balance is not ok; empty when it is.
type BalanceReason string

const (
	// BalanceInFlight: a persist fell between the two reads (settling).
	BalanceInFlight BalanceReason = "in_flight"
	// BalancePostgres: Postgres's orders holding a unit are not the units
	// its stock says are taken (Skew ≠ 0).
	BalancePostgres BalanceReason = "postgres"
	// BalanceSurplus: Redis and Postgres together hold more units than were
	// put on sale, beyond what a persist in flight explains (Diff > Queued).
	BalanceSurplus BalanceReason = "surplus"
	// BalanceShortfall: units put on sale are neither left, queued,
	// awaiting payment nor paid (Diff < 0). A unit given back in Postgres
	// (an expiry, a cancellation) that Redis has not taken back yet shows
	// so until it does, or until the reconciler's sweep returns it.
	BalanceShortfall BalanceReason = "shortfall"
	// BalanceRecount: units are neither left, queued, awaiting payment nor
	// paid (Diff < 0) while the campaign has units of shards rebuilt alone
	// to count back (LiveCounts.Recount): Postgres's stock holds them, and
	// Redis counts them again once nothing is left elsewhere (settling).
	BalanceRecount BalanceReason = "recount"
	// BalanceNotHeld: Redis does not hold the campaign (not warmed, or
	// ended and trimmed, or ended before Redis restarted).
	BalanceNotHeld BalanceReason = "not_held"
)

// Balance is a campaign's stock balance as read once: Redis's side, then
// Postgres's, and the verdict on them.
type Balance struct {
	State  BalanceState
	Reason BalanceReason  // empty when State is BalanceOK
	Live   LiveCounts     // Redis's side, read first
	Totals CampaignTotals // Postgres's side, read after Live
	// Diff is remaining + queued + awaiting payment + paid − initial: 0
	// when the books balance. It is 0 when Redis does not hold the
	// campaign: there is no Redis side to compare.
	Diff int64
	// Skew is Postgres's orders holding a unit (awaiting payment + paid)
	// minus the units its stock says are taken (initial − stock): 0 when
	// Postgres agrees with itself.
	Skew int64
}

// Holding is the orders that hold a unit: awaiting payment or paid.
func (t CampaignTotals) Holding() int64 { return t.Awaiting + t.Paid }

// Taken is the units Postgres's stock says are taken: initial − stock.
func (t CampaignTotals) Taken() int64 { return t.InitialStock - t.Stock }

// CheckBalance judges a campaign's books: live as read from Redis, then t
// as read from Postgres. In that order an order persisted between the two
// reads is counted twice (queued and awaiting payment), never missed: a sum
// above the initial stock by at most the queued count is settling, not a
// mismatch. Postgres's own check (Skew) needs no Redis and applies even
// when Redis does not hold the campaign.
func CheckBalance(live LiveCounts, t CampaignTotals) Balance {
	b := Balance{Live: live, Totals: t, Skew: t.Holding() - t.Taken()}
	if live.Known {
		b.Diff = live.Remaining + live.Queued + t.Holding() - t.InitialStock
	}
	switch {
	case b.Skew != 0:
		b.State, b.Reason = BalanceMismatch, BalancePostgres
	case !live.Known:
		b.State, b.Reason = BalanceUnknown, BalanceNotHeld
	case b.Diff == 0:
		b.State = BalanceOK
	case b.Diff > 0 && b.Diff <= live.Queued:
		b.State, b.Reason = BalanceSettling, BalanceInFlight
	case b.Diff > 0:
		b.State, b.Reason = BalanceMismatch, BalanceSurplus
	case live.Recount:
		b.State, b.Reason = BalanceSettling, BalanceRecount
	default:
		b.State, b.Reason = BalanceMismatch, BalanceShortfall
	}
	return b
}

// Drift is the units by which the books are off when they mismatch: the
// larger of |Diff| and |Skew|; 0 in any other state.
func (b Balance) Drift() int64 {
	if b.State != BalanceMismatch {
		return 0
	}
	return max(b.Diff, -b.Diff, b.Skew, -b.Skew)
}

// LiveCounter reads what admission (Redis) holds for campaigns.
type LiveCounter interface {
	// LiveCounts returns each campaign's live counts; a campaign Redis
	// does not hold is missing or reads Known false.
	LiveCounts(ctx context.Context, voucherIDs []int64) (map[int64]LiveCounts, error)
}

// TotalsReader reads what the system of record (Postgres) holds for a
// campaign.
type TotalsReader interface {
	// CampaignTotals reads a campaign's stock and order counts in one
	// snapshot. ENOTFOUND.
	CampaignTotals(ctx context.Context, voucherID int64) (CampaignTotals, error)
}

// BalanceReads says how often ReadBalance reads again while a campaign's
// books are settling or do not hold. The zero value reads once.
type BalanceReads struct {
	Every  time.Duration // the pause between two readings
	Count  int           // at most this many readings; 0: no limit but Within
	Within time.Duration // no reading starts after this long; 0: no limit but Count
}

// DefaultBalanceReads is what the dashboard and the consistency metric
// read with: three readings 30 ms apart, long enough for a persist in
// flight to land, short enough for a page or a scrape.
var DefaultBalanceReads = BalanceReads{Every: 30 * time.Millisecond, Count: 3}

// ReadBalance reads a campaign's books, Redis first and then Postgres, and
// judges them with CheckBalance. While they are settling or mismatched it
// reads again as reads says: a persist in flight, or a unit given back in
// Postgres that Redis takes a moment later, unbalances one reading, not the
// books. Postgres disagreeing with itself is not read again: its numbers
// come from one snapshot, so no write between reads explains them. It
// returns the last reading. ctx ending during a pause ends the
// re-reading, not the check: the last reading is returned. A failed read is
// an error; the caller decides what a Redis it cannot read means.
func ReadBalance(ctx context.Context, live LiveCounter, totals TotalsReader, voucherID int64, reads BalanceReads) (Balance, error) {
	start := time.Now()
	for n := 1; ; n++ {
		m, err := live.LiveCounts(ctx, []int64{voucherID})
		if err != nil {
			return Balance{}, fmt.Errorf("read the live counts of campaign %d: %w", voucherID, err)
		}
		t, err := totals.CampaignTotals(ctx, voucherID)
		if err != nil {
			return Balance{}, fmt.Errorf("read the totals of campaign %d: %w", voucherID, err)
		}
		b := CheckBalance(m[voucherID], t)
		if !reads.again(b, n, time.Since(start)) {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return b, nil
		case <-time.After(reads.Every):
		}
	}
}

// again reports whether to read again after the n-th reading b, elapsed
// after the first began.
func (r BalanceReads) again(b Balance, n int, elapsed time.Duration) bool {
	switch {
	case b.State != BalanceSettling && b.State != BalanceMismatch:
		return false // ok, or unknown: another reading tells nothing new
	case b.Reason == BalancePostgres:
		return false // one snapshot of one store: no read in between to wait for
	case r.Count == 0 && r.Within == 0:
		return false
	case r.Count > 0 && n >= r.Count:
		return false
	case r.Within > 0 && elapsed+r.Every > r.Within:
		return false
	}
	return true
}
