package jobs

import (
	"context"
	"sync"
	"time"

	"seckill/internal/seckill"
)

// PersistFunc writes a batch of admissions; an error fails every task in it.
type PersistFunc func(ctx context.Context, adms []seckill.Admission) error

// Batcher gathers the admissions of tasks that Asynq runs concurrently into
// batches, so that many orders cost one Postgres transaction. A task waits
// at most MaxWait for company; a full batch is written at once.
type Batcher struct {
	persist PersistFunc
	maxSize int
	maxWait time.Duration

	mu      sync.Mutex
	pending *batch
}

type batch struct {
	adms []seckill.Admission
	done chan struct{}
	err  error
}

// NewBatcher returns a Batcher that writes with persist, at most maxSize
// admissions at once, waiting at most maxWait for a batch to fill.
func NewBatcher(persist PersistFunc, maxSize int, maxWait time.Duration) *Batcher {
	if maxSize < 1 {
		maxSize = 1
	}
	return &Batcher{persist: persist, maxSize: maxSize, maxWait: maxWait}
}

// Persist adds adm to the current batch and returns once that batch is
// written, with its error.
func (b *Batcher) Persist(ctx context.Context, adm seckill.Admission) error {
	b.mu.Lock()
	cur := b.pending
	if cur == nil {
		cur = &batch{done: make(chan struct{})}
		b.pending = cur
		time.AfterFunc(b.maxWait, func() { b.flush(cur) })
	}
	cur.adms = append(cur.adms, adm)
	full := len(cur.adms) >= b.maxSize
	if full {
		b.pending = nil
	}
	b.mu.Unlock()
	if full {
		b.write(cur)
	}
	select {
	case <-cur.done:
		return cur.err
	case <-ctx.Done():
		// The batch may still be written; the task is retried and the store
		// finds its order already there.
		return ctx.Err()
	}
}

// flush writes cur if it is still the batch being filled.
func (b *Batcher) flush(cur *batch) {
	b.mu.Lock()
	if b.pending != cur {
		b.mu.Unlock()
		return
	}
	b.pending = nil
	b.mu.Unlock()
	b.write(cur)
}

func (b *Batcher) write(cur *batch) {
	// The batch serves several tasks: no single task's context may cancel it.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	cur.err = b.persist(ctx, cur.adms)
	close(cur.done)
}
