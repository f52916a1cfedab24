package app

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

// The challenge token's life, checked against a model.
//
// The model is what docs/challenge.md promises, per user and campaign: a
// token is good for the user and campaign it was issued to until it
// expires, and is spent by its first answer, right or wrong; a right
// answer buys once per user; a wrong one makes the user wait before any
// further attempt at that campaign (the test's wait is a minute, longer
// than any sequence, so the model knows such a user as waiting from then
// on). Random sequences of issuing, answering right and wrong, reusing,
// answering late, answering another user's or another campaign's token
// run against the real Service on real Redis and Postgres, and after every
// step the outcome the model predicts must be the one the service gave.
// make test runs a few dozen sequences; make test-model runs a thousand.

// modelTTL is how long a token lives on the model's clock; modelWait how
// long a user waits after a wrong answer, on Redis's (the real) clock.
const (
	modelTTL  = time.Minute
	modelWait = time.Minute
)

// rapidChecksOnce remembers whether the command line or RAPID_CHECKS chose
// rapid's number of checks, before boundRapidChecks sets it.
var rapidChecksOnce = sync.OnceValue(func() bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	_, env := os.LookupEnv("RAPID_CHECKS")
	return set || env
})

// boundRapidChecks makes rapid.Check run n sequences unless the command
// line (-rapid.checks, as make test-model passes) or RAPID_CHECKS asks
// for another number: make test stays quick.
func boundRapidChecks(t *testing.T, n int) {
	t.Helper()
	if rapidChecksOnce() {
		return
	}
	f := flag.Lookup("rapid.checks")
	old := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

func TestChallengeModel(t *testing.T) {
	boundRapidChecks(t, 25)
	e := newTestEnv(t, "")
	// An admitter of its own, sharing the app's Redis: no shared limit (the
	// model has none), no sold-out mark, and a long wait after a wrong
	// answer.
	adm := admission.New(e.app.Redis, admission.Options{Logger: e.app.Logger, SoldOutTTL: -1,
		WrongAnswerWait: modelWait, WrongAnswerWaitMax: 10 * modelWait})
	if err := adm.Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	ch := seckill.NewChallenger([]byte("model test secret of at least thirty-two bytes"), modelTTL, time.Hour)
	rapid.Check(t, func(rt *rapid.T) {
		m := newTokenModel(rt, e, adm, ch)
		rt.Repeat(m.actions())
	})
}

// modelQuiz is the quiz campaign's questions, one with choices, one with a
// free answer; each has one right answer (modelRight, as a buyer might
// type it).
var modelQuiz = []seckill.QuizQuestion{
	{Question: "What is two plus two?", Answers: []string{"four"}, Choices: []string{"three", "four", "five", "twenty-two"}},
	{Question: "What is the capital of France?", Answers: []string{"paris"}},
}

var modelRight = map[string]string{"What is two plus two?": "Four", "What is the capital of France?": " PARIS "}

const (
	campQuiz = iota
	campPoW
)

// modelToken is an issued token as the model knows it.
type modelToken struct {
	n            int // the order of issue, for the log
	user         int64
	camp         int
	token        string
	right, wrong string // solutions
	expiresMS    int64  // on the model's clock
	spent        bool
}

func (k *modelToken) String() string {
	return fmt.Sprintf("token #%d (user %d, %s)", k.n, k.user, campName(k.camp))
}

func campName(c int) string { return [...]string{"quiz", "pow"}[c] }

type userCamp struct {
	user int64
	camp int
}

// tokenModel is one sequence: two fresh campaigns, three users, the
// tokens issued so far and what each user bought.
type tokenModel struct {
	e      *testEnv
	svc    *seckill.Purchases
	issuer *seckill.Challenges
	adm    *admission.Admitter
	now    time.Time // the service's clock
	camps  [2]int64  // voucher ids
	users  []int64
	tokens []*modelToken
	bought map[userCamp]bool
	// waiting holds who answered a campaign wrong: they wait longer than
	// the sequence lasts.
	waiting map[userCamp]bool
}

const modelStock = 1000

func newTokenModel(rt *rapid.T, e *testEnv, adm *admission.Admitter, ch *seckill.Challenger) *tokenModel {
	m := &tokenModel{e: e, adm: adm, now: time.Now(), users: []int64{101, 102, 103},
		bought: map[userCamp]bool{}, waiting: map[userCamp]bool{}}
	clock := func() time.Time { return m.now }
	m.svc = e.purchasesWith(rt, func(d *seckill.PurchaseDeps) {
		d.Admitter, d.Outbox, d.Rebuilder, d.Challenger, d.Now = adm, adm, adm, ch, clock
	})
	m.issuer = e.challengesWith(rt, e.app.Store, ch, clock)
	admin := asUser(e.ctx, 1, true)
	for i, in := range []seckill.NewSeckillVoucher{
		{Challenge: seckill.ChallengeQuiz, Quiz: modelQuiz},
		{Challenge: seckill.ChallengePoW, PoWBits: new(4)},
	} {
		in.ShopID, in.Title, in.PayValue, in.ActualValue, in.Stock = 1, "model "+campName(i), 100, 200, modelStock
		in.BeginTime, in.EndTime = time.Now().Add(-time.Minute), time.Now().Add(24*time.Hour)
		v, err := e.app.Catalog.AddSeckillVoucher(admin, in)
		if err != nil {
			rt.Fatalf("create the %s campaign: %v", campName(i), err)
		}
		m.camps[i] = v.ID
	}
	return m
}

func (m *tokenModel) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"Challenge": m.challenge,
		"AnswerRight": func(rt *rapid.T) {
			k := m.pick(rt, func(k *modelToken) bool { return !k.spent && !m.expired(k) })
			m.answer(rt, k, k.user, k.camp, true)
		},
		"AnswerWrong": func(rt *rapid.T) {
			k := m.pick(rt, func(k *modelToken) bool { return !k.spent && !m.expired(k) })
			m.answer(rt, k, k.user, k.camp, false)
		},
		"Reuse": func(rt *rapid.T) {
			k := m.pick(rt, func(k *modelToken) bool { return k.spent })
			m.answer(rt, k, k.user, k.camp, rapid.Bool().Draw(rt, "right"))
		},
		"AnswerExpired": func(rt *rapid.T) {
			k := m.pick(rt, m.expired)
			m.answer(rt, k, k.user, k.camp, rapid.Bool().Draw(rt, "right"))
		},
		"AnswerOthersToken": func(rt *rapid.T) {
			k := m.pick(rt, func(*modelToken) bool { return true })
			other := rapid.SampledFrom(m.users).Filter(func(u int64) bool { return u != k.user }).Draw(rt, "user")
			m.answer(rt, k, other, k.camp, true)
		},
		"AnswerOtherCampaign": func(rt *rapid.T) {
			k := m.pick(rt, func(*modelToken) bool { return true })
			m.answer(rt, k, k.user, 1-k.camp, true)
		},
		"NoAnswer": func(rt *rapid.T) {
			u := rapid.SampledFrom(m.users).Draw(rt, "user")
			c := rapid.IntRange(0, 1).Draw(rt, "campaign")
			m.compare(rt, m.predictNoAnswer(u, c), u, c, nil, "no answer")
		},
		"Wait": func(rt *rapid.T) {
			d := time.Duration(rapid.Int64Range(1, 2*int64(modelTTL/time.Second)).Draw(rt, "seconds")) * time.Second
			m.now = m.now.Add(d)
			rt.Logf("the clock moves %v", d)
		},
		"": m.check,
	}
}

