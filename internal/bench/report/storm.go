package report

import (
	"fmt"
	"strings"
	"time"
)

// Targets of --expiry-storm's runs.
const (
	TargetStormSale   = "storm-sale" // the campaign of N units nobody pays for
	TargetProbeAlone  = "alone"      // the second campaign's sale before the storm
	TargetProbeDuring = "during"     // the same sale while the orders expire
)

// InterferenceTarget is issue #20's bound on what the storm may do to a
// sale beside it: its p99 and its persistence lag within 1.5× of the same
// sale alone.
const InterferenceTarget = 1.5

// Storm is what --expiry-storm measured: a campaign of Units sold to
// buyers who never pay, the Redis memory its awaiting orders hold, their
// expiry, and a second campaign's sale alone and during the expiry.
type Storm struct {
	Units      int64   `json:"units"`
	PayWindowS float64 `json:"pay_window_s"`
	VoucherID  int64   `json:"voucher_id"`
	// Sale is the campaign's sale; Alone and During the second campaign's
	// (ProbeVoucherID) before the storm and while it runs.
	SaleLoad       LoadInfo `json:"sale_load"`
	Sale           *Report  `json:"sale"`
	ProbeVoucherID int64    `json:"probe_voucher_id"`
	ProbeLoad      LoadInfo `json:"probe_load"`
	Alone          *Report  `json:"alone"`
	During         *Report  `json:"during,omitempty"`

	Memory       StormMemory  `json:"redis_memory"`
	Expiry       StormExpiry  `json:"expiry"`
	Pool         PoolUse      `json:"postgres_pool"`
	Interference Interference `json:"interference"`
	// CPU is each process's CPU from the first pay_by to the last
	// EXPIRED order, per expired order.
	CPU *CPU `json:"expiry_cpu,omitempty"`

	Notes   []string `json:"notes,omitempty"`
	OK      bool     `json:"ok"`
	Verdict string   `json:"verdict"`
}

// StormMemory is Redis's memory before the sale and once every order was
// CREATED (awaiting payment, its expiry scheduled).
type StormMemory struct {
	BeforeBytes int64 `json:"used_memory_before"`
	AfterBytes  int64 `json:"used_memory_after"`
	// Awaiting is the campaign's orders CREATED when AfterBytes was read.
	Awaiting      int64   `json:"awaiting"`
	PerOrderBytes float64 `json:"bytes_per_awaiting_order"` // (after − before) ÷ awaiting
	// Keys is what grew, by key pattern (MEMORY USAGE of a sample of each).
	Keys []KeyGrowth `json:"keys"`
	// Shared says the instance holds other databases' keys: used_memory
	// is not the server's alone.
	Shared bool `json:"shared,omitempty"`
}

// KeyGrowth is one key pattern's growth over the sale.
type KeyGrowth struct {
	Pattern       string  `json:"pattern"`
	Type          string  `json:"type"`
	KeysBefore    int64   `json:"keys_before"`
	KeysAfter     int64   `json:"keys_after"`
	BytesBefore   int64   `json:"bytes_before"`
	BytesAfter    int64   `json:"bytes_after"`
	PerOrderBytes float64 `json:"bytes_per_awaiting_order"`
	// Sampled says the bytes are scaled up from a sample of the keys.
	Sampled bool `json:"sampled,omitempty"`
}

// StormExpiry is how the orders expired.
type StormExpiry struct {
	FirstPayBy  time.Time `json:"first_pay_by"`
	LastPayBy   time.Time `json:"last_pay_by"`
	FirstClosed time.Time `json:"first_expired_at,omitzero"`
	LastClosed  time.Time `json:"last_expired_at,omitzero"`
	Expired     int64     `json:"expired"`
	Complete    bool      `json:"complete"` // every order expired before the timeout
	// DurationS runs from the first pay_by to the last order EXPIRED in
	// Postgres (its closed_at); PerS is Expired over it.
	DurationS float64 `json:"duration_s"`
	PerS      float64 `json:"expired_per_s"`
	PeakPerS  int64   `json:"busiest_second"`
	// BehindS is how long after the last pay_by the last order expired.
	BehindS float64 `json:"last_behind_its_pay_by_s"`
	// Books is the campaign's stock equation once the storm is over:
	// every unit back in Redis.
	Books *Books `json:"books,omitempty"`
}

// PoolUse is the server's Postgres connections during the storm, sampled
// from pg_stat_activity (the bench's own connections left out).
type PoolUse struct {
	PoolSize       int     `json:"pool_size"` // SECKILL_DB_MAX_CONNS
	EveryMs        float64 `json:"every_ms"`
	Samples        int     `json:"samples"`
	MaxConnections int     `json:"max_connections"`
	// In use is active plus idle in a transaction.
	MaxInUse     int     `json:"max_in_use"`
	MeanInUse    float64 `json:"mean_in_use"`
	MaxShare     float64 `json:"max_share"` // of the pool
	MeanShare    float64 `json:"mean_share"`
	MaxActive    int     `json:"max_active"`
	MeanActive   float64 `json:"mean_active"`
	MaxIdleInTx  int     `json:"max_idle_in_transaction"`
	MeanIdleInTx float64 `json:"mean_idle_in_transaction"`
	MaxLockWait  int     `json:"max_waiting_on_lock"`
	MeanLockWait float64 `json:"mean_waiting_on_lock"`
}

