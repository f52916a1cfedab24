package app

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// outageLog turns a run of failures of one kind (persistence while
// Postgres is down: every task of every worker fails, and retries) into two
// log lines: one when the run starts, with the first error, and one when it
// ends, with how many failures it counted and how long it lasted.
type outageLog struct {
	logger *slog.Logger
	what   string // "persist orders"

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
		o.logger.WarnContext(ctx, o.what+" failing; retrying (one line when it recovers)", "err", err)
	}
}

// ok ends a run of failures, if one is under way, with a summary.
func (o *outageLog) ok(ctx context.Context) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return
	}
	o.logger.InfoContext(ctx, o.what+" recovered", "failures", o.count,
		"lasted", time.Since(o.since).Round(time.Millisecond).String(), "last_err", o.lastErr)
	o.since, o.count, o.lastErr = time.Time{}, 0, nil
}
