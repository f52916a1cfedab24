package report

import (
	"fmt"
	"strings"
)

// MasterLoad is what one Redis master did during a run (--shards), from
// INFO commandstats and INFO cpu before and after it: the admission
// scripts it ran (EVALSHA and EVAL calls), their share of every master's,
// and its CPU time.
type MasterLoad struct {
	Addr    string  `json:"addr"`
	Scripts int64   `json:"scripts"`
	Share   float64 `json:"share"`
	CPUS    float64 `json:"cpu_s"`
}

// Busiest returns the master that ran most scripts, or nil.
func Busiest(ms []MasterLoad) *MasterLoad {
	var b *MasterLoad
	for i := range ms {
		if b == nil || ms[i].Scripts > b.Scripts {
			b = &ms[i]
		}
	}
	return b
}

// masterRows: with --shards, each run's campaign shards, how the scripts
// spread over the masters, and the busiest master's share and CPU per
// admission (accepted or not: every answer from Redis ran one script).
func (t *runTable) masterRows() {
	if !t.any(func(r *Report) bool { return len(r.Masters) > 0 }) {
		return
	}
	t.row("stock shards", func(r *Report) string { return fmt.Sprint(max(r.Shards, 1)) })
	t.row("scripts by master", func(r *Report) string {
		var parts []string
		for _, m := range r.Masters {
			parts = append(parts, fmt.Sprintf("%.0f%%", 100*m.Share))
		}
		return strings.Join(parts, "/")
	})
	t.row("busiest master's share", func(r *Report) string {
		if b := Busiest(r.Masters); b != nil {
			return fmt.Sprintf("%.0f%% (%s)", 100*b.Share, b.Addr)
		}
		return "—"
	})
	t.row("Redis CPU per script, busiest", func(r *Report) string {
		if b := Busiest(r.Masters); b != nil && b.Scripts > 0 {
			return Micros(1e6*b.CPUS/float64(b.Scripts)) + " µs"
		}
		return "—"
	})
}
