package seckill

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The difficulty of a proof of work: omitted takes the default, a given
// one is checked as given (0 included), for creation and for a guard
// change alike; Validate leaves its input as it was.
func TestPoWBits(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		kind    ChallengeKind
		bits    *int
		invalid bool
		want    int // the campaign's difficulty
	}{
		{"omitted", ChallengePoW, nil, false, DefaultPoWBits},
		{"1", ChallengePoW, new(1), false, 1},
		{"32", ChallengePoW, new(32), false, 32},
		{"0", ChallengePoW, new(0), true, 0},
		{"33", ChallengePoW, new(33), true, 0},
		{"-1", ChallengePoW, new(-1), true, 0},
		{"a quiz omits it", ChallengeQuiz, nil, false, 0},
		{"a quiz ignores a good one", ChallengeQuiz, new(12), false, 0},
		{"a quiz refuses a bad one", ChallengeQuiz, new(0), true, 0},
	}
	quiz := []QuizQuestion{{Question: "2+2?", Answers: []string{"4"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := NewSeckillVoucher{ShopID: 1, Title: "  sale  ", Stock: 1, BeginTime: now, EndTime: now.Add(time.Hour),
				Challenge: tt.kind, PoWBits: tt.bits}
			if tt.kind == ChallengeQuiz {
				in.Quiz = quiz
			}
			was := in
			err := in.Validate(now)
			if diff := cmp.Diff(was, in); diff != "" {
				t.Errorf("Validate changed its input (-before +after):\n%s", diff)
			}
			if got := ErrorField(err); tt.invalid && got != "powBits" || !tt.invalid && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			e := GuardEdit{Challenge: tt.kind, PoWBits: tt.bits, Quiz: in.Quiz}
			if err := e.Validate(); tt.invalid && ErrorField(err) != "powBits" || !tt.invalid && err != nil {
				t.Fatalf("GuardEdit.Validate: %v", err)
			}
			if tt.invalid {
				return
			}
			if got := in.Difficulty(); got != tt.want {
				t.Errorf("NewSeckillVoucher.Difficulty = %d, want %d", got, tt.want)
			}
			if got := e.Difficulty(); got != tt.want {
				t.Errorf("GuardEdit.Difficulty = %d, want %d", got, tt.want)
			}
			n := in.Normalized()
			if n.Title != "sale" || n.Challenge != tt.kind {
				t.Errorf("Normalized: title %q, challenge %s", n.Title, n.Challenge)
			}
			if got := n.Difficulty(); got != tt.want {
				t.Errorf("Normalized().Difficulty = %d, want %d", got, tt.want)
			}
		})
	}
	if n := (NewSeckillVoucher{}).Normalized(); n.Challenge != ChallengeNone || n.PoWBits != nil {
		t.Errorf("an empty challenge normalizes to %s with bits %v, want NONE and none", n.Challenge, n.PoWBits)
	}
}

// Validate names every field that is wrong, in the input's order, and
// changes nothing of its input.
func TestValidateReturnsEveryFieldError(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	bits := 0
	in := NewSeckillVoucher{Title: "  ", ShopID: 0, PayValue: -1, Stock: 0, PayWindow: time.Millisecond,
		EndTime: now.Add(-time.Hour), Brake: -1, Challenge: ChallengePoW, PoWBits: &bits}
	before := in
	err := in.Validate(now)
	var got []string
	for _, e := range AllFieldErrors(err) {
		got = append(got, e.Field)
	}
	want := []string{"title", "shopId", "payValue", "stock", "payWindow", "beginTime", "endTime", "brake", "powBits"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("fields %v, want %v", got, want)
	}
	if ErrorCode(err) != EINVALID || ErrorField(err) != "title" || ErrorMessage(err) != "title is required" {
		t.Errorf("as one error: %s %s %q", ErrorCode(err), ErrorField(err), ErrorMessage(err))
	}
	if in.Title != before.Title || in.PoWBits != before.PoWBits || in.Challenge != before.Challenge {
		t.Errorf("Validate changed its input: %+v", in)
	}
}