// challenge asks for a challenge, which the model expects to be issued.
func (m *tokenModel) challenge(rt *rapid.T) {
	u := rapid.SampledFrom(m.users).Draw(rt, "user")
	c := rapid.IntRange(0, 1).Draw(rt, "campaign")
	got, err := m.issuer.Challenge(asUser(m.e.ctx, u, false), m.camps[c])
	if err != nil {
		rt.Fatalf("user %d asks for a %s challenge: %v", u, campName(c), err)
	}
	k := &modelToken{n: len(m.tokens) + 1, user: u, camp: c, token: got.Token, expiresMS: m.now.Add(modelTTL).UnixMilli()}
	switch c {
	case campQuiz:
		if got.Kind != seckill.ChallengeQuiz {
			rt.Fatalf("a %s challenge for the quiz campaign", got.Kind)
		}
		right, ok := modelRight[got.Question]
		if !ok {
			rt.Fatalf("a question the quiz does not have: %q", got.Question)
		}
		k.right, k.wrong = right, "wrong"
		i := slices.IndexFunc(modelQuiz, func(q seckill.QuizQuestion) bool { return q.Question == got.Question })
		if want := modelQuiz[i].Choices; !slices.Equal(slices.Sorted(slices.Values(got.Choices)), slices.Sorted(slices.Values(want))) {
			rt.Fatalf("%q lists choices %v, want %v in any order", got.Question, got.Choices, want)
		}
		if len(got.Choices) > 0 { // a wrong pick, as a guesser makes
			k.wrong = rapid.SampledFrom(got.Choices).Filter(func(c string) bool { return c != "four" }).Draw(rt, "wrong choice")
		}
	case campPoW:
		if got.Kind != seckill.ChallengePoW || got.Bits != 4 {
			rt.Fatalf("a %s challenge of %d bits for the proof of work campaign", got.Kind, got.Bits)
		}
		k.right = seckill.SolvePoW(got.Token, 4)
		for i := 0; ; i++ {
			if s := strconv.Itoa(i); !seckill.PoWSolves(got.Token, s, 4) {
				k.wrong = s
				break
			}
		}
	}
	if got.ExpiresAt.UnixMilli() != k.expiresMS {
		rt.Fatalf("expires at %v, want %v", got.ExpiresAt, time.UnixMilli(k.expiresMS))
	}
	m.tokens = append(m.tokens, k)
	rt.Logf("%v issued", k)
}

