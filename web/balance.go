package web

import (
	"context"
	"strconv"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// balance reads a campaign's books with the domain's equation
// (seckill.ReadBalance) and shows its verdict. A Redis the dashboard cannot
// read is logged and shown as not holding the campaign, so the page still
// has Postgres's numbers.
func (h *Handler) balance(ctx context.Context, id int64) (views.Balance, seckill.Balance, error) {
	b, err := seckill.ReadBalance(ctx, liveOrLogged{h}, h.cfg.Records, id, seckill.DefaultBalanceReads)
	if err != nil {
		return views.Balance{}, b, err
	}
	return toViewBalance(b), b, nil
}

// liveOrLogged reads Redis's side of the books; a failed read is logged
// and reads as a campaign Redis does not hold.
type liveOrLogged struct{ h *Handler }

func (l liveOrLogged) LiveCounts(ctx context.Context, ids []int64) (map[int64]seckill.LiveCounts, error) {
	m, err := l.h.cfg.Live.LiveCounts(ctx, ids)
	if err != nil {
		l.h.logger.ErrorContext(ctx, "read live counts", "voucher_ids", ids, "err", err)
		return nil, nil
	}
	return m, nil
}

// toViewBalance shows a balance: its numbers, and in words why it is not ok.
func toViewBalance(b seckill.Balance) views.Balance {
	lc, t := b.Live, b.Totals
	v := views.Balance{
		State: string(b.State), Initial: t.InitialStock, Remaining: lc.Remaining, Queued: lc.Queued,
		Awaiting: t.Awaiting, Paid: t.Paid, Cancelled: t.Cancelled, Expired: t.Expired, Failed: t.Failures,
		Diff: b.Diff,
	}
	n := strconv.FormatInt
	switch b.Reason {
	case seckill.BalanceNotHeld:
		v.Message = "Redis does not hold this campaign (it is not warmed, or it ended before Redis restarted), so only Postgres's numbers are known."
	case seckill.BalancePostgres:
		v.Message = "Postgres disagrees with itself: " + n(t.Holding(), 10) +
			" orders await payment or are paid but the stock says " + n(t.Taken(), 10) + " units are taken."
	case seckill.BalanceInFlight:
		v.Message = n(b.Diff, 10) + " orders were persisted while the numbers were read, so they count as queued and awaiting payment at once."
	case seckill.BalanceSurplus:
		v.Message = "Redis and Postgres together hold " + n(b.Diff, 10) + " units more than were put on sale."
	case seckill.BalanceRecount:
		v.Message = n(-b.Diff, 10) + " units of stock shards rebuilt after a failover are in Postgres's stock but not yet in Redis: they are counted back when nothing is left in the other shards."
	case seckill.BalanceShortfall:
		v.Message = n(-b.Diff, 10) + " units put on sale are neither left, queued, awaiting payment nor paid (a unit given back in Postgres that Redis has not taken yet shows so until the reconciler's sweep returns it)."
	}
	return v
}
