package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// Page sizes.
const (
	campaignsPerPage = 50
	ordersPerPage    = 20
	auditEntries     = 50
	chartSpan        = 5 * time.Minute
)

func queryInt(r *http.Request, name string) int64 {
	n, err := strconv.ParseInt(r.URL.Query().Get(name), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// ---- the campaigns list

func (h *Handler) campaignsPage(w http.ResponseWriter, r *http.Request) {
	before := queryInt(r, "before")
	live, older, err := h.campaignsLive(r.Context(), before)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := views.CampaignsPage{Meta: h.meta(r, "Campaigns", views.NavCampaigns), Live: live}
	if older > 0 {
		p.Older = "/admin?before=" + strconv.FormatInt(older, 10)
	}
	if before > 0 {
		p.Newer = "/admin"
	}
	h.render(w, r, http.StatusOK, views.Campaigns(p))
}

func (h *Handler) campaignsFragment(w http.ResponseWriter, r *http.Request) {
	live, _, err := h.campaignsLive(r.Context(), queryInt(r, "before"))
	if err != nil {
		http.Error(w, h.messageOf(r, err), statusOf(err))
		return
	}
	h.render(w, r, http.StatusOK, views.CampaignsFragment(live))
}

// campaignsLive reads one page of campaigns with their live numbers; older
// is the id to page on from, or 0 on the last page.
func (h *Handler) campaignsLive(ctx context.Context, before int64) (views.CampaignsLive, int64, error) {
	l := views.CampaignsLive{Src: "/admin/live/campaigns"}
	if before > 0 {
		l.Src += "?before=" + strconv.FormatInt(before, 10)
	}
	vs, err := h.cfg.Records.Campaigns(ctx, seckill.CampaignFilter{Before: before, Limit: campaignsPerPage + 1})
	if err != nil {
		return l, 0, err
	}
	var older int64
	if len(vs) > campaignsPerPage {
		vs = vs[:campaignsPerPage]
		older = vs[len(vs)-1].ID
	}
	ids := make([]int64, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	live := h.liveCounts(ctx, ids)
	now := h.cfg.Now()
	for _, v := range vs {
		c := v.Campaign
		lc := live[v.ID]
		c.Remaining, c.RemainingKnown = lc.Remaining, lc.Known
		l.Rows = append(l.Rows, views.CampaignRow{
			ID: v.ID, Title: v.Title, SubTitle: v.SubTitle, Status: string(c.StatusAt(now)),
			Begin: c.BeginTime, End: c.EndTime, Initial: c.InitialStock,
			Remaining: lc.Remaining, Queued: lc.Queued, Known: lc.Known, Sold: c.Sold(),
			Spark: h.spark(v.ID, now),
		})
	}
	l.Queues = h.queuesLive()
	return l, older, nil
}

// liveCounts reads Redis's numbers; when Redis cannot answer, the page still
// shows Postgres's, with the live columns blank.
func (h *Handler) liveCounts(ctx context.Context, ids []int64) map[int64]seckill.LiveCounts {
	live, err := h.cfg.Live.LiveCounts(ctx, ids)
	if err != nil {
		h.logger.Error("read live counts", "err", err)
		return map[int64]seckill.LiveCounts{}
	}
	return live
}

func (h *Handler) spark(id int64, now time.Time) views.Spark {
	samples := h.cfg.Sampler.Samples(id, now.Add(-chartSpan))
	values := make([]float64, len(samples))
	for i, s := range samples {
		values[i] = s.Taken
	}
	return views.NewSpark(values)
}

// ---- one campaign

// notices are what a completed action tells the operator, by ?done=.
var notices = map[string]string{
	"create": "Campaign created; it is in admission and can be bought from its begin time.",
	"edit":   "Changes saved.",
	"pause":  "Paused: every purchase is answered PAUSED until you resume.",
	"resume": "Resumed: the campaign admits purchases again.",
	"end":    "Ended: no purchase is accepted any more.",
	"stock":  "Stock added: the new units can be bought now.",
}

// pageState is what an action hands the campaign page it renders.
type pageState struct {
	status     int
	notice     string
	err        string
	stockError string
	stockValue string
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
	now := h.cfg.Now()
	c := v.Campaign
	p := views.CampaignPage{
		Meta: h.meta(r, v.Title, views.NavCampaigns),
		Campaign: views.CampaignView{
			ID: v.ID, ShopID: v.ShopID, Title: v.Title, SubTitle: v.SubTitle, Rules: v.Rules,
			PayValue: v.PayValue, ActualValue: v.ActualValue, Status: string(c.StatusAt(now)),
			Begin: c.BeginTime, End: c.EndTime, Paused: c.Paused,
			Editable: now.Before(c.BeginTime), Ended: !now.Before(c.EndTime),
		},
		Live:       live,
		Orders:     h.ordersView(ctx, r, id),
		Notice:     st.notice,
		Error:      st.err,
		StockError: st.stockError,
		StockValue: st.stockValue,
	}
	for _, e := range entries {
		p.Audit = append(p.Audit, views.AuditRow{At: e.At, Actor: e.Actor, Action: e.Action, Detail: e.Detail})
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

// campaign returns a seckill voucher; a NORMAL one is not found here.
func (h *Handler) campaign(ctx context.Context, id int64) (*seckill.Voucher, error) {
	v, err := h.cfg.Service.Voucher(ctx, id)
	if err != nil {
		return nil, err
	}
	if v.Campaign == nil {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "voucher %d has no campaign", id)
	}
	return v, nil
}

func (h *Handler) campaignLive(ctx context.Context, v *seckill.Voucher) (views.CampaignLive, error) {
	b, lc, t, err := h.balance(ctx, v.ID)
	if err != nil {
		return views.CampaignLive{}, err
	}
	c := *v.Campaign
	c.InitialStock, c.Stock = t.InitialStock, t.Stock
	c.Remaining, c.RemainingKnown = lc.Remaining, lc.Known
	now := h.cfg.Now()
	return views.CampaignLive{
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
	}, nil
}

// balanceReads is how often the consistency check reads again before it
// reports that the equation does not hold.
const balanceReads = 3

// balance checks initial stock = remaining + queued + sold. It reads Redis
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
			h.logger.Error("read live counts", "voucher_id", id, "err", err)
			live = nil
		}
		lc = live[id]
		if t, err = h.cfg.Records.CampaignTotals(ctx, id); err != nil {
			return b, lc, t, err
		}
		sold := t.InitialStock - t.Stock
		b = views.Balance{
			Initial: t.InitialStock, Remaining: lc.Remaining, Queued: lc.Queued, Sold: sold,
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
				" orders are stored but the stock says " + strconv.FormatInt(sold, 10) + " were sold."
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
			b.Message = strconv.FormatInt(-b.Diff, 10) + " units put on sale are neither left, queued nor sold."
		}
	}
	return b, lc, t, nil
}

// charts draws the last chartSpan of a campaign's samples.
func (h *Handler) charts(id int64, now time.Time) []views.Chart {
	if h.cfg.Sampler == nil {
		return nil
	}
	from := now.Add(-chartSpan)
	samples := h.cfg.Sampler.Samples(id, from)
	series := func(name, class string, f func(Sample) float64) views.Series {
		s := views.Series{Name: name, Class: class, Points: make([]views.Point, len(samples))}
		for i, smp := range samples {
			s.Points[i] = views.Point{At: smp.At, V: f(smp)}
		}
		return s
	}
	var outcomes []views.Series
	for i, o := range Outcomes {
		s := series(strings.ReplaceAll(strings.ToLower(string(o)), "_", " "), "s-"+strings.ToLower(string(o)),
			func(smp Sample) float64 { return smp.Outcomes[i] })
		// Accepted always; the others once they happened.
		if i == 0 || hasValue(s) {
			outcomes = append(outcomes, s)
		}
	}
	return []views.Chart{
		views.NewChart("chart-outcomes", "Admissions per second by outcome", "(this instance)", from, now, outcomes...),
		views.NewChart("chart-persisted", "Units sold and orders persisted per second", "(all instances)", from, now,
			series("sold", "s-accepted", func(smp Sample) float64 { return smp.Taken }),
			series("persisted", "s-persisted", func(smp Sample) float64 { return smp.Persisted })),
		views.NewChart("chart-depth", "Queue depth", "(tasks waiting or running)", from, now,
			series("depth", "s-depth", func(smp Sample) float64 { return float64(smp.QueueDepth) })),
	}
}

func hasValue(s views.Series) bool {
	for _, p := range s.Points {
		if p.V > 0 {
			return true
		}
	}
	return false
}

// ordersView reads one page of a campaign's orders, or the search result.
func (h *Handler) ordersView(ctx context.Context, r *http.Request, id int64) views.OrdersView {
	q := r.URL.Query()
	base := "/admin/campaigns/" + strconv.FormatInt(id, 10)
	o := views.OrdersView{Action: base, By: q.Get("by"), Query: strings.TrimSpace(q.Get("q"))}
	if o.By != "user" {
		o.By = "order"
	}
	f := seckill.OrderFilter{VoucherID: id, Before: queryInt(r, "before"), Limit: ordersPerPage + 1}
	if o.Query != "" {
		n, err := strconv.ParseInt(o.Query, 10, 64)
		if err != nil || n <= 0 {
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
		if ord, err := h.cfg.Service.Order(ctx, f.OrderID); err == nil && ord.VoucherID == id {
			orders = append(orders, ord)
		}
	}
	if len(orders) > ordersPerPage {
		orders = orders[:ordersPerPage]
		v := url.Values{"before": {strconv.FormatInt(orders[len(orders)-1].ID, 10)}}
		if o.Query != "" {
			v.Set("by", o.By)
			v.Set("q", o.Query)
		}
		o.Older = base + "?" + v.Encode() + "#orders"
	}
	if f.Before > 0 {
		o.Newer = base + "#orders"
		if o.Query != "" {
			o.Newer = base + "?" + url.Values{"by": {o.By}, "q": {o.Query}}.Encode() + "#orders"
		}
	}
	for _, ord := range orders {
		o.Rows = append(o.Rows, views.OrderRow{ID: ord.ID, UserID: ord.UserID, Status: string(ord.Status), At: ord.CreatedAt, Reason: ord.FailureReason})
	}
	return o
}

// ---- actions

func (h *Handler) pauseCampaign(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, "pause", h.cfg.Service.PauseCampaign)
}

func (h *Handler) resumeCampaign(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, "resume", h.cfg.Service.ResumeCampaign)
}

