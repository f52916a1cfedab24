package jobs

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"seckill/internal/obs"
	"seckill/internal/seckill"
)

// Tracing a batch.
//
// An order's trace starts at its purchase request. The admission carries
// that request's span context (Admission.Trace, a W3C traceparent) in the
// task payload; payloads written before it existed, or with tracing off,
// simply lack it. A batch serves many orders, so its spans cannot have one
// parent: each is the root of its own trace and links to the span context
// of every admission it carries. The worker's write (internal/app) does the
// same, and adds one short span per order inside that order's own trace,
// linked back to the batch write, so each order's trace reaches Postgres.

// startBatchSpan starts a root span of the given kind for a batch of
// admissions, linked to each admission's request. With tracing off it
// costs no more than the no-op tracer's Start.
func startBatchSpan(ctx context.Context, name string, kind trace.SpanKind, adms []seckill.Admission) (context.Context, trace.Span) {
	tracer := obs.Tracer()
	ctx, span := tracer.Start(ctx, name, trace.WithNewRoot(), trace.WithSpanKind(kind))
	if !span.IsRecording() {
		return ctx, span
	}
	// Links after start: the sampler has decided already, and a
	// non-recording span never decodes them.
	for _, l := range obs.Links(traceparents(adms)) {
		span.AddLink(l)
	}
	span.SetAttributes(
		attribute.String("messaging.system", "asynq"),
		attribute.String("messaging.destination.name", QueueOrders),
		attribute.Int("messaging.batch.message_count", len(adms)),
		attribute.Int64("seckill.first_order_id", adms[0].OrderID),
	)
	return ctx, span
}

func traceparents(adms []seckill.Admission) []string {
	out := make([]string, len(adms))
	for i, a := range adms {
		out[i] = a.Trace
	}
	return out
}

// endWithError marks span as failed with err.
func endWithError(span trace.Span, err error) {
	if span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}
