package bench

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Load modes.
const (
	ModeBurst  = "burst"  // every user fires at once, the seed's experiment
	ModeOpen   = "open"   // a constant arrival rate, whatever the answers take
	ModeClosed = "closed" // a fixed number of callers, each waiting for its answer
)

// lateAfter is how far behind its planned time a request of the open model
// may leave before it counts as late. Its latency includes the delay anyway.
const lateAfter = time.Millisecond

// drainTimeout is how long requests in flight may still finish after the
// run was interrupted.
const drainTimeout = 2 * time.Second

// loadSpec is the load, the same for every target of a run.
type loadSpec struct {
	mode        string
	users       int           // distinct buyers; request k is made by user k mod users
	attempts    int           // burst: requests per user
	concurrency int           // burst and closed: callers at once
	rate        float64       // open: requests a second
	duration    time.Duration // open and closed
	ramp        time.Duration // burst: callers start spread over this long
	maxInFlight int           // open: requests outstanding at most; more are dropped
	timeout     time.Duration // one request
	// warm opens each caller's connection before the clock starts (burst
	// and closed), so the run measures the server, not TCP handshakes.
	warm bool
}

// planned returns how many requests the spec sends, or -1 when only time
// bounds it (closed model).
func (s loadSpec) planned() int64 {
	switch s.mode {
	case ModeBurst:
		return int64(s.users) * int64(s.attempts)
	case ModeOpen:
		return int64(s.rate * s.duration.Seconds())
	}
	return -1
}

// loadTarget is where the load goes.
type loadTarget struct {
	endpoint string
	body     []byte
	auth     []string // "Bearer <token>" of each user, by index
	client   *http.Client
}

// acceptance is one ACCEPTED answer.
type acceptance struct {
	orderID int64
	user    int // index into the run's users
}

type errorCount struct {
	n      int64
	detail string
}

// recorder collects what a run's requests came to. Its counters are read
// live by the progress display.
type recorder struct {
	start   time.Time     // set by begin, before the first request leaves
	started chan struct{} // closed by begin

	all, selling, soldOut *Histogram

	sent, answered, failed, dropped, late atomic.Int64
	inFlight                              atomic.Int64
	maxLate                               atomic.Int64 // ns
	lastDone                              atomic.Int64 // ns since start of the last answer
	firstAccepted, lastAccepted           atomic.Int64 // ns since start; 0: none yet
	firstSoldOut                          atomic.Int64 // ns since start; 0: not sold out yet
	acceptedN                             atomic.Int64

	mu       sync.Mutex
	outcomes map[string]int64
	errors   map[string]*errorCount
	accepted []acceptance
}

func newRecorder() *recorder {
	return &recorder{
		all: NewHistogram(), selling: NewHistogram(), soldOut: NewHistogram(),
		outcomes: map[string]int64{}, errors: map[string]*errorCount{},
		started: make(chan struct{}),
	}
}