func (h *Handler) endCampaign(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, "end", h.cfg.Service.EndCampaign)
}

func (h *Handler) addStock(w http.ResponseWriter, r *http.Request) {
	raw := strings.TrimSpace(r.PostFormValue("stock"))
	h.act(w, r, "stock", func(ctx context.Context, id int64) (*seckill.Voucher, error) {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, seckill.Invalidf("stock", "stock to add must be a whole number")
		}
		return h.cfg.Service.AddStock(ctx, id, n)
	})
}

// act runs one action on a campaign. Done, it redirects to the campaign's
// page (so a reload does not repeat it); refused, it shows the page with the
// reason, next to the field when there is one.
func (h *Handler) act(w http.ResponseWriter, r *http.Request, done string, do func(ctx context.Context, id int64) (*seckill.Voucher, error)) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := do(r.Context(), id); err != nil {
		if c := seckill.ErrorCode(err); c == seckill.ENOTFOUND || c == seckill.EUNAUTHENTICATED || c == seckill.EFORBIDDEN {
			h.fail(w, r, err)
			return
		}
		st := pageState{status: statusOf(err)}
		if seckill.ErrorField(err) == "stock" {
			st.stockError, st.stockValue = seckill.ErrorMessage(err), r.PostFormValue("stock")
		} else {
			st.err = h.messageOf(r, err)
		}
		h.renderCampaign(w, r, id, st)
		return
	}
	http.Redirect(w, r, "/admin/campaigns/"+strconv.FormatInt(id, 10)+"?done="+done, http.StatusSeeOther)
}

