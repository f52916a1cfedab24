package load

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits is the number of significant bits a Histogram keeps of each value:
// 2^subBits buckets per power of two, so a recorded value is known to within
// 1/2^subBits (0.8%), from a nanosecond to centuries, in a fixed 60 KB.
const subBits = 7

const (
	subCount   = 1 << subBits
	numBuckets = (64-subBits)*subCount + subCount
)

// Histogram records durations in logarithmic buckets, like an HDR histogram
// with two significant decimal digits. Record is lock-free and safe for
// concurrent use; readers see a consistent enough picture while recording
// goes on (each bucket is read atomically) and an exact one after it ends.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // nanoseconds; overflows after 584 years of latency
	min    atomic.Int64
	max    atomic.Int64
}

// NewHistogram returns an empty Histogram.
func NewHistogram() *Histogram {
	h := &Histogram{}
	h.min.Store(math.MaxInt64)
	return h
}

// bucketOf returns the bucket of v. Values below 2^(subBits+1) have a
// bucket each; above, a bucket spans 2^e values, where v >> e keeps the
// subBits+1 significant bits of v.
func bucketOf(v uint64) int {
	if v < 2*subCount {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // >= 1; v>>e is in [subCount, 2*subCount)
	return e*subCount + int(v>>e)
}

// bucketHigh returns the highest value that falls in bucket i.
func bucketHigh(i int) uint64 {
	if i < 2*subCount {
		return uint64(i)
	}
	e := i/subCount - 1
	m := uint64(i%subCount + subCount)
	return (m+1)<<e - 1
}

// Record adds one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(uint64(v))].Add(1)
	h.n.Add(1)
	h.sum.Add(uint64(v))
	for {
		cur := h.min.Load()
		if v >= cur || h.min.CompareAndSwap(cur, v) {
			break
		}
	}
	for {
		cur := h.max.Load()
		if v <= cur || h.max.CompareAndSwap(cur, v) {
			break
		}
	}
}

// Count returns how many durations were recorded.
func (h *Histogram) Count() uint64 { return h.n.Load() }

// Max returns the largest duration recorded, or 0.
func (h *Histogram) Max() time.Duration {
	if h.n.Load() == 0 {
		return 0
	}
	return time.Duration(h.max.Load())
}

// Min returns the smallest duration recorded, or 0.
func (h *Histogram) Min() time.Duration {
	if h.n.Load() == 0 {
		return 0
	}
	return time.Duration(h.min.Load())
}

// Mean returns the average duration, or 0.
func (h *Histogram) Mean() time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Quantile returns the duration below or at which a fraction q (0..1) of
// the recorded durations fall: the upper end of the bucket that holds the
// ceil(q*n)-th smallest value, never above Max. It returns 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(rank, 1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(time.Duration(bucketHigh(i)), h.Max())
		}
	}
	return h.Max()
}

// Merge adds every value of o to h. o must not be recorded into meanwhile.
func (h *Histogram) Merge(o *Histogram) {
	if o.n.Load() == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c > 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(o.n.Load())
	h.sum.Add(o.sum.Load())
	for {
		cur, v := h.min.Load(), o.min.Load()
		if v >= cur || h.min.CompareAndSwap(cur, v) {
			break
		}
	}
	for {
		cur, v := h.max.Load(), o.max.Load()
		if v <= cur || h.max.CompareAndSwap(cur, v) {
			break
		}
	}
}
