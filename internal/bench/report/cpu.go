package report

import (
	"fmt"
	"slices"
	"strings"
)

// The processes a CPU report names, and their sum.
const (
	ProcServer   = "server"   // the process listening on the server's port (workers included)
	ProcRedis    = "redis"    // the redis-server(s) on the Redis URL's port(s)
	ProcPostgres = "postgres" // the postmaster on the database URL's port and its children of the run's database
	ProcBench    = "bench"    // seckill-bench itself: the load generator and the verifier
	ProcSum      = "sum"      // server + Redis + Postgres
)

// The units CPU time is divided by.
const (
	UnitAccepted  = "accepted"  // ACCEPTED answers
	UnitPersisted = "persisted" // the run's orders in Postgres
	UnitExpired   = "expired"   // orders EXPIRED (the expiry storm)
)

// CPU is the CPU time each local process spent over a window of a run,
// read from /proc (utime+stime in clock ticks), and the same per unit
// sold, persisted or expired.
type CPU struct {
	WindowS float64 `json:"window_s"`
	TickMs  float64 `json:"tick_ms"` // the resolution of every reading
	// Units is what the per-unit figures divide by.
	Units     map[string]int64 `json:"units"`
	Processes []ProcessCPU     `json:"processes"`
}

// ProcessCPU is one process (or group of processes) of a CPU report.
type ProcessCPU struct {
	Name string `json:"name"` // one of the Proc constants
	PIDs []int  `json:"pids,omitempty"`
	// Seconds is its CPU time over the window, within ±ErrorS: each
	// process's reading is truncated to a whole tick.
	Seconds float64 `json:"cpu_s"`
	ErrorS  float64 `json:"error_s"`
	// PerUnitUs is Seconds per unit, in µs, by unit.
	PerUnitUs map[string]float64 `json:"us_per,omitempty"`
	// OtherS is CPU of its process tree that is not the run's: Postgres's
	// backends of other databases and its exited (reaped) children.
	OtherS float64 `json:"other_cpu_s,omitempty"`
	// Missing says why it was not measured; the figures are then zero.
	Missing string `json:"missing,omitempty"`
	// Gone says its process ended during the window.
	Gone bool `json:"gone,omitempty"`
}

// NotUsed is the Missing of a process the run has none of (the sync
// design's Redis, the ceiling's Postgres): nothing to say about it.
const NotUsed = "the run uses none"

// Coarse reports whether the ticks' resolution is more than a tenth of the
// figure: the run was too short to tell.
func (p ProcessCPU) Coarse() bool { return p.Missing == "" && p.ErrorS > 0.1*p.Seconds }

// Process returns the named process's figures, or nil.
func (c *CPU) Process(name string) *ProcessCPU {
	for i := range c.Processes {
		if c.Processes[i].Name == name {
			return &c.Processes[i]
		}
	}
	return nil
}

// PerUnit returns the µs per unit of the named process, or 0 when it was
// not measured.
func (c *CPU) PerUnit(name, unit string) float64 {
	if c == nil {
		return 0
	}
	if p := c.Process(name); p != nil && p.Missing == "" {
		return p.PerUnitUs[unit]
	}
	return 0
}

// AddSum appends the sum of server, Redis and Postgres, and fills every
// process's figures per unit.
func (c *CPU) AddSum() {
	sum := ProcessCPU{Name: ProcSum}
	var missing []string
	for _, name := range []string{ProcServer, ProcRedis, ProcPostgres} {
		p := c.Process(name)
		if p == nil || p.Missing != "" {
			missing = append(missing, name)
			continue
		}
		sum.Seconds += p.Seconds
		sum.ErrorS += p.ErrorS
	}
	if len(missing) > 0 {
		sum = ProcessCPU{Name: ProcSum, Missing: strings.Join(missing, ", ") + " not measured"}
	}
	c.Processes = append(c.Processes, sum)
	for i := range c.Processes {
		p := &c.Processes[i]
		if p.Missing != "" {
			continue
		}
		p.PerUnitUs = map[string]float64{}
		for unit, n := range c.Units {
			if n > 0 {
				p.PerUnitUs[unit] = p.Seconds * 1e6 / float64(n)
			}
		}
	}
}

