package web

import (
	"net/http"
	"net/url"
	"time"

	"seckill/web/views"
)

// Queue is one job queue's figures (internal/app converts Asynq's).
type Queue struct {
	Name        string
	Pending     int
	Active      int
	Scheduled   int
	Retry       int
	Archived    int
	Completed   int
	Aggregating int
	// Processed and Failed count tasks today (UTC); a persistence task
	// carries a batch of orders.
	Processed int
	Failed    int
	Latency   time.Duration // the oldest pending task's age
	Paused    bool
}

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
		l.Rows = append(l.Rows, views.QueueRow{
			Name: q.Name, Pending: q.Pending, Active: q.Active, Scheduled: q.Scheduled, Retry: q.Retry,
			Archived: q.Archived, Completed: q.Completed, Aggregating: q.Aggregating,
			Processed: q.Processed, Failed: q.Failed, Latency: q.Latency, Paused: q.Paused,
			MonitorURL: "/admin/queues/queues/" + url.PathEscape(q.Name),
		})
	}
	return l
}

func (h *Handler) queuesPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, views.Queues(views.QueuesPage{Meta: h.meta(r, "Queues", views.NavQueues), Live: h.queuesLive()}))
}

func (h *Handler) queuesFragment(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, views.QueuesFragment(h.queuesLive()))
}
