// Package jobs is the Asynq edge: task types, payloads, constructors, the
// handlers the workers run, and the enqueuer the service hands admissions to.
//
// Delivery is at least once, so every handler is idempotent: the store
// persists an order id once however often its task runs.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/trace"

	"seckill/internal/obs"
	"seckill/internal/seckill"
)

// Task types.
const (
	// TypeOrderPersist persists one admission: the reconciler's requeues.
	TypeOrderPersist = "order:persist"
	// TypeOrderPersistBatch persists the admissions one API process
	// gathered while its previous enqueue was under way.
	TypeOrderPersistBatch = "order:persist_batch"
)

// QueueOrders is the queue persistence tasks go to.
const QueueOrders = "orders"

// DefaultMaxRetry bounds retries of one task; with the backoff in RetryDelay
// it spans hours, enough to ride out a Postgres outage. After that the task
// is archived (the dead-letter queue, visible in the monitoring UI) and the
// admission stays pending in Redis, so nothing admitted is dropped.
const DefaultMaxRetry = 25

// NewOrderPersistTask returns the task that persists one admission. Its id is
// derived from the order id, so enqueuing the same admission again (the
// reconciler does) never makes a second task while one exists.
func NewOrderPersistTask(adm seckill.Admission) (*asynq.Task, error) {
	payload, err := json.Marshal(adm)
	if err != nil {
		return nil, fmt.Errorf("jobs: encode admission: %w", err)
	}
	return asynq.NewTask(TypeOrderPersist, payload,
		asynq.TaskID(OrderTaskID(adm.OrderID)),
		asynq.Queue(QueueOrders),
		asynq.MaxRetry(DefaultMaxRetry),
		asynq.Timeout(30*time.Second),
	), nil
}

// NewOrderPersistBatchTask returns the task that persists a batch of
// admissions. Its id is derived from the order ids it carries (each order is
// in one batch only), so enqueuing the same batch twice makes one task.
func NewOrderPersistBatchTask(adms []seckill.Admission) (*asynq.Task, error) {
	if len(adms) == 0 {
		return nil, errors.New("jobs: empty batch")
	}
	payload, err := json.Marshal(adms)
	if err != nil {
		return nil, fmt.Errorf("jobs: encode admissions: %w", err)
	}
	return asynq.NewTask(TypeOrderPersistBatch, payload,
		asynq.TaskID(BatchTaskID(adms)),
		asynq.Queue(QueueOrders),
		asynq.MaxRetry(DefaultMaxRetry),
		asynq.Timeout(30*time.Second),
	), nil
}

// OrderTaskID is the Asynq task id of an order's own persistence task.
func OrderTaskID(orderID int64) string {
	return "order:" + strconv.FormatInt(orderID, 10)
}

// BatchTaskID is the Asynq task id of a batch: its first order id and its size.
func BatchTaskID(adms []seckill.Admission) string {
	return "orders:" + strconv.FormatInt(adms[0].OrderID, 10) + "+" + strconv.Itoa(len(adms))
}

// checkAdmission rejects an admission no store could persist.
func checkAdmission(adm seckill.Admission) error {
	voucherID, seq := seckill.SplitOrderID(adm.OrderID)
	if adm.OrderID <= 0 || adm.UserID <= 0 || adm.VoucherID != voucherID || seq == 0 || !storableTime(adm.AdmittedAt) {
		return fmt.Errorf("invalid admission %+v: %w", adm, asynq.SkipRetry)
	}
	return nil
}

// storableTime reports whether t is set and Postgres can hold it: years 1
// to 9998 (Postgres has no year 0; pay_by adds up to a day).
func storableTime(t time.Time) bool {
	y := t.UTC().Year()
	return !t.IsZero() && y >= 1 && y < 9999
}

// parseAdmission decodes and checks a single persistence payload.
func parseAdmission(payload []byte) (seckill.Admission, error) {
	var adm seckill.Admission
	if err := json.Unmarshal(payload, &adm); err != nil {
		return adm, fmt.Errorf("decode admission: %v: %w", err, asynq.SkipRetry)
	}
	return adm, checkAdmission(adm)
}

// parseAdmissions decodes and checks a batch payload. It returns the
// admissions that pass checkAdmission, and the error of those that do not
// (SkipRetry, naming them): one bad member does not cost the others their
// write.
func parseAdmissions(payload []byte) ([]seckill.Admission, error) {
	var adms []seckill.Admission
	if err := json.Unmarshal(payload, &adms); err != nil {
		return nil, fmt.Errorf("decode admissions: %v: %w", err, asynq.SkipRetry)
	}
	if len(adms) == 0 {
		return nil, fmt.Errorf("empty batch: %w", asynq.SkipRetry)
	}
	var bad []error
	valid := adms[:0]
	for _, adm := range adms {
		if err := checkAdmission(adm); err != nil {
			bad = append(bad, err)
			continue
		}
		valid = append(valid, adm)
	}
	return valid, errors.Join(bad...)
}

