package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGroupAndFormat(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 100000: "100,000"} {
		if got := group(in); got != want {
			t.Errorf("group(%d) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{0.4567: "0.46 ms", 12.34: "12.3 ms", 488: "488 ms", 1234: "1.23 s", 61000: "61.0 s"} {
		if got := fmtMs(in); got != want {
			t.Errorf("fmtMs(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestJudge(t *testing.T) {
	clean := func() *Report {
		return &Report{Target: "seckill", Stock: 200, Accepted: 200, Outcomes: map[string]int64{"ACCEPTED": 200, "SOLD_OUT": 800},
			Persistence: &Persistence{Source: "postgres", Complete: true, Rows: 200, PostgresStock: ptr(int64(0))}}
	}
	for _, tc := range []struct {
		name   string
		change func(r *Report)
		ok     bool
		want   string
	}{
		{"clean", func(*Report) {}, true, "OK: 200 accepted of 200 units, 200 rows; no oversell, no lost, no duplicate orders"},
		{"oversold answers", func(r *Report) { r.Accepted = 201 }, false, "OVERSOLD: 201 accepted for 200 units"},
		{"oversold rows", func(r *Report) { r.Persistence.Rows = 201 }, false, "OVERSOLD: 201 rows"},
		{"negative stock", func(r *Report) { r.Persistence.PostgresStock = ptr(int64(-1)) }, false, "Postgres stock is -1"},
		{"lost", func(r *Report) { r.Persistence.Lost = 3 }, false, "LOST: 3 accepted orders are not in postgres"},
		{"not persisted", func(r *Report) { r.Persistence.Lost, r.Persistence.Complete, r.Persistence.WaitedS = 3, false, 60 }, false, "NOT PERSISTED: 3 accepted orders still missing after 60.0 s"},
		{"interrupted before persisted", func(r *Report) {
			r.Persistence.Lost, r.Persistence.Complete, r.Interrupted = 3, false, true
		}, true, "3 accepted orders not persisted yet when interrupted"},
		{"duplicate rows", func(r *Report) { r.Persistence.DuplicateUsers = 2 }, false, "DUPLICATE: 2 rows"},
		{"duplicate answers", func(r *Report) { r.DuplicateAnswers = 1 }, false, "DUPLICATE: 1 order ids or buyers accepted twice"},
		{"unexpected rows", func(r *Report) { r.Persistence.Unexpected = 2 }, false, "UNEXPECTED: 2 rows"},
		{"rows of timed-out requests", func(r *Report) { r.Persistence.Unexpected, r.Failed = 2, 5 }, true, "2 rows belong to requests whose answer was lost"},
		{"unanswered", func(r *Report) { r.Failed = 7 }, true, "7 requests unanswered"},
		{"unsold", func(r *Report) { r.Accepted, r.Persistence.Rows = 190, 190 }, true, "10 units unsold although SOLD_OUT was answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clean()
			tc.change(r)
			r.judge()
			if r.OK != tc.ok || !strings.Contains(r.Verdict, tc.want) {
				t.Errorf("verdict %v %q; want ok=%v containing %q", r.OK, r.Verdict, tc.ok, tc.want)
			}
		})
	}
}

func sampleResult() *Result {
	runs := []*Report{
		{Target: TargetSeckill, VoucherID: 7, Sent: 1000, Answered: 1000, ElapsedS: 0.1, Throughput: 10000,
			Latency: Latency{P50: 5, P90: 8, P99: 12, Max: 20}, Outcomes: map[string]int64{"ACCEPTED": 200, "SOLD_OUT": 800},
			Stock: 200, Accepted: 200, Persistence: &Persistence{Source: "postgres", Complete: true, Rows: 200,
				PostgresStock: ptr(int64(0)), RedisRemaining: ptr(int64(0)), LastCreatedAfterMs: ptr(35.0), PersistedPerS: ptr(5000.0), MaxQueueDepth: ptr(int64(120))},
			Server: &ServerStats{HeapStartMB: 10, HeapEndMB: 12, HeapMaxMB: 14}},
		{Target: TargetSync, VoucherID: 1, Sent: 1000, Answered: 990, Failed: 10, ElapsedS: 2, Throughput: 495,
			Latency: Latency{P50: 900, P90: 1500, P99: 1900, Max: 2000}, Outcomes: map[string]int64{"ACCEPTED": 200, "SOLD_OUT": 790},
			Errors: map[string]ErrorStat{"timeout": {Count: 10, Example: "context deadline exceeded"}},
			Stock:  200, Accepted: 200, Persistence: &Persistence{Source: "postgres", Complete: true, Rows: 200, PostgresStock: ptr(int64(0))}},
		{Target: TargetCeiling, VoucherID: 1, Sent: 1000, Answered: 1000, ElapsedS: 0.08, Throughput: 12500,
			Latency: Latency{P50: 4, P90: 6, P99: 9, Max: 11}, Outcomes: map[string]int64{"ACCEPTED": 200, "SOLD_OUT": 800},
			Stock: 200, Accepted: 200, Persistence: &Persistence{Source: "redis", Complete: true, Rows: 200, RedisRemaining: ptr(int64(0)), RedisPending: ptr(int64(200))}},
	}
	for _, r := range runs {
		r.judge()
	}
	return &Result{
		Load:        LoadInfo{Mode: ModeBurst, Users: 1000, Attempts: 1, Concurrency: 1000, TimeoutS: 10, Stock: 200},
		Runs:        runs,
		Comparisons: compare(runs),
	}
}

func TestCompare(t *testing.T) {
	res := sampleResult()
	got := make([]float64, 0, 4)
	for _, c := range res.Comparisons {
		got = append(got, c.ThroughputRatio, c.P99Ratio)
	}
	want := []float64{10000.0 / 495, 12.0 / 1900, 0.8, 12.0 / 9}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Comparisons[0].Text, "20.2× the throughput of sync") ||
		!strings.Contains(res.Comparisons[1].Text, "0.80 of the ceiling's throughput") {
		t.Errorf("comparison texts: %q", []string{res.Comparisons[0].Text, res.Comparisons[1].Text})
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"seckill bench: burst, 1,000 users × 1 attempt(s), 1,000 at once, stock 200",
		"requests/s", "10,000", "495", "12,500",
		"latency p99", "1.90 s",
		"  timeout ",
		"rows in Postgres", "last ACCEPTED→CREATED", "35.0 ms", "orders persisted/s", "5,000",
		"verdict seckill: OK",
		"verdict sync: OK",
		"10 timeout, e.g.: context deadline exceeded",
		"seckill serves 20.2× the throughput of sync",
		"seckill reaches 0.80 of the ceiling's throughput",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	// Columns line up: every table row is as wide as the header or less.
	lines := strings.Split(out, "\n")
	if !strings.HasSuffix(lines[2], "ceiling") {
		t.Errorf("header row %q", lines[2])
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Load struct {
			Mode  string `json:"mode"`
			Stock int64  `json:"stock"`
		} `json:"load"`
		Runs []struct {
			Target     string           `json:"target"`
			Throughput float64          `json:"requests_per_s"`
			Latency    map[string]any   `json:"latency_ms"`
			Outcomes   map[string]int64 `json:"outcomes"`
			OK         bool             `json:"ok"`
			Verdict    string           `json:"verdict"`
			Persist    map[string]any   `json:"persistence"`
		} `json:"runs"`
		Comparisons []struct {
			Other           string  `json:"other"`
			ThroughputRatio float64 `json:"throughput_ratio"`
		} `json:"comparisons"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if got.Load.Mode != ModeBurst || got.Load.Stock != 200 || len(got.Runs) != 3 || len(got.Comparisons) != 2 {
		t.Fatalf("unexpected JSON: %s", b.String())
	}
	r := got.Runs[0]
	if r.Target != TargetSeckill || r.Throughput != 10000 || r.Latency["p99"] != 12.0 || !r.OK ||
		r.Outcomes["ACCEPTED"] != 200 || r.Persist["rows"] != 200.0 || r.Persist["last_created_after_last_accepted_ms"] != 35.0 {
		t.Errorf("seckill run in JSON: %+v", r)
	}
	if got.Comparisons[1].Other != TargetCeiling || got.Comparisons[1].ThroughputRatio != 0.8 {
		t.Errorf("comparisons in JSON: %+v", got.Comparisons)
	}
}

// TestRunAgainstFake runs a whole burst against the fake server, verified
// through GraphQL only (no Postgres, no Redis).
func TestRunAgainstFake(t *testing.T) {
	f := newFakeServer(t, 0)
	var progress bytes.Buffer
	res, err := Run(t.Context(), Config{URL: f.URL, Users: 100, Stock: 20, JWTSecret: testSecret, JWTIssuer: "seckill", Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if !r.OK || r.Accepted != 20 || r.Answered != 100 || r.Persistence.Source != "graphql" || r.Persistence.Rows != 20 || !r.Persistence.Complete {
		t.Errorf("report: %+v %+v", r, r.Persistence)
	}
	if !strings.Contains(progress.String(), "seckill  [####################] 100%") {
		t.Errorf("progress: %q", progress.String())
	}
}

func TestRunErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/graphql"
	ln.Close()

	notGraphQL := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<html>404 page not found</html>")
	}))
	defer notGraphQL.Close()
	fake := newFakeServer(t, 0)

	for _, tc := range []struct {
		name   string
		url    string
		secret string
		want   string
	}{
		{"server down", down, testSecret, "cannot reach " + down + ": connection refused; is `seckill serve` running?"},
		{"wrong URL", notGraphQL.URL + "/x", testSecret, "answered 404 Not Found with \"<html>404 page not found</html>\" (text/html): not a GraphQL endpoint"},
		{"wrong secret", fake.URL, "another-secret-that-is-long-enough-0123456789", "rejected the bench's tokens (invalid token): the bench signs them with SECKILL_JWT_SECRET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := Run(ctx, Config{URL: tc.url, JWTSecret: tc.secret, JWTIssuer: "seckill"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Compare: []string{"fast"}}, `unknown target "fast"`},
		{Config{Stock: -1}, "--stock"},
		{Config{Rate: 0.5, Duration: time.Second}, "less than one request"},
		{Config{Users: maxUsers + 1}, "--users"},
	} {
		if _, err := tc.cfg.spec(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
	c := Config{Rate: 1000, Stock: 100_000}
	s, err := c.spec()
	if err != nil {
		t.Fatal(err)
	}
	if s.mode != ModeOpen || s.duration != DefaultDuration || s.users != 10_000 || s.maxInFlight != DefaultMaxInFlight {
		t.Errorf("open defaults: %+v", s)
	}
	c = Config{}
	if s, _ = c.spec(); s.mode != ModeBurst || s.users != 1000 || s.concurrency != 1000 || s.attempts != 1 || c.URL != DefaultURL {
		t.Errorf("burst defaults: %+v", s)
	}
}
