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
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"seckill/internal/seckill"
)

// Task types.
const (
	TypeOrderPersist = "order:persist"
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

// OrderTaskID is the Asynq task id of an order's persistence task.
func OrderTaskID(orderID int64) string {
	return "order:" + strconv.FormatInt(orderID, 10)
}

// parseAdmission decodes and checks a persistence payload.
func parseAdmission(payload []byte) (seckill.Admission, error) {
	var adm seckill.Admission
	if err := json.Unmarshal(payload, &adm); err != nil {
		return adm, fmt.Errorf("decode admission: %v: %w", err, asynq.SkipRetry)
	}
	voucherID, seq := seckill.SplitOrderID(adm.OrderID)
	if adm.OrderID <= 0 || adm.UserID <= 0 || adm.VoucherID != voucherID || seq == 0 || adm.AdmittedAt.IsZero() {
		return adm, fmt.Errorf("invalid admission %+v: %w", adm, asynq.SkipRetry)
	}
	return adm, nil
}

// Enqueuer implements seckill.Enqueuer with an Asynq client.
type Enqueuer struct {
	client *asynq.Client
}

var _ seckill.Enqueuer = (*Enqueuer)(nil)

// NewEnqueuer returns an Enqueuer that uses client.
func NewEnqueuer(client *asynq.Client) *Enqueuer { return &Enqueuer{client: client} }

// EnqueuePersist enqueues an admission's persistence task. A task that
// exists already (queued, retrying or archived) is not an error.
func (e *Enqueuer) EnqueuePersist(ctx context.Context, adm seckill.Admission) error {
	task, err := NewOrderPersistTask(adm)
	if err != nil {
		return err
	}
	if _, err := e.client.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("jobs: enqueue order %d: %w", adm.OrderID, err)
	}
	return nil
}

// RetryDelay backs off exponentially from 1 s to at most 10 minutes.
func RetryDelay(n int, _ error, _ *asynq.Task) time.Duration {
	d := time.Second << min(n, 10)
	return min(d, 10*time.Minute)
}
