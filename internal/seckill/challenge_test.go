package seckill

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestChallengeCheck(t *testing.T) {
	c := NewChallenger([]byte("a secret of at least thirty-two bytes"), time.Minute, time.Minute)
	now := time.Now()
	quiz := []QuizQuestion{{Question: "Name a primary colour", Answers: []string{"Red", "dark  blue"}}}
	q := c.Issue(ChallengeQuiz, 3, 7, 0, quiz, now)
	pow := c.Issue(ChallengePoW, 3, 7, 6, nil, now)
	sol := SolvePoW(pow.Token, 6)
	tamper := func(tok string) string { // flip one byte of the payload
		b := []byte(tok)
		b[2] ^= 1
		return string(b)
	}
	tests := []struct {
		name    string
		a       ChallengeAnswer
		voucher int64
		user    int64
		at      time.Time
		want    Outcome // "" for a good ticket
		spends  bool    // the ticket carries the token's nonce, to spend it
	}{
		{"quiz answer, other case and spaces", ChallengeAnswer{q.Token, "  RED "}, 3, 7, now, "", true},
		{"quiz second answer", ChallengeAnswer{q.Token, "Dark Blue"}, 3, 7, now, "", true},
		// A wrong answer to our token spends it: one guess a token.
		{"quiz wrong answer", ChallengeAnswer{q.Token, "green"}, 3, 7, now, OutcomeChallengeWrong, true},
		{"quiz empty answer", ChallengeAnswer{q.Token, ""}, 3, 7, now, OutcomeChallengeWrong, true},
		// A token we cannot trust spends nothing: its nonce is not ours to
		// mark.
		{"another user", ChallengeAnswer{q.Token, "red"}, 3, 8, now, OutcomeChallengeNotYours, false},
		{"another campaign", ChallengeAnswer{q.Token, "red"}, 4, 7, now, OutcomeChallengeNotYours, false},
		{"expired", ChallengeAnswer{q.Token, "red"}, 3, 7, now.Add(time.Minute), OutcomeChallengeExpired, false},
		{"expired and wrong", ChallengeAnswer{q.Token, "green"}, 3, 7, now.Add(time.Minute), OutcomeChallengeExpired, false},
		{"tampered", ChallengeAnswer{tamper(q.Token), "red"}, 3, 7, now, OutcomeChallengeWrong, false},
		{"not a token", ChallengeAnswer{"garbage", "red"}, 3, 7, now, OutcomeChallengeWrong, false},
		{"too long", ChallengeAnswer{strings.Repeat("a", 5000), "red"}, 3, 7, now, OutcomeChallengeWrong, false},
		{"pow solved", ChallengeAnswer{pow.Token, sol}, 3, 7, now, "", true},
		{"pow not a number", ChallengeAnswer{pow.Token, "1e3"}, 3, 7, now, OutcomeChallengeWrong, true},
	}
	for _, tt := range tests {
		got := c.Check(tt.a, tt.voucher, tt.user, tt.at)
		if got.Refusal != tt.want {
			t.Errorf("%s: refusal %q, want %q", tt.name, got.Refusal, tt.want)
		}
		if tt.spends && (got.Nonce == "" || got.Kind == "" || !got.ExpiresAt.After(now)) {
			t.Errorf("%s: ticket %+v lacks its nonce, kind or expiry", tt.name, got)
		}
		if !tt.spends && (got.Nonce != "" || got.Kind != "") {
			t.Errorf("%s: ticket %+v would spend a token it cannot trust", tt.name, got)
		}
	}
	// A counter that does not reach the bits is wrong, and spends the
	// token: find one.
	for i := 0; ; i++ {
		s := strings.Repeat("9", 1) + string(rune('0'+i%10)) + strings.Repeat("1", i/10)
		if !PoWSolves(pow.Token, s, 6) {
			if got := c.Check(ChallengeAnswer{pow.Token, s}, 3, 7, now); got.Refusal != OutcomeChallengeWrong || got.Nonce == "" {
				t.Errorf("pow with a wrong counter: %+v", got)
			}
			break
		}
	}
	// Another server key signs other tokens.
	other := NewChallenger([]byte("another secret of at least thirty-two b"), time.Minute, time.Minute)
	if got := other.Check(ChallengeAnswer{q.Token, "red"}, 3, 7, now); got.Refusal != OutcomeChallengeWrong {
		t.Errorf("a token of another key: %q", got.Refusal)
	}
}

func TestLeadingZeroBits(t *testing.T) {
	for _, tt := range []struct {
		b    []byte
		want int
	}{{[]byte{0x80}, 0}, {[]byte{0x01}, 7}, {[]byte{0, 0x10}, 11}, {[]byte{0, 0}, 16}} {
		if got := LeadingZeroBits(tt.b); got != tt.want {
			t.Errorf("LeadingZeroBits(%x) = %d, want %d", tt.b, got, tt.want)
		}
	}
}

func BenchmarkChallengeCheckPoW(b *testing.B) {
	c := NewChallenger([]byte("a secret of at least thirty-two bytes"), time.Minute, time.Minute)
	now := time.Now()
	pow := c.Issue(ChallengePoW, 3, 7, 12, nil, now)
	a := ChallengeAnswer{pow.Token, SolvePoW(pow.Token, 12)}
	for b.Loop() {
		if c.Check(a, 3, 7, now).Refusal != "" {
			b.Fatal("refused")
		}
	}
}

