package verify

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
	"seckill/internal/seckill"
)

// booksPoll is how often Books reads again while the books do not balance.
const booksPoll = 100 * time.Millisecond

// Books reads a campaign's books with the domain's equation
// (seckill.ReadBalance: Redis first, then Postgres), again every booksPoll
// while they are settling or mismatched, for up to timeout: an order
// persisted or expiring between the two reads, or a unit given back in
// Postgres that Redis takes a moment later, unbalances one reading, not the
// books. live may be nil: Postgres's side is checked alone then, as for a
// campaign Redis does not hold.
func Books(ctx context.Context, live seckill.LiveCounter, totals seckill.TotalsReader, voucherID int64, timeout time.Duration) (report.Books, error) {
	if live == nil {
		live = notHeld{}
	}
	b, err := seckill.ReadBalance(ctx, live, totals, voucherID, seckill.BalanceReads{Every: booksPoll, Within: timeout})
	if err != nil {
		return report.Books{}, err
	}
	return report.NewBooks(b), nil
}

// notHeld is a Redis that holds no campaign.
type notHeld struct{}

func (notHeld) LiveCounts(context.Context, []int64) (map[int64]seckill.LiveCounts, error) {
	return nil, nil
}

// Statuses returns the status of each order of the run's buyers, FAILED
// for a recorded failure, and how many buyers hold more than one live
// (CREATED or PAID) order of the campaign.
func (v *Postgres) Statuses(ctx context.Context, voucherID, userLo, userHi int64) (map[int64]seckill.OrderStatus, int64, error) {
	rows, err := v.DB.QueryContext(ctx, `SELECT id, user_id, status FROM voucher_order WHERE voucher_id = ? AND user_id BETWEEN ? AND ?`,
		voucherID, userLo, userHi)
	if err != nil {
		return nil, 0, fmt.Errorf("read order statuses: %w", err)
	}
	defer rows.Close()
	st := map[int64]seckill.OrderStatus{}
	live := map[int64]int{}
	var dup int64
	for rows.Next() {
		var id, user int64
		var s seckill.OrderStatus
		if err := rows.Scan(&id, &user, &s); err != nil {
			return nil, 0, err
		}
		st[id] = s
		if s == seckill.OrderCreated || s == seckill.OrderPaid {
			if live[user]++; live[user] == 2 {
				dup++
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	failed, err := v.failedIDs(ctx, voucherID, userLo, userHi)
	if err != nil {
		return nil, 0, err
	}
	for _, id := range failed {
		st[id] = seckill.OrderFailed
	}
	return st, dup, nil
}

// Succeeded counts the SUCCEEDED payments of a campaign's orders, and the
// orders they belong to.
func (v *Postgres) Succeeded(ctx context.Context, voucherID int64) (payments, orders int64, err error) {
	err = v.DB.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT p.order_id) FROM payment p
		JOIN voucher_order o ON o.id = p.order_id WHERE o.voucher_id = ? AND p.status = 'SUCCEEDED'`, voucherID).Scan(&payments, &orders)
	if err != nil {
		return 0, 0, fmt.Errorf("count succeeded payments: %w", err)
	}
	return payments, orders, nil
}

// Tally fills pay with what became of the accepted orders: their statuses,
// the units resold, and whether exactly the confirmed payments made
// orders PAID. It returns the ACCEPTED answers that repeat an order id or
// give a buyer a second order while the first still holds its unit (a
// buyer whose order expired or was cancelled may buy again).
func Tally(pay *report.Payments, accepted []load.Acceptance, statuses map[int64]seckill.OrderStatus, confirmed map[int64]bool, stock int64) (duplicateAnswers int64) {
	seen := make(map[int64]bool, len(accepted))
	holding := map[int]int64{} // buyer -> an accepted order that still holds a unit
	for _, a := range accepted {
		if seen[a.OrderID] {
			duplicateAnswers++
			continue
		}
		seen[a.OrderID] = true
		s := statuses[a.OrderID]
		switch s {
		case seckill.OrderPaid:
			pay.Paid++
		case seckill.OrderCreated:
			pay.Awaiting++
		case seckill.OrderExpired:
			pay.Expired++
		case seckill.OrderCancelled:
			pay.Cancelled++
		case seckill.OrderFailed:
			pay.Failed++
		default:
			pay.Unaccounted++
		}
		if s == seckill.OrderPaid && !confirmed[a.OrderID] {
			pay.PaidUnconfirmed++
		}
		if confirmed[a.OrderID] && s != seckill.OrderPaid {
			pay.ConfirmedUnpaid++
		}
		if s != seckill.OrderExpired && s != seckill.OrderCancelled && s != seckill.OrderFailed {
			if _, ok := holding[a.User]; ok {
				duplicateAnswers++
			}
			holding[a.User] = a.OrderID
		}
	}
	pay.Resold = max(int64(len(seen))-stock, 0)
	return duplicateAnswers
}
