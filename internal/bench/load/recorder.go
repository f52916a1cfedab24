package load

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ArrivalBucket is the resolution of Tally.Arrivals.
const ArrivalBucket = 100 * time.Millisecond

// lateAfter is how far behind its planned time a request of the open model
// may leave before it counts as late. Its latency includes the delay anyway.
const lateAfter = time.Millisecond

// Acceptance is one ACCEPTED answer.
type Acceptance struct {
	OrderID int64
	User    int       // index into the run's users
	At      time.Time // when the answer arrived
}

// ErrorCount counts one kind of failed request, with the first message seen.
type ErrorCount struct {
	N      int64
	Detail string
}

// Recorder collects what a run's requests came to. Its counters are read
// live by the progress display; the rest through Snapshot once the load is
// over.
type Recorder struct {
	Start   time.Time     // set when the load begins, before the first request leaves
	Started chan struct{} // closed when Start is set

	// All holds every answered request's latency; Selling those sent
	// before the first SOLD_OUT answer, SoldOut those sent after it.
	All, Selling, SoldOut *Histogram

	Sent, Answered, Failed, Dropped, Late atomic.Int64
	InFlight                              atomic.Int64
	MaxLate                               atomic.Int64 // ns
	LastDone                              atomic.Int64 // ns since Start of the last answer
	FirstAccepted, LastAccepted           atomic.Int64 // ns since Start; 0: none yet
	FirstSoldOut                          atomic.Int64 // ns since Start; 0: not sold out yet
	AcceptedN                             atomic.Int64
	// Skipped counts the buyers whose Prepare sent nothing (ErrNoPurchase).
	Skipped atomic.Int64

	// OnAccept, when set before the load begins, is called with each
	// ACCEPTED answer as it is recorded, on the caller's goroutine: it
	// must not block (seckill-bench's buyers pay their orders from it).
	OnAccept func(Acceptance)

	mu       sync.Mutex
	arrivals map[int64]int64 // purchases sent, by 100 ms since Start
	outcomes map[string]int64
	errors   map[string]*ErrorCount
	accepted []Acceptance
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{
		All: NewHistogram(), Selling: NewHistogram(), SoldOut: NewHistogram(),
		outcomes: map[string]int64{}, errors: map[string]*ErrorCount{}, arrivals: map[int64]int64{},
		Started: make(chan struct{}),
	}
}

// begin marks the start of the load; readers of Start wait for Started.
func (r *Recorder) begin() {
	r.Start = time.Now()
	close(r.Started)
}

// At returns the moment an offset such as LastAccepted stands for.
func (r *Recorder) At(offset *atomic.Int64) time.Time {
	return r.Start.Add(time.Duration(offset.Load()))
}

// Tally is what a Recorder counted by outcome and by error, and the
// accepted orders, in the order they were answered.
type Tally struct {
	// Arrivals counts the purchases sent in each 100 ms since the start.
	Arrivals map[int64]int64
	Outcomes map[string]int64
	Errors   map[string]ErrorCount
	Accepted []Acceptance
}

// Snapshot copies the recorder's tallies.
func (r *Recorder) Snapshot() Tally {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := Tally{Outcomes: maps.Clone(r.outcomes), Accepted: slices.Clone(r.accepted), Arrivals: maps.Clone(r.arrivals)}
	if len(r.errors) > 0 {
		t.Errors = make(map[string]ErrorCount, len(r.errors))
		for k, e := range r.errors {
			t.Errors[k] = *e
		}
	}
	return t
}

// StoreMax raises a to v if v is larger.
func StoreMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// since returns t's offset from the start, at least 1ns so that 0 can mean
// "not yet".
func (r *Recorder) since(t time.Time) int64 { return max(int64(t.Sub(r.Start)), 1) }

// record counts one request that left at sent (for the open model: was
// planned to leave) and ended at done.
func (r *Recorder) record(user int, sent, done time.Time, res result) {
	doneAt := r.since(done)
	r.mu.Lock()
	r.arrivals[r.since(sent)/int64(ArrivalBucket)]++
	r.mu.Unlock()
	StoreMax(&r.LastDone, doneAt)
	if res.outcome == "" {
		r.Failed.Add(1)
		r.mu.Lock()
		e := r.errors[res.err]
		if e == nil {
			e = &ErrorCount{Detail: res.detail}
			r.errors[res.err] = e
		}
		e.N++
		r.mu.Unlock()
		return
	}
	lat := done.Sub(sent)
	r.All.Record(lat)
	// A request belongs to the sold-out phase when it left after the first
	// SOLD_OUT answer: it is what later buyers experience.
	if fs := r.FirstSoldOut.Load(); fs != 0 && r.since(sent) >= fs {
		r.SoldOut.Record(lat)
	} else {
		r.Selling.Record(lat)
	}
	switch res.outcome {
	case "SOLD_OUT":
		r.FirstSoldOut.CompareAndSwap(0, doneAt)
	case "ACCEPTED":
		r.AcceptedN.Add(1)
		r.FirstAccepted.CompareAndSwap(0, doneAt)
		StoreMax(&r.LastAccepted, doneAt)
	}
	r.mu.Lock()
	r.outcomes[res.outcome]++
	a := Acceptance{OrderID: res.orderID, User: user, At: done}
	if res.outcome == "ACCEPTED" {
		r.accepted = append(r.accepted, a)
	}
	r.mu.Unlock()
	if res.outcome == "ACCEPTED" && r.OnAccept != nil {
		r.OnAccept(a)
	}
	r.Answered.Add(1)
}