// Lag is how long after its ACCEPTED answer each order reached Postgres.
type Lag struct {
	Orders int64   `json:"orders"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// Interference compares the second campaign's sale during the storm with
// the same sale alone.
type Interference struct {
	P99Ratio float64 `json:"p99_ratio"` // during ÷ alone
	LagRatio float64 `json:"lag_p99_ratio"`
	// Overlap is the share of the sale during the storm that the storm
	// covered: below 1 it ended before the sale did.
	Overlap float64 `json:"overlap"`
	Met     bool    `json:"met"` // both ratios within InterferenceTarget, over a full overlap
	Text    string  `json:"text"`
}

// Judge sets the storm's verdict: the sale's, every order expired, and
// the books balanced afterwards. The interference target is reported, not
// judged: it is a figure to improve, not a fault.
func (s *Storm) Judge(interrupted bool) {
	var fails []string
	for _, r := range []*Report{s.Alone, s.Sale, s.During} {
		if r != nil && !r.OK {
			fails = append(fails, r.Target+": "+r.Verdict)
		}
	}
	e := s.Expiry
	if !e.Complete && !interrupted {
		fails = append(fails, fmt.Sprintf("NOT EXPIRED: %s of %s orders expired before the timeout", Number(e.Expired), Number(s.Units)))
	}
	if b := e.Books; b != nil && e.Complete && !b.Balanced {
		fails = append(fails, fmt.Sprintf("BOOKS: initial %s ≠ remaining %s + queued %s + awaiting payment %s + paid %s after the storm",
			Number(b.Initial), Number(b.Remaining), Number(b.Queued), Number(b.Awaiting), Number(b.Paid)))
	}
	s.OK = len(fails) == 0
	if s.OK {
		s.Verdict = fmt.Sprintf("OK: %s sold, %s expired", Number(s.Sale.Accepted), Number(e.Expired))
		if e.Books != nil && e.Complete {
			s.Verdict += ", every unit back on sale (books balance)"
		}
	} else {
		s.Verdict = "FAIL: " + strings.Join(fails, "; ")
	}
}

// Relate fills the interference from the two sales of the second campaign.
func (s *Storm) Relate() { s.Interference = interference(s.Alone, s.During, s.Interference.Overlap) }

// interference compares the second campaign's sale during a storm with the same
// sale alone; overlap is the share of it the storm covered.
func interference(a, d *Report, overlap float64) Interference {
	in := Interference{Overlap: overlap}
	if a == nil || d == nil {
		in.Text = "interference: not measured (the storm was over before the second sale)"
		return in
	}
	in.P99Ratio = ratioOf(d.Latency.P99, a.Latency.P99)
	var al, dl *Lag
	if a.Persistence != nil {
		al = a.Persistence.Lag
	}
	if d.Persistence != nil {
		dl = d.Persistence.Lag
	}
	if al != nil && dl != nil {
		in.LagRatio = ratioOf(dl.P99, al.P99)
	}
	in.Met = in.P99Ratio > 0 && in.P99Ratio <= InterferenceTarget && in.LagRatio > 0 && in.LagRatio <= InterferenceTarget && in.Overlap >= 0.99
	verdict := "met"
	if !in.Met {
		verdict = "NOT MET"
	}
	over := "the storm ran through the whole sale"
	if in.Overlap < 0.99 {
		over = fmt.Sprintf("the storm covered only %.0f%% of the sale", 100*in.Overlap)
	}
	lag := "-"
	if al != nil && dl != nil {
		lag = fmt.Sprintf("%s vs %s alone (%.2f×)", Millis(dl.P99), Millis(al.P99), in.LagRatio)
	}
	in.Text = fmt.Sprintf("interference: the second campaign's sale during the storm: p99 %s vs %s alone (%.2f×), "+
		"persistence lag p99 %s; target ≤ %.1f× %s (%s)",
		Millis(d.Latency.P99), Millis(a.Latency.P99), in.P99Ratio, lag, InterferenceTarget, verdict, over)
	return in
}

func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// write writes the storm for people: the three sales side by side, then
// the memory, the expiry, the pool, the CPU per expired order and the
// interference.
func (s *Storm) write(b *strings.Builder) {
	fmt.Fprintf(b, "seckill-bench --expiry-storm %s: campaign %d of %s units with a %s pay window, sold to buyers who never pay "+
		"(%s); campaign %d sold alone before and again during the expiry (%s)\n\n",
		Number(s.Units), s.VoucherID, Number(s.Units), Seconds(s.PayWindowS), strings.TrimPrefix(loadHeadline(s.SaleLoad), "seckill-bench: "),
		s.ProbeVoucherID, strings.TrimPrefix(loadHeadline(s.ProbeLoad), "seckill-bench: "))
	var runs []*Report
	for _, r := range []*Report{s.Alone, s.Sale, s.During} {
		if r != nil {
			runs = append(runs, r)
		}
	}
	writeRunTable(b, "", runs)
	b.WriteString("\n")
	writeVerdicts(b, runs)
	b.WriteString("\n")

	m := s.Memory
	fmt.Fprintf(b, "Redis memory (INFO used_memory): %s before the sale, %s once its %s orders awaited payment: %+.1f bytes per awaiting order\n",
		Bytes(m.BeforeBytes), Bytes(m.AfterBytes), Number(m.Awaiting), m.PerOrderBytes)
	if m.Shared {
		b.WriteString("  (the instance holds other databases' keys too: used_memory is not the server's alone)\n")
	}
	if len(m.Keys) > 0 {
		kt := &table{header: []string{"  keys that changed (MEMORY USAGE)", "type", "keys before → after", "bytes before → after", "bytes per awaiting order"}}
		for i, k := range m.Keys {
			if i == 12 {
				kt.rows = append(kt.rows, []string{fmt.Sprintf("  … %d more patterns", len(m.Keys)-i), "", "", "", ""})
				break
			}
			est := ""
			if k.Sampled {
				est = "≈"
			}
			kt.rows = append(kt.rows, []string{"  " + k.Pattern, k.Type, Number(k.KeysBefore) + " → " + Number(k.KeysAfter),
				est + Bytes(k.BytesBefore) + " → " + est + Bytes(k.BytesAfter), fmt.Sprintf("%+.1f", k.PerOrderBytes)})
		}
		kt.write(b)
	}

	e := s.Expiry
	if e.Expired > 0 {
		fmt.Fprintf(b, "expiry: %s orders from the first pay_by (%s) to the last EXPIRED in Postgres (%s) in %s: %s expired/s, "+
			"%s in the busiest second; the last expired %s after the last pay_by\n",
			Number(e.Expired), e.FirstPayBy.Format("15:04:05.000"), e.LastClosed.Format("15:04:05.000"), Seconds(e.DurationS),
			Number(int64(e.PerS+0.5)), Number(e.PeakPerS), Seconds(e.BehindS))
	} else {
		b.WriteString("expiry: no order expired\n")
	}
	if !e.Complete {
		fmt.Fprintf(b, "  INCOMPLETE: %s of %s orders expired before the bench stopped waiting\n", Number(e.Expired), Number(s.Units))
	}
	writePool(b, s.Pool, "the expiry")
	writeCPUPer(b, s.CPU, UnitExpired, "expired order over the expiry")
	b.WriteString(s.Interference.Text + "\n")
	for _, n := range s.Notes {
		b.WriteString("note: " + n + "\n")
	}
	fmt.Fprintf(b, "verdict expiry storm: %s\n", s.Verdict)
	writeCPUNote(b, runs)
}

// writePool writes the server's Postgres pool during a storm.
func writePool(b *strings.Builder, p PoolUse, during string) {
	fmt.Fprintf(b, "Postgres pool during %s (pg_stat_activity every %.0f ms, %d samples, pool of %d): in use (active or idle in "+
		"a transaction) max %d (%.0f%%), mean %.1f (%.0f%%); active max %d, mean %.1f; idle in transaction max %d, mean %.1f; "+
		"waiting on a lock max %d, mean %.1f\n",
		during, p.EveryMs, p.Samples, p.PoolSize, p.MaxInUse, 100*p.MaxShare, p.MeanInUse, 100*p.MeanShare, p.MaxActive, p.MeanActive,
		p.MaxIdleInTx, p.MeanIdleInTx, p.MaxLockWait, p.MeanLockWait)
}

// writeCPUPer writes each process's CPU per unit of a storm, "per what".
func writeCPUPer(b *strings.Builder, c *CPU, unit, what string) {
	if c == nil {
		return
	}
	var parts []string
	for _, name := range cpuOrder {
		if cell := CPUCell(c, name, unit); cell != "-" {
			parts = append(parts, cpuLabel[name]+" "+cell)
		}
	}
	fmt.Fprintf(b, "CPU µs per %s, the second sale's load aside (%s): %s\n", what, Seconds(c.WindowS), strings.Join(parts, ", "))
}

// Bytes formats a byte count: "512 B", "1.5 KB", "23.4 MB".
func Bytes(n int64) string {
	v := float64(n)
	switch {
	case n < 0:
		return "-" + Bytes(-n)
	case v >= 1e9:
		return fmt.Sprintf("%.2f GB", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1f MB", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f KB", v/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
