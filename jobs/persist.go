package jobs

import (
	"context"
	"fmt"

	"github.com/hibiken/asynq"
)

// OrderPersistHandler persists one admission, batched with the admissions of
// the tasks running at the same time.
type OrderPersistHandler struct {
	batcher *Batcher
}

// NewOrderPersistHandler returns a handler that persists through batcher.
func NewOrderPersistHandler(batcher *Batcher) *OrderPersistHandler {
	return &OrderPersistHandler{batcher: batcher}
}

// ProcessTask implements asynq.Handler. A bad payload is not retried; a
// failed write is (the store is idempotent, so a retry is always safe).
func (h *OrderPersistHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	adm, err := parseAdmission(t.Payload())
	if err != nil {
		return err
	}
	if err := h.batcher.Persist(ctx, adm); err != nil {
		return fmt.Errorf("persist order %d: %w", adm.OrderID, err)
	}
	return nil
}

// Register adds every handler to mux.
func Register(mux *asynq.ServeMux, persist *OrderPersistHandler) {
	mux.Handle(TypeOrderPersist, persist)
}
