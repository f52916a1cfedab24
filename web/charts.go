package web

import (
	"strings"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// Sample is one interval of a campaign's recent history.
type Sample struct {
	At time.Time
	// Taken is units taken per second over the interval, by every
	// instance; Persisted is orders written to Postgres per second.
	Taken     float64
	Persisted float64
	// Outcomes are admissions per second by outcome, of the instance
	// serving the page, accepted first.
	Outcomes []OutcomeRate
	// QueueDepth is the tasks waiting or running in the job queues.
	QueueDepth int64
}

// OutcomeRate is how many purchases a second got one outcome.
type OutcomeRate struct {
	Outcome   seckill.Outcome
	PerSecond float64
}

// History is the recent history of the live campaigns, which a background
// sampler keeps (internal/sampler).
type History interface {
	// Samples returns a campaign's samples since since, oldest first.
	Samples(voucherID int64, since time.Time) []Sample
}

func (h *Handler) samples(id int64, since time.Time) []Sample {
	if h.cfg.History == nil {
		return nil
	}
	return h.cfg.History.Samples(id, since)
}

func (h *Handler) spark(id int64, now time.Time) views.Spark {
	samples := h.samples(id, now.Add(-chartSpan))
	values := make([]float64, len(samples))
	for i, s := range samples {
		values[i] = s.Taken
	}
	return views.NewSpark(values)
}

// charts draws the last chartSpan of a campaign's samples.
func (h *Handler) charts(id int64, now time.Time) []views.Chart {
	if h.cfg.History == nil {
		return nil
	}
	from := now.Add(-chartSpan)
	samples := h.samples(id, from)
	series := func(name, class string, f func(Sample) float64) views.Series {
		s := views.Series{Name: name, Class: class, Points: make([]views.Point, len(samples))}
		for i, smp := range samples {
			s.Points[i] = views.Point{At: smp.At, V: f(smp)}
		}
		return s
	}
	kinds := []seckill.Outcome{seckill.OutcomeAccepted}
	if len(samples) > 0 {
		kinds = kinds[:0]
		for _, o := range samples[0].Outcomes {
			kinds = append(kinds, o.Outcome)
		}
	}
	var outcomes []views.Series
	for i, o := range kinds {
		s := series(strings.ReplaceAll(strings.ToLower(string(o)), "_", " "), "s-"+strings.ToLower(string(o)),
			func(smp Sample) float64 {
				if i < len(smp.Outcomes) {
					return smp.Outcomes[i].PerSecond
				}
				return 0
			})
		// Accepted always; the others once they happened.
		if o == seckill.OutcomeAccepted || hasValue(s) {
			outcomes = append(outcomes, s)
		}
	}
	return []views.Chart{
		views.NewChart("chart-funnel", "Purchases per second: arrivals and the layer that stopped them", "(this instance)", "/s", from, now,
			funnelSeries(series)...),
		views.NewChart("chart-outcomes", "Admissions per second by outcome", "(this instance)", "/s", from, now, outcomes...),
		views.NewChart("chart-persisted", "Units sold and orders persisted per second", "(all instances)", "/s", from, now,
			series("sold", "s-accepted", func(smp Sample) float64 { return smp.Taken }),
			series("persisted", "s-persisted", func(smp Sample) float64 { return smp.Persisted })),
		views.NewChart("chart-depth", "Queue depth", "(tasks waiting or running)", " tasks", from, now,
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

// funnelSeries sums the outcome rates by funnel layer (seckill.Layers), and
// all of them into the arrivals: how requests spread around an opening, and
// where each layer stopped them. Layers show once they stopped something.
func funnelSeries(series func(name, class string, f func(Sample) float64) views.Series) []views.Series {
	out := []views.Series{series("arrivals", "s-arrivals", func(smp Sample) float64 {
		t := 0.0
		for _, o := range smp.Outcomes {
			t += o.PerSecond
		}
		return t
	})}
	for _, layer := range seckill.Layers {
		s := series(strings.ReplaceAll(layer, "_", " "), "s-"+strings.ReplaceAll(layer, "_", "-"), func(smp Sample) float64 {
			t := 0.0
			for _, o := range smp.Outcomes {
				if o.Outcome.Layer() == layer {
					t += o.PerSecond
				}
			}
			return t
		})
		if hasValue(s) {
			out = append(out, s)
		}
	}
	return out
}
