package seckill

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The challenge before a purchase.
//
// A campaign may ask each buyer to pass a challenge before it admits them: a
// quiz question a person answers in a couple of seconds, or a proof of work a
// browser computes in about as long. It keeps bots that skip it out, and it
// spreads the opening peak over seconds.
//
// A challenge is a signed, self-contained token: an HMAC over the kind, the
// campaign, the user, a random nonce, the expiry and the difficulty (proof
// of work) or keyed digests of the accepted answers (quiz). Checking an
// answer is a few hash computations in the process that serves the
// purchase, with no database trip; that a token is used once is decided
// inside the admission script, atomically with the admission (its nonce is
// remembered under the campaign's hash tag until the token expires).

// ChallengeKind is what a campaign asks of a buyer before admitting them.
type ChallengeKind string

const (
	ChallengeNone ChallengeKind = "NONE"
	ChallengeQuiz ChallengeKind = "QUIZ"
	ChallengePoW  ChallengeKind = "PROOF_OF_WORK"
)

// Valid reports whether k is a known kind.
func (k ChallengeKind) Valid() bool {
	return k == ChallengeNone || k == ChallengeQuiz || k == ChallengePoW
}

// Limits of the challenge settings, shared by every edge.
const (
	MinPoWBits         = 1
	MaxPoWBits         = 32
	DefaultPoWBits     = 20 // about a million hashes: seconds in a browser (docs/challenge.md)
	MaxQuizQuestions   = 50
	MaxQuizAnswers     = 10
	MaxQuizQuestionLen = 500
	MaxQuizAnswerLen   = 100 // an accepted answer's and a choice's, normalized
	maxTokenLen        = 2048
	maxSolutionLen     = 200

	// A question that lists its choices offers MinQuizChoices to
	// MaxQuizChoices of them and accepts at most a quarter: one token
	// guesses right at most one time in four.
	MinQuizChoices = 4
	MaxQuizChoices = 10
)

// The wait after a wrong answer. A token answers one guess, but tokens are
// free: without a cost a bot would fetch one for each choice of a quiz and
// guess them all within its burst. So each wrong answer to a campaign's
// challenge (quiz or proof of work) makes its user wait before their next
// attempt at that campaign, twice as long as the wrong answer before,
// from DefaultWrongAnswerWait up to DefaultMaxWrongAnswerWait: with four
// choices the worst guesser waits 2 + 4 + 8 = 14 s before their fourth
// guess, while a sale sells out in about a second. The admission script
// keeps the count beside the campaign (WrongAnswerWait is its schedule).
const (
	DefaultWrongAnswerWait    = 2 * time.Second
	DefaultMaxWrongAnswerWait = 5 * time.Minute
)

// WrongAnswerWait is how long a user waits after their n-th wrong answer
// (n >= 1) to a campaign's challenge: base·2^(n−1), at most max.
func WrongAnswerWait(n int, base, max time.Duration) time.Duration {
	if n < 1 || base <= 0 {
		return 0
	}
	w := base
	for i := 1; i < n && w < max; i++ {
		w *= 2
	}
	return min(w, max)
}

// QuizQuestion is one question of a campaign's quiz with the answers it
// accepts (compared after NormalizeAnswer). Choices, when set, are what a
// buyer picks from (each challenge lists them in its own order), and the
// accepted answers are among them; without choices the buyer types a free
// answer.
type QuizQuestion struct {
	Question string
	Answers  []string
	Choices  []string
}

