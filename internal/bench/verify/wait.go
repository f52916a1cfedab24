package verify

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/bench/report"
)

// WaitPersisted polls until done reports at least want, the timeout passes
// or ctx ends. It reports whether everything was persisted, and when.
func WaitPersisted(ctx context.Context, d *report.Display, label string, want int64, timeout time.Duration,
	done func(context.Context) (int64, error)) (bool, time.Time, error) {
	deadline := time.Now().Add(timeout)
	start := time.Now()
	defer d.End()
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := done(pctx)
		cancel()
		if err != nil {
			return false, time.Now(), err
		}
		now := time.Now()
		if n >= want {
			d.Update(fmt.Sprintf("%-8s persisted %s of %s accepted orders in %s", label, report.Number(n), report.Number(want), report.Duration(now.Sub(start))), true)
			return true, now, nil
		}
		d.Update(fmt.Sprintf("%-8s waiting for persistence: %s of %s accepted orders (%s)", label, report.Number(n), report.Number(want), report.Duration(now.Sub(start))), false)
		if now.After(deadline) || ctx.Err() != nil {
			return false, now, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