// ---- the create and edit forms

// formFields are the inputs of the campaign form, named as the GraphQL
// input's fields so errors name the same field.
var formFields = []string{"title", "subTitle", "rules", "shopId", "stock", "payValue", "actualValue", "beginTimeLocal", "endTimeLocal"}

func (h *Handler) newCampaignForm(w http.ResponseWriter, r *http.Request) {
	now := h.cfg.Now().UTC().Truncate(time.Minute)
	p := views.FormPage{
		Meta: h.meta(r, "New campaign", views.NavCampaigns), Action: "/admin/campaigns",
		Values: map[string]string{"shopId": "1"},
		Begin:  now.Add(5 * time.Minute), End: now.Add(65 * time.Minute),
	}
	h.render(w, r, http.StatusOK, views.CampaignForm(p))
}

func (h *Handler) createCampaign(w http.ResponseWriter, r *http.Request) {
	p := views.FormPage{Meta: h.meta(r, "New campaign", views.NavCampaigns), Action: "/admin/campaigns", Values: formValues(r)}
	in, err := parseNewCampaign(r, &p)
	if err == nil {
		var v *seckill.Voucher
		if v, err = h.cfg.Service.AddSeckillVoucher(r.Context(), in); err == nil {
			http.Redirect(w, r, "/admin/campaigns/"+strconv.FormatInt(v.ID, 10)+"?done=create", http.StatusSeeOther)
			return
		}
	}
	h.formError(w, r, &p, err)
}

