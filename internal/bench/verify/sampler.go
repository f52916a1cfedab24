package verify

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
)

// Queue tells how many admissions of each campaign are pending: seckill's
// admission.Admitter.
type Queue interface {
	Queued(ctx context.Context, voucherIDs []int64) (map[int64]int64, error)
}

// Sampler watches a server while it is under load: the depth of the
// persistence queue (admissions pending in Redis) and the memory and
// goroutines from /metrics.
type Sampler struct {
	stop func()

	maxQueue atomic.Int64
	queued   atomic.Bool // at least one queue sample

	mu    sync.Mutex
	stats *report.ServerStats
}

// StartSampler samples every 250 ms (queue) and every second (metrics)
// until stop. q or metrics may be nil / "".
func StartSampler(ctx context.Context, q Queue, voucherID int64, metrics string) *Sampler {
	s := &Sampler{}
	base := context.WithoutCancel(ctx)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 2 * time.Second}
	var funnelStart map[string]float64 // the server's funnel at the first sample (under s.mu)
	sampleMetrics := func(ctx context.Context) {
		if metrics == "" {
			return
		}
		m, err := scrape(ctx, client, metrics)
		if err != nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		heap, rss, gor := m["go_memstats_heap_inuse_bytes"]/1e6, m["process_resident_memory_bytes"]/1e6, int64(m["go_goroutines"])
		if s.stats == nil {
			s.stats = &report.ServerStats{HeapStartMB: heap, RSSStartMB: rss, GoroutinesStart: gor}
		}
		st := s.stats
		if funnelStart == nil {
			funnelStart = funnelOf(m)
		}
		st.Funnel = funnelDelta(funnelStart, funnelOf(m))
		st.HeapEndMB, st.RSSEndMB, st.GoroutinesEnd = heap, rss, gor
		st.HeapMaxMB, st.RSSMaxMB, st.GoroutinesMax = max(st.HeapMaxMB, heap), max(st.RSSMaxMB, rss), max(st.GoroutinesMax, gor)
		st.Samples++
	}
	sampleQueue := func(ctx context.Context) {
		if q == nil {
			return
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		n, err := q.Queued(qctx, []int64{voucherID})
		if err != nil {
			return
		}
		s.queued.Store(true)
		load.StoreMax(&s.maxQueue, n[voucherID])
	}
	sampleMetrics(ctx)
	sampleQueue(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			sampleQueue(ctx)
			if i%4 == 0 {
				sampleMetrics(ctx)
			}
		}
	}()
	s.stop = func() {
		cancel()
		wg.Wait()
		sampleMetrics(base) // the state at the end
	}
	return s
}

// MaxQueueDepth returns the most admissions seen pending at once, or nil
// when the queue could not be sampled.
func (s *Sampler) MaxQueueDepth() *int64 {
	if !s.queued.Load() {
		return nil
	}
	return report.Ptr(s.maxQueue.Load())
}

// ServerStats returns what /metrics showed, or nil.
func (s *Sampler) ServerStats() *report.ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats == nil {
		return nil
	}
	st := *s.stats
	return &st
}

// funnelMetric is the server's count of purchase attempts by the funnel
// layer that stopped them (or admitted them).
const funnelMetric = "seckill_purchase_funnel_total"

// funnelOf picks the funnel's layers out of a scrape.
func funnelOf(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, v := range m {
		if rest, ok := strings.CutPrefix(name, funnelMetric+`{layer="`); ok {
			if layer, ok := strings.CutSuffix(rest, `"}`); ok {
				out[layer] = v
			}
		}
	}
	return out
}

// funnelDelta is what each layer counted between two scrapes; nil when the
// server exports no funnel.
func funnelDelta(from, to map[string]float64) map[string]int64 {
	if len(to) == 0 {
		return nil
	}
	out := make(map[string]int64, len(to))
	for layer, v := range to {
		out[layer] = int64(v - from[layer])
	}
	return out
}

// scrape reads the numeric samples of a Prometheus text exposition: those
// without labels, and the funnel's by layer (named as exposed, labels
// included).
func scrape(ctx context.Context, client *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok || (strings.ContainsRune(name, '{') && !strings.HasPrefix(name, funnelMetric+"{")) {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}

// Stop ends the sampling and takes a last sample of /metrics.
func (s *Sampler) Stop() { s.stop() }
