package app

import (
	"time"

	"github.com/hibiken/asynq"

	"seckill/internal/sampler"
	"seckill/jobs"
	"seckill/web"
)

// The dashboard (web) owns the types it shows; these convert what the
// sampler, Asynq and the admission adapter speak into them.

// history hands the dashboard the sampler's history in web's types.
type history struct{ s *sampler.Sampler }

// Samples implements web.History.
func (h history) Samples(voucherID int64, since time.Time) []web.Sample {
	in := h.s.Samples(voucherID, since)
	out := make([]web.Sample, len(in))
	for i, s := range in {
		out[i] = toWebSample(s)
	}
	return out
}

func toWebSample(s sampler.Sample) web.Sample {
	w := web.Sample{At: s.At, Taken: s.Taken, Persisted: s.Persisted, QueueDepth: s.QueueDepth,
		Outcomes: make([]web.OutcomeRate, len(sampler.Outcomes))}
	for i, o := range sampler.Outcomes {
		w.Outcomes[i] = web.OutcomeRate{Outcome: o, PerSecond: s.Outcomes[i]}
	}
	return w
}

// queueFigures hands the dashboard Asynq's queue numbers in web's types.
type queueFigures struct{ q *jobs.QueueStats }

// Queues implements web.Queues.
func (f queueFigures) Queues() ([]web.Queue, time.Time, error) {
	info, at, err := f.q.Get()
	out := make([]web.Queue, len(info))
	for i, q := range info {
		out[i] = toWebQueue(q)
	}
	return out, at, err
}

func toWebQueue(q asynq.QueueInfo) web.Queue {
	return web.Queue{
		Name: q.Queue, Pending: q.Pending, Active: q.Active, Scheduled: q.Scheduled, Retry: q.Retry,
		Archived: q.Archived, Completed: q.Completed, Aggregating: q.Aggregating,
		Processed: q.Processed, Failed: q.Failed, Latency: q.Latency, Paused: q.Paused,
	}
}
