package jobs

import (
	"context"
	"sync"

	"seckill/internal/seckill"
)

// BatchFunc handles a batch of admissions; an error fails every submission
// in it.
type BatchFunc func(ctx context.Context, adms []seckill.Admission) error

// Coalescer runs a BatchFunc over the admissions submitted to it with at
// most slots calls at once. Admissions submitted while every slot is busy
// wait together and go in the next call, up to maxSize a call. That is group
// commit: with little load each admission goes at once, alone; under heavy
// load batches grow to what the slots can drain, with no timer to wait for.
type Coalescer struct {
	fn      BatchFunc
	maxSize int
	slots   chan struct{}
	ctx     context.Context // for the calls; never a submitter's context
	running sync.WaitGroup

	mu      sync.Mutex
	pending *batch // accepting admissions while it waits for a slot
}

type batch struct {
	adms []seckill.Admission
	done chan struct{}
	err  error
}

// NewCoalescer returns a Coalescer calling fn with at most maxSize
// admissions, slots calls at a time; ctx bounds every call.
func NewCoalescer(ctx context.Context, fn BatchFunc, maxSize, slots int) *Coalescer {
	return &Coalescer{fn: fn, maxSize: max(maxSize, 1), slots: make(chan struct{}, max(slots, 1)), ctx: ctx}
}

// Submit adds adms to the next batch and returns it without waiting.
func (c *Coalescer) Submit(adms ...seckill.Admission) *batch {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.pending
	if b == nil || len(b.adms)+len(adms) > c.maxSize {
		b = &batch{done: make(chan struct{}), adms: make([]seckill.Admission, 0, min(c.maxSize, 64))}
		c.pending = b
		c.running.Add(1)
		go c.run(b)
	}
	b.adms = append(b.adms, adms...)
	return b
}

// Do submits adms and waits for their batch's result, or for ctx. A batch
// that ctx gave up on may still be written: the store is idempotent.
func (c *Coalescer) Do(ctx context.Context, adms ...seckill.Admission) error {
	b := c.Submit(adms...)
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait returns once every submitted batch has been handled.
func (c *Coalescer) Wait() { c.running.Wait() }

func (c *Coalescer) run(b *batch) {
	defer c.running.Done()
	c.slots <- struct{}{}
	defer func() { <-c.slots }()
	// Close the batch to newcomers now that it holds a slot.
	c.mu.Lock()
	if c.pending == b {
		c.pending = nil
	}
	c.mu.Unlock()
	b.err = c.fn(c.ctx, b.adms)
	close(b.done)
}
