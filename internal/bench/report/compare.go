package report

import (
	"fmt"
	"slices"
	"strings"
)

// Compare relates the runs that have something to say to each other:
// seckill to the sync design and to the ceiling, HS256 tokens to an
// identity provider's RS256 and ES256, Redis's appendfsync
// always to everysec, WAIT for a replica to none, and the shared limit to
// none, in the order of runs. A target run in several rounds (--rounds
// with --compare ceiling) is related by the medians of its rounds, and
// round by round.
func Compare(runs []*Report) []Comparison {
	byTarget := map[string][]*Report{}
	var order []string
	for _, r := range runs {
		if byTarget[r.Target] == nil {
			order = append(order, r.Target)
		}
		byTarget[r.Target] = append(byTarget[r.Target], r)
	}
	var out []Comparison
	for _, target := range order {
		o := byTarget[target]
		switch target {
		case TargetSync, TargetCeiling, TargetCeilingProcess, TargetRS256, TargetES256:
			if base := byTarget[TargetSeckill]; base != nil {
				out = append(out, relate(base, o))
			}
		case TargetAlways:
			if base := byTarget[TargetEverysec]; base != nil {
				out = append(out, relate(o, base))
			}
		case TargetWait:
			if base := byTarget[TargetNoWait]; base != nil {
				out = append(out, relate(o, base))
			}
		case TargetLimit:
			if base := byTarget[TargetNoLimit]; base != nil {
				out = append(out, relate(o, base))
			}
		}
	}
	return out
}

// relate compares base's runs with other's: ratios base/other of their
// medians (of one run each, the runs' own figures), and a sentence.
func relate(baseRuns, otherRuns []*Report) Comparison {
	base, o := side(baseRuns), side(otherRuns)
	bt, ot := baseRuns[0].Target, otherRuns[0].Target
	c := Comparison{Base: bt, Other: ot}
	if o.Throughput > 0 {
		c.ThroughputRatio = base.Throughput / o.Throughput
	}
	if o.P50 > 0 {
		c.P50Ratio = base.P50 / o.P50
	}
	if o.P99 > 0 {
		c.P99Ratio = base.P99 / o.P99
	}
	figures := fmt.Sprintf("%s vs %s requests/s; p99 %s vs %s", Number(int64(base.Throughput)), Number(int64(o.Throughput)),
		Millis(base.P99), Millis(o.P99))
	if len(baseRuns) > 1 || len(otherRuns) > 1 {
		c.Rounds = min(len(baseRuns), len(otherRuns))
		rounds := make([]string, 0, c.Rounds)
		for i := range c.Rounds {
			if t := otherRuns[i].Throughput; t > 0 {
				c.RoundRatios = append(c.RoundRatios, baseRuns[i].Throughput/t)
				rounds = append(rounds, fmt.Sprintf("%.2f", c.RoundRatios[len(c.RoundRatios)-1]))
			}
		}
		figures = fmt.Sprintf("medians of %d rounds, round by round %s: %s", c.Rounds, strings.Join(rounds, ", "), figures)
	}
	switch ot {
	case TargetCeiling:
		c.Text = fmt.Sprintf("%s reaches %.2f of the ceiling's throughput (%s)", bt, c.ThroughputRatio, figures)
	case TargetCeilingProcess:
		c.Text = fmt.Sprintf("%s reaches %.2f of the ceiling's throughput with the ceiling in a process of its own (%s)", bt, c.ThroughputRatio, figures)
	case TargetEverysec:
		c.Text = fmt.Sprintf("appendfsync always: %.2f× the throughput of everysec, p50 %.2f×, p99 %.2f× (%s; p50 %s vs %s)",
			c.ThroughputRatio, c.P50Ratio, c.P99Ratio, figures, Millis(base.P50), Millis(o.P50))
	case TargetRS256, TargetES256:
		c.Text = fmt.Sprintf("HS256 tokens: %.2f× the throughput of %s tokens, p50 %.2f×, p99 %.2f× (%s; p50 %s vs %s)",
			c.ThroughputRatio, strings.ToUpper(ot), c.P50Ratio, c.P99Ratio, figures, Millis(base.P50), Millis(o.P50))
	case TargetNoWait:
		c.Text = fmt.Sprintf("WAIT for 1 replica: %.2f× the throughput without, p50 %.2f×, p99 %.2f× (%s; p50 %s vs %s)",
			c.ThroughputRatio, c.P50Ratio, c.P99Ratio, figures, Millis(base.P50), Millis(o.P50))
	case TargetNoLimit:
		c.Text = fmt.Sprintf("shared limit per user and per address: %.2f× the throughput without, p50 %.2f×, p99 %.2f× (%s; p50 %s vs %s)",
			c.ThroughputRatio, c.P50Ratio, c.P99Ratio, figures, Millis(base.P50), Millis(o.P50))
		// The comparison prices the check, not its refusals: a refused
		// purchase is cheaper than an accepted one.
		var limited int64
		for _, r := range baseRuns {
			limited += r.Outcomes["RATE_LIMITED"]
		}
		if limited > 0 {
			c.Text += fmt.Sprintf("; NOT A MEASURE OF THE CHECK: %s purchases were RATE_LIMITED", Number(limited))
		}
	default:
		c.Text = fmt.Sprintf("%s serves %.1f× the throughput of %s (%s)", bt, c.ThroughputRatio, ot, figures)
	}
	if c.Rounds > 0 {
		var cpu []string
		for _, s := range []struct {
			target string
			side   BuildSide
		}{{bt, base}, {ot, o}} {
			if f := s.side.cpuFigures(); f != "" {
				cpu = append(cpu, s.target+" "+f)
			}
		}
		if len(cpu) > 0 {
			c.Text += "\n  CPU µs per accepted purchase (medians): " + strings.Join(cpu, "; ")
		}
	}
	return c
}

// cpuFigures lists the side's CPU per accepted purchase by process, "~"
// before a figure some round measured too coarsely.
func (s BuildSide) cpuFigures() string {
	var out []string
	for _, name := range cpuOrder {
		v, ok := s.CPUPerAcceptedUs[name]
		if !ok {
			continue
		}
		mark := ""
		if slices.Contains(s.CPUCoarse, name) {
			mark = "~"
		}
		out = append(out, fmt.Sprintf("%s %s%s", cpuLabel[name], mark, Micros(v)))
	}
	return strings.Join(out, ", ")
}