func (h *Handler) editCampaignForm(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v, err := h.campaign(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !h.cfg.Now().Before(v.Campaign.BeginTime) {
		h.renderCampaign(w, r, id, pageState{status: http.StatusConflict,
			err: "This campaign has started: it can only be paused, resumed, ended or given more stock."})
		return
	}
	p := h.editPage(r, v)
	p.Values["title"], p.Values["subTitle"], p.Values["rules"] = v.Title, v.SubTitle, v.Rules
	p.Begin, p.End = v.Campaign.BeginTime, v.Campaign.EndTime
	h.render(w, r, http.StatusOK, views.CampaignForm(p))
}

func (h *Handler) editCampaign(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v, err := h.campaign(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := h.editPage(r, v)
	for _, f := range []string{"title", "subTitle", "rules", "beginTimeLocal", "endTimeLocal"} {
		p.Values[f] = r.PostFormValue(f)
	}
	e := seckill.CampaignEdit{Title: r.PostFormValue("title"), SubTitle: r.PostFormValue("subTitle"), Rules: r.PostFormValue("rules")}
	err = parseTimes(r, &p, &e.BeginTime, &e.EndTime)
	if err == nil {
		if _, err = h.cfg.Service.UpdateCampaign(r.Context(), id, e); err == nil {
			http.Redirect(w, r, "/admin/campaigns/"+strconv.FormatInt(id, 10)+"?done=edit", http.StatusSeeOther)
			return
		}
	}
	if seckill.ErrorCode(err) == seckill.ECONFLICT {
		h.renderCampaign(w, r, id, pageState{status: http.StatusConflict, err: h.messageOf(r, err)})
		return
	}
	h.formError(w, r, &p, err)
}

func (h *Handler) editPage(r *http.Request, v *seckill.Voucher) views.FormPage {
	id := strconv.FormatInt(v.ID, 10)
	return views.FormPage{
		Meta: h.meta(r, "Edit "+v.Title, views.NavCampaigns), Action: "/admin/campaigns/" + id + "/edit",
		Edit: true, ID: v.ID,
		Values: map[string]string{
			"shopId":   strconv.FormatInt(v.ShopID, 10),
			"payValue": strconv.FormatInt(v.PayValue, 10), "actualValue": strconv.FormatInt(v.ActualValue, 10),
			"stock": strconv.FormatInt(v.Campaign.InitialStock, 10),
		},
	}
}

// formError shows the form again with the error next to its field.
func (h *Handler) formError(w http.ResponseWriter, r *http.Request, p *views.FormPage, err error) {
	if f := seckill.ErrorField(err); f != "" {
		p.Errors = map[string]string{f: seckill.ErrorMessage(err)}
	} else {
		p.Error = h.messageOf(r, err)
	}
	h.render(w, r, statusOf(err), views.CampaignForm(*p))
}

func formValues(r *http.Request) map[string]string {
	vals := make(map[string]string, len(formFields))
	for _, f := range formFields {
		vals[f] = r.PostFormValue(f)
	}
	return vals
}

// parseNewCampaign reads the create form into the domain's input; the domain
// validates it, so the messages are those of the GraphQL mutation. Only
// what cannot be converted is refused here, naming the same fields.
func parseNewCampaign(r *http.Request, p *views.FormPage) (seckill.NewSeckillVoucher, error) {
	in := seckill.NewSeckillVoucher{
		Title: r.PostFormValue("title"), SubTitle: r.PostFormValue("subTitle"), Rules: r.PostFormValue("rules"),
	}
	shop, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("shopId")), 10, 64)
	if err != nil || shop <= 0 {
		return in, seckill.Invalidf("shopId", "shopId must be a positive integer id")
	}
	in.ShopID = shop
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"payValue", &in.PayValue}, {"actualValue", &in.ActualValue}, {"stock", &in.Stock}} {
		n, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue(f.name)), 10, 64)
		if err != nil {
			return in, seckill.Invalidf(f.name, "%s must be a whole number", f.name)
		}
		*f.dst = n
	}
	return in, parseTimes(r, p, &in.BeginTime, &in.EndTime)
}

// parseTimes reads beginTime and endTime: the UTC instant the script put in
// the hidden field, or else the visible datetime-local value read as UTC.
func parseTimes(r *http.Request, p *views.FormPage, begin, end *time.Time) error {
	for _, f := range []struct {
		name string
		dst  *time.Time
		show *time.Time
	}{{"beginTime", begin, &p.Begin}, {"endTime", end, &p.End}} {
		t, ok := parseFormTime(r.PostFormValue(f.name), r.PostFormValue(f.name+"Local"))
		if !ok {
			return seckill.Invalidf(f.name, "%s must be a date and time", f.name)
		}
		*f.dst, *f.show = t, t
	}
	return nil
}

func parseFormTime(utcValue, local string) (time.Time, bool) {
	if s := strings.TrimSpace(utcValue); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		return t.UTC(), err == nil
	}
	s := strings.TrimSpace(local)
	if s == "" {
		return time.Time{}, true // the domain says it is required
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
