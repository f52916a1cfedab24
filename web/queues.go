package web

import (
	"net/http"
	"net/url"
	"time"

	"seckill/web/views"
)

// Queue is one job queue's figures, as the views show them.
type Queue = views.Queue

// Queues reads the job queues' figures, every queue sorted by name, and
// when they were read (at most every few seconds: reading costs the queue
// backend a memory sample).
type Queues interface {
	Queues() ([]Queue, time.Time, error)
}

func (h *Handler) queuesLive() views.QueuesLive {
	l := views.QueuesLive{Src: "/admin/jobs/live"}
	if h.cfg.Queues == nil {
		l.Error = "Queue numbers are not available."
		return l
	}
	qs, at, err := h.cfg.Queues.Queues()
	if err != nil {
		h.logger.Error("read job queues", "err", err)
		l.Error = "The queues cannot be read right now."
	}
	l.At = at
	for _, q := range qs {
		l.Rows = append(l.Rows, views.QueueRow{Queue: q, MonitorURL: "/admin/queues/queues/" + url.PathEscape(q.Name)})
	}
	return l
}

func (h *Handler) queuesPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, views.Queues(views.QueuesPage{Meta: h.meta(r, "Queues", views.NavQueues), Live: h.queuesLive()}))
}

func (h *Handler) queuesFragment(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, views.QueuesFragment(h.queuesLive()))
}
