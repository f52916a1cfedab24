package report

import (
	"math"
	"strings"
	"testing"
)

func TestSpearman(t *testing.T) {
	for _, tc := range []struct {
		name string
		x, y []float64
		rho  float64
	}{
		{"same order", []float64{1, 2, 3, 4, 5}, []float64{10, 20, 30, 40, 50}, 1},
		{"reversed", []float64{1, 2, 3, 4, 5}, []float64{5, 4, 3, 2, 1}, -1},
		{"monotone, not linear", []float64{1, 2, 3, 4}, []float64{1, 8, 27, 1000}, 1},
		// Ranks x 1..5, y 2,1,4,3,5: d² = 1+1+1+1+0 = 4, rho = 1 - 6·4/(5·24) = 0.8.
		{"swapped pairs", []float64{1, 2, 3, 4, 5}, []float64{2, 1, 4, 3, 5}, 0.8},
		// Ties take their mean rank: y ranks 1.5, 1.5, 3; Pearson of the ranks.
		{"ties", []float64{1, 2, 3}, []float64{7, 7, 9}, math.Sqrt(3) / 2},
	} {
		c := Spearman(tc.x, tc.y)
		if math.Abs(c.Rho-tc.rho) > 1e-9 || c.N != len(tc.x) || math.Abs(c.SE-1/math.Sqrt(float64(len(tc.x)-1))) > 1e-12 {
			t.Errorf("%s: %+v, want rho %v", tc.name, c, tc.rho)
		}
	}
	if c := Spearman([]float64{1, 2}, []float64{1, 2}); c.N != 2 || c.Rho != 0 || c.SE != 0 {
		t.Errorf("two pairs: %+v", c)
	}
	if c := Spearman([]float64{1, 2, 3}, []float64{4, 4, 4}); c.Rho != 0 || c.SE != 0 {
		t.Errorf("a constant series: %+v", c)
	}
}

// The room's verdicts: a purchase without a pass accepted, or a buyer
// accepted without a turn, fails; so does unsold stock when every buyer
// went through without an error.
func TestRoomJudge(t *testing.T) {
	ok := func() *Report {
		return &Report{Target: TargetSeckill, Stock: 5, Accepted: 5, Outcomes: map[string]int64{"ACCEPTED": 5},
			Room: &Room{Buyers: 20, NoPass: map[string]int64{"PASS_REQUIRED": 10}}}
	}
	r := ok()
	r.Judge()
	if !r.OK {
		t.Errorf("a clean room run: %s", r.Verdict)
	}
	for name, tc := range map[string]struct {
		mod  func(r *Report)
		want string
	}{
		"accepted without a pass": {func(r *Report) { r.Room.NoPass["ACCEPTED"] = 1 }, "NO PASS: 1 purchases without a pass"},
		"accepted without a turn": {func(r *Report) { r.Room.AcceptedWithoutTurn = 2 }, "NO PASS: 2 buyers the room never let through"},
		"unsold":                  {func(r *Report) { r.Accepted, r.Outcomes["ACCEPTED"] = 4, 4 }, "UNSOLD: 4 accepted of 5 units"},
	} {
		r := ok()
		tc.mod(r)
		r.Judge()
		if r.OK || !strings.Contains(r.Verdict, tc.want) {
			t.Errorf("%s: %s", name, r.Verdict)
		}
	}
	r = ok()
	r.Accepted, r.Room.Failed, r.Room.Error = 4, 1, "status: timeout"
	r.Judge()
	if !r.OK || !strings.Contains(r.Verdict, "1 buyers failed in the room") {
		t.Errorf("a buyer who failed in the room: %s", r.Verdict)
	}
}
