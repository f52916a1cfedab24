// Package obs holds the small observability helpers every edge shares: the
// request's id and GraphQL operation in its context, a slog handler that
// adds them (and the trace id) to every record logged with a context, the
// tracer, and the W3C trace context an admission carries to the worker that
// persists it. It depends only on the standard library and OpenTelemetry's
// API, so adapters and edges may import it without importing each other.
package obs

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names seckill's own spans (the instrumentation scope).
const TracerName = "seckill"

// Tracer returns seckill's tracer from the global provider. Until a
// provider is installed (internal/app does when tracing is configured) it
// is OpenTelemetry's no-op: starting a span costs a context lookup.
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// RequestIDHeader is the header a request id comes in and goes back in.
const RequestIDHeader = "X-Request-Id"

// MaxRequestIDLen bounds a request id taken from a client.
const MaxRequestIDLen = 64

// Request is what the HTTP edge knows of one request; the middleware puts
// one in the context and the GraphQL edge names its operation.
type Request struct {
	ID string

	mu        sync.Mutex // a WebSocket's operations run on goroutines of their own
	operation string
}

type requestKey struct{}

// WithRequest returns a copy of ctx that carries req.
func WithRequest(ctx context.Context, req *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

// RequestFrom returns the request ctx belongs to, or nil outside one.
func RequestFrom(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// RequestID returns the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	if r := RequestFrom(ctx); r != nil {
		return r.ID
	}
	return ""
}

// Operation returns the operation SetOperation named last, or "".
func (r *Request) Operation() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.operation
}

// SetOperation names the GraphQL operation being served in ctx (its root
// field, such as "seckill"): the request's metrics are labelled with it and
// its server span carries it. Outside a request, and with tracing off, it
// costs a context lookup.
func SetOperation(ctx context.Context, name string) {
	if r := RequestFrom(ctx); r != nil {
		r.mu.Lock()
		r.operation = name
		r.mu.Unlock()
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("graphql.operation.name", name))
	}
}

// ValidRequestID reports whether id, taken from a client, may be used as a
// request id: 1 to MaxRequestIDLen printable ASCII characters without
// spaces, quotes or backslashes, so that it is safe in any log format.
func ValidRequestID(id string) bool {
	if len(id) == 0 || len(id) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// NewRequestID returns a fresh random request id: 16 hex digits.
func NewRequestID() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], rand.Uint64())
	return hex.EncodeToString(b[:])
}