// pick draws one of the tokens that ok accepts, or skips the action.
func (m *tokenModel) pick(rt *rapid.T, ok func(*modelToken) bool) *modelToken {
	var some []*modelToken
	for _, k := range m.tokens {
		if ok(k) {
			some = append(some, k)
		}
	}
	if len(some) == 0 {
		rt.Skip("no such token")
	}
	return some[rapid.IntRange(0, len(some)-1).Draw(rt, "which")]
}

func (m *tokenModel) expired(k *modelToken) bool { return m.now.UnixMilli() >= k.expiresMS }

// answer has user answer token k (rightly or not) at campaign camp, and
// compares the outcome with the model's.
func (m *tokenModel) answer(rt *rapid.T, k *modelToken, user int64, camp int, right bool) {
	sol := k.wrong
	if right {
		sol = k.right
	}
	what := fmt.Sprintf("%v answered %s by user %d at the %s campaign", k, map[bool]string{true: "right", false: "wrong"}[right], user, campName(camp))
	m.compare(rt, m.predict(k, user, camp, right), user, camp, &seckill.ChallengeAnswer{Token: k.token, Solution: sol}, what)
}

func (m *tokenModel) compare(rt *rapid.T, want seckill.Outcome, user int64, camp int, a *seckill.ChallengeAnswer, what string) {
	res, err := m.svc.PurchaseWith(asUser(m.e.ctx, user, false), m.camps[camp], a, "")
	if err != nil {
		rt.Fatalf("%s: %v", what, err)
	}
	rt.Logf("%s: %s", what, res.Outcome)
	if res.Outcome != want {
		rt.Fatalf("%s: got %s, the model says %s", what, res.Outcome, want)
	}
	// The wait a wrong answer starts (always the first: the user waits
	// from then on), and what is left of it.
	switch {
	case want == seckill.OutcomeChallengeWrong && res.RetryAfter != modelWait,
		want == seckill.OutcomeRateLimited && (res.RetryAfter <= 0 || res.RetryAfter > modelWait),
		want != seckill.OutcomeChallengeWrong && want != seckill.OutcomeRateLimited && res.RetryAfter != 0:
		rt.Fatalf("%s: %s with retry after %v", what, res.Outcome, res.RetryAfter)
	}
}

// predict is the model: what an answer comes to, and what it changes.
func (m *tokenModel) predict(k *modelToken, user int64, camp int, right bool) seckill.Outcome {
	uc := userCamp{user, camp}
	switch {
	case m.waiting[uc]: // before the token is looked at
		return seckill.OutcomeRateLimited
	case k.user != user || k.camp != camp:
		return seckill.OutcomeChallengeNotYours
	case m.expired(k):
		return seckill.OutcomeChallengeExpired
	case k.spent:
		return seckill.OutcomeChallengeUsed
	}
	k.spent = true // by its first answer, right or wrong
	switch {
	case !right:
		m.waiting[uc] = true
		return seckill.OutcomeChallengeWrong
	case m.bought[uc]:
		return seckill.OutcomeAlreadyPurchased
	}
	m.bought[uc] = true
	return seckill.OutcomeAccepted
}

func (m *tokenModel) predictNoAnswer(user int64, camp int) seckill.Outcome {
	if m.waiting[userCamp{user, camp}] {
		return seckill.OutcomeRateLimited
	}
	return seckill.OutcomeChallengeRequired
}

// check holds the stock to the purchases the model accepted.
func (m *tokenModel) check(rt *rapid.T) {
	rem, err := m.adm.Remaining(m.e.ctx, m.camps[:])
	if err != nil {
		rt.Fatal(err)
	}
	for c, id := range m.camps {
		sold := 0
		for uc, ok := range m.bought {
			if ok && uc.camp == c {
				sold++
			}
		}
		if rem[id] != int64(modelStock-sold) {
			rt.Fatalf("the %s campaign has %d left, want %d", campName(c), rem[id], modelStock-sold)
		}
	}
}
