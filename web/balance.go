package web

import (
	"context"
	"strconv"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// Balance runs a campaign's consistency check, the one its page shows, for
// a caller outside the dashboard (the app's consistency metrics).
func (h *Handler) Balance(ctx context.Context, voucherID int64) (views.Balance, error) {
	b, _, _, err := h.balance(ctx, voucherID)
	return b, err
}

// balanceReads is how often the consistency check reads again before it
// reports that the equation does not hold.
const balanceReads = 3

// balance checks initial stock = remaining + queued + awaiting payment +
// paid (sold is the last two: what Postgres's stock says is taken). It reads Redis
// (remaining and queued, in one MULTI) and then Postgres (initial stock,
// stock and row counts, in one statement). In that order, an order
// persisted between the two reads is counted twice (queued and sold), never
// missed: so a sum above the initial stock by at most the queued count is a
// persist in flight ("settling"); anything else is a real disagreement.
func (h *Handler) balance(ctx context.Context, id int64) (views.Balance, seckill.LiveCounts, seckill.CampaignTotals, error) {
	var (
		b  views.Balance
		lc seckill.LiveCounts
		t  seckill.CampaignTotals
	)
	for i := range balanceReads {
		if i > 0 {
			select {
			case <-ctx.Done():
				return b, lc, t, ctx.Err()
			case <-time.After(30 * time.Millisecond):
			}
		}
		live, err := h.cfg.Live.LiveCounts(ctx, []int64{id})
		if err != nil {
			h.logger.ErrorContext(ctx, "read live counts", "voucher_id", id, "err", err)
			live = nil
		}
		lc = live[id]
		if t, err = h.cfg.Records.CampaignTotals(ctx, id); err != nil {
			return b, lc, t, err
		}
		sold := t.InitialStock - t.Stock
		b = views.Balance{
			Initial: t.InitialStock, Remaining: lc.Remaining, Queued: lc.Queued, Sold: sold,
			Awaiting: t.Awaiting, Paid: t.Paid, Cancelled: t.Cancelled, Expired: t.Expired,
			Failed: t.Failures, Orders: t.Orders, Diff: lc.Remaining + lc.Queued + sold - t.InitialStock,
		}
		switch {
		case !lc.Known:
			b.State = views.BalanceUnknown
			b.Message = "Redis does not hold this campaign (it is not warmed, or it ended before Redis restarted), so only Postgres's numbers are known."
			return b, lc, t, nil
		case t.Orders != sold:
			b.State = views.BalanceMismatch
			b.Message = "Postgres disagrees with itself: " + strconv.FormatInt(t.Orders, 10) +
				" orders await payment or are paid but the stock says " + strconv.FormatInt(sold, 10) + " units are taken."
		case b.Diff == 0:
			b.State = views.BalanceOK
			return b, lc, t, nil
		case b.Diff > 0 && b.Diff <= lc.Queued:
			b.State = views.BalanceSettling
			b.Message = strconv.FormatInt(b.Diff, 10) + " orders were persisted while the numbers were read, so they count as queued and sold at once."
		case b.Diff > 0:
			b.State = views.BalanceMismatch
			b.Message = "Redis and Postgres together hold " + strconv.FormatInt(b.Diff, 10) + " units more than were put on sale."
		default:
			b.State = views.BalanceMismatch
			b.Message = strconv.FormatInt(-b.Diff, 10) + " units put on sale are neither left, queued, awaiting payment nor paid (a unit given back in Postgres that Redis has not taken yet shows so until the reconciler's sweep returns it)."
		}
	}
	return b, lc, t, nil
}
