package app

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"seckill/graph"
	"seckill/internal/obs"
)

// Labels of the request metrics whose value is not a route or an operation.
const (
	routeUnmatched = "unmatched" // no route of ours: 404 and 405
	operationNone  = "none"      // not a GraphQL operation (or refused before one began)
	operationOther = "other"     // a name outside the allowlist
)

// requestMetrics count and time HTTP requests by route (the mux's pattern),
// GraphQL operation and status. Every label has few values: routes are the
// patterns we register, operations come from an allowlist (the schema's
// root fields), statuses are the codes our handlers write.
type requestMetrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	operations map[string]bool
	// series holds each label set's counter and histogram once looked up
	// (requestSeries by requestLabels): WithLabelValues hashes and checks
	// every value again on every call, and the labels have few values.
	series sync.Map
}

type requestLabels struct {
	route, operation string
	status           int
}

type requestSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func newRequestMetrics(reg prometheus.Registerer, operations []string) *requestMetrics {
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_requests_total",
			Help: "HTTP requests by route, GraphQL operation (root field) and status code.",
		}, []string{"route", "operation", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route and GraphQL operation (WebSockets: the connection's life).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"route", "operation"}),
		operations: map[string]bool{},
	}
	for _, op := range operations {
		m.operations[op] = true
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *requestMetrics) operation(name string) string {
	switch {
	case name == "":
		return operationNone
	case m.operations[name]:
		return name
	}
	return operationOther
}

func (m *requestMetrics) observe(route, operation string, status int, d time.Duration) {
	l := requestLabels{route, operation, status}
	v, ok := m.series.Load(l)
	if !ok {
		v, _ = m.series.LoadOrStore(l, &requestSeries{
			requests: m.requests.WithLabelValues(route, operation, statusLabel(status)),
			duration: m.duration.WithLabelValues(route, operation),
		})
	}
	s := v.(*requestSeries)
	s.requests.Inc()
	s.duration.Observe(d.Seconds())
}

// statusLabels spares the request path a strconv.Itoa per request.
var statusLabels = func() (l [600]string) {
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func statusLabel(code int) string {
	if code >= 0 && code < len(statusLabels) {
		return statusLabels[code]
	}
	return strconv.Itoa(code)
}

// observe wraps the whole HTTP API: it gives every request an id (the
// client's X-Request-Id when it is acceptable, a new one otherwise), echoes
// it in the response, and puts it in the context for the logs; it counts
// the request in the request metrics; and, when tracing is on, it runs the
// request in a server span that joins the caller's trace when the
// propagator finds one. With tracing off it creates no span at all.
func (a *App) observe(next http.Handler) http.Handler {
	if tracingInstalled() {
		return a.observeTraced(next)
	}
	// Without tracing, no span code at all: this frame is on the stack of
	// every purchase (see admitterMetrics).
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		o := a.observed(w, r)
		r = r.WithContext(obs.WithRequest(r.Context(), &o.req))
		next.ServeHTTP(&o.statusWriter, r)
		a.countRequest(r, o, start)
	})
}

// observeTraced is observe when tracing is on: the request runs in a
// server span that joins the caller's trace when the propagator finds one.
func (a *App) observeTraced(next http.Handler) http.Handler {
	tracer := obs.Tracer()
	serverSpan := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		o := a.observed(w, r)
		ctx := obs.WithRequest(r.Context(), &o.req)
		ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method, serverSpan...)
		r = r.WithContext(ctx)
		next.ServeHTTP(&o.statusWriter, r)
		route, status := a.countRequest(r, o, start)
		if span.IsRecording() {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(
				attribute.String("http.request.method", r.Method),
				attribute.String("http.route", route),
				attribute.Int("http.response.status_code", status),
				attribute.String("seckill.request_id", o.req.ID),
			)
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
		span.End()
	})
}

// observed gives the request its id (the client's X-Request-Id when it is
// acceptable, a new one otherwise) and echoes it in the response.
func (a *App) observed(w http.ResponseWriter, r *http.Request) *observed {
	id := r.Header.Get(obs.RequestIDHeader)
	if !obs.ValidRequestID(id) {
		id = obs.NewRequestID()
	}
	w.Header().Set(obs.RequestIDHeader, id)
	return &observed{statusWriter: statusWriter{ResponseWriter: w}, req: obs.Request{ID: id}}
}

// countRequest counts the finished request in the request metrics and
// returns its route and status.
func (a *App) countRequest(r *http.Request, o *observed, start time.Time) (route string, status int) {
	route = r.Pattern // set by the mux on this request
	if route == "" {
		route = routeUnmatched
	}
	status = o.status
	if status == 0 {
		status = http.StatusOK
	}
	a.Metrics.http.observe(route, a.Metrics.http.operation(o.req.Operation()), status, time.Since(start))
	return route, status
}

// observed is one request's state in observe, in one allocation.
type observed struct {
	statusWriter
	req obs.Request
}

// operationAllowlist is every operation label the GraphQL edge reports.
func operationAllowlist() []string { return graph.OperationLabels() }

// statusWriter records the status a handler writes. Unwrap lets
// http.ResponseController (and the WebSocket upgrade) reach the
// connection beneath.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher for handlers that assert it directly.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
