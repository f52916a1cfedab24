package app

import (
	"context"
	"sync/atomic"
	"time"

	"seckill/internal/obs"
	"seckill/internal/seckill"
	"seckill/jobs"
)

// Direct persistence.
//
// A process that runs the workers beside the API (seckill serve, the
// default) writes its own fresh admissions to Postgres itself, in batches,
// instead of sending them through the Asynq queue to a worker, which would
// be itself: that round trip would add to every purchase the work of
// encoding the task, enqueueing it, dequeueing, leasing and
// acknowledging it, and decoding it again. The admission is pending in Redis
// either way, so nothing is promised on the queue's word: a batch that
// fails or takes longer than directTimeout is handed to the queue (of a
// batch that one admission's own error failed, only that one), whose
// retries take over, and a process killed with admissions in hand leaves
// them pending for the reconciler, as a process killed before its enqueue
// always did. An API without workers (serve --worker=false) enqueues.

// directPace is how long direct persistence waits after each batch before
// it writes the next: a batch holds what arrived during the pause and the
// write. Each transaction costs Postgres, Redis (the batch's ack, its status
// events) and this process the same whether it carries ten admissions or a
// thousand, so fewer, larger batches are cheaper a purchase for all three:
// a pause longer than the queue's jobs.EnqueuePace makes larger batches,
// which a saturated server turns into more purchases a second. An order
// reaches Postgres at most that much later; its buyer, answered already,
// does not wait for it. The first admission after a quiet spell goes at
// once.
const directPace = 20 * time.Millisecond

// directTimeout is how long a direct batch may take before its admissions
// go to the queue instead.
const directTimeout = 2 * time.Second

// directPersist is the seckill.Enqueuer the purchases hand admissions to.
type directPersist struct {
	queue  seckill.Enqueuer // the Asynq enqueuer
	active atomic.Pointer[jobs.Coalescer]
}

var _ seckill.Enqueuer = (*directPersist)(nil)

// EnqueuePersist gives adm to this process's persistence while its workers
// run and it has room, else to the queue.
func (d *directPersist) EnqueuePersist(ctx context.Context, adm seckill.Admission) error {
	if c := d.active.Load(); c != nil {
		// Looking for a span walks the purchase's whole context chain,
		// on every purchase, for nothing while tracing is off.
		if adm.Trace == "" && tracingInstalled() {
			adm.Trace = obs.TraceParent(ctx)
		}
		if c.Submit(ctx, adm) == nil {
			return nil
		}
	}
	return d.queue.EnqueuePersist(ctx, adm)
}

// RequeuePersist is the reconciler's: always the queue, whose task ids make
// a requeue of the same admission one task.
func (d *directPersist) RequeuePersist(ctx context.Context, adm seckill.Admission) error {
	return d.queue.RequeuePersist(ctx, adm)
}

// run persists directly through persist while ctx lives, with the worker's
// batch size and writers, then stops taking admissions and waits (at most
// drain) for those in hand.
func (d *directPersist) run(ctx context.Context, persist jobs.BatchFunc, batchSize, writers int, drain time.Duration) {
	c := jobs.NewCoalescer(func(ctx context.Context, adms []seckill.Admission) error {
		tctx, cancel := context.WithTimeout(ctx, directTimeout)
		err := persist(tctx, adms)
		cancel()
		if err != nil && len(adms) > 1 && jobs.MemberError(err) {
			// One admission's own error: the coalescer splits the batch
			// (package batch) until that one is alone, and only it goes to
			// the queue, whose task ends with its error. The others are
			// written again, which the store makes harmless.
			return err
		}
		if err != nil {
			for _, adm := range adms {
				// The queue's failures are its own outage log's; the
				// reconciler requeues what it could not take.
				_ = d.queue.EnqueuePersist(ctx, adm)
			}
		}
		// A busy process writes batches of what arrived meanwhile.
		time.Sleep(directPace)
		return nil
	}, batchSize, 1, 2*batchSize*writers)
	d.active.Store(c)
	<-ctx.Done()
	d.active.CompareAndSwap(c, nil)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	_ = c.Wait(wctx)
}
