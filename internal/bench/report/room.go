package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// Room is what a run through a campaign's waiting room came to
// (seckill-bench --waiting-room).
type Room struct {
	Rate   int     `json:"admit_per_second"`
	OpensS float64 `json:"opens_s_before"`
	PassS  float64 `json:"pass_s,omitempty"` // 0: the server's default

	Buyers           int64  `json:"buyers"`
	Joined           int64  `json:"joined"`
	JoinedBeforeOpen int64  `json:"joined_before_open"`
	LetThrough       int64  `json:"let_through"` // heard YOUR_TURN, with a pass
	Missed           int64  `json:"missed"`      // their turn passed unused
	SoldOut          int64  `json:"sold_out"`    // heard SOLD_OUT in line
	Ended            int64  `json:"ended"`
	Failed           int64  `json:"failed"` // buyers whose way through the room failed
	Error            string `json:"error,omitempty"`
	// AcceptedWithoutTurn counts ACCEPTED answers to buyers the room never
	// let through: what only a purchase without a valid pass could get.
	AcceptedWithoutTurn int64 `json:"accepted_without_turn"`
	// NoPass is the outcomes of the purchases sent without a pass (or with
	// a forged one) just after the open: each must be PASS_REQUIRED.
	NoPass      map[string]int64 `json:"no_pass"`
	NoPassError string           `json:"no_pass_error,omitempty"`

	// PerSecond counts the purchases with a pass, and those accepted, by
	// the second of the sale they left in (0: the first).
	PerSecond []RoomSecond `json:"per_second"`
	// Fairness relates when the buyers who joined before the open joined
	// to their place in line.
	Fairness Correlation `json:"fairness"`
}

// RoomSecond is one second of a sale through a waiting room.
type RoomSecond struct {
	Second    int64 `json:"second"`
	Purchases int64 `json:"purchases"`
	Accepted  int64 `json:"accepted"`
}

// Correlation is Spearman's rank correlation of n pairs, with its standard
// error under independence, 1/sqrt(n-1).
type Correlation struct {
	N   int     `json:"n"`
	Rho float64 `json:"rho"`
	SE  float64 `json:"se"`
}

// Spearman returns the rank correlation of x and y (of equal length):
// Pearson's correlation of their ranks, ties ranked by their mean. Fewer
// than three pairs, or a constant series, give N alone.
func Spearman(x, y []float64) Correlation {
	c := Correlation{N: len(x)}
	if len(x) < 3 || len(x) != len(y) {
		return c
	}
	rx, ry := ranks(x), ranks(y)
	var mx, my float64
	for i := range rx {
		mx += rx[i]
		my += ry[i]
	}
	mx /= float64(len(rx))
	my /= float64(len(ry))
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mx, ry[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return c
	}
	c.Rho = sxy / math.Sqrt(sxx*syy)
	c.SE = 1 / math.Sqrt(float64(len(x)-1))
	return c
}

// ranks returns the 1-based rank of each value, ties given their mean rank.
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	out := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		mean := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			out[idx[k]] = mean
		}
		i = j + 1
	}
	return out
}

// judge adds the room's verdicts: nobody bought without their turn, every
// purchase without a pass was refused, and, when every buyer got through
// the room without an error and there were enough of them, exactly the
// stock sold.
func (rm *Room) judge(fails, notes []string, accepted, stock int64, interrupted bool) ([]string, []string) {
	if rm.AcceptedWithoutTurn > 0 {
		fails = append(fails, fmt.Sprintf("NO PASS: %s buyers the room never let through were accepted", Number(rm.AcceptedWithoutTurn)))
	}
	if n := rm.NoPass["ACCEPTED"]; n > 0 {
		fails = append(fails, fmt.Sprintf("NO PASS: %s purchases without a pass were accepted", Number(n)))
	}
	var probes, refused int64
	for o, n := range rm.NoPass {
		probes += n
		if o == "PASS_REQUIRED" {
			refused += n
		}
	}
	if probes > refused {
		notes = append(notes, fmt.Sprintf("%s of %s purchases without a pass answered other than PASS_REQUIRED", Number(probes-refused), Number(probes)))
	}
	if rm.NoPassError != "" {
		notes = append(notes, "a purchase without a pass failed: "+rm.NoPassError)
	}
	switch {
	case interrupted || rm.Failed > 0:
	case accepted != min(stock, rm.Buyers):
		fails = append(fails, fmt.Sprintf("UNSOLD: %s accepted of %s units, though %s buyers went through the room without an error",
			Number(accepted), Number(stock), Number(rm.Buyers)))
	}
	if rm.Failed > 0 {
		notes = append(notes, fmt.Sprintf("%s buyers failed in the room, e.g. %s", Number(rm.Failed), rm.Error))
	}
	return fails, notes
}

// write adds the room's section of the text report.
func (rm *Room) write(b *strings.Builder, label string) {
	pass := "the server's default"
	if rm.PassS > 0 {
		pass = Seconds(rm.PassS)
	}
	fmt.Fprintf(b, "waiting room %s: opens %s before the sale, %s turns a second, a pass lasts %s\n",
		label, Seconds(rm.OpensS), Number(int64(rm.Rate)), pass)
	fmt.Fprintf(b, "  buyers %s: joined %s (%s before the open), let through %s, missed their turn %s, heard sold out %s, ended %s, failed %s\n",
		Number(rm.Buyers), Number(rm.Joined), Number(rm.JoinedBeforeOpen), Number(rm.LetThrough), Number(rm.Missed),
		Number(rm.SoldOut), Number(rm.Ended), Number(rm.Failed))
	var parts []string
	for _, o := range slices.SortedFunc(maps.Keys(rm.NoPass), func(a, b string) int { return cmp.Compare(a, b) }) {
		parts = append(parts, fmt.Sprintf("%s %s", Number(rm.NoPass[o]), o))
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "  purchases without a pass: %s\n", strings.Join(parts, ", "))
	}
	if f := rm.Fairness; f.N >= 3 {
		fmt.Fprintf(b, "  fairness: Spearman's rho between join time and place, %s joiners before the open: %+.3f ± %.3f (|rho|/se %.1f; near 0: joining early gave no edge)\n",
			Number(int64(f.N)), f.Rho, f.SE, math.Abs(f.Rho)/f.SE)
	} else {
		fmt.Fprintf(b, "  fairness: too few joiners before the open with a known place (%d)\n", f.N)
	}
	if len(rm.PerSecond) > 0 {
		b.WriteString("  purchases with a pass by second of the sale (accepted):")
		for _, s := range rm.PerSecond {
			fmt.Fprintf(b, " %d: %s (%s)", s.Second, Number(s.Purchases), Number(s.Accepted))
			if s != rm.PerSecond[len(rm.PerSecond)-1] {
				b.WriteString(";")
			}
		}
		b.WriteString("\n")
	}
}
