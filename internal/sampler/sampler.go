// Package sampler keeps, in memory, the recent per-second history of every
// live campaign behind the dashboard's charts: a background job that
// internal/app runs, reading the store, admission's live counts, the job
// queues' depth and the outcomes this process answered.
package sampler

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"seckill/internal/seckill"
)

// Sample is one second (one interval) of a campaign.
type Sample struct {
	At        time.Time
	Remaining int64 // Redis, at At
	Queued    int64 // Redis, at At
	Sold      int64 // Postgres, at At
	// Taken is units taken per second over the interval, by every
	// instance: the change of sold + queued.
	Taken float64
	// Persisted is orders written to Postgres per second.
	Persisted float64
	// Outcomes are admissions per second by outcome, in Outcomes' order,
	// of this instance only.
	Outcomes [nOutcomes]float64
	// QueueDepth is the tasks waiting or running in Asynq (every queue).
	QueueDepth int64
}

// CampaignLister lists campaigns (the store).
type CampaignLister interface {
	Campaigns(ctx context.Context, f seckill.CampaignFilter) ([]*seckill.Voucher, error)
}

// LiveCounter reads admission's live numbers (Redis).
type LiveCounter interface {
	LiveCounts(ctx context.Context, voucherIDs []int64) (map[int64]seckill.LiveCounts, error)
}

// QueueDepth counts the tasks waiting or running in the job queues.
type QueueDepth interface {
	Depth() (int64, error)
}

// Config configures a Sampler.
type Config struct {
	Campaigns CampaignLister
	Live      LiveCounter
	Queues    QueueDepth      // nil: depth 0
	Outcomes  *OutcomeCounter // nil: no outcome rates
	Interval  time.Duration   // 0 means one second
	Window    time.Duration   // history kept; 0 means ten minutes
	Logger    *slog.Logger
}

// Sampler keeps, in memory, the last Window of per-interval samples of every
// campaign that has not ended (or ended within Window): the history behind
// the charts and sparklines. Each process keeps its own.
type Sampler struct {
	cfg Config

	mu     sync.RWMutex
	series map[int64]*history
}

type history struct {
	samples []Sample // a ring: next is the oldest once full
	next    int
	full    bool
	last    outcomeCounts
}

// New returns a sampler; Run starts it.
func New(cfg Config) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Window <= 0 {
		cfg.Window = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sampler{cfg: cfg, series: map[int64]*history{}}
}

// Window is the history the sampler keeps.
func (s *Sampler) Window() time.Duration { return s.cfg.Window }

// Run samples every interval until ctx ends; it returns nil then.
func (s *Sampler) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if err := s.Sample(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("sample", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sample takes one sample of every live campaign at now.
func (s *Sampler) Sample(ctx context.Context, now time.Time) error {
	vs, err := s.cfg.Campaigns.Campaigns(ctx, seckill.CampaignFilter{Limit: 1000, EndedAfter: now.Add(-s.cfg.Window)})
	if err != nil {
		return err
	}
	ids := make([]int64, 0, len(vs))
	for _, v := range vs {
		ids = append(ids, v.ID)
	}
	live, err := s.cfg.Live.LiveCounts(ctx, ids)
	if err != nil {
		return err
	}
	var depth int64
	if s.cfg.Queues != nil {
		if depth, err = s.cfg.Queues.Depth(); err != nil {
			s.cfg.Logger.Warn("sample: queue depth", "err", err)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	keep := make(map[int64]bool, len(vs))
	for _, v := range vs {
		keep[v.ID] = true
		lc := live[v.ID]
		smp := Sample{At: now, Remaining: lc.Remaining, Queued: lc.Queued, Sold: v.Campaign.Sold(), QueueDepth: depth}
		counts := s.cfg.Outcomes.counts(v.ID)
		h, ok := s.series[v.ID]
		if !ok {
			h = &history{samples: make([]Sample, 0, int(s.cfg.Window/s.cfg.Interval)+1)}
			s.series[v.ID] = h
		} else if prev, ok := h.latest(); ok {
			secs := now.Sub(prev.At).Seconds()
			if secs > 0 {
				smp.Persisted = max(0, float64(smp.Sold-prev.Sold)/secs)
				smp.Taken = max(0, float64(smp.Sold+smp.Queued-prev.Sold-prev.Queued)/secs)
				for i := range smp.Outcomes {
					smp.Outcomes[i] = max(0, float64(counts[i]-h.last[i])/secs)
				}
			}
		}
		h.last = counts
		h.add(smp)
	}
	for id := range s.series {
		if !keep[id] {
			delete(s.series, id)
		}
	}
	return nil
}

func (h *history) add(smp Sample) {
	if len(h.samples) < cap(h.samples) {
		h.samples = append(h.samples, smp)
		return
	}
	h.samples[h.next] = smp
	h.next = (h.next + 1) % len(h.samples)
	h.full = true
}

func (h *history) latest() (Sample, bool) {
	if len(h.samples) == 0 {
		return Sample{}, false
	}
	if !h.full {
		return h.samples[len(h.samples)-1], true
	}
	return h.samples[(h.next+len(h.samples)-1)%len(h.samples)], true
}

// Samples returns a campaign's samples since since, oldest first.
func (s *Sampler) Samples(voucherID int64, since time.Time) []Sample {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.series[voucherID]
	if !ok {
		return nil
	}
	out := make([]Sample, 0, len(h.samples))
	for i := range h.samples {
		smp := h.samples[(h.next+i)%len(h.samples)]
		if !smp.At.Before(since) {
			out = append(out, smp)
		}
	}
	return out
}
