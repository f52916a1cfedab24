// Package batch gathers work that arrives concurrently into batches and
// commits each batch with one call: group commit.
//
// With little load every call is committed at once, alone; while commits are
// under way, the calls that arrive meanwhile wait together and go in the next
// commit, so under heavy load batches grow to what the commits drain, with
// no timer to wait for. What may wait is bounded: a Committer holds at most
// Backlog items that are not being committed yet, and starts at most Flushes
// goroutines of its own, however long its commits take.
//
// # One member does not fail the batch
//
// A commit that fails fails every call in its batch, unless the error is a
// member's: something one call's items carry that no retry fixes (in
// Postgres a data exception, SQLSTATE class 22, such as a number or a time
// out of range, or a constraint the statement is not meant to absorb, class
// 23; in Redis a script's error about one member's arguments). The
// owner of a Committer says which errors those are with Options.Isolate;
// a member's error then splits the batch in halves, at the boundaries of
// calls, and commits each half on its own, again and again, until the
// calls that fail alone are found: only those get the error (each its own,
// from its own commit), and every other call its results. A call whose
// items committed in a half is answered once, from that half: a part that
// failed was rolled back (Func is all or nothing, or idempotent), so
// nothing is applied twice. Finding k poison calls among n costs about 2k·log2(n) more
// commits; a batch that commits costs nothing more.
//
// Any other error (the database away, a timeout, a cancellation) fails
// the batch once, without splitting: a split would only multiply the load
// on a store that cannot take it. So does an error of a part, for that part
// and every part not committed yet.
//
// Owners still validate what they cheaply can before a call joins a batch
// (ids, enumerations, sizes, text without NUL), answering a bad call with
// its own error at once: isolation is for what only the store can tell.
package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrBusy is returned when the backlog is full: Submit returns it at once,
// Do when its context ends before there is room.
var ErrBusy = errors.New("batch: busy")

// Func commits one batch. It sets out[i] to the result of items[i]; out has
// the length of items and starts zeroed. An error fails the whole batch:
// every caller with an item in it gets that error and no results, unless
// Options.Isolate calls it a member's (see the package doc). A Func used
// with Isolate must be all or nothing (a batch it fails has changed
// nothing: one transaction, rolled back) or idempotent, so that its parts
// can be committed anew.
//
// ctx carries the values, but not the cancellation, of the call that started
// the commit: a batch is shared, so no one caller's ending may end it. Func
// bounds its own time.
type Func[T, R any] func(ctx context.Context, items []T, out []R) error

// Options bound a Committer.
type Options struct {
	// MaxBatch is the most items in one commit (at least 1). The items of
	// one call always share a commit, so a call with more items than this
	// is committed alone.
	MaxBatch int
	// Flushes is the most commits under way at once (at least 1).
	Flushes int
	// Backlog is the most items waiting for a commit, not counting those
	// being committed (at least MaxBatch). A call that does not fit waits
	// (Do) or is refused with ErrBusy (Submit). A call larger than Backlog
	// is let in when nothing else waits.
	Backlog int
	// Crowd, when above 1, is the fewest items a batch needs to be
	// committed while another commit is under way: a smaller one waits for
	// a commit to end and goes next. A commit has a cost of its own (a
	// round trip's system calls on both ends) whatever it carries, so under
	// a steady load a second commit slot used at once mostly sends batches
	// of one or two; the slots beyond the first are then for crowds (a
	// burst), and a lone call on an idle Committer still goes at once.
	Crowd int
	// Isolate, when set, reports whether a commit's error is a member's:
	// caused by what one call's items carry, so that the batch's other
	// calls would commit without it. Such an error splits the batch until
	// the failing calls are alone (see the package doc). nil: every error
	// fails the whole batch.
	Isolate func(error) bool
}

// Committer gathers the items of concurrent calls into batches and commits
// them with a Func. It is safe for concurrent use; its zero value is not
// usable: call New.
type Committer[T, R any] struct {
	commit   Func[T, R]
	maxBatch int
	flushes  int
	backlog  int
	crowd    int
	isolate  func(error) bool

	mu      sync.Mutex
	open    *group[T, R]   // takes new items; nil when none does
	full    []*group[T, R] // closed to new items, waiting for a flush, oldest first
	waiting int            // items in open and full
	running int            // commits under way
	room    chan struct{}  // closed when items leave the backlog; nil while nobody waits for that
	idle    chan struct{}  // closed when nothing waits or runs; nil while nobody waits for that
}

