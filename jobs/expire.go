package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"seckill/internal/seckill"
)

// TypeOrderExpire expires one order at its pay_by unless it was paid or
// cancelled first.
const TypeOrderExpire = "order:expire"

// expirePayload is the payload of TypeOrderExpire.
type expirePayload struct {
	OrderID int64 `json:"order_id"`
}

// ExpireTaskID is the Asynq task id of an order's expiry: one per order,
// however often it is scheduled.
func ExpireTaskID(orderID int64) string {
	return "expire:" + strconv.FormatInt(orderID, 10)
}

// NewOrderExpireTask returns the task that expires an order at payBy.
func NewOrderExpireTask(orderID int64, payBy time.Time) (*asynq.Task, error) {
	if orderID <= 0 {
		return nil, fmt.Errorf("jobs: expire: bad order id %d", orderID)
	}
	payload, err := json.Marshal(expirePayload{OrderID: orderID})
	if err != nil {
		return nil, fmt.Errorf("jobs: encode expiry: %w", err)
	}
	return asynq.NewTask(TypeOrderExpire, payload,
		asynq.TaskID(ExpireTaskID(orderID)),
		asynq.Queue(QueueOrders),
		asynq.ProcessAt(payBy),
		asynq.MaxRetry(DefaultMaxRetry),
		asynq.Timeout(30*time.Second),
	), nil
}

// ExpiryScheduler implements seckill.ExpiryScheduler with an Asynq client.
type ExpiryScheduler struct {
	client *asynq.Client
}

var _ seckill.ExpiryScheduler = (*ExpiryScheduler)(nil)

// NewExpiryScheduler returns a scheduler enqueuing through client.
func NewExpiryScheduler(client *asynq.Client) *ExpiryScheduler {
	return &ExpiryScheduler{client: client}
}

// expiryEnqueuers bounds the enqueues of one ScheduleExpiry under way at
// once: Asynq enqueues one task per round trip.
const expiryEnqueuers = 8

// ScheduleExpiry schedules each order's expiry task at its PayBy. A task
// that exists already is not an error. The first failure is returned after
// every order was tried; the sweep expires what was not scheduled.
func (e *ExpiryScheduler) ScheduleExpiry(ctx context.Context, orders []seckill.Order) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, expiryEnqueuers)
	)
	for _, o := range orders {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := e.schedule(ctx, o); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

func (e *ExpiryScheduler) schedule(ctx context.Context, o seckill.Order) error {
	task, err := NewOrderExpireTask(o.ID, o.PayBy)
	if err != nil {
		return err
	}
	if _, err := e.client.EnqueueContext(ctx, task); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("jobs: schedule expiry of order %d: %w", o.ID, err)
	}
	return nil
}

// Expirer is what ExpireHandler needs: seckill.Service.ExpireOrder.
type Expirer interface {
	ExpireOrder(ctx context.Context, id int64) (bool, error)
}

// ExpireHandler runs TypeOrderExpire.
type ExpireHandler struct {
	expirer Expirer
}

// NewExpireHandler returns a handler that expires through expirer.
func NewExpireHandler(expirer Expirer) *ExpireHandler {
	return &ExpireHandler{expirer: expirer}
}

// errNotDue makes Asynq retry an expiry that ran before its pay_by on the
// database's clock (clocks differ slightly).
var errNotDue = errors.New("order not due yet")

// ProcessTask implements asynq.Handler. Expiring is idempotent: an order
// paid, cancelled or expired before is left as it is.
func (h *ExpireHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var p expirePayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.OrderID <= 0 {
		return fmt.Errorf("decode expiry %q: %w", t.Payload(), asynq.SkipRetry)
	}
	done, err := h.expirer.ExpireOrder(ctx, p.OrderID)
	if err != nil {
		return fmt.Errorf("expire order %d: %w", p.OrderID, err)
	}
	if !done {
		return fmt.Errorf("expire order %d: %w", p.OrderID, errNotDue)
	}
	return nil
}
