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
			return final(fmt.Errorf("persist order %d: %w", adm.OrderID, err))
		}
	case TypeOrderPersistBatch:
		// An admission that fails checkAdmission is never written (the
		// reconciler requeues it from Redis's own record, should it be
		// pending there): the others are, and the task then ends with
		// that admission's error, not retried.
		adms, invalid := parseAdmissions(t.Payload())
		if len(adms) == 0 {
			return invalid
		}
		ctx, span := startBatchSpan(ctx, TypeOrderPersistBatch, trace.SpanKindConsumer, adms)
		defer span.End()
		if err := h.coalescer.Do(ctx, adms...); err != nil {
			endWithError(span, err)
			return final(fmt.Errorf("persist %d orders from %d: %w", len(adms), adms[0].OrderID, err))
		}
		if invalid != nil {
			endWithError(span, invalid)
			return fmt.Errorf("persisted %d orders from %d, skipped: %w", len(adms), adms[0].OrderID, invalid)
		}
	default:
		return fmt.Errorf("unexpected task type %q: %w", t.Type(), asynq.SkipRetry)
	}
	return nil
}

// final marks err, a write's error, as not to be retried when it is an
// admission's own (MemberError): a retry would meet it again, forever. The
// coalescer answered it to this task alone; every other error is retried
// (the store is idempotent).
func final(err error) error {
	if MemberError(err) {
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	return err
}

// Register adds every handler to mux.
func Register(mux *asynq.ServeMux, persist *PersistHandler, expire *ExpireHandler, refund *RefundHandler) {
	mux.Handle(TypeOrderPersist, persist)
	mux.Handle(TypeOrderPersistBatch, persist)
	mux.Handle(TypeOrderExpire, expire)
	mux.Handle(TypeRefundSend, refund)
}
