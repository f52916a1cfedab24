package load

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	for i := range numBuckets - 1 {
		hi := bucketHigh(i)
		if got := bucketOf(hi); got != i {
			t.Fatalf("bucketOf(bucketHigh(%d)=%d) = %d", i, hi, got)
		}
		if got := bucketOf(hi + 1); got != i+1 {
			t.Fatalf("bucketOf(bucketHigh(%d)+1=%d) = %d, want %d", i, hi+1, got, i+1)
		}
	}
	if got := bucketOf(math.MaxUint64); got != numBuckets-1 {
		t.Fatalf("bucketOf(MaxUint64) = %d, want %d", got, numBuckets-1)
	}
}

// TestQuantileAccuracy compares the histogram's percentiles with the exact
// ones of a sorted slice: they must never be below and at most 1% above.
func TestQuantileAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		gen  func() time.Duration
	}{
		{"lognormal around 2ms", func() time.Duration {
			return time.Duration(math.Exp(r.NormFloat64()*1.2) * float64(2*time.Millisecond))
		}},
		{"uniform 0-500ms", func() time.Duration { return time.Duration(r.Int64N(int64(500 * time.Millisecond))) }},
		{"tiny values", func() time.Duration { return time.Duration(r.IntN(300)) }},
		{"bimodal", func() time.Duration {
			if r.IntN(100) < 3 {
				return time.Second + time.Duration(r.IntN(1e6))
			}
			return 100*time.Microsecond + time.Duration(r.IntN(1e5))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistogram()
			vals := make([]time.Duration, 200_000)
			for i := range vals {
				vals[i] = tc.gen()
				h.Record(vals[i])
			}
			slices.Sort(vals)
			for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
				rank := max(int(math.Ceil(q*float64(len(vals)))), 1)
				exact := vals[rank-1]
				got := h.Quantile(q)
				if got < exact || float64(got-exact) > 0.01*float64(exact)+1 {
					t.Errorf("q%.3f = %v, exact %v", q, got, exact)
				}
			}
			if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] {
				t.Errorf("min/max = %v/%v, want %v/%v", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
			}
			if h.Count() != uint64(len(vals)) {
				t.Errorf("count = %d", h.Count())
			}
		})
	}
}

func TestHistogramEmptyAndNegative(t *testing.T) {
	h := NewHistogram()
	if h.Quantile(0.99) != 0 || h.Max() != 0 || h.Min() != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram must report zeros")
	}
	h.Record(-5 * time.Millisecond)
	if h.Max() != 0 || h.Quantile(1) != 0 {
		t.Fatalf("negative duration recorded as %v", h.Max())
	}
}

func TestHistogramConcurrentAndMerge(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := a
			if g%2 == 1 {
				h = b
			}
			for i := range 10_000 {
				h.Record(time.Duration(i+1) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	a.Merge(b)
	if a.Count() != 80_000 {
		t.Fatalf("count = %d, want 80000", a.Count())
	}
	if a.Max() != 10*time.Millisecond || a.Min() != time.Microsecond {
		t.Fatalf("min/max = %v/%v", a.Min(), a.Max())
	}
	if p50 := a.Quantile(0.5); p50 < 5*time.Millisecond || p50 > 5050*time.Microsecond {
		t.Fatalf("p50 = %v, want about 5ms", p50)
	}
	if mean := a.Mean(); mean < 4990*time.Microsecond || mean > 5010*time.Microsecond {
		t.Fatalf("mean = %v", mean)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistogram()
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(1)
		for pb.Next() {
			h.Record(d)
			d = d*7%(10*time.Second) + 1
		}
	})
}
