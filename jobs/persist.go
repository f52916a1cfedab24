package jobs

import (
	"context"
	"fmt"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/trace"

	"seckill/internal/seckill"
)

// PersistHandler persists admissions from both task types through one
// Coalescer, so the batches of concurrently running tasks merge into fewer,
// larger Postgres transactions.
type PersistHandler struct {
	coalescer *Coalescer
}

// NewPersistHandler returns a handler that writes through coalescer.
func NewPersistHandler(coalescer *Coalescer) *PersistHandler {
	return &PersistHandler{coalescer: coalescer}
}

// ProcessTask implements asynq.Handler. A bad payload is not retried; a
// failed write is (the store is idempotent, so a retry is always safe).
func (h *PersistHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	switch t.Type() {
	case TypeOrderPersist:
		adm, err := parseAdmission(t.Payload())
		if err != nil {
			return err
		}
		ctx, span := startBatchSpan(ctx, TypeOrderPersist, trace.SpanKindConsumer, []seckill.Admission{adm})
		defer span.End()
		if err := h.coalescer.Do(ctx, adm); err != nil {
			endWithError(span, err)
			return fmt.Errorf("persist order %d: %w", adm.OrderID, err)
		}
	case TypeOrderPersistBatch:
		adms, err := parseAdmissions(t.Payload())
		if err != nil {
			return err
		}
		ctx, span := startBatchSpan(ctx, TypeOrderPersistBatch, trace.SpanKindConsumer, adms)
		defer span.End()
		if err := h.coalescer.Do(ctx, adms...); err != nil {
			endWithError(span, err)
			return fmt.Errorf("persist %d orders from %d: %w", len(adms), adms[0].OrderID, err)
		}
	default:
		return fmt.Errorf("unexpected task type %q: %w", t.Type(), asynq.SkipRetry)
	}
	return nil
}

// Register adds every handler to mux.
func Register(mux *asynq.ServeMux, persist *PersistHandler, expire *ExpireHandler, refund *RefundHandler) {
	mux.Handle(TypeOrderPersist, persist)
	mux.Handle(TypeOrderPersistBatch, persist)
	mux.Handle(TypeOrderExpire, expire)
	mux.Handle(TypeRefundSend, refund)
}
