package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestValidRequestID(t *testing.T) {
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{"abc-123", true},
		{"0123456789abcdef", true},
		{"f81d4fae-7dec-11d0-a765-00a0c91e6bf6", true},
		{"req:1/2+3=4_5.6~", true},
		{strings.Repeat("a", MaxRequestIDLen), true},
		{"", false},
		{strings.Repeat("a", MaxRequestIDLen+1), false},
		{"has space", false},
		{"new\nline", false},
		{"tab\t", false},
		{`quote"`, false},
		{`back\slash`, false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"é", false},
	} {
		if got := ValidRequestID(tt.id); got != tt.want {
			t.Errorf("ValidRequestID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestNewRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewRequestID()
		if len(id) != 16 || !ValidRequestID(id) || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("NewRequestID() = %q, want 16 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("NewRequestID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestSetOperation(t *testing.T) {
	SetOperation(context.Background(), "seckill") // outside a request: nothing to do, no panic
	req := &Request{ID: "r1"}
	ctx := WithRequest(context.Background(), req)
	if got := req.Operation(); got != "" {
		t.Fatalf("Operation() before SetOperation = %q", got)
	}
	SetOperation(ctx, "seckill")
	if got, id := req.Operation(), RequestID(ctx); got != "seckill" || id != "r1" {
		t.Fatalf("Operation() = %q, RequestID = %q; want seckill, r1", got, id)
	}
	if RequestID(context.Background()) != "" {
		t.Fatal("RequestID outside a request is not empty")
	}
}

func TestTraceParentRoundTrip(t *testing.T) {
	if got := TraceParent(context.Background()); got != "" {
		t.Fatalf("TraceParent without a span = %q, want empty", got)
	}
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	s := TraceParent(ctx)
	sc := SpanContext(s)
	if !sc.IsValid() || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsRemote() {
		t.Fatalf("SpanContext(%q) = %+v, want the span's context, remote", s, sc)
	}
	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01", strings.Repeat("0", 1000)} {
		if SpanContext(bad).IsValid() {
			t.Errorf("SpanContext(%q) is valid", bad)
		}
	}
	links := Links([]string{s, "", "garbage", s})
	if len(links) != 1 || links[0].SpanContext.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("Links = %+v, want one link to the span", links)
	}
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test").WithGroup("g")
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(WithRequest(context.Background(), &Request{ID: "req-42"}), "request")
	defer span.End()

	log.InfoContext(ctx, "with context", "k", "v")
	log.Info("without context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", lines)
	}
	var rec struct {
		Component string         `json:"component"`
		G         map[string]any `json:"g"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"k": "v", "request_id": "req-42",
		"trace_id": span.SpanContext().TraceID().String(), "span_id": span.SpanContext().SpanID().String()}
	if rec.Component != "test" || len(rec.G) != len(want) {
		t.Fatalf("record %s, want component test and group g = %v", lines[0], want)
	}
	for k, v := range want {
		if rec.G[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, rec.G[k], v, lines[0])
		}
	}
	if strings.Contains(lines[1], "request_id") || strings.Contains(lines[1], "trace_id") {
		t.Errorf("a record without a context got ids: %s", lines[1])
	}
	// A context whose span is not valid adds no trace id.
	buf.Reset()
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}), "no span")
	if strings.Contains(buf.String(), "trace_id") {
		t.Errorf("invalid span context logged a trace id: %s", buf.String())
	}
}