// begin marks the start of the load; readers of start wait for started.
func (r *recorder) begin() {
	r.start = time.Now()
	close(r.started)
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// since returns t's offset from the start, at least 1ns so that 0 can mean
// "not yet".
func (r *recorder) since(t time.Time) int64 { return max(int64(t.Sub(r.start)), 1) }

// record counts one request that left at sent (for the open model: was
// planned to leave) and ended at done.
func (r *recorder) record(user int, sent, done time.Time, res result) {
	doneAt := r.since(done)
	storeMax(&r.lastDone, doneAt)
	if res.outcome == "" {
		r.failed.Add(1)
		r.mu.Lock()
		e := r.errors[res.err]
		if e == nil {
			e = &errorCount{detail: res.detail}
			r.errors[res.err] = e
		}
		e.n++
		r.mu.Unlock()
		return
	}
	lat := done.Sub(sent)
	r.all.Record(lat)
	// A request belongs to the sold-out phase when it left after the first
	// SOLD_OUT answer: it is what later buyers experience.
	if fs := r.firstSoldOut.Load(); fs != 0 && r.since(sent) >= fs {
		r.soldOut.Record(lat)
	} else {
		r.selling.Record(lat)
	}
	switch res.outcome {
	case "SOLD_OUT":
		r.firstSoldOut.CompareAndSwap(0, doneAt)
	case "ACCEPTED":
		r.acceptedN.Add(1)
		r.firstAccepted.CompareAndSwap(0, doneAt)
		storeMax(&r.lastAccepted, doneAt)
	}
	r.mu.Lock()
	r.outcomes[res.outcome]++
	if res.outcome == "ACCEPTED" {
		r.accepted = append(r.accepted, acceptance{orderID: res.orderID, user: user})
	}
	r.mu.Unlock()
	r.answered.Add(1)
}

// runLoad sends spec's load to t and records it in rec. It returns when the
// load is over or ctx ends; after ctx ends, requests in flight get
// drainTimeout to finish.
func runLoad(ctx context.Context, spec loadSpec, t loadTarget, rec *recorder) {
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	stopDrain := context.AfterFunc(ctx, func() {
		time.AfterFunc(drainTimeout, cancelReqs)
	})
	defer stopDrain()

	send := func(user int, sent time.Time) {
		rctx, cancel := context.WithTimeout(reqCtx, spec.timeout)
		res := purchase(rctx, t.client, t.endpoint, t.body, t.auth[user])
		cancel()
		rec.record(user, sent, time.Now(), res)
	}
	warm := func() {}
	if spec.warm {
		warm = func() {
			rctx, cancel := context.WithTimeout(reqCtx, spec.timeout)
			defer cancel()
			warmUp(rctx, t.client, t.endpoint)
		}
	}
	switch spec.mode {
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

// runBurst starts spec.concurrency callers that wait at a barrier, then
// share users*attempts requests; each request's latency runs from the
// moment it leaves.
func runBurst(ctx context.Context, spec loadSpec, rec *recorder, warm func(), send func(user int, sent time.Time)) {
	total := int64(spec.users) * int64(spec.attempts)
	callers := int(min(int64(spec.concurrency), total))
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		ready sync.WaitGroup
		gate  = make(chan struct{})
	)
	for w := range callers {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			warm()
			ready.Done()
			<-gate
			if spec.ramp > 0 {
				at := rec.start.Add(time.Duration(int64(spec.ramp) * int64(w) / int64(callers)))
				if !sleepUntil(ctx, at) {
					return
				}
			}
			for ctx.Err() == nil {
				k := next.Add(1) - 1
				if k >= total {
					return
				}
				rec.sent.Add(1)
				rec.inFlight.Add(1)
				send(int(k%int64(spec.users)), time.Now())
				rec.inFlight.Add(-1)
			}
		}()
	}
	ready.Wait()
	rec.begin()
	close(gate)
	wg.Wait()
}

// runOpen sends requests at their planned times, start + k/rate, whether or
// not earlier ones were answered (an open model: latency under overload is
// what a crowd would see). Each latency runs from the planned time, so a
// late send (a busy load generator) is charged to the measurement rather
// than hidden. A request that would exceed spec.maxInFlight is dropped and
// counted.
func runOpen(ctx context.Context, spec loadSpec, rec *recorder, send func(user int, sent time.Time)) {
	total := spec.planned()
	interval := float64(time.Second) / spec.rate
	var wg sync.WaitGroup
	rec.begin()
	for k := range total {
		planned := rec.start.Add(time.Duration(float64(k) * interval))
		if !sleepUntil(ctx, planned) {
			break
		}
		if rec.inFlight.Load() >= int64(spec.maxInFlight) {
			rec.dropped.Add(1)
			continue
		}
		if lag := time.Since(planned); lag > lateAfter {
			rec.late.Add(1)
			storeMax(&rec.maxLate, int64(lag))
		}
		rec.sent.Add(1)
		rec.inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(int(k%int64(spec.users)), planned)
			rec.inFlight.Add(-1)
		}()
	}
	wg.Wait()
}

// runClosed keeps spec.concurrency callers busy for spec.duration; each
// sends its next request when the previous one is answered.
func runClosed(ctx context.Context, spec loadSpec, rec *recorder, warm func(), send func(user int, sent time.Time)) {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		ready sync.WaitGroup
		gate  = make(chan struct{})
		end   time.Time
	)
	for range spec.concurrency {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			warm()
			ready.Done()
			<-gate
			for ctx.Err() == nil {
				now := time.Now()
				if !now.Before(end) {
					return
				}
				k := next.Add(1) - 1
				rec.sent.Add(1)
				rec.inFlight.Add(1)
				send(int(k%int64(spec.users)), now)
				rec.inFlight.Add(-1)
			}
		}()
	}
	ready.Wait()
	rec.begin()
	end = rec.start.Add(spec.duration)
	close(gate)
	wg.Wait()
}

// sleepUntil waits until t; it reports false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
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
