package app

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/uptrace/bun/extra/bunotel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"seckill/internal/config"
	"seckill/internal/obs"
	"seckill/internal/seckill"
)

// Tracing.
//
// With OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) set, New
// installs an SDK tracer provider that batches spans to that collector over
// OTLP/HTTP, the W3C trace-context propagator, and the bun and go-redis
// instrumentation. Without it nothing is installed: the global provider
// stays OpenTelemetry's no-op, spans cost a context lookup, and Postgres
// and Redis calls carry no hooks at all. A program (or test) that installs
// an SDK provider globally itself gets the instrumentation too.
//
// The spans of one order: the server span of its purchase request (which
// joins the caller's trace when a traceparent header comes in), the Redis
// admission under it; then, in traces of their own because each serves a
// whole batch, the enqueue of the batch task, the task in the worker and
// the batch write ("persist orders", with the SQL under it), each linked to
// every order's request span; and inside the order's own trace a short
// "order persisted" span linked to the batch write it was part of.

// startTracing installs the OTLP tracer provider when cfg asks for one. It
// returns the function that flushes and stops it (nil when there is none).
func startTracing(ctx context.Context, cfg *config.Config) (func(context.Context) error, error) {
	if cfg.OTLPEndpoint == "" {
		return nil, nil
	}
	// The exporter reads its other OTEL_EXPORTER_OTLP_* settings (headers,
	// timeout, certificate) itself.
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.OTLPEndpoint))
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", cfg.OTelServiceName),
		attribute.String("service.version", buildVersion()),
	))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		// Back to the no-op, so that nothing traces into a stopped provider.
		if otel.GetTracerProvider() == trace.TracerProvider(tp) {
			otel.SetTracerProvider(noop.NewTracerProvider())
			otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		}
		return tp.Shutdown(ctx)
	}, nil
}

// tracingInstalled reports whether the global tracer provider records
// spans: an SDK provider, ours or one the embedding program installed.
func tracingInstalled() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

// instrument adds the bun and go-redis tracing hooks when tracing is on.
// They trace only calls made within a span: Asynq's polling, the dashboard
// sampler and the reconciler would otherwise start a trace of one span for
// every command they send, several a second.
func (a *App) instrument() error {
	if !tracingInstalled() {
		return nil
	}
	tp := childSpansOnly{tp: otel.GetTracerProvider()}
	a.DB.AddQueryHook(bunotel.NewQueryHook(bunotel.WithDBName("seckill"), bunotel.WithTracerProvider(tp)))
	if err := redisotel.InstrumentTracing(a.Redis, redisotel.WithDBStatement(false), redisotel.WithTracerProvider(tp)); err != nil {
		return fmt.Errorf("trace redis: %w", err)
	}
	return nil
}

// childSpansOnly is a tracer provider whose tracers start a span only
// under another one; without a parent they hand back the no-op span.
type childSpansOnly struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (p childSpansOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{t: p.tp.Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (t childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.t.Start(ctx, name, opts...)
}

// stopTracing flushes the spans still buffered.
func (a *App) stopTracing() {
	if a.traceShutdown == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.traceShutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		a.Logger.Warn("flush traces", "err", err)
	}
	a.traceShutdown = nil
}

// tracePersist wraps the worker's batch write in a root span linked to the
// request span of every admission in the batch.
func tracePersist(persist func(context.Context, []seckill.Admission) error) func(context.Context, []seckill.Admission) error {
	return func(ctx context.Context, adms []seckill.Admission) error {
		ctx, span := obs.Tracer().Start(ctx, "persist orders", trace.WithNewRoot())
		defer span.End()
		if span.IsRecording() {
			traces := make([]string, len(adms))
			for i, adm := range adms {
				traces[i] = adm.Trace
			}
			for _, l := range obs.Links(traces) {
				span.AddLink(l)
			}
			span.SetAttributes(attribute.Int("seckill.batch.size", len(adms)))
		}
		err := persist(ctx, adms)
		if err != nil && span.IsRecording() {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}
}

// traceStore adds to each order's own trace an "order persisted" span for
// the write that decided it, linked to the batch write ("persist orders")
// that ctx carries. Links from the batch to the orders go one way and
// backends cap them; this makes the order's trace reach Postgres itself.
type traceStore struct {
	seckill.OrderStore
}

func (s traceStore) PersistOrders(ctx context.Context, adms []seckill.Admission) ([]seckill.PersistOutcome, error) {
	start := time.Now()
	out, err := s.OrderStore.PersistOrders(ctx, adms)
	batch := trace.SpanFromContext(ctx)
	if err != nil || !batch.IsRecording() {
		return out, err
	}
	end := time.Now()
	tracer := obs.Tracer()
	link := trace.Link{SpanContext: batch.SpanContext()}
	for _, o := range out {
		parent := obs.SpanContext(o.Admission.Trace)
		if !parent.IsValid() {
			continue
		}
		_, span := tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "order persisted",
			trace.WithTimestamp(start), trace.WithLinks(link), trace.WithAttributes(
				attribute.Int64("seckill.order_id", o.Admission.OrderID),
				attribute.Int64("seckill.voucher_id", o.Admission.VoucherID),
				attribute.String("seckill.order_status", string(o.Status)),
				attribute.Bool("seckill.inserted", o.Inserted),
			))
		if o.Reason != "" {
			span.SetAttributes(attribute.String("seckill.failure_reason", o.Reason))
		}
		span.End(trace.WithTimestamp(end))
	}
	return out, nil
}

// buildVersion is the main module's version, or "devel".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
