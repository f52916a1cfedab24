package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"seckill/internal/seckill"
)

// Actions on a campaign: pause, resume, end, add stock.

func (h *Handler) pauseCampaign(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, "pause", h.cfg.Campaigns.PauseCampaign)
}

func (h *Handler) resumeCampaign(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, "resume", h.cfg.Campaigns.ResumeCampaign)
}

func (h *Handler) endCampaign(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, "end", h.cfg.Campaigns.EndCampaign)
}

func (h *Handler) addStock(w http.ResponseWriter, r *http.Request) {
	raw := strings.TrimSpace(r.PostFormValue("stock"))
	h.act(w, r, "stock", func(ctx context.Context, id int64) (*seckill.Voucher, error) {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, seckill.Invalidf("stock", "stock to add must be a whole number")
		}
		return h.cfg.Campaigns.AddStock(ctx, id, n)
	})
}

// act runs one action on a campaign. Done, it redirects to the campaign's
// page (so a reload does not repeat it); refused, it shows the page with the
// reason, next to the field when there is one.
// refused, when given, adjusts the page shown after a refusal.
func (h *Handler) act(w http.ResponseWriter, r *http.Request, done string, do func(ctx context.Context, id int64) (*seckill.Voucher, error), refused ...func(st *pageState)) {
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
		for _, f := range refused {
			f(&st)
		}
		h.renderCampaign(w, r, id, st)
		return
	}
	http.Redirect(w, r, "/admin/campaigns/"+strconv.FormatInt(id, 10)+"?done="+done, http.StatusSeeOther)
}

// done ends an action on campaign id: refused (err set), it shows the
// campaign's page with the reason, or the error page for a campaign or
// order the operator cannot reach; done, it redirects to the campaign's
// page at anchor with the notice of done (so a reload does not repeat it).
func (h *Handler) done(w http.ResponseWriter, r *http.Request, id int64, err error, done, anchor string) {
	if err != nil {
		if c := seckill.ErrorCode(err); c == seckill.ENOTFOUND || c == seckill.EUNAUTHENTICATED || c == seckill.EFORBIDDEN {
			h.fail(w, r, err)
			return
		}
		h.renderCampaign(w, r, id, pageState{status: statusOf(err), err: h.messageOf(r, err)})
		return
	}
	http.Redirect(w, r, "/admin/campaigns/"+strconv.FormatInt(id, 10)+"?done="+done+anchor, http.StatusSeeOther)
}
