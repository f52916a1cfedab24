package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"seckill/internal/seckill"
)

// WriteJSON writes res as indented JSON.
func (res *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// WriteText writes res for people: what load was sent, the runs side by
// side, then the verdicts and the comparisons.
func (res *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	switch {
	case res.Builds != nil:
		res.writeBuilds(&b)
	case res.Storm != nil:
		res.Storm.write(&b)
	case res.CloseStorm != nil:
		res.CloseStorm.write(&b)
	default:
		b.WriteString(res.headline() + "\n\n")
		writeRunTable(&b, res.Load.Mode, res.Runs)
		b.WriteString("\n")
		writeVerdicts(&b, res.Runs)
		for _, r := range res.Runs {
			if r.Room != nil {
				r.Room.write(&b, r.Label())
			}
		}
		for _, c := range res.Comparisons {
			fmt.Fprintf(&b, "%s\n", c.Text)
		}
		writeCPUNote(&b, res.Runs)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRunTable writes runs side by side, a column each.
func writeRunTable(b *strings.Builder, mode string, runs []*Report) {
	t := newRunTable(runs)
	t.requestRows(mode)
	t.latencyRows()
	t.outcomeRows()
	t.persistenceRows()
	t.paymentRows()
	t.serverRows()
	t.masterRows()
	t.cpuRows()
	t.write(b)
}

// headline describes the load every run received.
func (res *Result) headline() string {
	h := loadHeadline(res.Load)
	if res.Interrupted {
		h += " — INTERRUPTED, partial results"
	}
	return h
}

// loadHeadline describes a load.
func loadHeadline(l LoadInfo) string {
	var b strings.Builder
	switch l.Mode {
	case ModeBurst:
		if l.WaitingRoom {
			fmt.Fprintf(&b, "seckill-bench: %s users through a waiting room, each buying once at their turn", Number(int64(l.Users)))
			break
		}
		fmt.Fprintf(&b, "seckill-bench: burst, %s users × %d attempt(s), %s at once", Number(int64(l.Users)), l.Attempts, Number(int64(l.Concurrency)))
		if l.RampS > 0 {
			fmt.Fprintf(&b, " (ramp %s)", Seconds(l.RampS))
		}
	case ModeOpen:
		fmt.Fprintf(&b, "seckill-bench: open model, %s requests/s for %s, %s users, at most %s in flight",
			Number(int64(l.Rate)), Seconds(l.DurationS), Number(int64(l.Users)), Number(int64(l.MaxInFlight)))
	case ModeClosed:
		fmt.Fprintf(&b, "seckill-bench: closed model, %s callers for %s, %s users",
			Number(int64(l.Concurrency)), Seconds(l.DurationS), Number(int64(l.Users)))
	}
	fmt.Fprintf(&b, ", stock %s, timeout %s", Number(l.Stock), Seconds(l.TimeoutS))
	if l.Warm {
		b.WriteString(", connections opened beforehand")
	}
	if p := l.Pay; p != nil {
		fmt.Fprintf(&b, ", %.0f%% of buyers pay after %s", 100*p.Ratio, Seconds(p.DelayS))
		if p.WindowS > 0 {
			fmt.Fprintf(&b, ", pay window %s", Seconds(p.WindowS))
		}
	}
	return b.String()
}

// requestRows: the voucher, and what became of the requests sent.
func (t *runTable) requestRows(mode string) {
	t.row("voucher", func(r *Report) string {
		id := strconv.FormatInt(r.VoucherID, 10)
		if r.VoucherOf != "" {
			return id + " (" + r.VoucherOf + ")"
		}
		return id
	})
	t.row("requests sent", func(r *Report) string { return Number(r.Sent) })
	if t.any(func(r *Report) bool { return r.Dropped > 0 }) {
		t.row("dropped (in-flight cap)", func(r *Report) string { return Number(r.Dropped) })
	}
	if mode == ModeOpen {
		t.row("sent late (>1 ms)", func(r *Report) string {
			return fmt.Sprintf("%s (max %s)", Number(r.Late), Millis(r.MaxLateMs))
		})
	}
	t.row("answered", func(r *Report) string { return Number(r.Answered) })
	t.row("errors", func(r *Report) string { return Number(r.Failed) })
	for _, k := range t.keys(func(r *Report) []string { return slices.Collect(maps.Keys(r.Errors)) }, strings.Compare) {
		t.row("  "+k, func(r *Report) string { return Number(r.Errors[k].Count) })
	}
	t.row("elapsed", func(r *Report) string { return Seconds(r.ElapsedS) })
}

// latencyRows: throughput and latency percentiles.
func (t *runTable) latencyRows() {
	t.row("requests/s", func(r *Report) string { return Number(int64(r.Throughput + 0.5)) })
	t.row("latency p50", func(r *Report) string { return Millis(r.Latency.P50) })
	t.row("latency p90", func(r *Report) string { return Millis(r.Latency.P90) })
	t.row("latency p99", func(r *Report) string { return Millis(r.Latency.P99) })
	t.row("latency max", func(r *Report) string { return Millis(r.Latency.Max) })
}

// outcomeRows: the answers by outcome, and the two phases of a sale.
func (t *runTable) outcomeRows() {
	for _, k := range t.keys(func(r *Report) []string { return slices.Collect(maps.Keys(r.Outcomes)) }, outcomeOrder) {
		t.row("  "+k, func(r *Report) string { return Number(r.Outcomes[k]) })
	}
	if t.any(func(r *Report) bool { return r.Selling != nil }) {
		t.row("selling: req/s, p99", func(r *Report) string { return fmtPhase(r.Selling) })
		t.row("sold out: req/s, p99", func(r *Report) string { return fmtPhase(r.SoldOut) })
	}
	t.row("accepted / stock", func(r *Report) string { return Number(r.Accepted) + " / " + Number(r.Stock) })
	if t.any(func(r *Report) bool { return r.Arrivals != nil }) {
		t.row("arrivals: middle 80% in", func(r *Report) string {
			if r.Arrivals == nil {
				return "-"
			}
			return Seconds(r.Arrivals.SpreadS)
		})
		t.row("arrivals: busiest second", func(r *Report) string {
			if r.Arrivals == nil {
				return "-"
			}
			return fmt.Sprintf("%s (%.0f%%)", Number(r.Arrivals.PeakPerS), 100*r.Arrivals.PeakShare)
		})
	}
}

// persistenceRows: what the system of record holds after the run.
func (t *runTable) persistenceRows() {
	t.persistenceRow("verified in", func(p *Persistence) string { return p.Source })
	t.persistenceRow("rows in Postgres", func(p *Persistence) string {
		if p.Source == SourceRedis {
			return "-"
		}
		return Number(p.Rows)
	})
	t.persistenceRow("failed orders", func(p *Persistence) string { return Number(p.FailedOrders) })
	t.persistenceRow("lost / unexpected", func(p *Persistence) string { return Number(p.Lost) + " / " + Number(p.Unexpected) })
	t.persistenceRow("duplicate rows", func(p *Persistence) string { return Number(p.DuplicateUsers + p.DuplicateIDs) })
	t.persistenceRow("Postgres stock left", func(p *Persistence) string { return optInt(p.PostgresStock) })
	t.persistenceRow("Redis remaining", func(p *Persistence) string { return optInt(p.RedisRemaining) })
	t.persistenceRow("persisted", fmtPersisted)
	t.persistenceRow("last row written", func(p *Persistence) string { return fmtLastCreated(p.LastCreatedAfterMs) })
	t.persistenceRow("orders persisted/s", func(p *Persistence) string {
		if p.PersistedPerS == nil {
			return "-"
		}
		return Number(int64(*p.PersistedPerS + 0.5))
	})
	t.persistenceRow("max queue depth", func(p *Persistence) string { return optInt(p.MaxQueueDepth) })
	if t.any(func(r *Report) bool { return r.Persistence != nil && r.Persistence.Lag != nil }) {
		t.persistenceRow("lag ACCEPTED → row: p50 / p99", func(p *Persistence) string {
			if p.Lag == nil {
				return "-"
			}
			return Millis(p.Lag.P50) + " / " + Millis(p.Lag.P99)
		})
	}
}

// paymentRows: what the buyers paid, what expired and was sold again, and
// the campaign's books (seckill-bench --pay-ratio).
func (t *runTable) paymentRows() {
	if !t.any(func(r *Report) bool { return r.Persistence != nil && r.Persistence.Payments != nil }) {
		return
	}
	row := func(label string, cell func(p *Payments) string) {
		t.persistenceRow(label, func(p *Persistence) string {
			if p.Payments == nil {
				return "-"
			}
			return cell(p.Payments)
		})
	}
	row("payments created", func(p *Payments) string { return Number(p.Created) })
	row("confirmed / late / not paid", func(p *Payments) string {
		return Number(p.Confirmed) + " / " + Number(p.Late) + " / " + Number(p.Unpaid)
	})
	row("orders paid", func(p *Payments) string { return Number(p.Paid) })
	row("orders awaiting payment", func(p *Payments) string { return Number(p.Awaiting) })
	row("orders expired", func(p *Payments) string { return Number(p.Expired) })
	row("orders cancelled / failed", func(p *Payments) string { return Number(p.Cancelled) + " / " + Number(p.Failed) })
	row("units resold", func(p *Payments) string { return Number(p.Resold) })
	row("books: initial", func(p *Payments) string { return Number(p.Books.Initial) })
	row("  = remaining+queued", func(p *Payments) string {
		if !p.Books.Known {
			return "- (not in Redis)"
		}
		return Number(p.Books.Remaining) + " + " + Number(p.Books.Queued)
	})
	row("  + awaiting+paid", func(p *Payments) string {
		ok := "NOT BALANCED"
		switch p.Books.Balance().State {
		case seckill.BalanceOK:
			ok = "balanced"
		case seckill.BalanceUnknown:
			ok = "Postgres only"
		case seckill.BalanceSettling:
			ok = "NOT BALANCED: settling"
		}
		return Number(p.Books.Awaiting) + " + " + Number(p.Books.Paid) + " (" + ok + ")"
	})
}

// serverRows: memory and goroutines from the server's /metrics.
func (t *runTable) serverRows() {
	if !t.any(func(r *Report) bool { return r.Server != nil }) {
		return
	}
	t.serverRow("server heap MB", func(s *ServerStats) string {
		return fmt.Sprintf("%.1f→%.1f (max %.1f)", s.HeapStartMB, s.HeapEndMB, s.HeapMaxMB)
	})
	t.serverRow("server RSS MB", func(s *ServerStats) string {
		return fmt.Sprintf("%.1f→%.1f (max %.1f)", s.RSSStartMB, s.RSSEndMB, s.RSSMaxMB)
	})
	t.serverRow("server goroutines", func(s *ServerStats) string {
		return fmt.Sprintf("%d→%d (max %d)", s.GoroutinesStart, s.GoroutinesEnd, s.GoroutinesMax)
	})
	t.funnelRows()
}

// funnelRows: the share of attempts each layer of the server's funnel
// stopped (or admitted) during the run; layers that counted nothing are
// left out.
func (t *runTable) funnelRows() {
	if !t.any(func(r *Report) bool { return r.Server != nil && len(r.Server.Funnel) > 0 }) {
		return
	}
	rank := func(l string) int {
		// As a purchase meets them; a layer this build does not know
		// (another server version) goes last.
		if i := slices.Index(seckill.Layers, l); i >= 0 {
			return i
		}
		return len(seckill.Layers)
	}
	layers := t.keys(func(r *Report) []string {
		if r.Server == nil {
			return nil
		}
		var out []string
		for l, n := range r.Server.Funnel {
			if n > 0 {
				out = append(out, l)
			}
		}
		return out
	}, func(a, b string) int { return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b)) })
	if len(layers) == 0 {
		return
	}
	t.row("server funnel (share of attempts)", func(*Report) string { return "" })
	for _, l := range layers {
		t.serverRow("  "+strings.ReplaceAll(l, "_", " "), func(s *ServerStats) string {
			total := int64(0)
			for _, n := range s.Funnel {
				total += n
			}
			if total == 0 {
				return "-"
			}
			return fmt.Sprintf("%s (%.1f%%)", Number(s.Funnel[l]), 100*float64(s.Funnel[l])/float64(total))
		})
	}
}

// keys returns the union of every run's keys, sorted by order.
func (t *runTable) keys(of func(r *Report) []string, order func(a, b string) int) []string {
	seen := map[string]bool{}
	for _, r := range t.runs {
		for _, k := range of(r) {
			seen[k] = true
		}
	}
	return slices.SortedFunc(maps.Keys(seen), order)
}

// writeVerdicts writes each run's verdict with its notes and errors, and
// what the timing rows mean when it is not obvious.
func writeVerdicts(b *strings.Builder, runs []*Report) {
	for _, r := range runs {
		fmt.Fprintf(b, "verdict %s: %s\n", r.Label(), r.Verdict)
		if p := r.Persistence; p != nil && p.Note != "" {
			fmt.Fprintf(b, "  note: %s\n", p.Note)
		}
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			fmt.Fprintf(b, "  %s %s, e.g.: %s\n", Number(r.Errors[k].Count), k, r.Errors[k].Example)
		}
	}
	if slices.ContainsFunc(runs, func(r *Report) bool {
		return r.Persistence != nil && r.Persistence.LastCreatedAfterMs != nil && *r.Persistence.LastCreatedAfterMs < 0
	}) {
		b.WriteString("last row written \"before\": the last order was in Postgres before its buyer heard ACCEPTED " +
			"(a synchronous design writes, then answers)\n")
	}
}

// fmtPersisted says whether every accepted order reached the system of
// record. The ceiling keeps its admissions pending in Redis: it claims
// nothing.
func fmtPersisted(p *Persistence) string {
	switch {
	case p.Source == SourceRedis:
		return "nothing (by design)"
	case !p.Complete:
		return "INCOMPLETE after " + Seconds(p.WaitedS)
	}
	return "all, after " + Seconds(p.WaitedS)
}

// fmtLastCreated says when the last order was written relative to the last
// ACCEPTED answer. created_at is the writing transaction's start, so a
// synchronous design writes its last order before it answers: that is
// "before", not a negative latency.
func fmtLastCreated(v *float64) string {
	switch {
	case v == nil:
		return "-"
	case *v < 0:
		return Millis(-*v) + " before last ACCEPTED"
	}
	return Millis(*v) + " after last ACCEPTED"
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
	return Number(int64(p.Throughput+0.5)) + ", " + Millis(p.P99)
}

func optInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return Number(*v)
}
