package app

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"seckill/internal/seckill"
)

// outageLog turns a run of failures of one kind (persistence while
// Postgres is down: every task of every worker fails, and retries) into two
// log lines: one when the run starts, with the first error, and one when it
// ends, with how many failures it counted and how long it lasted.
type outageLog struct {
	logger *slog.Logger
	what   string // "persist orders"

	failing atomic.Bool // ok's lock-free fast path while healthy

	mu      sync.Mutex
	since   time.Time // zero while healthy
	count   int
	lastErr error
}

func newOutageLog(logger *slog.Logger, what string) *outageLog {
	return &outageLog{logger: logger, what: what}
}

// fail counts one failure, logging it only when it starts a run.
func (o *outageLog) fail(ctx context.Context, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.count++
	o.lastErr = err
	if o.since.IsZero() {
		o.since = time.Now()
		o.failing.Store(true)
		o.logger.WarnContext(ctx, o.what+" failing; retrying (one line when it recovers)", "err", err)
	}
}

// ok ends a run of failures, if one is under way, with a summary.
func (o *outageLog) ok(ctx context.Context) {
	if !o.failing.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return
	}
	o.logger.InfoContext(ctx, o.what+" recovered", "failures", o.count,
		"lasted", time.Since(o.since).Round(time.Millisecond).String(), "last_err", o.lastErr)
	o.since, o.count, o.lastErr = time.Time{}, 0, nil
	o.failing.Store(false)
}

// outageEnqueuer reports failed enqueues of fresh admissions through an
// outageLog instead of one warning each (a stalled Redis refuses thousands a
// second). Such an admission stays pending in Redis, and the reconciler
// requeues it, so the Service needs no error from it.
type outageEnqueuer struct {
	seckill.Enqueuer
	outage *outageLog
}

func (e outageEnqueuer) EnqueuePersist(ctx context.Context, adm seckill.Admission) error {
	if err := e.Enqueuer.EnqueuePersist(ctx, adm); err != nil {
		e.outage.fail(ctx, err)
		return nil
	}
	e.outage.ok(ctx)
	return nil
}