// cpuOrder is the order of the text report's rows.
var cpuOrder = []string{ProcServer, ProcRedis, ProcPostgres, ProcSum, ProcBench}

var cpuLabel = map[string]string{ProcServer: "server", ProcRedis: "Redis", ProcPostgres: "Postgres",
	ProcSum: "server+Redis+Postgres", ProcBench: "bench"}

// cpuRows: each process's CPU per accepted purchase and per persisted
// order, over the window from the start of the load until the last
// accepted order was in Postgres.
func (t *runTable) cpuRows() {
	if !t.any(func(r *Report) bool { return r.CPU != nil }) {
		return
	}
	t.row("CPU window (/proc)", func(r *Report) string {
		if r.CPU == nil {
			return "-"
		}
		return Seconds(r.CPU.WindowS)
	})
	t.row("CPU µs per accepted / persisted", func(*Report) string { return "" })
	for _, name := range cpuOrder {
		t.row("  "+cpuLabel[name], func(r *Report) string {
			if r.CPU == nil {
				return "-"
			}
			return CPUCell(r.CPU, name, UnitAccepted, UnitPersisted)
		})
	}
	if t.any(func(r *Report) bool { p := r.CPU.maybe(ProcPostgres); return p != nil && p.OtherS > 0 }) {
		t.row("  Postgres, not the run's (s)", func(r *Report) string {
			p := r.CPU.maybe(ProcPostgres)
			if p == nil || p.Missing != "" {
				return "-"
			}
			return fmt.Sprintf("%.2f", p.OtherS)
		})
	}
}

func (c *CPU) maybe(name string) *ProcessCPU {
	if c == nil {
		return nil
	}
	return c.Process(name)
}

// CPUCell formats the named process's µs per each unit, "110 / 111 ±0.4";
// "~" marks figures coarser than a tenth, "-" a process not measured.
func CPUCell(c *CPU, name string, units ...string) string {
	p := c.maybe(name)
	if p == nil || p.Missing != "" {
		return "-"
	}
	mark := ""
	if p.Coarse() {
		mark = "~"
	}
	var parts []string
	var errUs float64
	for _, u := range units {
		v, ok := p.PerUnitUs[u]
		if !ok {
			parts = append(parts, "-")
			continue
		}
		parts = append(parts, mark+Micros(v))
		if n := c.Units[u]; n > 0 && errUs == 0 {
			errUs = p.ErrorS * 1e6 / float64(n)
		}
	}
	return strings.Join(parts, " / ") + " ±" + Micros(errUs)
}

// Micros formats microseconds with about three significant digits.
func Micros(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// writeCPUNote explains the CPU rows once, and says for each run what was
// not measured.
func writeCPUNote(b *strings.Builder, runs []*Report) {
	if !slices.ContainsFunc(runs, func(r *Report) bool { return r.CPU != nil }) {
		return
	}
	b.WriteString("CPU: utime+stime of each local process from /proc, in clock ticks of " +
		fmt.Sprintf("%.0f ms", runs[slices.IndexFunc(runs, func(r *Report) bool { return r.CPU != nil })].CPU.TickMs) +
		", from the start of the load until the last accepted order was in Postgres; ± is the ticks' " +
		"resolution (one tick per process), and ~ marks a figure coarser than a tenth: run longer. " +
		"Postgres counts its postmaster, its shared processes and the backends of the run's database; " +
		"other databases' backends and exited backends are shown apart, not counted.\n")
	for _, r := range runs {
		if r.CPU == nil {
			continue
		}
		for _, p := range r.CPU.Processes {
			switch {
			case p.Missing != "" && p.Missing != NotUsed && p.Name != ProcSum:
				fmt.Fprintf(b, "  cpu %s: %s not measured: %s\n", r.Label(), cpuLabel[p.Name], p.Missing)
			case p.Gone:
				fmt.Fprintf(b, "  cpu %s: %s ended during the window: its figure is short\n", r.Label(), cpuLabel[p.Name])
			}
		}
	}
}
