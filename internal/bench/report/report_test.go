package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGroupAndFormat(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 100000: "100,000"} {
		if got := Number(in); got != want {
			t.Errorf("Number(%d) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{0.4567: "0.46 ms", 12.34: "12.3 ms", 488: "488 ms", 1234: "1.23 s", 61000: "61.0 s"} {
		if got := Millis(in); got != want {
			t.Errorf("Millis(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestJudge(t *testing.T) {
	clean := func() *Report {
		return &Report{Target: "seckill", Stock: 200, Accepted: 200, Outcomes: map[string]int64{"ACCEPTED": 200, "SOLD_OUT": 800},
			Persistence: &Persistence{Source: "postgres", Complete: true, Rows: 200, PostgresStock: Ptr(int64(0))}}
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
		{"negative stock", func(r *Report) { r.Persistence.PostgresStock = Ptr(int64(-1)) }, false, "Postgres stock is -1"},
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
		{"rate limited with the limits compared", func(r *Report) { r.Target, r.Outcomes["RATE_LIMITED"] = TargetLimit, 3 }, false,
			"RATE_LIMITED: 3 purchases refused by the shared limit, which this comparison sets never to refuse: the measurement is wrong"},
		{"rate limited without the limit", func(r *Report) { r.Target, r.Outcomes["RATE_LIMITED"] = TargetNoLimit, 1 }, false, "RATE_LIMITED: 1 purchases"},
		{"rate limited elsewhere", func(r *Report) { r.Outcomes["RATE_LIMITED"] = 3 }, true, "OK: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clean()
			tc.change(r)
			r.Judge()
			if r.OK != tc.ok || !strings.Contains(r.Verdict, tc.want) {
				t.Errorf("verdict %v %q; want ok=%v containing %q", r.OK, r.Verdict, tc.ok, tc.want)
			}
		})
	}
}

func TestJudgePayments(t *testing.T) {
	// 30 accepted of 20 units: 10 expired and were resold.
	clean := func() *Report {
		return &Report{Target: "seckill", Stock: 20, Accepted: 30, Outcomes: map[string]int64{"ACCEPTED": 30, "SOLD_OUT": 70},
			Persistence: &Persistence{Source: "postgres", Complete: true, Rows: 30, PostgresStock: Ptr(int64(0)),
				Payments: &Payments{Confirmed: 15, Paid: 15, Awaiting: 5, Expired: 10, Resold: 10,
					Books: Books{Initial: 20, Remaining: 0, Awaiting: 5, Paid: 15, Taken: 20, Known: true, Balanced: true}}}}
	}
	for _, tc := range []struct {
		name   string
		change func(r *Report, p *Payments)
		ok     bool
		want   string
	}{
		{"clean", func(*Report, *Payments) {}, true, "OK: 30 accepted of 20 units, 30 rows, 15 paid, 10 expired, 10 resold; books balance"},
		{"accepted beyond the units returned", func(r *Report, _ *Payments) { r.Accepted = 31 }, false, "OVERSOLD: 31 accepted for 20 units"},
		{"live orders beyond the stock", func(_ *Report, p *Payments) { p.Books.Awaiting, p.Books.Taken = 6, 21 }, false, "OVERSOLD: 21 orders awaiting payment or paid for 20 units"},
		{"unbalanced", func(_ *Report, p *Payments) { p.Books.Remaining = 1 }, false, "BOOKS: initial 20 ≠ remaining 1 + queued 0 + awaiting payment 5 + paid 15"},
		{"still settling", func(_ *Report, p *Payments) { p.Books.Queued = 1 }, false, "BOOKS: initial 20 ≠ remaining 0 + queued 1 + awaiting payment 5 + paid 15 (still settling: 1 orders count as queued and persisted)"},
		{"Postgres's stock disagrees", func(_ *Report, p *Payments) { p.Books.Taken = 19 }, false, "BOOKS: Postgres's stock says 19 units are taken"},
		{"not in Redis", func(_ *Report, p *Payments) { p.Books.Known = false }, true, "checked in Postgres only"},
		{"two live orders", func(_ *Report, p *Payments) { p.Books.DuplicateBuyers = 1 }, false, "DUPLICATE: 1 buyers hold two live orders"},
		{"no status", func(_ *Report, p *Payments) { p.Unaccounted = 2 }, false, "LOST: 2 accepted orders are neither awaiting payment nor in a final status"},
		{"payment lost", func(_ *Report, p *Payments) { p.ConfirmedUnpaid = 1 }, false, "LOST PAYMENT: 1"},
		{"paid unpaid", func(_ *Report, p *Payments) { p.PaidUnconfirmed = 1 }, false, "UNPAID: 1 orders PAID"},
		{"paid by a call whose answer was lost", func(_ *Report, p *Payments) { p.PaidUnconfirmed, p.Errors = 1, 1 }, true, "1 orders PAID by webhook calls whose answer was lost"},
		{"paid when interrupted", func(r *Report, p *Payments) { p.PaidUnconfirmed, r.Interrupted = 1, true }, true, "1 orders PAID by webhook calls whose answer was lost"},
		{"late", func(_ *Report, p *Payments) { p.Late = 2 }, true, "2 payments arrived after their order closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := clean()
			tc.change(r, r.Persistence.Payments)
			r.Judge()
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
				PostgresStock: Ptr(int64(0)), RedisRemaining: Ptr(int64(0)), LastCreatedAfterMs: Ptr(35.0), PersistedPerS: Ptr(5000.0), MaxQueueDepth: Ptr(int64(120))},
			Server: &ServerStats{HeapStartMB: 10, HeapEndMB: 12, HeapMaxMB: 14,
				Funnel: map[string]int64{"admitted": 200, "sold_out_mark": 600, "sold_out": 200, "shared_limit": 0}}},
		{Target: TargetSync, VoucherID: 1, VoucherOf: "its own database", Sent: 1000, Answered: 990, Failed: 10, ElapsedS: 2, Throughput: 495,
			Latency: Latency{P50: 900, P90: 1500, P99: 1900, Max: 2000}, Outcomes: map[string]int64{"ACCEPTED": 200, "SOLD_OUT": 790},
			Errors: map[string]ErrorStat{"timeout": {Count: 10, Example: "context deadline exceeded"}},
			Stock:  200, Accepted: 200, Persistence: &Persistence{Source: "postgres", Complete: true, Rows: 200, PostgresStock: Ptr(int64(0)),
				LastCreatedAfterMs: Ptr(-129.0)}},
		{Target: TargetCeiling, VoucherID: 1, VoucherOf: "its own Redis keys", Sent: 1000, Answered: 1000, ElapsedS: 0.08, Throughput: 12500,
			Latency: Latency{P50: 4, P90: 6, P99: 9, Max: 11}, Outcomes: map[string]int64{"ACCEPTED": 200, "SOLD_OUT": 800},
			Stock: 200, Accepted: 200, Persistence: &Persistence{Source: "redis", Complete: true, Rows: 200, RedisRemaining: Ptr(int64(0)), RedisPending: Ptr(int64(200))}},
	}
	for _, r := range runs {
		r.Judge()
	}
	return &Result{
		Load:        LoadInfo{Mode: ModeBurst, Users: 1000, Attempts: 1, Concurrency: 1000, TimeoutS: 10, Stock: 200},
		Runs:        runs,
		Comparisons: Compare(runs),
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

// TestCompareRounds relates a target run in several rounds by the medians
// of its rounds, and round by round in the order they ran.
func TestCompareRounds(t *testing.T) {
	run := func(target string, round int, rps, p99, serverUs float64) *Report {
		r := &Report{Target: target, Round: round, Throughput: rps, Latency: Latency{P50: p99 / 2, P99: p99}}
		r.CPU = &CPU{Units: map[string]int64{UnitAccepted: 1000}}
		if serverUs > 0 {
			r.CPU.Processes = append(r.CPU.Processes, ProcessCPU{Name: ProcServer, Seconds: serverUs * 1000 / 1e6})
		}
		r.CPU.Processes = append(r.CPU.Processes, ProcessCPU{Name: ProcBench, Seconds: 0.05})
		r.CPU.AddSum()
		return r
	}
	runs := []*Report{
		run(TargetSeckill, 1, 8000, 20, 70), run(TargetCeiling, 1, 10000, 10, 0),
		run(TargetCeiling, 2, 12000, 12, 0), run(TargetSeckill, 2, 9000, 22, 80),
		run(TargetSeckill, 3, 6000, 30, 90), run(TargetCeiling, 3, 8000, 14, 0),
	}
	cs := Compare(runs)
	if len(cs) != 1 {
		t.Fatalf("comparisons %+v", cs)
	}
	c := cs[0]
	// Medians: seckill 8,000 req/s and p99 22 ms, the ceiling 10,000 and 12.
	if c.ThroughputRatio != 0.8 || c.P99Ratio != 22.0/12 || c.Rounds != 3 {
		t.Errorf("ratios %+v", c)
	}
	if diff := cmp.Diff([]float64{0.8, 0.75, 0.75}, c.RoundRatios); diff != "" {
		t.Errorf("round ratios (-want +got):\n%s", diff)
	}
	for _, want := range []string{
		"seckill reaches 0.80 of the ceiling's throughput (medians of 3 rounds, round by round 0.80, 0.75, 0.75: 8,000 vs 10,000 requests/s",
		"CPU µs per accepted purchase (medians): seckill server 80.0",
		"; ceiling bench 50.0",
	} {
		if !strings.Contains(c.Text, want) {
			t.Errorf("text %q lacks %q", c.Text, want)
		}
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := sampleResult().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"seckill-bench: burst, 1,000 users × 1 attempt(s), 1,000 at once, stock 200",
		"requests/s", "10,000", "495", "12,500",
		"latency p99", "1.90 s",
		"  timeout ",
		"rows in Postgres", "last row written", "35.0 ms after last ACCEPTED", "orders persisted/s", "5,000",
		"verdict seckill: OK",
		"verdict sync: OK",
		"10 timeout, e.g.: context deadline exceeded",
		"seckill serves 20.2× the throughput of sync",
		"seckill reaches 0.80 of the ceiling's throughput",
		// The compared servers' vouchers are theirs, not seckill's.
		"1 (its own database)", "1 (its own Redis keys)",
		// A synchronous design writes before it answers: words, not a
		// negative latency.
		"129 ms before last ACCEPTED", "last row written \"before\"",
		// The server's funnel: the share each layer stopped, in the order
		// a purchase meets them; a layer that stopped nothing is left out.
		"server funnel (share of attempts)", "  sold out mark", "600 (60.0%)", "  admitted", "200 (20.0%)",
		// The ceiling persists nothing and says so.
		"nothing (by design)", "verdict ceiling: OK: 200 accepted of 200 units, all pending in Redis (nothing persisted)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "sold out mark"), strings.Index(out, "  admitted"); i < 0 || j < i {
		t.Errorf("funnel rows out of the funnel's order:\n%s", out)
	}
	for _, never := range []string{"-129", "−129", "shared limit"} {
		if strings.Contains(out, never) {
			t.Errorf("text report contains %q:\n%s", never, out)
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

// TestCompareFsync checks that appendfsync always is related to everysec,
// whatever else ran.
func TestCompareFsync(t *testing.T) {
	runs := []*Report{
		{Target: TargetSeckill, Throughput: 9000, Latency: Latency{P50: 4, P99: 10}},
		{Target: TargetEverysec, Throughput: 8000, Latency: Latency{P50: 4, P99: 10}},
		{Target: TargetAlways, Throughput: 6000, Latency: Latency{P50: 6, P99: 25}},
	}
	got := Compare(runs)
	want := []Comparison{{Base: TargetAlways, Other: TargetEverysec, ThroughputRatio: 0.75, P50Ratio: 1.5, P99Ratio: 2.5,
		Text: "appendfsync always: 0.75× the throughput of everysec, p50 1.50×, p99 2.50× (6,000 vs 8,000 requests/s; p99 25.0 ms vs 10.0 ms; p50 6.00 ms vs 4.00 ms)"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("comparisons (-want +got):\n%s", diff)
	}
}

// TestCompareLimit checks that the shared limit is related to none, and
// that a RATE_LIMITED answer says the ratio is not the check's cost.
func TestCompareLimit(t *testing.T) {
	runs := []*Report{
		{Target: TargetSeckill, Throughput: 9000, Latency: Latency{P50: 4, P99: 10}},
		{Target: TargetNoLimit, Throughput: 8000, Latency: Latency{P50: 4, P99: 10}},
		{Target: TargetLimit, Throughput: 7200, Latency: Latency{P50: 5, P99: 12}, Outcomes: map[string]int64{"ACCEPTED": 100}},
	}
	want := []Comparison{{Base: TargetLimit, Other: TargetNoLimit, ThroughputRatio: 0.9, P50Ratio: 1.25, P99Ratio: 1.2,
		Text: "shared limit per user and per address: 0.90× the throughput without, p50 1.25×, p99 1.20× (7,200 vs 8,000 requests/s; p99 12.0 ms vs 10.0 ms; p50 5.00 ms vs 4.00 ms)"}}
	if diff := cmp.Diff(want, Compare(runs)); diff != "" {
		t.Errorf("comparisons (-want +got):\n%s", diff)
	}
	runs[2].Outcomes["RATE_LIMITED"] = 1200
	if got := Compare(runs); len(got) != 1 || !strings.HasSuffix(got[0].Text, "; NOT A MEASURE OF THE CHECK: 1,200 purchases were RATE_LIMITED") {
		t.Errorf("with refusals: %+v", got)
	}
}

// TestDisplay checks that progress is redrawn in place on a terminal and
// printed as lines, at most one per period, elsewhere.
func TestDisplay(t *testing.T) {
	var tty bytes.Buffer
	d := NewDisplay(&tty, true)
	d.Update("one", false)
	d.Update("two", false)
	d.End()
	if got, want := tty.String(), "\rone\x1b[K\rtwo\x1b[K\n"; got != want {
		t.Errorf("terminal: %q, want %q", got, want)
	}
	var lines bytes.Buffer
	d = NewDisplay(&lines, false)
	d.Update("one", false)
	d.Update("two", false) // within the period: skipped
	d.Update("done", true)
	d.End()
	if got, want := lines.String(), "one\ndone\n"; got != want {
		t.Errorf("not a terminal: %q, want %q", got, want)
	}
}