// NormalizeAnswer is how answers are compared: case folded, surrounding
// space trimmed, inner runs of space collapsed to one.
func NormalizeAnswer(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// ValidateChallenge checks a campaign's challenge settings; field names
// are those of the GraphQL input.
func ValidateChallenge(kind ChallengeKind, powBits int, quiz []QuizQuestion) error {
	if !kind.Valid() {
		return Invalidf("challenge", "challenge must be NONE, QUIZ or PROOF_OF_WORK")
	}
	if kind == ChallengePoW && (powBits < MinPoWBits || powBits > MaxPoWBits) {
		return Invalidf("powBits", "powBits must be between %d and %d", MinPoWBits, MaxPoWBits)
	}
	if kind == ChallengeQuiz && len(quiz) == 0 {
		return Invalidf("quiz", "QUIZ needs at least one question")
	}
	if len(quiz) > MaxQuizQuestions {
		return Invalidf("quiz", "at most %d questions", MaxQuizQuestions)
	}
	for i, q := range quiz {
		if err := checkText("quiz", q.Question, false); err != nil {
			return err
		}
		if n := utf8.RuneCountInString(strings.TrimSpace(q.Question)); n == 0 || n > MaxQuizQuestionLen {
			return Invalidf("quiz", "question %d must have 1 to %d characters", i+1, MaxQuizQuestionLen)
		}
		if len(q.Answers) == 0 || len(q.Answers) > MaxQuizAnswers {
			return Invalidf("quiz", "question %d needs 1 to %d accepted answers", i+1, MaxQuizAnswers)
		}
		for _, a := range q.Answers {
			if err := checkText("quiz", a, false); err != nil {
				return err
			}
			if n := utf8.RuneCountInString(NormalizeAnswer(a)); n == 0 || n > MaxQuizAnswerLen {
				return Invalidf("quiz", "each answer of question %d must have 1 to %d characters", i+1, MaxQuizAnswerLen)
			}
		}
		if err := validateChoices(i, q); err != nil {
			return err
		}
	}
	return nil
}

// validateChoices checks the choices of question i (0-based), if it lists
// any: MinQuizChoices to MaxQuizChoices distinct ones, every accepted answer
// among them, and at most a quarter of them accepted, so that one token
// guesses right at most one time in four.
func validateChoices(i int, q QuizQuestion) error {
	if len(q.Choices) == 0 {
		return nil
	}
	if n := len(q.Choices); n < MinQuizChoices || n > MaxQuizChoices {
		return Invalidf("quiz", "question %d offers %d choices: give %d to %d, or none for a free answer", i+1, n, MinQuizChoices, MaxQuizChoices)
	}
	choices := make(map[string]bool, len(q.Choices))
	for _, c := range q.Choices {
		if err := checkText("quiz", c, false); err != nil {
			return err
		}
		nc := NormalizeAnswer(c)
		if n := utf8.RuneCountInString(nc); n == 0 || n > MaxQuizAnswerLen {
			return Invalidf("quiz", "each choice of question %d must have 1 to %d characters", i+1, MaxQuizAnswerLen)
		}
		if choices[nc] {
			return Invalidf("quiz", "question %d offers the choice %q twice (case and extra spaces do not count)", i+1, nc)
		}
		choices[nc] = true
	}
	accepted := map[string]bool{}
	for _, a := range q.Answers {
		na := NormalizeAnswer(a)
		if !choices[na] {
			return Invalidf("quiz", "question %d accepts %q, which is not one of its choices", i+1, na)
		}
		accepted[na] = true
	}
	if len(accepted)*4 > len(q.Choices) {
		return Invalidf("quiz", "question %d accepts %d of its %d choices: at most a quarter, so that a guess is right at most one time in four",
			i+1, len(accepted), len(q.Choices))
	}
	return nil
}

// Challenge is what a buyer must solve before buying: Token goes back with
// the solution (ChallengeAnswer).
type Challenge struct {
	Kind      ChallengeKind
	Token     string
	Question  string   // QUIZ: the question to answer
	Choices   []string // QUIZ: what to pick the answer from, in an order of this challenge's; none for a free answer
	Bits      int      // PROOF_OF_WORK: leading zero bits required
	ExpiresAt time.Time
}

// ChallengeAnswer is a buyer's solution to a challenge.
type ChallengeAnswer struct {
	Token    string
	Solution string // QUIZ: the answer; PROOF_OF_WORK: the counter found
}

// Ticket is what the purchase path hands the admission script about the
// challenge: nothing (Kind ""), an answer to a token we signed for this
// user and campaign that has not expired (its kind, nonce and expiry; the
// token is spent by this answer, right or wrong: Refusal is "" for a right
// one, CHALLENGE_WRONG for a wrong one), or a token we cannot trust
// (Refusal set and no nonce: not ours, another's, expired), which spends
// nothing. Every kind counts against the user's limit.
type Ticket struct {
	Kind      ChallengeKind
	Nonce     string
	ExpiresAt time.Time
	Refusal   Outcome
	// Pass is what the purchase's waiting-room pass came to (CheckPass);
	// the admission script refuses a campaign with a room without a valid
	// one.
	Pass PassVerdict
}

// Challenger issues and checks challenge tokens. Every instance must use
// the same key.
type Challenger struct {
	key []byte
	TTL time.Duration // how long a token stays valid
	// Lead is how long before the sale opens challenges are handed out.
	Lead time.Duration
}

// NewChallenger returns a Challenger whose key is derived from secret (the
// server's signing secret), so no second secret needs managing.
func NewChallenger(secret []byte, ttl, lead time.Duration) *Challenger {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("seckill challenge key v1"))
	return &Challenger{key: m.Sum(nil), TTL: ttl, Lead: lead}
}

func (c *Challenger) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, c.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

func (c *Challenger) answerDigest(nonce, answer string) string {
	return hex.EncodeToString(c.mac("quiz", nonce, NormalizeAnswer(answer))[:8])
}

