package obs

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceContext encodes span contexts as W3C traceparent values, whatever
// propagator the process installed: an admission's trace context is data
// in a task payload, not a header.
var traceContext = propagation.TraceContext{}

// TraceParent returns the W3C traceparent of the span in ctx
// ("00-<trace id>-<span id>-<flags>"), or "" when ctx holds no valid span
// context (tracing is off): untraced payloads stay as they were.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c["traceparent"]
}

// SpanContext decodes a traceparent written by TraceParent into a remote
// span context; anything else (empty, malformed) gives an invalid one.
func SpanContext(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// Links returns a link to each valid span context among traceparents, at
// most one per span, for a span that serves them all (a batch).
func Links(traceparents []string) []trace.Link {
	var links []trace.Link
	seen := map[trace.SpanID]bool{}
	for _, tp := range traceparents {
		sc := SpanContext(tp)
		if !sc.IsValid() || seen[sc.SpanID()] {
			continue
		}
		seen[sc.SpanID()] = true
		links = append(links, trace.Link{SpanContext: sc})
	}
	return links
}
