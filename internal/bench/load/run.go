package load

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// drainTimeout is how long requests in flight may still finish after the
// run was interrupted.
const drainTimeout = 2 * time.Second

// Target is where the load goes.
type Target struct {
	Endpoint string
	Body     []byte   // the request every caller sends: see PurchaseBody
	Auth     []string // "Bearer <token>" of each user, by index
	Client   *http.Client
	// Prepare, when set, makes each request's body instead of Body, before
	// it is sent (seckill-bench --challenge asks for a challenge and
	// solves it; --waiting-room waits for the buyer's turn); the request
	// counts as sent when its purchase leaves. An error fails the request
	// (counted under PrepareLabel); ErrNoPurchase means the buyer sends
	// nothing, and the request is not counted at all.
	Prepare func(ctx context.Context, user int) ([]byte, error)
	// PrepareTimeout bounds Prepare on its own, the purchase then getting
	// the whole of Spec.Timeout; 0: Prepare and the purchase share
	// Spec.Timeout.
	PrepareTimeout time.Duration
	// PrepareLabel names Prepare's failures among the errors; "challenge"
	// when empty.
	PrepareLabel string
}

// ErrNoPurchase is what Prepare returns for a buyer who sends no purchase
// (a waiting room told them the sale sold out before their turn).
var ErrNoPurchase = errors.New("load: no purchase to send")

// Run sends spec's load to t and records it in rec. It returns when the
// load is over or ctx ends; after ctx ends, requests in flight get
// drainTimeout to finish.
func Run(ctx context.Context, spec Spec, t Target, rec *Recorder) {
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	stopDrain := context.AfterFunc(ctx, func() {
		time.AfterFunc(drainTimeout, cancelReqs)
	})
	defer stopDrain()

	send := func(user int, sent time.Time) {
		body := t.Body
		deadline := time.Now().Add(spec.Timeout)
		if t.Prepare != nil {
			pctx, cancel := context.WithTimeout(reqCtx, cmp.Or(t.PrepareTimeout, spec.Timeout))
			b, err := t.Prepare(pctx, user)
			cancel()
			switch {
			case errors.Is(err, ErrNoPurchase):
				rec.Sent.Add(-1)
				rec.Skipped.Add(1)
				return
			case err != nil:
				rec.record(user, time.Now(), time.Now(), result{err: cmp.Or(t.PrepareLabel, "challenge"), detail: err.Error()})
				return
			}
			body, sent = b, time.Now()
		}
		if t.Prepare != nil && t.PrepareTimeout > 0 {
			deadline = time.Now().Add(spec.Timeout) // the purchase's own
		}
		rctx, cancel := context.WithDeadline(reqCtx, deadline)
		defer cancel()
		res := purchase(rctx, t.Client, t.Endpoint, body, t.Auth[user])
		rec.record(user, sent, time.Now(), res)
	}
	warm := func() {}
	if spec.Warm {
		warm = func() {
			rctx, cancel := context.WithTimeout(reqCtx, spec.Timeout)
			defer cancel()
			warmUp(rctx, t.Client, t.Endpoint)
		}
	}
	switch spec.Mode {
	case ModeBurst:
		runBurst(ctx, spec, rec, warm, send)
	case ModeOpen:
		runOpen(ctx, spec, rec, send)
	case ModeClosed:
		runClosed(ctx, spec, rec, warm, send)
	}
}

// warmUp opens a connection to endpoint with a request that changes
// nothing: GET { __typename }. Any answer will do; the connection stays in
// the pool.
func warmUp(ctx context.Context, client *http.Client, endpoint string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?query=%7B__typename%7D", nil)
	if err != nil {
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// runBurst starts spec.Concurrency callers that wait at a barrier, then
// share users*attempts requests; each request's latency runs from the
// moment it leaves.
func runBurst(ctx context.Context, spec Spec, rec *Recorder, warm func(), send func(user int, sent time.Time)) {
	total := int64(spec.Users) * int64(spec.Attempts)
	n := int(min(int64(spec.Concurrency), total))
	var next atomic.Int64
	startCallers(n, warm, rec.begin, func(w int) {
		if spec.Ramp > 0 {
			at := rec.Start.Add(time.Duration(int64(spec.Ramp) * int64(w) / int64(n)))
			if !SleepUntil(ctx, at) {
				return
			}
		}
		for ctx.Err() == nil {
			k := next.Add(1) - 1
			if k >= total {
				return
			}
			rec.Sent.Add(1)
			rec.InFlight.Add(1)
			send(int(k%int64(spec.Users)), time.Now())
			rec.InFlight.Add(-1)
		}
	})
}

// startCallers starts n callers that each warm up and wait at a barrier
// until all have; then begin runs once, the barrier opens and each caller
// runs body with its index. It returns when every body has returned.
func startCallers(n int, warm, begin func(), body func(w int)) {
	var (
		wg    sync.WaitGroup
		ready sync.WaitGroup
		gate  = make(chan struct{})
	)
	for w := range n {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			warm()
			ready.Done()
			<-gate
			body(w)
		}()
	}
	ready.Wait()
	begin()
	close(gate)
	wg.Wait()
}

// runOpen sends requests at their planned times, start + k/rate, whether or
// not earlier ones were answered (an open model: latency under overload is
// what a crowd would see). Each latency runs from the planned time, so a
// late send (a busy load generator) is charged to the measurement rather
// than hidden. A request that would exceed spec.MaxInFlight is dropped and
// counted.
func runOpen(ctx context.Context, spec Spec, rec *Recorder, send func(user int, sent time.Time)) {
	total := spec.Planned()
	interval := float64(time.Second) / spec.Rate
	var wg sync.WaitGroup
	rec.begin()
	for k := range total {
		planned := rec.Start.Add(time.Duration(float64(k) * interval))
		if !SleepUntil(ctx, planned) {
			break
		}
		if rec.InFlight.Load() >= int64(spec.MaxInFlight) {
			rec.Dropped.Add(1)
			continue
		}
		if lag := time.Since(planned); lag > lateAfter {
			rec.Late.Add(1)
			StoreMax(&rec.MaxLate, int64(lag))
		}
		rec.Sent.Add(1)
		rec.InFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(int(k%int64(spec.Users)), planned)
			rec.InFlight.Add(-1)
		}()
	}
	wg.Wait()
}

// runClosed keeps spec.Concurrency callers busy for spec.Duration; each
// sends its next request when the previous one is answered.
func runClosed(ctx context.Context, spec Spec, rec *Recorder, warm func(), send func(user int, sent time.Time)) {
	var (
		next atomic.Int64
		end  time.Time // set by begin, read after the barrier opens
	)
	begin := func() {
		rec.begin()
		end = rec.Start.Add(spec.Duration)
	}
	startCallers(spec.Concurrency, warm, begin, func(int) {
		for ctx.Err() == nil {
			now := time.Now()
			if !now.Before(end) {
				return
			}
			k := next.Add(1) - 1
			rec.Sent.Add(1)
			rec.InFlight.Add(1)
			send(int(k%int64(spec.Users)), now)
			rec.InFlight.Add(-1)
		}
	})
}

// SleepUntil waits until t; it reports false when ctx ended first.
func SleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	if d < 5*time.Millisecond {
		// Short waits are the common case at high rates: a plain sleep
		// costs no timer allocation and ctx is checked right after.
		time.Sleep(d)
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
