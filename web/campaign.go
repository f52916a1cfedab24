package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// One campaign's page: its settings, live numbers, audit log and orders.

// notices are what a completed action tells the operator, by ?done=.
var notices = map[string]string{
	"create": "Campaign created; it is in admission and can be bought from its begin time.",
	"edit":   "Changes saved.",
	"pause":  "Paused: every purchase is answered PAUSED until you resume.",
	"resume": "Resumed: the campaign admits purchases again.",
	"end":    "Ended: no purchase is accepted any more.",
	"stock":  "Stock added: the new units can be bought now.",
	"guard":  "Challenge and brake saved: admission applies them from now on.",
	"cancel": "Order cancelled: its unit is back on sale, and its buyer may buy again.",
	"refund": "Refund sent again: the provider's confirmation moves it to refunded.",
}

// pageState is what an action hands the campaign page it renders.
type pageState struct {
	status     int
	notice     string
	err        string
	stockError string
	stockValue string
	// guard re-shows the challenge form after a refusal.
	guard *views.GuardView
}

func (h *Handler) campaignPage(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderCampaign(w, r, id, pageState{status: http.StatusOK, notice: notices[r.URL.Query().Get("done")]})
}

func (h *Handler) renderCampaign(w http.ResponseWriter, r *http.Request, id int64, st pageState) {
	ctx := r.Context()
	v, err := h.campaign(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	live, err := h.campaignLive(ctx, v)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	entries, err := h.cfg.Records.AuditLog(ctx, id, auditEntries)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	refunds, err := h.refundList(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	now := h.cfg.Now()
	c := v.Campaign
	p := views.CampaignPage{
		Meta: h.meta(r, v.Title, views.NavCampaigns),
		Campaign: views.CampaignView{
			ID: v.ID, ShopID: v.ShopID, Title: v.Title, SubTitle: v.SubTitle, Rules: v.Rules,
			PayValue: v.PayValue, ActualValue: v.ActualValue, Status: string(c.StatusAt(now)),
			Begin: c.BeginTime, End: c.EndTime, PayWindow: c.PayWindow, Currency: h.cfg.Currency, Paused: c.Paused,
			Editable: now.Before(c.BeginTime), Ended: !now.Before(c.EndTime), Shards: c.ShardCount(),
			Room: toRoomSettings(c),
		},
		Live:       live,
		Orders:     h.ordersView(ctx, r, id),
		Refunds:    refunds,
		Notice:     st.notice,
		Error:      st.err,
		StockError: st.stockError,
		StockValue: st.stockValue,
	}
	for _, e := range entries {
		p.Audit = append(p.Audit, toAuditRow(e))
	}
	if st.guard != nil {
		p.Guard = *st.guard
	} else {
		p.Guard = h.guardView(ctx, v, now)
	}
	h.render(w, r, st.status, views.Campaign(p))
}

func (h *Handler) campaignFragment(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err == nil {
		var v *seckill.Voucher
		if v, err = h.campaign(r.Context(), id); err == nil {
			var live views.CampaignLive
			if live, err = h.campaignLive(r.Context(), v); err == nil {
				h.render(w, r, http.StatusOK, views.CampaignFragment(live))
				return
			}
		}
	}
	http.Error(w, h.messageOf(r, err), statusOf(err))
}

// pathCampaign reads the campaign the route's {id} names; when there is
// none it answers the request and returns false.
func (h *Handler) pathCampaign(w http.ResponseWriter, r *http.Request) (*seckill.Voucher, bool) {
	id, err := pathID(r)
	if err == nil {
		var v *seckill.Voucher
		if v, err = h.campaign(r.Context(), id); err == nil {
			return v, true
		}
	}
	h.fail(w, r, err)
	return nil, false
}

// campaign returns a seckill voucher; a NORMAL one is not found here.
func (h *Handler) campaign(ctx context.Context, id int64) (*seckill.Voucher, error) {
	v, err := h.cfg.Campaigns.Voucher(ctx, id)
	if err != nil {
		return nil, err
	}
	if v.Campaign == nil {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "voucher %d has no campaign", id)
	}
	return v, nil
}

func (h *Handler) campaignLive(ctx context.Context, v *seckill.Voucher) (views.CampaignLive, error) {
	b, bal, err := h.balance(ctx, v.ID)
	if err != nil {
		return views.CampaignLive{}, err
	}
	lc, t := bal.Live, bal.Totals
	c := *v.Campaign
	c.InitialStock, c.Stock = t.InitialStock, t.Stock
	c.Remaining, c.RemainingKnown = lc.Remaining, lc.Known
	now := h.cfg.Now()
	l := views.CampaignLive{
		Src:       "/admin/campaigns/" + strconv.FormatInt(v.ID, 10) + "/live",
		Status:    string(c.StatusAt(now)),
		Initial:   t.InitialStock,
		Remaining: lc.Remaining,
		Queued:    lc.Queued,
		Sold:      c.Sold(),
		Failed:    t.Failures,
		Known:     lc.Known,
		Balance:   b,
		Charts:    h.charts(v.ID, now),

		Awaiting: t.Awaiting, OldestPayBy: t.OldestPayBy, Paid: t.Paid, Revenue: t.Revenue, Currency: h.cfg.Currency,
		Cancelled: t.Cancelled, Expired: t.Expired,
	}
	if err := h.refundTotals(ctx, v.ID, &l); err != nil {
		return views.CampaignLive{}, err
	}
	l.Shards = h.shardViews(v.ID, lc.Shards, now)
	if c.Room.Enabled() {
		l.Room = h.roomLive(ctx, v.ID)
	}
	return l, nil
}

// toRoomSettings shows a campaign's waiting room; nil when it has none.
func toRoomSettings(c *seckill.Campaign) *views.RoomSettings {
	if !c.Room.Enabled() {
		return nil
	}
	return &views.RoomSettings{OpensBefore: c.Room.OpensBefore, OpensAt: c.BeginTime.Add(-c.Room.OpensBefore),
		AdmitPerSecond: c.Room.AdmitPerSecond, PassFor: c.Room.PassFor}
}

// roomLive reads a waiting room's layers. A room that cannot be read
// says so on the page rather than failing it: the rest still shows.
func (h *Handler) roomLive(ctx context.Context, voucherID int64) *views.RoomLive {
	f, err := h.cfg.Rooms.Funnel(ctx, voucherID)
	if err != nil {
		h.logger.WarnContext(ctx, "read the waiting room", "voucher_id", voucherID, "err", err)
		return &views.RoomLive{Error: seckill.ErrorMessage(err)}
	}
	return &views.RoomLive{Joined: f.Joined, Waiting: f.Waiting, LetThrough: f.LetThrough, PassesLive: f.PassesLive,
		Expired: f.Expired, Admitted: f.Admitted}
}

// shardSample is one reading of a campaign's shards, for their rates.
type shardSample struct {
	at     time.Time
	shards []seckill.ShardLive
}

// shardViews turns a campaign's shards as admission reads them into the
// page's, with each shard's admissions a second since the last reading of
// this process (any viewer's), which it then remembers.
func (h *Handler) shardViews(voucherID int64, shards []seckill.ShardLive, now time.Time) []views.ShardView {
	if len(shards) == 0 {
		return nil
	}
	h.shardMu.Lock()
	prev, ok := h.shardLast[voucherID]
	if h.shardLast == nil {
		h.shardLast = make(map[int64]shardSample)
	}
	h.shardLast[voucherID] = shardSample{at: now, shards: shards}
	h.shardMu.Unlock()
	out := make([]views.ShardView, len(shards))
	for i, s := range shards {
		out[i] = views.ShardView{Shard: i, Remaining: s.Remaining, Queued: s.Queued, Known: s.Known}
		if dt := now.Sub(prev.at).Seconds(); ok && dt > 0 && i < len(prev.shards) && prev.shards[i].Epoch == s.Epoch &&
			s.Admitted >= prev.shards[i].Admitted {
			out[i].PerSecond, out[i].Rate = float64(s.Admitted-prev.shards[i].Admitted)/dt, true
		}
	}
	return out
}

// ordersView reads one page of a campaign's orders, or the search result.
func (h *Handler) ordersView(ctx context.Context, r *http.Request, id int64) views.OrdersView {
	q := r.URL.Query()
	base := "/admin/campaigns/" + strconv.FormatInt(id, 10)
	o := views.OrdersView{Currency: h.cfg.Currency, Action: base, By: q.Get("by"), Query: strings.TrimSpace(q.Get("q"))}
	if o.By != "user" {
		o.By = "order"
	}
	f := seckill.OrderFilter{VoucherID: id, Before: queryInt(r, "before"), Limit: ordersPerPage + 1}
	if st, ok := orderStatusFilter(q.Get("status")); ok {
		o.Status, f.Status = string(st), st
	}
	o.CSV = base + "/orders.csv?" + filterQuery(o).Encode()
	if o.Query != "" {
		n, err := seckill.ParseID("q", o.Query)
		if err != nil {
			o.Error = "Search for an order id or a user id: a positive whole number."
			return o
		}
		if o.By == "user" {
			f.UserID = n
		} else {
			f.OrderID = n
		}
	}
	orders, err := h.cfg.Records.CampaignOrders(ctx, f)
	if err != nil {
		o.Error = h.messageOf(r, err)
		return o
	}
	// An order not in Postgres yet may be queued in Redis.
	if f.OrderID > 0 && len(orders) == 0 {
		if ord, err := h.cfg.Orders.Order(ctx, f.OrderID); err == nil && ord.VoucherID == id {
			orders = append(orders, ord)
		}
	}
	if len(orders) > ordersPerPage {
		orders = orders[:ordersPerPage]
		v := filterQuery(o)
		v.Set("before", strconv.FormatInt(orders[len(orders)-1].ID, 10))
		o.Older = base + "?" + v.Encode() + "#orders"
	}
	if f.Before > 0 {
		o.Newer = base + "#orders"
		if v := filterQuery(o); len(v) > 0 {
			o.Newer = base + "?" + v.Encode() + "#orders"
		}
	}
	for _, ord := range orders {
		o.Rows = append(o.Rows, toOrderRow(base, ord))
	}
	return o
}

// toAuditRow says who made an entry in words. The domain records an
// operator by name and an API caller as "token user <id>"; operator names
// have no spaces, so the two cannot be confused.
func toAuditRow(e seckill.AuditEntry) views.AuditRow {
	row := views.AuditRow{At: e.At, Actor: e.Actor, Action: e.Action, Detail: e.Detail}
	if id, ok := strings.CutPrefix(e.Actor, "token user "); ok {
		row.Actor, row.API = id, true
	}
	return row
}
