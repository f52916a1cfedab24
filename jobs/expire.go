package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"
)

// TypeOrderExpire expired one order at its pay_by, one task an order, until
// the workers expired orders in batches (seckill.Life.ExpireDue, run by
// app's expiry loop): its handler stays for the tasks an earlier version
// scheduled, which still run once.
const TypeOrderExpire = "order:expire"

// expirePayload is the payload of TypeOrderExpire.
type expirePayload struct {
	OrderID int64 `json:"order_id"`
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
