package jobs

import (
	"context"

	"seckill/internal/batch"
	"seckill/internal/seckill"
)

// BatchFunc handles a batch of admissions; an error fails every submission
// in it, unless it is an admission's own (MemberError): the batch is then
// split until the submissions that fail alone are found (package batch),
// and only they get it. fn is called again for the parts: it must be
// idempotent (the store writes each order once).
type BatchFunc func(ctx context.Context, adms []seckill.Admission) error

// MemberError reports whether err, a BatchFunc's, is one admission's rather
// than the batch's: a domain error no retry changes (EINVALID, ECONFLICT:
// the store or Redis refused what that admission carries), where anything
// else (EUNAVAILABLE, an internal error) is the store or Redis away.
func MemberError(err error) bool {
	switch seckill.ErrorCode(err) {
	case seckill.EINVALID, seckill.ECONFLICT:
		return true
	}
	return false
}

// Coalescer runs a BatchFunc over the admissions submitted to it, with at
// most slots calls at once (group commit, package batch). Admissions
// submitted while every slot is busy wait together and go in the next call.
// A call gets at most maxSize admissions, except that the admissions of one
// submission always share a call, so a submission of more goes alone. At
// most backlog admissions wait for a call: beyond that Do waits for room
// within its ctx and Submit is refused with batch.ErrBusy.
//
// A call runs under the values, but not the cancellation, of the submission
// that started it: the batch is shared. fn bounds its own time.
type Coalescer struct {
	batches *batch.Committer[seckill.Admission, struct{}]
}

// NewCoalescer returns a Coalescer calling fn with at most maxSize
// admissions (but see Coalescer), slots calls at a time, holding at most
// backlog admissions (at least maxSize) that wait for a call.
func NewCoalescer(fn BatchFunc, maxSize, slots, backlog int) *Coalescer {
	commit := func(ctx context.Context, adms []seckill.Admission, _ []struct{}) error { return fn(ctx, adms) }
	return &Coalescer{batches: batch.New(commit, batch.Options{MaxBatch: maxSize, Flushes: slots, Backlog: backlog, Isolate: MemberError})}
}

// Submit adds adms to the next batch and returns without waiting for it;
// batch.ErrBusy, taking none of them, while the backlog is full.
func (c *Coalescer) Submit(ctx context.Context, adms ...seckill.Admission) error {
	return c.batches.Submit(ctx, adms...)
}

// Do submits adms and waits for their batch's result, or for ctx. A batch
// that ctx gave up on may still be written: the store is idempotent.
func (c *Coalescer) Do(ctx context.Context, adms ...seckill.Admission) error {
	_, err := c.batches.Do(ctx, adms...)
	return err
}

// Wait returns once every admission submitted has been handled, or when
// ctx ends.
func (c *Coalescer) Wait(ctx context.Context) error { return c.batches.Wait(ctx) }
