package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"seckill/internal/config"
	"seckill/internal/obs"
	"seckill/internal/testenv"
)

// installRecorder makes an SDK tracer provider that records every span in
// memory the global one until the test ends, as startTracing does with the
// OTLP exporter. Call it before newTestEnv, which then instruments bun and
// go-redis.
func installRecorder(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

// PostPurchase sends the purchase mutation (the fast path's document) to
// the server at base as token, with the extra header, and returns the
// response, whose body it has read and closed, and the body. It is
// exported for the dashboard tests in package app_test.
func PostPurchase(tb testing.TB, base, token string, voucherID int64, header http.Header) (*http.Response, []byte) {
	tb.Helper()
	body, _ := json.Marshal(map[string]any{
		"query":     `mutation($v: ID!) { seckill(voucherId: $v) { outcome orderId } }`,
		"variables": map[string]any{"v": strconv.FormatInt(voucherID, 10)},
	})
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return res, raw
}

// postBuy sends the purchase mutation with the given extra headers and
// returns the response and the order id.
func (e *testEnv) postBuy(token string, voucherID int64, header http.Header) (*http.Response, string) {
	e.t.Helper()
	res, raw := PostPurchase(e.t, e.url, token, voucherID, header)
	var out struct {
		Data struct {
			Seckill purchase `json:"seckill"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Data.Seckill.Outcome != "ACCEPTED" || out.Data.Seckill.OrderID == nil {
		e.t.Fatalf("purchase: %d %s (%v)", res.StatusCode, raw, err)
	}
	return res, *out.Data.Seckill.OrderID
}

// TestTraceOfAnOrder follows one order on real Redis and Postgres: its
// purchase request joins the caller's trace, the Redis admission is a child
// of the request's span, the batch write links to it (the process writes
// its own purchases, without a task), the SQL runs under the write, and the order's own trace holds an
// "order persisted" span linked to that write.
func TestTraceOfAnOrder(t *testing.T) {
	rec := installRecorder(t)
	e := newTestEnv(t, "")
	e.worker()
	v := e.createCampaign(10)

	callerTrace, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	callerSpan, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	res, orderID := e.postBuy(e.token(2001, false), v, http.Header{
		"Traceparent":  {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"X-Request-Id": {"trace-test-1"},
	})
	if got := res.Header.Get("X-Request-Id"); got != "trace-test-1" {
		t.Fatalf("X-Request-Id = %q, want it echoed", got)
	}
	eventually(t, 10*time.Second, "the order in Postgres", func() bool { return e.rows(v) == 1 })

	var (
		server, persist, persisted sdktrace.ReadOnlySpan
		spans                      []sdktrace.ReadOnlySpan
	)
	eventually(t, 10*time.Second, "the order's spans", func() bool {
		spans = rec.Ended()
		server, persist, persisted = nil, nil, nil
		for _, s := range spans {
			if s.SpanKind() == trace.SpanKindServer && attr(s, "seckill.request_id") == "trace-test-1" {
				server = s
			}
		}
		if server == nil {
			return false
		}
		for _, s := range spans {
			switch {
			case s.Name() == "persist orders" && linksTo(s, server):
				persist = s
			case s.Name() == "order persisted" && attr(s, "seckill.order_id") == orderID:
				persisted = s
			}
		}
		return persist != nil && persisted != nil
	})

	if server.SpanContext().TraceID() != callerTrace || server.Parent().SpanID() != callerSpan {
		t.Errorf("request span in trace %s under %s, want the caller's %s under %s",
			server.SpanContext().TraceID(), server.Parent().SpanID(), callerTrace, callerSpan)
	}
	if server.Name() != "POST /graphql" || attr(server, "graphql.operation.name") != "seckill" || attr(server, "http.response.status_code") != "200" {
		t.Errorf("request span %q with %v", server.Name(), server.Attributes())
	}
	if !slices.ContainsFunc(spans, func(s sdktrace.ReadOnlySpan) bool {
		return childOf(s, server) && attr(s, "db.system") == "redis"
	}) {
		t.Errorf("no Redis span under the request span")
	}
	// The process runs its workers, so it wrote its purchase itself
	// (direct.go): no task carried it.
	for _, name := range []string{"enqueue order:persist_batch", "order:persist_batch"} {
		if slices.ContainsFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == name && linksTo(s, server) }) {
			t.Errorf("a %q span linked to the request: the purchase went through the queue", name)
		}
	}
	if !slices.ContainsFunc(spans, func(s sdktrace.ReadOnlySpan) bool {
		return childOf(s, persist) && attr(s, "db.system") == "postgresql"
	}) {
		t.Errorf("no Postgres span under the batch write")
	}
	if i := slices.IndexFunc(spans, func(s sdktrace.ReadOnlySpan) bool {
		return !s.Parent().IsValid() && attr(s, "db.system") != ""
	}); i >= 0 {
		t.Errorf("a %s call outside any span made a trace of its own: %q", attr(spans[i], "db.system"), spans[i].Name())
	}
	if !childOf(persisted, server) || !linksTo(persisted, persist) || attr(persisted, "seckill.order_status") != "CREATED" {
		t.Errorf("order persisted span: parent %s (want %s), links %v (want %s), attributes %v",
			persisted.Parent().SpanID(), server.SpanContext().SpanID(), persisted.Links(), persist.SpanContext().SpanID(), persisted.Attributes())
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func childOf(s, parent sdktrace.ReadOnlySpan) bool {
	return s.Parent().SpanID() == parent.SpanContext().SpanID() && s.SpanContext().TraceID() == parent.SpanContext().TraceID()
}

func linksTo(s, target sdktrace.ReadOnlySpan) bool {
	for _, l := range s.Links() {
		if l.SpanContext.SpanID() == target.SpanContext().SpanID() && l.SpanContext.TraceID() == target.SpanContext().TraceID() {
			return true
		}
	}
	return false
}

// TestOTLPExport checks that with OTEL_EXPORTER_OTLP_ENDPOINT set the
// app's spans reach that collector over OTLP/HTTP, flushed when it closes,
// and that closing puts the no-op provider back.
func TestOTLPExport(t *testing.T) {
	got := make(chan []byte, 16)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			select {
			case got <- body:
			default:
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	e := newTestEnv(t, "", func(m map[string]string) { m["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.URL })
	if !tracingInstalled() {
		t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT is set but no tracer provider is installed")
	}
	res, err := http.Get(e.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	e.app.stopTracing()
	if tracingInstalled() {
		t.Error("the stopped provider is still installed")
	}
	select {
	case body := <-got:
		if !bytes.Contains(body, []byte("GET /healthz")) || !bytes.Contains(body, []byte("seckill")) {
			t.Errorf("the export does not hold the request's span: %q", body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no OTLP export reached the collector")
	}
}

// TestRequestID checks that every response carries a request id (the
// client's when acceptable) and that what the request logs carries it too.
func TestRequestID(t *testing.T) {
	e := newTestEnv(t, "")
	get := func(id string) string {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/healthz", nil)
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.Header.Get("X-Request-Id")
	}
	if got := get("client-id-1"); got != "client-id-1" {
		t.Errorf("a valid id came back as %q", got)
	}
	generated := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for _, bad := range []string{"", "has space", strings.Repeat("x", 65), "quote\"d", "back\\slash"} {
		got := get(bad)
		if !generated.MatchString(got) {
			t.Errorf("for %q the server answered id %q, want a fresh one", bad, got)
		}
	}
	if a, b := get(""), get(""); a == b {
		t.Errorf("two requests got the same id %q", a)
	}

	// A request path that logs: a failed dashboard sign-in.
	form := url.Values{"user": {"nobody"}, "password": {"wrong-password"}}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/admin/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.url)
	req.Header.Set("X-Request-Id", "login-req-7")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	eventually(t, 5*time.Second, "the sign-in failure logged with its request id", func() bool {
		for _, line := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(line, "login failed") && strings.Contains(line, "request_id=login-req-7") {
				return true
			}
		}
		return false
	})
}

// TestObserveLogsTraceID checks that a handler's log line carries the
// request id and the trace id of the request's span.
func TestObserveLogsTraceID(t *testing.T) {
	rec := installRecorder(t)
	var buf testenv.LogBuffer
	cfg := &config.Config{LogFormat: "json", LogLevel: slog.LevelInfo}
	a := &App{Metrics: NewMetrics(), Logger: newLogger(cfg, &buf)}
	h := a.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Logger.InfoContext(r.Context(), "handled")
	}))
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set("X-Request-Id", "json-req-1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	var line struct {
		Msg       string `json:"msg"`
		RequestID string `json:"request_id"`
		TraceID   string `json:"trace_id"`
	}
	if err := json.Unmarshal([]byte(buf.String()), &line); err != nil {
		t.Fatalf("%v: %q", err, buf.String())
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	if line.Msg != "handled" || line.RequestID != "json-req-1" || line.TraceID != spans[0].SpanContext().TraceID().String() {
		t.Fatalf("log line %+v, want request_id json-req-1 and trace_id %s", line, spans[0].SpanContext().TraceID())
	}
}

// metricFamilies scrapes /metrics.
func (e *testEnv) scrape() map[string]*dto.MetricFamily {
	e.t.Helper()
	res, err := http.Get(e.url + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return fams
}

// value returns the value of the series of name with (at least) labels,
// and whether it exists; histograms give their count.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// TestMetrics scrapes /metrics around a purchase, a query, a request no
// route takes and a consistency check, and asserts that the series exist
// and move; then that every metric the deploy/ files use is among them.
func TestMetrics(t *testing.T) {
	e := newTestEnv(t, "")
	e.worker()
	v := e.createCampaign(10)
	before := e.scrape()

	e.postBuy(e.token(3001, false), v, nil)
	if res, err := e.gql(nil, "", `query { vouchers { id } }`, nil, nil); err != nil || len(res.Errors) > 0 {
		t.Fatalf("vouchers: %v %+v", err, res)
	}
	if res, err := http.Get(e.url + "/no/such/route"); err != nil {
		t.Fatal(err)
	} else {
		res.Body.Close()
	}
	eventually(t, 10*time.Second, "the order in Postgres", func() bool { return e.rows(v) == 1 })
	if err := e.app.checkConsistency(e.ctx); err != nil {
		t.Fatal(err)
	}
	after := e.scrape()

	moved := func(name string, labels map[string]string, by float64) {
		t.Helper()
		b, _ := value(before, name, labels)
		a, ok := value(after, name, labels)
		if !ok {
			t.Errorf("%s%v missing", name, labels)
		} else if by > 0 && a-b != by || by == 0 && a <= b { // by < 0: only present
			t.Errorf("%s%v went from %v to %v, want +%v", name, labels, b, a, by)
		}
	}
	is := func(name string, labels map[string]string, want float64) {
		t.Helper()
		got, ok := value(after, name, labels)
		if !ok || got != want {
			t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, want)
		}
	}
	moved("seckill_http_requests_total", map[string]string{"route": "/graphql", "operation": "seckill", "status": "200"}, 1)
	moved("seckill_http_requests_total", map[string]string{"route": "/graphql", "operation": "vouchers", "status": "200"}, 1)
	moved("seckill_http_requests_total", map[string]string{"route": routeUnmatched, "operation": operationNone, "status": "404"}, 1)
	moved("seckill_http_requests_total", map[string]string{"route": "GET /metrics", "operation": operationNone, "status": "200"}, 1)
	moved("seckill_http_request_duration_seconds", map[string]string{"route": "/graphql", "operation": "seckill"}, 1)
	moved("seckill_purchases_total", map[string]string{"outcome": "ACCEPTED"}, 1)
	moved("seckill_orders_persisted_total", map[string]string{"status": "CREATED"}, 1)
	moved("seckill_redis_pool_hits_total", nil, 0)
	is("go_sql_max_open_connections", map[string]string{"db_name": "seckill"}, float64(e.app.Config.DBMaxConns))
	moved("go_sql_in_use_connections", map[string]string{"db_name": "seckill"}, -1) // present
	is("seckill_queue_tasks", map[string]string{"queue": "orders", "state": "archived"}, 0)
	if _, ok := value(after, "seckill_queue_latency_seconds", map[string]string{"queue": "orders"}); !ok {
		t.Error("seckill_queue_latency_seconds{queue=orders} missing")
	}
	is("seckill_queue_stats_up", nil, 1)
	is("seckill_dependency_up", map[string]string{"dependency": "postgres"}, 1)
	is("seckill_dependency_up", map[string]string{"dependency": "redis"}, 1)
	is("seckill_build_info", map[string]string{"goversion": runtime.Version()}, 1)
	is("seckill_consistency_campaigns", map[string]string{"state": "ok"}, 1)
	is("seckill_consistency_campaigns", map[string]string{"state": "mismatch"}, 0)
	is("seckill_consistency_drift_units", nil, 0)
	for name, f := range after {
		if name == "seckill_http_requests_total" {
			for _, m := range f.Metric {
				for _, l := range m.Label {
					if l.GetName() == "operation" && !slices.Contains(append(operationAllowlist(), operationNone, operationOther), l.GetValue()) {
						t.Errorf("operation label %q is outside the allowlist", l.GetValue())
					}
				}
			}
		}
	}

	// An open waiting room, whose series the deploy files use too (after
	// the collector's cache of a scrape without it).
	StartRoomSale(t, e.url, func(u int64, admin bool) string { return e.token(u, admin) }, 3101)
	time.Sleep(roomStatsTTL)

	// Postgres loses two units Redis knows nothing about: the check
	// reports the campaign mismatched by two.
	if _, err := e.app.DB.ExecContext(e.ctx, "UPDATE seckill_campaign SET stock = stock - 2 WHERE voucher_id = ?", v); err != nil {
		t.Fatal(err)
	}
	if err := e.app.checkConsistency(e.ctx); err != nil {
		t.Fatal(err)
	}
	broken := e.scrape()
	if n, _ := value(broken, "seckill_consistency_campaigns", map[string]string{"state": "mismatch"}); n != 1 {
		t.Errorf("mismatched campaigns = %v, want 1", n)
	}
	if d, _ := value(broken, "seckill_consistency_drift_units", nil); d != 2 {
		t.Errorf("drift = %v, want 2", d)
	}

	t.Run("deploy files use exported metrics", func(t *testing.T) {
		for _, file := range []string{"../../deploy/prometheus/alerts.yml", "../../deploy/grafana/seckill-dashboard.json"} {
			names := metricNames(t, file)
			if len(names) < 5 {
				t.Fatalf("%s names only %v", file, names)
			}
			for _, n := range names {
				if !exported(broken, n) {
					t.Errorf("%s uses %s, which /metrics does not export", file, n)
				}
			}
		}
	})
}

// metricNamePattern finds metric names in PromQL: ours, the Postgres pool's
// and Prometheus' own up.
var metricNamePattern = regexp.MustCompile(`\b(?:seckill|go_sql)_[a-z0-9_]+\b|\bup\{`)

func metricNames(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range metricNamePattern.FindAllString(string(b), -1) {
		if m == "up{" {
			continue // made by Prometheus for every target
		}
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	return names
}

// exported reports whether name is a series of fams, directly or as a
// histogram's _bucket, _sum or _count.
func exported(fams map[string]*dto.MetricFamily, name string) bool {
	if _, ok := fams[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
				return true
			}
		}
	}
	return false
}

// TestDependencyDown checks that an unreachable Redis reads 0 while
// Postgres still reads 1.
func TestDependencyDown(t *testing.T) {
	e := newTestEnv(t, "")
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer dead.Close()
	c := &dependencyCollector{a: &App{DB: e.app.DB, Redis: dead}}
	want := `
# HELP seckill_dependency_up 1 when the dependency answered a ping at the last scrape, 0 otherwise.
# TYPE seckill_dependency_up gauge
seckill_dependency_up{dependency="postgres"} 1
seckill_dependency_up{dependency="redis"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkObserve measures what the middleware adds to a request with
// tracing off (the no-op provider): request id, span, metrics.
func BenchmarkObserve(b *testing.B) {
	otel.SetTracerProvider(noop.NewTracerProvider())
	a := &App{Metrics: NewMetrics()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /graphql", func(w http.ResponseWriter, r *http.Request) {
		obs.SetOperation(r.Context(), "seckill")
		w.WriteHeader(http.StatusOK)
	})
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"bare", mux}, {"observed", a.observe(mux)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodPost, "/graphql", nil)
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					bc.h.ServeHTTP(w, req)
				}
			})
		})
	}
}

// discardWriter is a ResponseWriter that keeps nothing, so that the
// benchmark measures the handlers rather than httptest's recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
