package jobs

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"seckill/internal/obs"
	"seckill/internal/seckill"
)

// TestPayloadTraceContext checks that an admission's trace context travels
// in the batch payload, and that payloads written before it existed (or
// with tracing off) decode as before.
func TestPayloadTraceContext(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	adm := seckill.Admission{OrderID: seckill.OrderID(42, 7), VoucherID: 42, UserID: 1001, AdmittedAt: at}

	old := []byte(`[{"order_id":` + strconv.FormatInt(adm.OrderID, 10) + `,"voucher_id":42,"user_id":1001,"admitted_at":"2026-11-30T10:00:00Z"}]`)
	got, err := parseAdmissions(old)
	if err != nil {
		t.Fatalf("old payload: %v", err)
	}
	if diff := cmp.Diff([]seckill.Admission{adm}, got); diff != "" {
		t.Fatalf("old payload (-want +got):\n%s", diff)
	}
	// Untraced, the payload is byte for byte what it was.
	task, err := NewOrderPersistBatchTask([]seckill.Admission{adm})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(task.Payload(), old) {
		t.Fatalf("untraced payload changed:\n got %s\nwant %s", task.Payload(), old)
	}

	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	traced := adm
	traced.Trace = obs.TraceParent(ctx)
	if traced.Trace == "" {
		t.Fatal("no traceparent for a recording span")
	}
	task, err = NewOrderPersistBatchTask([]seckill.Admission{traced, adm})
	if err != nil {
		t.Fatal(err)
	}
	got, err = parseAdmissions(task.Payload())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]seckill.Admission{traced, adm}, got); diff != "" {
		t.Fatalf("traced payload (-want +got):\n%s", diff)
	}
	if sc := obs.SpanContext(got[0].Trace); sc.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("decoded span %v, want %v", sc.SpanID(), span.SpanContext().SpanID())
	}
}
