package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Builds is seckill-bench --compare base: two builds of the seckill binary,
// BASE and HEAD, each on a private Redis and database, under the same
// loads, alternated round by round.
type Builds struct {
	BaseBinary string      `json:"base_binary"`
	HeadBinary string      `json:"head_binary"`
	Rounds     int         `json:"rounds"`
	Loads      []BuildLoad `json:"loads"`
}

// BuildLoad is one load's runs against both builds, and how they compare.
type BuildLoad struct {
	Load LoadInfo  `json:"load"`
	Runs []*Report `json:"runs"` // base #1, head #1, base #2, head #2, ...
	// Base and Head are the medians over the rounds.
	Base BuildSide `json:"base"`
	Head BuildSide `json:"head"`
	// ThroughputRatio is head ÷ base of the medians; RoundRatios the same
	// round by round.
	ThroughputRatio float64   `json:"throughput_ratio"`
	RoundRatios     []float64 `json:"round_ratios"`
	P50Ratio        float64   `json:"p50_ratio"`
	P99Ratio        float64   `json:"p99_ratio"`
	Text            string    `json:"text"`
}

// BuildSide is one build's medians over the rounds of a load.
type BuildSide struct {
	Throughput float64 `json:"requests_per_s"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	// CPUPerAcceptedUs is each process's CPU per accepted purchase, by
	// process (ProcServer, ..., ProcSum); absent where not measured.
	CPUPerAcceptedUs map[string]float64 `json:"cpu_us_per_accepted,omitempty"`
	// CPUCoarse names the processes whose figure, in some round, was
	// coarser than a tenth (a burst is too short for 10 ms ticks).
	CPUCoarse []string `json:"cpu_coarse,omitempty"`
}

// Summarize fills the medians, the ratios and the sentence from the runs.
func (l *BuildLoad) Summarize(label string) {
	var base, head []*Report
	for _, r := range l.Runs {
		switch r.Target {
		case TargetBase:
			base = append(base, r)
		case TargetHead:
			head = append(head, r)
		}
	}
	l.Base, l.Head = side(base), side(head)
	l.RoundRatios = nil
	for i := range min(len(base), len(head)) {
		if base[i].Throughput > 0 {
			l.RoundRatios = append(l.RoundRatios, head[i].Throughput/base[i].Throughput)
		}
	}
	ratio := func(h, b float64) float64 {
		if b == 0 {
			return 0
		}
		return h / b
	}
	l.ThroughputRatio = ratio(l.Head.Throughput, l.Base.Throughput)
	l.P50Ratio, l.P99Ratio = ratio(l.Head.P50, l.Base.P50), ratio(l.Head.P99, l.Base.P99)
	rounds := make([]string, len(l.RoundRatios))
	for i, r := range l.RoundRatios {
		rounds[i] = fmt.Sprintf("%.2f", r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: head ÷ base throughput %.2f× (medians of %d rounds; round by round %s): %s vs %s requests/s; "+
		"p50 %s vs %s (%.2f×), p99 %s vs %s (%.2f×)",
		label, l.ThroughputRatio, len(l.RoundRatios), strings.Join(rounds, ", "),
		Number(int64(l.Head.Throughput+0.5)), Number(int64(l.Base.Throughput+0.5)),
		Millis(l.Head.P50), Millis(l.Base.P50), l.P50Ratio, Millis(l.Head.P99), Millis(l.Base.P99), l.P99Ratio)
	var cpu []string
	for _, name := range cpuOrder {
		h, okh := l.Head.CPUPerAcceptedUs[name]
		bs, okb := l.Base.CPUPerAcceptedUs[name]
		if okh && okb {
			mark := ""
			if slices.Contains(l.Head.CPUCoarse, name) || slices.Contains(l.Base.CPUCoarse, name) {
				mark = "~"
			}
			cpu = append(cpu, fmt.Sprintf("%s %s%s vs %s%s", cpuLabel[name], mark, Micros(h), mark, Micros(bs)))
		}
	}
	if len(cpu) > 0 {
		fmt.Fprintf(&b, "\n  CPU µs per accepted purchase, head vs base (medians): %s", strings.Join(cpu, ", "))
	}
	l.Text = b.String()
}

// side takes the medians of one build's runs.
func side(runs []*Report) BuildSide {
	var s BuildSide
	if len(runs) == 0 {
		return s
	}
	s.Throughput = median(runs, func(r *Report) (float64, bool) { return r.Throughput, true })
	s.P50 = median(runs, func(r *Report) (float64, bool) { return r.Latency.P50, true })
	s.P99 = median(runs, func(r *Report) (float64, bool) { return r.Latency.P99, true })
	for _, name := range cpuOrder {
		v := median(runs, func(r *Report) (float64, bool) {
			if r.CPU == nil {
				return 0, false
			}
			p := r.CPU.Process(name)
			if p == nil || p.Missing != "" {
				return 0, false
			}
			v, ok := p.PerUnitUs[UnitAccepted]
			if ok && p.Coarse() && !slices.Contains(s.CPUCoarse, name) {
				s.CPUCoarse = append(s.CPUCoarse, name)
			}
			return v, ok
		})
		if v > 0 {
			if s.CPUPerAcceptedUs == nil {
				s.CPUPerAcceptedUs = map[string]float64{}
			}
			s.CPUPerAcceptedUs[name] = v
		}
	}
	return s
}

// median returns the median of the values of runs that have one (the mean
// of the middle two of an even count), or 0.
func median(runs []*Report, of func(*Report) (float64, bool)) float64 {
	var vs []float64
	for _, r := range runs {
		if v, ok := of(r); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0
	}
	slices.SortFunc(vs, cmp.Compare[float64])
	if n := len(vs); n%2 == 1 {
		return vs[n/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// writeBuilds writes a --compare base result: each load's runs side by side,
// their verdicts, and how HEAD compares with BASE.
func (res *Result) writeBuilds(b *strings.Builder) {
	bc := res.Builds
	fmt.Fprintf(b, "seckill-bench --compare base: HEAD %s against BASE %s, %d rounds alternated (base first in odd rounds, head in even ones), "+
		"each on a private redis-server and database", bc.HeadBinary, bc.BaseBinary, bc.Rounds)
	if res.Interrupted {
		b.WriteString(" — INTERRUPTED, partial results")
	}
	b.WriteString("\n")
	var all []*Report
	for _, l := range bc.Loads {
		b.WriteString("\n" + loadHeadline(l.Load) + "\n\n")
		writeRunTable(b, l.Load.Mode, l.Runs)
		b.WriteString("\n")
		writeVerdicts(b, l.Runs)
		all = append(all, l.Runs...)
	}
	b.WriteString("\n")
	for _, l := range bc.Loads {
		b.WriteString(l.Text + "\n")
	}
	writeCPUNote(b, all)
}