// group is one batch: the items of the calls that share a commit.
type group[T, R any] struct {
	items []T
	out   []R
	err   error
	done  chan struct{} // closed once out and err (or iso.errs) are set
	iso   *calls        // with Options.Isolate only
}

// calls are the calls of a batch a Committer with Options.Isolate may
// split: where each call's items start in the batch's items, and, once the
// batch was split, each call's own error (the batch's err is then nil).
type calls struct {
	starts []int
	errs   []error
}

// New returns a Committer that commits with fn, bounded by opts.
func New[T, R any](fn Func[T, R], opts Options) *Committer[T, R] {
	maxBatch := max(opts.MaxBatch, 1)
	return &Committer[T, R]{
		commit:   fn,
		maxBatch: maxBatch,
		flushes:  max(opts.Flushes, 1),
		backlog:  max(opts.Backlog, maxBatch),
		crowd:    min(opts.Crowd, maxBatch), // a full batch is a crowd
		isolate:  opts.Isolate,
	}
}

// Do commits items together, in a batch with other callers' items, and
// returns their results in order (a slice owned by the caller; nil for no
// items). If a commit slot is free, Do commits at once in its own goroutine
// and returns when that commit is done, whatever ctx does meanwhile (Func
// bounds its own time).
//
// While the backlog is full, Do waits for room until ctx ends, then returns
// an error that is both ErrBusy and ctx's error; its items were not taken.
// If ctx ends while its batch waits, or is committed by another caller, Do
// returns ctx's error at once, but the items stay in the batch and may
// still be committed, as when a reply is lost: Func must make that
// harmless.
func (c *Committer[T, R]) Do(ctx context.Context, items ...T) ([]R, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, nil
	}
	c.mu.Lock()
	for !c.fits(len(items)) {
		room := c.roomLocked()
		c.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrBusy, ctx.Err())
		}
		c.mu.Lock()
	}
	g, off := c.addLocked(items)
	lead := c.startLocked()
	c.mu.Unlock()

	if lead != nil {
		// A slot was free, so nothing else waited: lead is g. The next
		// batches to take this slot go in a goroutine, so that this caller
		// returns as soon as its own batch is done.
		ctx := context.WithoutCancel(ctx)
		if next := c.flush(ctx, lead); next != nil {
			go c.work(ctx, next)
		}
	} else {
		select {
		case <-g.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if g.err != nil {
		return nil, g.err
	}
	if g.iso != nil && g.iso.errs != nil {
		if i, _ := slices.BinarySearch(g.iso.starts, off); g.iso.errs[i] != nil {
			return nil, g.iso.errs[i]
		}
	}
	return g.out[off : off+len(items) : off+len(items)], nil
}

// Submit hands items to the next batch and returns without waiting for
// their commit; their results are dropped. It returns ErrBusy, taking
// nothing, when the backlog is full. A commit it starts runs in a goroutine
// of the Committer's, under ctx's values without its cancellation.
func (c *Committer[T, R]) Submit(ctx context.Context, items ...T) error {
	if len(items) == 0 {
		return nil
	}
	c.mu.Lock()
	if !c.fits(len(items)) {
		c.mu.Unlock()
		return ErrBusy
	}
	c.addLocked(items)
	lead := c.startLocked()
	c.mu.Unlock()
	if lead != nil {
		go c.work(context.WithoutCancel(ctx), lead)
	}
	return nil
}

// Wait returns once nothing waits for a commit and no commit is under way,
// or when ctx ends (with its error).
func (c *Committer[T, R]) Wait(ctx context.Context) error {
	c.mu.Lock()
	if c.waiting == 0 && c.running == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Waiting returns how many items wait for a commit, not counting those
// being committed.
func (c *Committer[T, R]) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// fits reports whether n more items may wait. c.mu is held.
func (c *Committer[T, R]) fits(n int) bool {
	return c.waiting == 0 || c.waiting+n <= c.backlog
}

// roomLocked returns a channel closed when items next leave the backlog.
func (c *Committer[T, R]) roomLocked() <-chan struct{} {
	if c.room == nil {
		c.room = make(chan struct{})
	}
	return c.room
}

// addLocked appends items to the open batch, opening a new one when they do
// not fit, and returns the batch and where the items start in it.
func (c *Committer[T, R]) addLocked(items []T) (*group[T, R], int) {
	g := c.open
	if g != nil && len(g.items)+len(items) > c.maxBatch {
		c.full = append(c.full, g)
		g = nil
	}
	if g == nil {
		g = &group[T, R]{items: make([]T, 0, min(c.maxBatch, max(len(items), 8))), done: make(chan struct{})}
		c.open = g
	}
	off := len(g.items)
	if c.isolate != nil {
		if g.iso == nil {
			g.iso = &calls{}
		}
		g.iso.starts = append(g.iso.starts, off)
	}
	g.items = append(g.items, items...)
	c.waiting += len(items)
	return g, off
}

// startLocked takes the oldest waiting batch if a commit slot is free, and
// counts its commit as under way. The caller then runs it with flush.
func (c *Committer[T, R]) startLocked() *group[T, R] {
	if c.running >= c.flushes {
		return nil
	}
	if c.running > 0 && c.crowd > 1 && len(c.full) == 0 && (c.open == nil || len(c.open.items) < c.crowd) {
		return nil // not a crowd: it goes when a commit ends
	}
	g := c.takeLocked()
	if g != nil {
		c.running++
	}
	return g
}

// takeLocked removes the oldest waiting batch from the backlog.
func (c *Committer[T, R]) takeLocked() *group[T, R] {
	var g *group[T, R]
	switch {
	case len(c.full) > 0:
		g = c.full[0]
		c.full[0] = nil
		c.full = c.full[1:]
	case c.open != nil:
		g = c.open
		c.open = nil
	default:
		return nil
	}
	c.waiting -= len(g.items)
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
	return g
}

// flush commits g in its slot, then hands the slot to the next waiting
// batch, which it returns, or frees it and returns nil.
func (c *Committer[T, R]) flush(ctx context.Context, g *group[T, R]) *group[T, R] {
	g.out = make([]R, len(g.items))
	g.err = c.commit(ctx, g.items, g.out)
	if g.err != nil && g.iso != nil && len(g.iso.starts) > 1 && c.isolate(g.err) {
		// A call alone keeps its error.
		clear(g.out)
		g.iso.errs = make([]error, len(g.iso.starts))
		c.split(ctx, g, 0, len(g.iso.starts))
		g.err = nil
	}
	close(g.done)

	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.takeLocked()
	if next == nil {
		c.running--
		if c.running == 0 && c.waiting == 0 && c.idle != nil {
			close(c.idle)
			c.idle = nil
		}
	}
	return next
}

// split commits the calls [lo, hi) of g, a batch that failed with a
// member's error, in two halves, each on its own, splitting again a half
// that fails with a member's error, until a call that fails alone keeps
// its error in g.iso.errs. Once a part fails with any other error, it and
// every part not committed yet get that error without a commit; split
// returns that error, if any, so that the caller's later parts get it too.
func (c *Committer[T, R]) split(ctx context.Context, g *group[T, R], lo, hi int) error {
	var stop error
	mid := lo + (hi-lo)/2
	for _, part := range [2][2]int{{lo, mid}, {mid, hi}} {
		lo, hi := part[0], part[1]
		if stop != nil {
			for i := lo; i < hi; i++ {
				g.iso.errs[i] = stop
			}
			continue
		}
		from, to := g.iso.starts[lo], len(g.items)
		if hi < len(g.iso.starts) {
			to = g.iso.starts[hi]
		}
		err := c.commit(ctx, g.items[from:to:to], g.out[from:to:to])
		switch {
		case err == nil:
		case !c.isolate(err):
			clear(g.out[from:to])
			stop = err
			for i := lo; i < hi; i++ {
				g.iso.errs[i] = err
			}
		case hi-lo == 1:
			clear(g.out[from:to])
			g.iso.errs[lo] = err
		default:
			clear(g.out[from:to])
			stop = c.split(ctx, g, lo, hi)
		}
	}
	return stop
}

// work commits g and then every batch handed to its slot. It runs in a
// goroutine of its own, one per slot at most.
func (c *Committer[T, R]) work(ctx context.Context, g *group[T, R]) {
	for g != nil {
		g = c.flush(ctx, g)
	}
}