func TestWrongAnswerWait(t *testing.T) {
	base, longest := DefaultWrongAnswerWait, DefaultMaxWrongAnswerWait
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{
		{0, 0}, {1, 2 * time.Second}, {2, 4 * time.Second}, {3, 8 * time.Second}, {4, 16 * time.Second},
		{8, 256 * time.Second}, {9, 5 * time.Minute}, {1000, 5 * time.Minute},
	} {
		if got := WrongAnswerWait(tt.n, base, longest); got != tt.want {
			t.Errorf("WrongAnswerWait(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
	if got := WrongAnswerWait(3, 0, time.Minute); got != 0 {
		t.Errorf("without a wait: %v", got)
	}
}

// A question with choices offers 4 to 10 distinct ones, accepts only
// among them and at most a quarter of them; one without is a free answer.
func TestValidateQuizChoices(t *testing.T) {
	four := []string{"Red", "Green", "Blue", "Yellow"}
	eight := []string{"1", "2", "3", "4", "5", "6", "7", "8"}
	tests := []struct {
		name string
		q    QuizQuestion
		ok   bool
	}{
		{"free answer", QuizQuestion{Question: "Name a colour", Answers: []string{"red", "blue"}}, true},
		{"empty choices are a free answer", QuizQuestion{Question: "Name a colour", Answers: []string{"red"}, Choices: []string{}}, true},
		{"four choices, one accepted", QuizQuestion{Question: "Q", Answers: []string{" RED "}, Choices: four}, true},
		{"eight choices, two accepted", QuizQuestion{Question: "Q", Answers: []string{"1", "2"}, Choices: eight}, true},
		{"ten choices", QuizQuestion{Question: "Q", Answers: []string{"1"}, Choices: append(eight, "9", "10")}, true},
		{"the same answer twice counts once", QuizQuestion{Question: "Q", Answers: []string{"red", "Red"}, Choices: four}, true},
		{"three choices", QuizQuestion{Question: "Q", Answers: []string{"red"}, Choices: four[:3]}, false},
		{"eleven choices", QuizQuestion{Question: "Q", Answers: []string{"1"}, Choices: append(eight, "9", "10", "11")}, false},
		{"two accepted of four", QuizQuestion{Question: "Q", Answers: []string{"red", "blue"}, Choices: four}, false},
		{"three accepted of eight", QuizQuestion{Question: "Q", Answers: []string{"1", "2", "3"}, Choices: eight}, false},
		{"an answer that is no choice", QuizQuestion{Question: "Q", Answers: []string{"purple"}, Choices: four}, false},
		{"a choice twice, after normalizing", QuizQuestion{Question: "Q", Answers: []string{"red"}, Choices: []string{"Red", "green", " RED", "blue"}}, false},
		{"an empty choice", QuizQuestion{Question: "Q", Answers: []string{"red"}, Choices: []string{"red", "green", " ", "blue"}}, false},
		{"a choice too long", QuizQuestion{Question: "Q", Answers: []string{"red"}, Choices: []string{"red", "green", "blue", strings.Repeat("x", 101)}}, false},
		{"a control character in a choice", QuizQuestion{Question: "Q", Answers: []string{"red"}, Choices: []string{"red", "green", "blue", "a\x00"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateChallenge(ChallengeQuiz, 0, []QuizQuestion{tt.q})
			if tt.ok && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !tt.ok && ErrorField(err) != "quiz" {
				t.Errorf("got %v, want INVALID_INPUT on quiz", err)
			}
		})
	}
}

// Each challenge lists the question's choices, all of them, in an order of
// its own; a free-answer question lists none.
func TestIssueShufflesChoices(t *testing.T) {
	c := NewChallenger([]byte("a secret of at least thirty-two bytes"), time.Minute, time.Minute)
	choices := []string{"Red", "Green", "Blue", "Yellow", "Black", "White"}
	quiz := []QuizQuestion{{Question: "Q", Answers: []string{"red"}, Choices: choices}}
	first := map[string]int{}
	for range 600 {
		ch := c.Issue(ChallengeQuiz, 3, 7, 0, quiz, time.Now())
		got := slices.Sorted(slices.Values(ch.Choices))
		if want := slices.Sorted(slices.Values(choices)); !slices.Equal(got, want) {
			t.Fatalf("choices %v, want a permutation of %v", ch.Choices, choices)
		}
		first[ch.Choices[0]]++
	}
	for _, ch := range choices {
		if n := first[ch]; n < 50 || n > 150 { // about 100 each; far outside is not a shuffle
			t.Errorf("%q came first %d times in 600", ch, n)
		}
	}
	if !slices.Equal(quiz[0].Choices, choices) {
		t.Errorf("Issue reordered the campaign's own choices: %v", quiz[0].Choices)
	}
	free := c.Issue(ChallengeQuiz, 3, 7, 0, []QuizQuestion{{Question: "Q", Answers: []string{"red"}}}, time.Now())
	if free.Choices != nil {
		t.Errorf("a free-answer question lists choices %v", free.Choices)
	}
}