// Enqueuer implements seckill.Enqueuer with an Asynq client. Fresh
// admissions are coalesced: while one enqueue is under way the next ones
// gather and go as one batch task, so the queue carries one task per batch,
// not per order, and each worker transaction gets a whole batch.
type Enqueuer struct {
	client    *asynq.Client
	coalescer *Coalescer
	logger    *slog.Logger
	pace      time.Duration // the pause after each enqueue (EnqueuePace)
}

var _ seckill.Enqueuer = (*Enqueuer)(nil)

// EnqueueBacklog is the most admissions an Enqueuer holds while its enqueues
// are slow or failing (at least one batch): at 5,000 purchases a second,
// ten seconds' worth. Beyond it EnqueuePersist refuses; the admissions stay
// pending in Redis for the reconciler.
const EnqueueBacklog = 50_000

// EnqueuePace is how long an Enqueuer waits after sending a batch before
// it sends the next one. A task costs the same in Redis and in the worker
// (enqueue, dequeue, lease, done) whether it
// carries one admission or a thousand, and a Redis round trip takes well
// under a millisecond, so without a pause a sale of 10,000 purchases a
// second makes tasks of about ten admissions. Waiting 5 ms makes them about
// sixty (a batch holds what arrived during the pause and the send): a few
// milliseconds more before an order reaches Postgres, nothing on the
// answer, which does not wait for the enqueue. The first admission after a
// quiet spell goes at once.
const EnqueuePace = 5 * time.Millisecond

// NewEnqueuer returns an Enqueuer using client, putting at most maxBatch
// admissions in one task. Close flushes what it holds.
func NewEnqueuer(client *asynq.Client, maxBatch int, logger *slog.Logger) *Enqueuer {
	e := &Enqueuer{client: client, logger: logger, pace: EnqueuePace}
	// One enqueue at a time, each followed by the pause, while the next
	// batch fills.
	e.coalescer = NewCoalescer(e.enqueueBatch, maxBatch, 1, max(EnqueueBacklog, maxBatch))
	return e
}

// EnqueuePersist hands adm to the next batch and returns at once: the
// admission is pending in Redis already, and the reconciler requeues it if
// this enqueue is lost. It fails (with batch.ErrBusy) only when
// EnqueueBacklog admissions wait already. The trace context of ctx (the
// purchase request) travels with the admission in the task payload; see
// tracing.go.
//
// An admission a task cannot carry (checkAdmission) is refused alone,
// before it joins a batch, which it would fail for every admission in it.
func (e *Enqueuer) EnqueuePersist(ctx context.Context, adm seckill.Admission) error {
	if err := checkAdmission(adm); err != nil {
		return fmt.Errorf("jobs: enqueue order %d: %w", adm.OrderID, err)
	}
	if adm.Trace == "" {
		adm.Trace = obs.TraceParent(ctx)
	}
	if err := e.coalescer.Submit(ctx, adm); err != nil {
		return fmt.Errorf("jobs: enqueue order %d: %w", adm.OrderID, err)
	}
	return nil
}

func (e *Enqueuer) enqueueBatch(ctx context.Context, adms []seckill.Admission) error {
	err := e.enqueue(ctx, adms)
	// The slot stays taken during the pause: what arrives meanwhile waits
	// for the next task.
	time.Sleep(e.pace)
	return err
}

func (e *Enqueuer) enqueue(ctx context.Context, adms []seckill.Admission) error {
	ctx, span := startBatchSpan(ctx, "enqueue "+TypeOrderPersistBatch, trace.SpanKindProducer, adms)
	defer span.End()
	task, err := NewOrderPersistBatchTask(adms)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err = e.client.EnqueueContext(ctx, task)
	}
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		endWithError(span, err)
		e.logger.WarnContext(ctx, "enqueue admissions; the reconciler will requeue them", "count", len(adms), "first_order_id", adms[0].OrderID, "err", err)
		return err
	}
	return nil
}

// RequeuePersist enqueues one admission as its own task and waits. A task
// that exists already (queued, retrying or archived) is not an error.
func (e *Enqueuer) RequeuePersist(ctx context.Context, adm seckill.Admission) error {
	task, err := NewOrderPersistTask(adm)
	if err != nil {
		return err
	}
	if _, err := e.client.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("jobs: enqueue order %d: %w", adm.OrderID, err)
	}
	return nil
}

// Close waits until every admission handed over has been enqueued (or
// failed to be).
func (e *Enqueuer) Close() { _ = e.coalescer.Wait(context.Background()) }

// RetryDelay backs off exponentially from 1 s to at most 10 minutes.
func RetryDelay(n int, _ error, _ *asynq.Task) time.Duration {
	d := time.Second << min(n, 10)
	return min(d, 10*time.Minute)
}
