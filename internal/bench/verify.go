package bench

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/admission"
)

// pgVerifier reads a run's orders straight from Postgres. It knows the
// tables it reads: voucher_order (id, user_id, voucher_id, created_at),
// seckill_campaign (voucher_id, stock) and, when failures is set,
// order_failure (voucher_id, user_id). The sync design's schema has the
// first two under the same names.
type pgVerifier struct {
	db       *bun.DB
	failures bool
}

// pgCounts is what Postgres holds of one run: the orders of the users in
// [userLo, userHi] for one voucher.
type pgCounts struct {
	rows, distinctUsers, distinctIDs, failed int64
	lastCreated                              time.Time // zero without rows
	stock                                    int64     // units left in seckill_campaign
}

func (v *pgVerifier) counts(ctx context.Context, voucherID, userLo, userHi int64) (pgCounts, error) {
	var c pgCounts
	var last sql.NullTime
	err := v.db.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT user_id), count(DISTINCT id), max(created_at)
		FROM voucher_order WHERE voucher_id = ? AND user_id BETWEEN ? AND ?`, voucherID, userLo, userHi).
		Scan(&c.rows, &c.distinctUsers, &c.distinctIDs, &last)
	if err != nil {
		return c, fmt.Errorf("count orders: %w", err)
	}
	c.lastCreated = last.Time
	if v.failures {
		err := v.db.QueryRowContext(ctx, `SELECT count(*) FROM order_failure WHERE voucher_id = ? AND user_id BETWEEN ? AND ?`,
			voucherID, userLo, userHi).Scan(&c.failed)
		if err != nil {
			return c, fmt.Errorf("count failed orders: %w", err)
		}
	}
	err = v.db.QueryRowContext(ctx, `SELECT stock FROM seckill_campaign WHERE voucher_id = ?`, voucherID).Scan(&c.stock)
	if err != nil {
		return c, fmt.Errorf("read campaign %d: %w", voucherID, err)
	}
	return c, nil
}

// orderIDs returns the ids of the run's orders.
func (v *pgVerifier) orderIDs(ctx context.Context, voucherID, userLo, userHi int64) ([]int64, error) {
	return v.runIDs(ctx, "voucher_order", voucherID, userLo, userHi)
}

// failedIDs returns the ids of the run's admissions recorded as FAILED.
func (v *pgVerifier) failedIDs(ctx context.Context, voucherID, userLo, userHi int64) ([]int64, error) {
	if !v.failures {
		return nil, nil
	}
	return v.runIDs(ctx, "order_failure", voucherID, userLo, userHi)
}

// runIDs returns the ids in table (one of ours, never input) of the run's
// buyers of voucherID.
func (v *pgVerifier) runIDs(ctx context.Context, table string, voucherID, userLo, userHi int64) ([]int64, error) {
	rows, err := v.db.QueryContext(ctx, `SELECT id FROM `+table+` WHERE voucher_id = ? AND user_id BETWEEN ? AND ?`,
		voucherID, userLo, userHi)
	if err != nil {
		return nil, fmt.Errorf("read ids from %s: %w", table, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// verifyPostgres fills p from Postgres: counts, duplicates, and the
// accepted order ids compared with the rows (and the recorded failures).
func verifyPostgres(ctx context.Context, v *pgVerifier, p *Persistence, voucherID, userLo, userHi int64, accepted []acceptance) (pgCounts, error) {
	c, err := v.counts(ctx, voucherID, userLo, userHi)
	if err != nil {
		return c, err
	}
	p.Rows, p.FailedOrders = c.rows, c.failed
	p.DuplicateUsers, p.DuplicateIDs = c.rows-c.distinctUsers, c.rows-c.distinctIDs
	p.PostgresStock = ptr(c.stock)
	ids, err := v.orderIDs(ctx, voucherID, userLo, userHi)
	if err != nil {
		return c, err
	}
	failed, err := v.failedIDs(ctx, voucherID, userLo, userHi)
	if err != nil {
		return c, err
	}
	p.Lost, p.Unexpected = diffOrders(accepted, ids, failed)
	return c, nil
}

// diffOrders compares the order ids the bench was told with the rows:
// lost are accepted ids neither in rows nor recorded as failed; unexpected
// are rows that no answer accepted.
func diffOrders(accepted []acceptance, rows, failed []int64) (lost, unexpected int64) {
	have := make(map[int64]bool, len(rows)+len(failed))
	for _, id := range rows {
		have[id] = true
	}
	for _, id := range failed {
		have[id] = true
	}
	told := make(map[int64]bool, len(accepted))
	for _, a := range accepted {
		told[a.orderID] = true
		if !have[a.orderID] {
			lost++
		}
	}
	for _, id := range rows {
		if !told[id] {
			unexpected++
		}
	}
	return lost, unexpected
}

// waitPersisted polls until done reports at least want, the timeout passes
// or ctx ends. It reports whether everything was persisted, and when.
func waitPersisted(ctx context.Context, d *display, label string, want int64, timeout time.Duration,
	done func(context.Context) (int64, error)) (bool, time.Time, error) {
	deadline := time.Now().Add(timeout)
	start := time.Now()
	defer d.end()
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := done(pctx)
		cancel()
		if err != nil {
			return false, time.Now(), err
		}
		now := time.Now()
		if n >= want {
			d.update(fmt.Sprintf("%-8s persisted %s of %s accepted orders in %s", label, group(n), group(want), fmtDur(now.Sub(start))), true)
			return true, now, nil
		}
		d.update(fmt.Sprintf("%-8s waiting for persistence: %s of %s accepted orders (%s)", label, group(n), group(want), fmtDur(now.Sub(start))), false)
		if now.After(deadline) || ctx.Err() != nil {
			return false, now, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sampler watches a server while it is under load: the depth of the
// persistence queue (admissions pending in Redis) and the memory and
// goroutines from /metrics.
type sampler struct {
	stop func()

	maxQueue atomic.Int64
	queued   atomic.Bool // at least one queue sample

	mu    sync.Mutex
	stats *ServerStats
}

// startSampler samples every 250 ms (queue) and every second (metrics)
// until stop. adm or metrics may be nil / "".
func startSampler(ctx context.Context, adm *admission.Admitter, voucherID int64, metrics string) *sampler {
	s := &sampler{}
	base := context.WithoutCancel(ctx)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 2 * time.Second}
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
			s.stats = &ServerStats{HeapStartMB: heap, RSSStartMB: rss, GoroutinesStart: gor}
		}
		st := s.stats
		st.HeapEndMB, st.RSSEndMB, st.GoroutinesEnd = heap, rss, gor
		st.HeapMaxMB, st.RSSMaxMB, st.GoroutinesMax = max(st.HeapMaxMB, heap), max(st.RSSMaxMB, rss), max(st.GoroutinesMax, gor)
		st.Samples++
	}
	sampleQueue := func(ctx context.Context) {
		if adm == nil {
			return
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		q, err := adm.Queued(qctx, []int64{voucherID})
		if err != nil {
			return
		}
		s.queued.Store(true)
		storeMax(&s.maxQueue, q[voucherID])
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

// maxQueueDepth returns the most admissions seen pending at once, or nil
// when the queue could not be sampled.
func (s *sampler) maxQueueDepth() *int64 {
	if !s.queued.Load() {
		return nil
	}
	return ptr(s.maxQueue.Load())
}

// serverStats returns what /metrics showed, or nil.
func (s *sampler) serverStats() *ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats == nil {
		return nil
	}
	st := *s.stats
	return &st
}

// scrape reads the numeric samples without labels of a Prometheus text
// exposition.
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
		if !ok || strings.ContainsRune(name, '{') {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[name] = f
		}
	}
	return out, sc.Err()
}
