package report

import (
	"maps"
	"slices"
	"time"

	"seckill/internal/bench/load"
)

// Ms returns d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Ptr returns a pointer to v, for the optional figures.
func Ptr[T any](v T) *T { return &v }

// Build turns what rec recorded into a Report, before verification: the
// caller adds Persistence and then calls Judge.
func Build(target, endpoint string, voucherID, stock int64, rec *load.Recorder, interrupted bool) *Report {
	tally := rec.Snapshot()
	r := &Report{
		Target: target, URL: endpoint, VoucherID: voucherID, StartedAt: rec.Start.UTC(),
		Interrupted: interrupted,
		Sent:        rec.Sent.Load(), Answered: rec.Answered.Load(), Failed: rec.Failed.Load(),
		Dropped: rec.Dropped.Load(), Late: rec.Late.Load(), MaxLateMs: Ms(time.Duration(rec.MaxLate.Load())),
		Outcomes: tally.Outcomes,
		Stock:    stock,
		Accepted: tally.Outcomes["ACCEPTED"],
	}
	elapsed := time.Duration(rec.LastDone.Load())
	r.ElapsedS = elapsed.Seconds()
	if elapsed > 0 {
		r.Throughput = float64(r.Answered) / elapsed.Seconds()
	}
	h := rec.All
	r.Latency = Latency{
		P50: Ms(h.Quantile(0.50)), P90: Ms(h.Quantile(0.90)), P99: Ms(h.Quantile(0.99)),
		P999: Ms(h.Quantile(0.999)), Max: Ms(h.Max()), Mean: Ms(h.Mean()),
	}
	if len(tally.Errors) > 0 {
		r.Errors = map[string]ErrorStat{}
		for k, e := range tally.Errors {
			r.Errors[k] = ErrorStat{Count: e.N, Example: e.Detail}
		}
	}
	if fs := time.Duration(rec.FirstSoldOut.Load()); fs > 0 {
		r.Selling = phase(rec.Selling, fs)
		r.SoldOut = phase(rec.SoldOut, elapsed-fs)
	}
	r.DuplicateAnswers = duplicateAnswers(tally.Accepted)
	r.Arrivals = arrivalSpread(tally.Arrivals)
	return r
}

// arrivalSpread sums up when the purchases left: the span holding the
// middle 80% of them and the busiest second (a sliding window of 100 ms
// buckets).
func arrivalSpread(buckets map[int64]int64) *Arrivals {
	if len(buckets) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(buckets))
	var total int64
	for _, k := range keys {
		total += buckets[k]
	}
	at := func(q float64) int64 {
		var seen int64
		for _, k := range keys {
			seen += buckets[k]
			if float64(seen) >= q*float64(total) {
				return k
			}
		}
		return keys[len(keys)-1]
	}
	step := load.ArrivalBucket.Seconds()
	per := int64(time.Second / load.ArrivalBucket)
	var peak int64
	for _, k := range keys {
		var n int64
		for j := k; j < k+per; j++ {
			n += buckets[j]
		}
		peak = max(peak, n)
	}
	return &Arrivals{
		SpreadS:   float64(at(0.9)-at(0.1)+1) * step,
		PeakPerS:  peak,
		PeakShare: float64(peak) / float64(total),
	}
}

// duplicateAnswers counts ACCEPTED answers that repeat an order id or a
// buyer.
func duplicateAnswers(accepted []load.Acceptance) int64 {
	var n int64
	ids := make(map[int64]bool, len(accepted))
	buyers := make(map[int]bool, len(accepted))
	for _, a := range accepted {
		if ids[a.OrderID] || buyers[a.User] {
			n++
		}
		ids[a.OrderID], buyers[a.User] = true, true
	}
	return n
}

func phase(h *load.Histogram, d time.Duration) *Phase {
	p := &Phase{Answered: int64(h.Count()), ElapsedS: d.Seconds(), P50: Ms(h.Quantile(0.5)), P99: Ms(h.Quantile(0.99))}
	if d > 0 {
		p.Throughput = float64(p.Answered) / d.Seconds()
	}
	return p
}
