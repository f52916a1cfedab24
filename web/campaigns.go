package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// The campaigns list: the page and its live fragment.

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
		h.logger.ErrorContext(ctx, "read live counts", "err", err)
		return map[int64]seckill.LiveCounts{}
	}
	return live
}
