package web

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// Refunds of payments owed back: the campaign page's totals and list, and
// the operator's "send again" of a failed one.

// Refunds lists, counts and retries refunds (seckill.Refunds).
type Refunds interface {
	// List returns payments owed back or refunded, oldest owed first.
	List(ctx context.Context, f seckill.RefundFilter) ([]seckill.Refund, error)
	// Stats counts a campaign's refunds by status, and those stuck.
	Stats(ctx context.Context, voucherID int64) (seckill.RefundStats, error)
	// Retry sends a failed refund again, audited. ENOTFOUND, ECONFLICT
	// (not failed), EUNAVAILABLE (no provider).
	Retry(ctx context.Context, paymentID string) (*seckill.RefundSend, error)
	// Sending reports whether a provider takes the refunds.
	Sending() bool
}

// refundsShown bounds the refunds a campaign page lists.
const refundsShown = 50

// refundTotals fills the live numbers of a campaign's refunds.
func (h *Handler) refundTotals(ctx context.Context, voucherID int64, l *views.CampaignLive) error {
	st, err := h.cfg.Refunds.Stats(ctx, voucherID)
	if err != nil {
		return err
	}
	tally := func(s seckill.PaymentStatus) views.RefundTally {
		t := st.ByStatus[s]
		return views.RefundTally{Count: t.Count, Amount: amounts(t.Amounts)}
	}
	l.RefundsOwed, l.RefundsSent = tally(seckill.PaymentRefundNeeded), tally(seckill.PaymentRefunding)
	l.RefundsDone, l.RefundsFailed = tally(seckill.PaymentRefunded), tally(seckill.PaymentRefundFailed)
	l.RefundsStuck = st.Stuck
	return nil
}

// amounts writes amounts of several currencies: "1.50 CNY, 3 JPY"; "—"
// for none.
func amounts(by map[string]int64) string {
	if len(by) == 0 {
		return "—"
	}
	var out []string
	for cur, n := range by {
		out = append(out, seckill.FormatAmount(n, cur))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// refundList reads the refunds a campaign page lists.
func (h *Handler) refundList(ctx context.Context, voucherID int64) (views.RefundList, error) {
	rs, err := h.cfg.Refunds.List(ctx, seckill.RefundFilter{VoucherID: voucherID, Limit: refundsShown + 1})
	if err != nil {
		return views.RefundList{}, err
	}
	l := views.RefundList{Sending: h.cfg.Refunds.Sending()}
	if len(rs) > refundsShown {
		rs, l.More = rs[:refundsShown], true
	}
	base := "/admin/campaigns/" + strconv.FormatInt(voucherID, 10) + "/refunds/"
	for _, r := range rs {
		row := views.RefundRow{PaymentID: r.PaymentID, OrderID: r.OrderID, UserID: r.UserID,
			Amount: seckill.FormatAmount(r.Amount, r.Currency), Status: string(r.Status), OwedAt: r.OwedAt,
			SentAt: r.SentAt, RefundedAt: r.RefundedAt, Sends: r.Sends, Error: r.Error}
		if r.Status == seckill.PaymentRefundFailed && l.Sending {
			row.Retry = base + r.PaymentID + "/retry"
		}
		l.Rows = append(l.Rows, row)
	}
	return l, nil
}

// retryRefund sends a failed refund of the campaign again, as the
// signed-in operator (audited by the service), and goes back to the
// campaign's refunds.
func (h *Handler) retryRefund(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	paymentID := r.PathValue("payment")
	// The payment must be this campaign's: the path names both.
	rs, err := h.cfg.Refunds.List(r.Context(), seckill.RefundFilter{VoucherID: id, Status: seckill.PaymentRefundFailed, Limit: 1000})
	if err == nil && !slices.ContainsFunc(rs, func(rf seckill.Refund) bool { return rf.PaymentID == paymentID }) {
		err = seckill.Errorf(seckill.ECONFLICT, "payment %s of campaign %d has no failed refund", paymentID, id)
	}
	if err == nil {
		_, err = h.cfg.Refunds.Retry(r.Context(), paymentID)
	}
	h.done(w, r, id, err, "refund", "#refunds")
}
