package web

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// Orders after the purchase: the status filter, an operator's cancel, and
// the CSV exports of orders and of the audit log.

// orderStatuses are the statuses the orders filter offers, in the order of
// an order's life.
var orderStatuses = []seckill.OrderStatus{seckill.OrderCreated, seckill.OrderPaid,
	seckill.OrderCancelled, seckill.OrderExpired, seckill.OrderFailed}

func orderStatusFilter(s string) (seckill.OrderStatus, bool) {
	for _, st := range orderStatuses {
		if string(st) == s {
			return st, true
		}
	}
	return "", false
}

// filterQuery is the query string of the orders' search and filter.
func filterQuery(o views.OrdersView) url.Values {
	v := url.Values{}
	if o.Query != "" {
		v.Set("by", o.By)
		v.Set("q", o.Query)
	}
	if o.Status != "" {
		v.Set("status", o.Status)
	}
	return v
}

func toOrderRow(base string, o *seckill.Order) views.OrderRow {
	row := views.OrderRow{ID: o.ID, UserID: o.UserID, Status: string(o.Status), At: o.CreatedAt,
		Reason: o.FailureReason, Amount: o.Amount, PayBy: o.PayBy}
	if o.Status == seckill.OrderCreated {
		row.Cancel = base + "/orders/" + strconv.FormatInt(o.ID, 10) + "/cancel"
	}
	return row
}

// cancelOrder cancels an order awaiting payment, as the signed-in operator
// (audited by the service), and goes back to the campaign's orders.
func (h *Handler) cancelOrder(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	orderID, err := seckill.ParseID("order", r.PathValue("order"))
	if err == nil {
		var o *seckill.Order
		if o, err = h.cfg.Orders.Order(r.Context(), orderID); err == nil && o.VoucherID != id {
			err = seckill.Errorf(seckill.ENOTFOUND, "order %d not found", orderID)
		}
	}
	if err == nil {
		_, err = h.cfg.Orders.AdminCancelOrder(r.Context(), orderID)
	}
	h.done(w, r, id, err, "cancel", "#orders")
}

// csvRows bounds an export: pages of MaxPageSize, at most this many rows.
const csvRows = 100_000

// ordersCSV exports a campaign's orders (the filter of the page) as CSV,
// newest first.
func (h *Handler) ordersCSV(w http.ResponseWriter, r *http.Request) {
	v, ok := h.pathCampaign(w, r)
	if !ok {
		return
	}
	f := seckill.OrderFilter{VoucherID: v.ID, Limit: seckill.MaxPageSize}
	q := r.URL.Query()
	if st, ok := orderStatusFilter(q.Get("status")); ok {
		f.Status = st
	}
	if s := q.Get("q"); s != "" {
		n, err := seckill.ParseID("q", s)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if q.Get("by") == "user" {
			f.UserID = n
		} else {
			f.OrderID = n
		}
	}
	cw := h.startCSV(w, "campaign-"+strconv.FormatInt(v.ID, 10)+"-orders.csv",
		"order_id", "user_id", "status", "amount", "currency", "at", "pay_by", "paid_at", "closed_at", "reason")
	for n := 0; n < csvRows; {
		orders, err := h.cfg.Records.CampaignOrders(r.Context(), f)
		if err != nil {
			h.logger.ErrorContext(r.Context(), "export orders", "voucher_id", v.ID, "err", err)
			return // the truncated file ends without its last line
		}
		for _, o := range orders {
			// The amount in minor units, as the API writes it, beside
			// its currency.
			_ = cw.Write([]string{itoa(o.ID), itoa(o.UserID), string(o.Status), itoa(o.Amount), h.cfg.Currency, csvTime(o.CreatedAt),
				csvTime(o.PayBy), csvTime(o.PaidAt), csvTime(o.ClosedAt), o.FailureReason})
		}
		n += len(orders)
		if len(orders) < f.Limit || f.OrderID > 0 {
			break
		}
		f.Before = orders[len(orders)-1].ID
	}
	cw.Flush()
}

// auditCSV exports a campaign's audit log as CSV, newest first.
func (h *Handler) auditCSV(w http.ResponseWriter, r *http.Request) {
	v, ok := h.pathCampaign(w, r)
	if !ok {
		return
	}
	entries, err := h.cfg.Records.AuditLog(r.Context(), v.ID, csvRows)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	cw := h.startCSV(w, "campaign-"+strconv.FormatInt(v.ID, 10)+"-audit.csv", "at", "actor", "action", "detail")
	for _, e := range entries {
		_ = cw.Write([]string{csvTime(e.At), e.Actor, e.Action, e.Detail})
	}
	cw.Flush()
}

func (h *Handler) startCSV(w http.ResponseWriter, name string, header ...string) *csv.Writer {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	cw := csv.NewWriter(w)
	_ = cw.Write(header)
	return cw
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
