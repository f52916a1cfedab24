package report

import (
	"fmt"
	"strings"
)

// Compare relates the runs that have something to say to each other:
// seckill to the sync design and to the ceiling, HS256 tokens to an
// identity provider's RS256 and ES256, Redis's appendfsync
// always to everysec, WAIT for a replica to none, and the shared limit to
// none, in the order of runs.
func Compare(runs []*Report) []Comparison {
	byTarget := map[string]*Report{}
	for _, r := range runs {
		byTarget[r.Target] = r
	}
	var out []Comparison
	for _, o := range runs {
		switch o.Target {
		case TargetSync, TargetCeiling, TargetRS256, TargetES256:
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

// relate compares base with other: ratios base/other and a sentence.
func relate(base, o *Report) Comparison {
	c := Comparison{Base: base.Target, Other: o.Target}
	if o.Throughput > 0 {
		c.ThroughputRatio = base.Throughput / o.Throughput
	}
	if o.Latency.P50 > 0 {
		c.P50Ratio = base.Latency.P50 / o.Latency.P50
	}
	if o.Latency.P99 > 0 {
		c.P99Ratio = base.Latency.P99 / o.Latency.P99
	}
	figures := fmt.Sprintf("%s vs %s requests/s; p99 %s vs %s", Number(int64(base.Throughput)), Number(int64(o.Throughput)),
		Millis(base.Latency.P99), Millis(o.Latency.P99))
	switch o.Target {
	case TargetCeiling:
		c.Text = fmt.Sprintf("%s reaches %.2f of the ceiling's throughput (%s)", base.Target, c.ThroughputRatio, figures)
	case TargetEverysec:
		c.Text = fmt.Sprintf("appendfsync always: %.2f× the throughput of everysec, p50 %.2f×, p99 %.2f× (%s; p50 %s vs %s)",
			c.ThroughputRatio, c.P50Ratio, c.P99Ratio, figures, Millis(base.Latency.P50), Millis(o.Latency.P50))
	case TargetRS256, TargetES256:
		c.Text = fmt.Sprintf("HS256 tokens: %.2f× the throughput of %s tokens, p50 %.2f×, p99 %.2f× (%s; p50 %s vs %s)",
			c.ThroughputRatio, strings.ToUpper(o.Target), c.P50Ratio, c.P99Ratio, figures, Millis(base.Latency.P50), Millis(o.Latency.P50))
	case TargetNoWait:
		c.Text = fmt.Sprintf("WAIT for 1 replica: %.2f× the throughput without, p50 %.2f×, p99 %.2f× (%s; p50 %s vs %s)",
			c.ThroughputRatio, c.P50Ratio, c.P99Ratio, figures, Millis(base.Latency.P50), Millis(o.Latency.P50))
	case TargetNoLimit:
		c.Text = fmt.Sprintf("shared limit per user and per address: %.2f× the throughput without, p50 %.2f×, p99 %.2f× (%s; p50 %s vs %s)",
			c.ThroughputRatio, c.P50Ratio, c.P99Ratio, figures, Millis(base.Latency.P50), Millis(o.Latency.P50))
		// The comparison prices the check, not its refusals: a refused
		// purchase is cheaper than an accepted one.
		if n := base.Outcomes["RATE_LIMITED"]; n > 0 {
			c.Text += fmt.Sprintf("; NOT A MEASURE OF THE CHECK: %s purchases were RATE_LIMITED", Number(n))
		}
	default:
		c.Text = fmt.Sprintf("%s serves %.1f× the throughput of %s (%s)", base.Target, c.ThroughputRatio, o.Target, figures)
	}
	return c
}
