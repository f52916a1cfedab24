package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is what one `seckill bench` measured: a Report per target, run
// one after the other with the same load, and how they compare.
type Result struct {
	Load        LoadInfo     `json:"load"`
	Runs        []*Report    `json:"runs"`
	Comparisons []Comparison `json:"comparisons,omitempty"`
	Interrupted bool         `json:"interrupted,omitempty"`
}

// LoadInfo describes the load every target received.
type LoadInfo struct {
	Mode        string  `json:"mode"`
	Users       int     `json:"users"`
	Attempts    int     `json:"attempts,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	DurationS   float64 `json:"duration_s,omitempty"`
	RampS       float64 `json:"ramp_s,omitempty"`
	MaxInFlight int     `json:"max_in_flight,omitempty"`
	TimeoutS    float64 `json:"timeout_s"`
	Warm        bool    `json:"warm,omitempty"` // connections opened before the clock started
	Stock       int64   `json:"stock"`
}

// Report is what one target's run came to.
type Report struct {
	Target      string    `json:"target"` // "seckill", "sync" or "ceiling"
	URL         string    `json:"url"`
	VoucherID   int64     `json:"voucher_id"`
	StartedAt   time.Time `json:"started_at"`
	Interrupted bool      `json:"interrupted,omitempty"`

	Sent       int64                `json:"sent"`
	Answered   int64                `json:"answered"` // with an outcome
	Failed     int64                `json:"failed"`   // no outcome: HTTP, GraphQL or transport error
	Dropped    int64                `json:"dropped,omitempty"`
	Late       int64                `json:"late,omitempty"`
	MaxLateMs  float64              `json:"max_late_ms,omitempty"`
	ElapsedS   float64              `json:"elapsed_s"`
	Throughput float64              `json:"requests_per_s"` // answered per second
	Latency    Latency              `json:"latency_ms"`
	Outcomes   map[string]int64     `json:"outcomes"`
	Errors     map[string]ErrorStat `json:"errors,omitempty"`
	Selling    *Phase               `json:"selling,omitempty"`  // requests sent before the first SOLD_OUT
	SoldOut    *Phase               `json:"sold_out,omitempty"` // requests sent after it

	Stock            int64        `json:"stock"` // units on sale when the run began
	Accepted         int64        `json:"accepted"`
	DuplicateAnswers int64        `json:"duplicate_answers"` // an order id or a user accepted twice
	Persistence      *Persistence `json:"persistence,omitempty"`
	Server           *ServerStats `json:"server,omitempty"`

	OK      bool   `json:"ok"`
	Verdict string `json:"verdict"`
}

// Latency percentiles in milliseconds, over answered requests.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Phase is the part of a run before or after the campaign sold out.
type Phase struct {
	Answered   int64   `json:"answered"`
	ElapsedS   float64 `json:"elapsed_s"`
	Throughput float64 `json:"requests_per_s"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
}

// ErrorStat counts one kind of failed request, with the first message seen.
type ErrorStat struct {
	Count   int64  `json:"count"`
	Example string `json:"example"`
}

// Persistence is what the system of record holds after the run.
type Persistence struct {
	Source   string  `json:"source"` // "postgres", "graphql" or "redis"
	Complete bool    `json:"complete"`
	WaitedS  float64 `json:"waited_s"`

	Rows           int64 `json:"rows"`            // orders of this run's users
	FailedOrders   int64 `json:"failed_orders"`   // admissions recorded as FAILED
	DuplicateUsers int64 `json:"duplicate_users"` // rows beyond one per (voucher, user)
	DuplicateIDs   int64 `json:"duplicate_ids"`
	Lost           int64 `json:"lost"`       // ACCEPTED answers without a row
	Unexpected     int64 `json:"unexpected"` // rows no answer accepted

	PostgresStock  *int64 `json:"postgres_stock,omitempty"`  // units left in Postgres
	Sold           *int64 `json:"sold,omitempty"`            // GraphQL seckill.sold
	RedisRemaining *int64 `json:"redis_remaining,omitempty"` // live admission counter
	RedisPending   *int64 `json:"redis_pending,omitempty"`   // admitted, not yet persisted
	MaxQueueDepth  *int64 `json:"max_queue_depth,omitempty"` // most pending admissions seen

	LastCreatedAfterMs *float64 `json:"last_created_after_last_accepted_ms,omitempty"`
	PersistedPerS      *float64 `json:"persisted_per_s,omitempty"`
	Note               string   `json:"note,omitempty"`
}

