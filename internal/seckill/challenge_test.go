package seckill

import (
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