// Issue makes a challenge of kind for the user and campaign. For a quiz it
// picks one of quiz at random.
func (c *Challenger) Issue(kind ChallengeKind, voucherID, userID int64, powBits int, quiz []QuizQuestion, now time.Time) Challenge {
	var nb [16]byte
	rand.Read(nb[:])
	nonce := hex.EncodeToString(nb[:])
	exp := now.Add(c.TTL)
	ch := Challenge{Kind: kind, ExpiresAt: time.UnixMilli(exp.UnixMilli()).UTC()}
	var extra string
	switch kind {
	case ChallengePoW:
		ch.Bits = powBits
		extra = strconv.Itoa(powBits)
	case ChallengeQuiz:
		var ib [8]byte
		rand.Read(ib[:])
		q := quiz[int(uint64(ib[0])|uint64(ib[1])<<8|uint64(ib[2])<<16)%len(quiz)]
		ch.Question = q.Question
		ch.Choices = shuffled(q.Choices)
		ds := make([]string, len(q.Answers))
		for i, a := range q.Answers {
			ds[i] = c.answerDigest(nonce, a)
		}
		extra = strings.Join(ds, ",")
	}
	payload := strings.Join([]string{"1", string(kind), strconv.FormatInt(voucherID, 10), strconv.FormatInt(userID, 10),
		nonce, strconv.FormatInt(exp.UnixMilli(), 10), extra}, ".")
	ch.Token = base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(c.mac("token", payload)[:16])
	return ch
}

// shuffled returns a copy of choices in a random order, so that where the
// right one stands tells nothing (nil for none).
func shuffled(choices []string) []string {
	if len(choices) == 0 {
		return nil
	}
	out := slices.Clone(choices)
	for i := len(out) - 1; i > 0; i-- {
		j := int(randUint64() % uint64(i+1)) // bias below 2^-59 for ten choices
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func randUint64() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// Check verifies an answer for the user and campaign at now, in
// microseconds and without I/O. For a token we signed for them that has
// not expired, the Ticket carries what the admission script needs to
// spend it once, and CHALLENGE_WRONG when the answer is wrong: the first
// answer spends a token, right or wrong. Otherwise it carries only the
// refusal (CHALLENGE_WRONG for a token we did not sign,
// CHALLENGE_EXPIRED, CHALLENGE_NOT_YOURS), since its nonce cannot be
// trusted.
func (c *Challenger) Check(a ChallengeAnswer, voucherID, userID int64, now time.Time) Ticket {
	wrong := Ticket{Refusal: OutcomeChallengeWrong}
	if len(a.Token) > maxTokenLen || len(a.Solution) > maxSolutionLen {
		return wrong
	}
	p64, s64, ok := strings.Cut(a.Token, ".")
	if !ok {
		return wrong
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(s64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, c.mac("token", string(payload))[:16]) {
		return wrong // not a token we signed
	}
	f := strings.Split(string(payload), ".")
	if len(f) != 7 || f[0] != "1" {
		return wrong
	}
	kind, nonce, extra := ChallengeKind(f[1]), f[4], f[6]
	v, _ := strconv.ParseInt(f[2], 10, 64)
	u, _ := strconv.ParseInt(f[3], 10, 64)
	exp, _ := strconv.ParseInt(f[5], 10, 64)
	if v != voucherID || u != userID {
		return Ticket{Refusal: OutcomeChallengeNotYours}
	}
	if now.UnixMilli() >= exp {
		return Ticket{Refusal: OutcomeChallengeExpired}
	}
	ticket := Ticket{Kind: kind, Nonce: nonce, ExpiresAt: time.UnixMilli(exp)}
	spent := ticket // a wrong answer spends the token too
	spent.Refusal = OutcomeChallengeWrong
	switch kind {
	case ChallengePoW:
		n, err := strconv.Atoi(extra)
		if err != nil {
			return wrong
		}
		if !PoWSolves(a.Token, a.Solution, n) {
			return spent
		}
	case ChallengeQuiz:
		if len(a.Solution) == 0 {
			return spent
		}
		d := c.answerDigest(nonce, a.Solution)
		found := false
		for _, want := range strings.Split(extra, ",") {
			found = hmac.Equal([]byte(d), []byte(want)) || found
		}
		if !found {
			return spent
		}
	default:
		return wrong
	}
	return ticket
}

// PoWSolves reports whether solution solves the proof of work of token at
// bits: SHA-256 of token, ":" and solution (a decimal counter of at most 20
// digits) starts with at least bits zero bits. docs/challenge.md describes
// it for clients.
func PoWSolves(token, solution string, bits int) bool {
	if len(solution) == 0 || len(solution) > 20 || bits < MinPoWBits || bits > MaxPoWBits {
		return false
	}
	for _, r := range solution {
		if r < '0' || r > '9' {
			return false
		}
	}
	sum := sha256.Sum256([]byte(token + ":" + solution))
	return LeadingZeroBits(sum[:]) >= bits
}

// LeadingZeroBits counts the zero bits at the start of b.
func LeadingZeroBits(b []byte) int {
	n := 0
	for _, x := range b {
		if x != 0 {
			return n + bits.LeadingZeros8(x)
		}
		n += 8
	}
	return n
}

// SolvePoW finds the smallest counter that solves token at bits (what a
// client does; tests and seckill-bench use it).
func SolvePoW(token string, bits int) string {
	h := sha256.New()
	var sum [32]byte
	buf := make([]byte, 0, 24)
	for i := uint64(0); ; i++ {
		buf = strconv.AppendUint(buf[:0], i, 10)
		h.Reset()
		h.Write([]byte(token))
		h.Write([]byte{':'})
		h.Write(buf)
		if LeadingZeroBits(h.Sum(sum[:0])) >= bits {
			return string(buf)
		}
	}
}