// ServerStats samples the server's /metrics during the run.
type ServerStats struct {
	HeapStartMB     float64 `json:"heap_start_mb"`
	HeapEndMB       float64 `json:"heap_end_mb"`
	HeapMaxMB       float64 `json:"heap_max_mb"`
	RSSStartMB      float64 `json:"rss_start_mb"`
	RSSEndMB        float64 `json:"rss_end_mb"`
	RSSMaxMB        float64 `json:"rss_max_mb"`
	GoroutinesStart int64   `json:"goroutines_start"`
	GoroutinesEnd   int64   `json:"goroutines_end"`
	GoroutinesMax   int64   `json:"goroutines_max"`
	Samples         int     `json:"samples"`
}

// Comparison relates the seckill run to another target's.
type Comparison struct {
	Base            string  `json:"base"`
	Other           string  `json:"other"`
	ThroughputRatio float64 `json:"throughput_ratio"` // base / other
	P99Ratio        float64 `json:"p99_ratio"`        // base / other
	Text            string  `json:"text"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ptr[T any](v T) *T { return &v }

// buildReport turns what rec recorded into a Report, without verification.
func buildReport(target, endpoint string, voucherID, stock int64, rec *recorder, interrupted bool) *Report {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := &Report{
		Target: target, URL: endpoint, VoucherID: voucherID, StartedAt: rec.start.UTC(),
		Interrupted: interrupted,
		Sent:        rec.sent.Load(), Answered: rec.answered.Load(), Failed: rec.failed.Load(),
		Dropped: rec.dropped.Load(), Late: rec.late.Load(), MaxLateMs: ms(time.Duration(rec.maxLate.Load())),
		Outcomes: maps.Clone(rec.outcomes),
		Stock:    stock,
		Accepted: rec.outcomes["ACCEPTED"],
	}
	elapsed := time.Duration(rec.lastDone.Load())
	r.ElapsedS = elapsed.Seconds()
	if elapsed > 0 {
		r.Throughput = float64(r.Answered) / elapsed.Seconds()
	}
	h := rec.all
	r.Latency = Latency{
		P50: ms(h.Quantile(0.50)), P90: ms(h.Quantile(0.90)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.Max()), Mean: ms(h.Mean()),
	}
	if len(rec.errors) > 0 {
		r.Errors = map[string]ErrorStat{}
		for k, e := range rec.errors {
			r.Errors[k] = ErrorStat{Count: e.n, Example: e.detail}
		}
	}
	if fs := time.Duration(rec.firstSoldOut.Load()); fs > 0 {
		r.Selling = phase(rec.selling, fs)
		r.SoldOut = phase(rec.soldOut, elapsed-fs)
	}
	ids := make(map[int64]bool, len(rec.accepted))
	buyers := make(map[int]bool, len(rec.accepted))
	for _, a := range rec.accepted {
		if ids[a.orderID] || buyers[a.user] {
			r.DuplicateAnswers++
		}
		ids[a.orderID], buyers[a.user] = true, true
	}
	return r
}

func phase(h *Histogram, d time.Duration) *Phase {
	p := &Phase{Answered: int64(h.Count()), ElapsedS: d.Seconds(), P50: ms(h.Quantile(0.5)), P99: ms(h.Quantile(0.99))}
	if d > 0 {
		p.Throughput = float64(p.Answered) / d.Seconds()
	}
	return p
}

// judge sets the verdict: oversell, lost and duplicate orders fail a run;
// unanswered requests and unsold units are noted.
func (r *Report) judge() {
	var fails, notes []string
	if over := r.Accepted - r.Stock; over > 0 {
		fails = append(fails, fmt.Sprintf("OVERSOLD: %s accepted for %s units", group(r.Accepted), group(r.Stock)))
	}
	if r.DuplicateAnswers > 0 {
		fails = append(fails, fmt.Sprintf("DUPLICATE: %s order ids or buyers accepted twice", group(r.DuplicateAnswers)))
	}
	if p := r.Persistence; p != nil {
		if p.Source != "redis" && p.Rows > r.Stock {
			fails = append(fails, fmt.Sprintf("OVERSOLD: %s rows for %s units", group(p.Rows), group(r.Stock)))
		}
		if p.PostgresStock != nil && *p.PostgresStock < 0 {
			fails = append(fails, fmt.Sprintf("OVERSOLD: Postgres stock is %d", *p.PostgresStock))
		}
		if p.RedisRemaining != nil && *p.RedisRemaining < 0 {
			fails = append(fails, fmt.Sprintf("OVERSOLD: Redis remaining is %d", *p.RedisRemaining))
		}
		if p.Lost > 0 && !p.Complete && r.Interrupted {
			notes = append(notes, fmt.Sprintf("%s accepted orders not persisted yet when interrupted", group(p.Lost)))
		} else if p.Lost > 0 {
			if p.Complete {
				fails = append(fails, fmt.Sprintf("LOST: %s accepted orders are not in %s", group(p.Lost), p.Source))
			} else {
				fails = append(fails, fmt.Sprintf("NOT PERSISTED: %s accepted orders still missing after %.1f s", group(p.Lost), p.WaitedS))
			}
		}
		if n := p.DuplicateUsers + p.DuplicateIDs; n > 0 {
			fails = append(fails, fmt.Sprintf("DUPLICATE: %s rows beyond one per buyer or order id", group(n)))
		}
		// An order accepted for a request whose answer was lost to a
		// timeout is a row nobody saw accepted; more such rows than failed
		// requests cannot be explained.
		if p.Unexpected > r.Failed {
			fails = append(fails, fmt.Sprintf("UNEXPECTED: %s rows that no answer accepted", group(p.Unexpected)))
		} else if p.Unexpected > 0 {
			notes = append(notes, fmt.Sprintf("%s rows belong to requests whose answer was lost", group(p.Unexpected)))
		}
		if p.FailedOrders > 0 {
			notes = append(notes, fmt.Sprintf("%s accepted orders FAILED in persistence", group(p.FailedOrders)))
		}
	}
	if n := r.Failed + r.Dropped; n > 0 {
		notes = append(notes, fmt.Sprintf("%s requests unanswered", group(n)))
	}
	if r.Accepted < r.Stock && r.Outcomes["SOLD_OUT"] > 0 {
		notes = append(notes, fmt.Sprintf("%s units unsold although SOLD_OUT was answered", group(r.Stock-r.Accepted)))
	}
	if r.Interrupted {
		notes = append(notes, "interrupted")
	}
	r.OK = len(fails) == 0
	var b strings.Builder
	if r.OK {
		b.WriteString("OK: ")
		fmt.Fprintf(&b, "%s accepted of %s units", group(r.Accepted), group(r.Stock))
		if p := r.Persistence; p != nil && p.Source != "redis" {
			fmt.Fprintf(&b, ", %s rows", group(p.Rows))
		}
		b.WriteString("; no oversell, no lost, no duplicate orders")
	} else {
		b.WriteString("FAIL: ")
		b.WriteString(strings.Join(fails, "; "))
	}
	if len(notes) > 0 {
		b.WriteString(" (" + strings.Join(notes, "; ") + ")")
	}
	r.Verdict = b.String()
}

// compare relates base to each other run.
func compare(runs []*Report) []Comparison {
	if len(runs) < 2 {
		return nil
	}
	base := runs[0]
	var out []Comparison
	for _, o := range runs[1:] {
		c := Comparison{Base: base.Target, Other: o.Target}
		if o.Throughput > 0 {
			c.ThroughputRatio = base.Throughput / o.Throughput
		}
		if o.Latency.P99 > 0 {
			c.P99Ratio = base.Latency.P99 / o.Latency.P99
		}
		switch o.Target {
		case TargetCeiling:
			c.Text = fmt.Sprintf("%s reaches %.2f of the ceiling's throughput (%s vs %s requests/s; p99 %s vs %s)",
				base.Target, c.ThroughputRatio, group(int64(base.Throughput)), group(int64(o.Throughput)),
				fmtMs(base.Latency.P99), fmtMs(o.Latency.P99))
		default:
			c.Text = fmt.Sprintf("%s serves %.1f× the throughput of %s (%s vs %s requests/s; p99 %s vs %s)",
				base.Target, c.ThroughputRatio, o.Target, group(int64(base.Throughput)), group(int64(o.Throughput)),
				fmtMs(base.Latency.P99), fmtMs(o.Latency.P99))
		}
		out = append(out, c)
	}
	return out
}

// WriteJSON writes res as indented JSON.
func (res *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// WriteText writes res for people: the runs side by side, then the
// verdicts and the comparisons.
func (res *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	l := res.Load
	switch l.Mode {
	case ModeBurst:
		fmt.Fprintf(&b, "seckill bench: burst, %s users × %d attempt(s), %s at once", group(int64(l.Users)), l.Attempts, group(int64(l.Concurrency)))
		if l.RampS > 0 {
			fmt.Fprintf(&b, " (ramp %s)", fmtSeconds(l.RampS))
		}
	case ModeOpen:
		fmt.Fprintf(&b, "seckill bench: open model, %s requests/s for %s, %s users, at most %s in flight",
			group(int64(l.Rate)), fmtSeconds(l.DurationS), group(int64(l.Users)), group(int64(l.MaxInFlight)))
	case ModeClosed:
		fmt.Fprintf(&b, "seckill bench: closed model, %s callers for %s, %s users",
			group(int64(l.Concurrency)), fmtSeconds(l.DurationS), group(int64(l.Users)))
	}
	fmt.Fprintf(&b, ", stock %s, timeout %s", group(l.Stock), fmtSeconds(l.TimeoutS))
	if l.Warm {
		b.WriteString(", connections opened beforehand")
	}
	if res.Interrupted {
		b.WriteString(" — INTERRUPTED, partial results")
	}
	b.WriteString("\n\n")

	t := &table{}
	t.header = append(t.header, "")
	for _, r := range res.Runs {
		t.header = append(t.header, r.Target)
	}
	row := func(label string, f func(r *Report) string) {
		cells := []string{label}
		for _, r := range res.Runs {
			cells = append(cells, f(r))
		}
		t.rows = append(t.rows, cells)
	}
	some := func(f func(r *Report) bool) bool { return slices.ContainsFunc(res.Runs, f) }

	row("voucher", func(r *Report) string { return strconv.FormatInt(r.VoucherID, 10) })
	row("requests sent", func(r *Report) string { return group(r.Sent) })
	if some(func(r *Report) bool { return r.Dropped > 0 }) {
		row("dropped (in-flight cap)", func(r *Report) string { return group(r.Dropped) })
	}
	if l.Mode == ModeOpen {
		row("sent late (>1 ms)", func(r *Report) string {
			return fmt.Sprintf("%s (max %s)", group(r.Late), fmtMs(r.MaxLateMs))
		})
	}
	row("answered", func(r *Report) string { return group(r.Answered) })
	row("errors", func(r *Report) string { return group(r.Failed) })
	kinds := map[string]bool{}
	for _, r := range res.Runs {
		for k := range r.Errors {
			kinds[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		row("  "+k, func(r *Report) string { return group(r.Errors[k].Count) })
	}
	row("elapsed", func(r *Report) string { return fmtSeconds(r.ElapsedS) })
	row("requests/s", func(r *Report) string { return group(int64(r.Throughput + 0.5)) })
	row("latency p50", func(r *Report) string { return fmtMs(r.Latency.P50) })
	row("latency p90", func(r *Report) string { return fmtMs(r.Latency.P90) })
	row("latency p99", func(r *Report) string { return fmtMs(r.Latency.P99) })
	row("latency max", func(r *Report) string { return fmtMs(r.Latency.Max) })
	outcomes := map[string]bool{}
	for _, r := range res.Runs {
		for k := range r.Outcomes {
			outcomes[k] = true
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(outcomes), outcomeOrder) {
		row("  "+k, func(r *Report) string { return group(r.Outcomes[k]) })
	}
	if some(func(r *Report) bool { return r.Selling != nil }) {
		row("selling: req/s, p99", func(r *Report) string { return fmtPhase(r.Selling) })
		row("sold out: req/s, p99", func(r *Report) string { return fmtPhase(r.SoldOut) })
	}
	row("accepted / stock", func(r *Report) string { return group(r.Accepted) + " / " + group(r.Stock) })
	pers := func(f func(p *Persistence) string) func(r *Report) string {
		return func(r *Report) string {
			if r.Persistence == nil {
				return "-"
			}
			return f(r.Persistence)
		}
	}
	row("verified in", pers(func(p *Persistence) string { return p.Source }))
	row("rows in Postgres", pers(func(p *Persistence) string {
		if p.Source == "redis" {
			return "-"
		}
		return group(p.Rows)
	}))
	row("failed orders", pers(func(p *Persistence) string { return group(p.FailedOrders) }))
	row("lost / unexpected", pers(func(p *Persistence) string { return group(p.Lost) + " / " + group(p.Unexpected) }))
	row("duplicate rows", pers(func(p *Persistence) string { return group(p.DuplicateUsers + p.DuplicateIDs) }))
	row("Postgres stock left", pers(func(p *Persistence) string { return optInt(p.PostgresStock) }))
	row("Redis remaining", pers(func(p *Persistence) string { return optInt(p.RedisRemaining) }))
	row("persisted", pers(func(p *Persistence) string {
		if !p.Complete {
			return fmt.Sprintf("INCOMPLETE after %s", fmtSeconds(p.WaitedS))
		}
		return "all, after " + fmtSeconds(p.WaitedS)
	}))
	row("last ACCEPTED→CREATED", pers(func(p *Persistence) string {
		switch v := p.LastCreatedAfterMs; {
		case v == nil:
			return "-"
		case *v < 0:
			// created_at is the writing transaction's start: the order
			// was in Postgres before its buyer heard ACCEPTED.
			return "-" + fmtMs(-*v) + " (before the answer)"
		default:
			return fmtMs(*v)
		}
	}))
	row("orders persisted/s", pers(func(p *Persistence) string {
		if p.PersistedPerS == nil {
			return "-"
		}
		return group(int64(*p.PersistedPerS + 0.5))
	}))
	row("max queue depth", pers(func(p *Persistence) string { return optInt(p.MaxQueueDepth) }))
	if some(func(r *Report) bool { return r.Server != nil }) {
		row("server heap MB", func(r *Report) string {
			if r.Server == nil {
				return "-"
			}
			s := r.Server
			return fmt.Sprintf("%.1f→%.1f (max %.1f)", s.HeapStartMB, s.HeapEndMB, s.HeapMaxMB)
		})
		row("server RSS MB", func(r *Report) string {
			if r.Server == nil {
				return "-"
			}
			s := r.Server
			return fmt.Sprintf("%.1f→%.1f (max %.1f)", s.RSSStartMB, s.RSSEndMB, s.RSSMaxMB)
		})
		row("server goroutines", func(r *Report) string {
			if r.Server == nil {
				return "-"
			}
			s := r.Server
			return fmt.Sprintf("%d→%d (max %d)", s.GoroutinesStart, s.GoroutinesEnd, s.GoroutinesMax)
		})
	}
	t.write(&b)
	b.WriteString("\n")
	for _, r := range res.Runs {
		fmt.Fprintf(&b, "verdict %s: %s\n", r.Target, r.Verdict)
		if p := r.Persistence; p != nil && p.Note != "" {
			fmt.Fprintf(&b, "  note: %s\n", p.Note)
		}
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			fmt.Fprintf(&b, "  %s %s, e.g.: %s\n", group(r.Errors[k].Count), k, r.Errors[k].Example)
		}
	}
	for _, c := range res.Comparisons {
		fmt.Fprintf(&b, "%s\n", c.Text)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var outcomeRank = map[string]int{"ACCEPTED": 0, "SOLD_OUT": 1, "ALREADY_PURCHASED": 2, "RATE_LIMITED": 3,
	"NOT_STARTED": 4, "ENDED": 5, "PAUSED": 6}

func outcomeOrder(a, b string) int {
	ra, oka := outcomeRank[a]
	rb, okb := outcomeRank[b]
	if !oka {
		ra = 100
	}
	if !okb {
		rb = 100
	}
	return cmp.Or(cmp.Compare(ra, rb), cmp.Compare(a, b))
}

func fmtPhase(p *Phase) string {
	if p == nil || p.Answered == 0 {
		return "-"
	}
	return group(int64(p.Throughput+0.5)) + ", " + fmtMs(p.P99)
}

func optInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return group(*v)
}

// table aligns cells in columns: the first left, the rest right.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) write(b *strings.Builder) {
	all := append([][]string{t.header}, t.rows...)
	widths := make([]int, len(t.header))
	for _, r := range all {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, r := range all {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i == 0 {
				line.WriteString(c + pad)
			} else {
				line.WriteString("   " + pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
}

// group formats n with thousands separators: 1234567 -> "1,234,567".
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// fmtMs formats milliseconds with three significant digits.
func fmtMs(v float64) string {
	switch {
	case v >= 10_000:
		return fmt.Sprintf("%.1f s", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

func fmtDur(d time.Duration) string { return fmtMs(ms(d)) }

func fmtSeconds(s float64) string { return fmtMs(s * 1000) }
