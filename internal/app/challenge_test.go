package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"seckill/internal/seckill"
)

// TestChallengeFlow goes through the real HTTP handler, Postgres and Redis:
// an operator creates a QUIZ campaign and a PROOF_OF_WORK one, a buyer asks
// for a challenge, answers it and buys; a bot that skips the challenge, a
// wrong answer, a token answered again (after a wrong answer or a right
// one) get nothing.
func TestChallengeFlow(t *testing.T) {
	e := newTestEnv(t, "")
	create := func(extra map[string]any) int64 {
		in := map[string]any{
			"shopId": "1", "title": "challenged", "payValue": 100, "actualValue": 200, "stock": 10,
			"beginTime": time.Now().Add(-time.Minute).Format(time.RFC3339),
			"endTime":   time.Now().Add(time.Hour).Format(time.RFC3339),
		}
		for k, v := range extra {
			in[k] = v
		}
		var data struct {
			AddSeckillVoucher struct {
				ID      string
				Seckill struct {
					Challenge string
					PowBits   *int
				}
			} `json:"addSeckillVoucher"`
		}
		res, err := e.gql(nil, e.token(1, true), `mutation($in: AddSeckillVoucherInput!) {
			addSeckillVoucher(input: $in) { id seckill { challenge powBits } } }`, map[string]any{"in": in}, &data)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("addSeckillVoucher: %v %+v", err, res)
		}
		if data.AddSeckillVoucher.Seckill.Challenge != extra["challenge"] {
			t.Errorf("challenge %q, want %q", data.AddSeckillVoucher.Seckill.Challenge, extra["challenge"])
		}
		id, _ := strconv.ParseInt(data.AddSeckillVoucher.ID, 10, 64)
		return id
	}
	type challenge struct {
		Kind     string
		Token    string
		Question *string
		Choices  []string
		Bits     *int
	}
	ask := func(token string, voucher int64) challenge {
		var data struct{ SeckillChallenge challenge }
		res, err := e.gql(nil, token, `query($v: ID!) { seckillChallenge(voucherId: $v) { kind token question choices bits expiresAt } }`,
			map[string]any{"v": strconv.FormatInt(voucher, 10)}, &data)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("seckillChallenge: %v %+v", err, res)
		}
		return data.SeckillChallenge
	}
	var retryAfter *int // of the last buy
	buy := func(token string, voucher int64, tok, solution string) string {
		var data struct {
			Seckill struct {
				purchase
				RetryAfter *int `json:"retryAfter"`
			}
		}
		res, err := e.gql(nil, token, `mutation($v: ID!, $a: ChallengeAnswer) { seckill(voucherId: $v, answer: $a) { outcome orderId retryAfter } }`,
			map[string]any{"v": strconv.FormatInt(voucher, 10), "a": map[string]any{"token": tok, "solution": solution}}, &data)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("seckill: %v %+v", err, res)
		}
		retryAfter = data.Seckill.RetryAfter
		return data.Seckill.Outcome
	}

	quiz := create(map[string]any{"challenge": "QUIZ", "quiz": []map[string]any{
		{"question": "What is two plus two?", "answers": []string{"4", "four"}},
	}})
	pow := create(map[string]any{"challenge": "PROOF_OF_WORK", "powBits": 8})
	alice, bob := e.token(100, false), e.token(101, false)

	// A bot that skips the challenge (the plain purchase document, served
	// by the fast path) gets nothing.
	if p, err := e.buy(nil, alice, quiz); err != nil || p.Outcome != string(seckill.OutcomeChallengeRequired) {
		t.Fatalf("without an answer: %+v %v, want CHALLENGE_REQUIRED", p, err)
	}
	q := ask(alice, quiz)
	if q.Kind != "QUIZ" || q.Question == nil || *q.Question != "What is two plus two?" {
		t.Fatalf("quiz challenge %+v", q)
	}
	// A wrong answer spends the token and makes alice wait, at this
	// campaign only, before she may try again.
	if got := buy(alice, quiz, q.Token, "five"); got != string(seckill.OutcomeChallengeWrong) || retryAfter == nil || *retryAfter != 2 {
		t.Errorf("wrong answer: %s, retry after %v s, want CHALLENGE_WRONG after 2", got, retryAfter)
	}
	if got := buy(alice, quiz, q.Token, " Four "); got != string(seckill.OutcomeRateLimited) || retryAfter == nil || *retryAfter < 1 || *retryAfter > 2 {
		t.Fatalf("right answer while she waits: %s, retry after %v s", got, retryAfter)
	}
	wait := time.Duration(*retryAfter) * time.Second
	if got := buy(bob, quiz, q.Token, "four"); got != string(seckill.OutcomeChallengeNotYours) {
		t.Errorf("alice's challenge used by bob: %s", got)
	}
	time.Sleep(wait)
	// The wrong answer spent the token: one guess a token.
	if got := buy(alice, quiz, q.Token, " Four "); got != string(seckill.OutcomeChallengeUsed) {
		t.Errorf("right answer after the wait, on the token answered wrong: %s", got)
	}
	q = ask(alice, quiz)
	if got := buy(alice, quiz, q.Token, " Four "); got != string(seckill.OutcomeAccepted) || retryAfter != nil {
		t.Errorf("right answer: %s, retry after %v", got, retryAfter)
	}
	q2 := ask(bob, quiz)
	if got := buy(bob, quiz, q2.Token, "4"); got != string(seckill.OutcomeAccepted) {
		t.Errorf("bob's right answer: %s", got)
	}
	if got := buy(bob, quiz, q2.Token, "4"); got != string(seckill.OutcomeChallengeUsed) {
		t.Errorf("bob's answer again: %s", got)
	}

	p := ask(alice, pow)
	if p.Kind != "PROOF_OF_WORK" || p.Bits == nil || *p.Bits != 8 {
		t.Fatalf("pow challenge %+v", p)
	}
	if got := buy(alice, pow, p.Token, seckill.SolvePoW(p.Token, 8)); got != string(seckill.OutcomeAccepted) {
		t.Errorf("solved proof of work: %s", got)
	}
	if got := buy(bob, pow, p.Token, seckill.SolvePoW(p.Token, 8)); got != string(seckill.OutcomeChallengeNotYours) {
		t.Errorf("alice's proof of work used by bob: %s", got)
	}
	if got := buy(bob, quiz, p.Token, seckill.SolvePoW(p.Token, 8)); got != string(seckill.OutcomeChallengeNotYours) {
		t.Errorf("a proof of work for another campaign: %s", got)
	}
	// The funnel counts where each attempt stopped.
	for layer, least := range map[string]float64{seckill.LayerChallengeMissing: 1, seckill.LayerChallengeWrong: 5,
		seckill.LayerSharedLimit: 1, seckill.LayerAdmitted: 3} {
		if got := testutil.ToFloat64(e.app.Metrics.Funnel.WithLabelValues(layer)); got < least {
			t.Errorf("funnel layer %s counted %v, want at least %v", layer, got, least)
		}
	}
	// A question with choices: each challenge lists them all, in its own
	// order, and the buyer sends the one they pick.
	choices := []string{"Lyon", "Paris", "Nice", "Lille"}
	picked := create(map[string]any{"challenge": "QUIZ", "quiz": []map[string]any{
		{"question": "What is the capital of France?", "answers": []string{"paris"}, "choices": choices},
	}})
	orders := map[string]bool{}
	for range 20 {
		c := ask(bob, picked)
		if got, want := slices.Sorted(slices.Values(c.Choices)), slices.Sorted(slices.Values(choices)); !slices.Equal(got, want) {
			t.Fatalf("choices %v, want %v in any order", c.Choices, choices)
		}
		orders[strings.Join(c.Choices, ",")] = true
	}
	if len(orders) < 2 {
		t.Errorf("20 challenges listed the choices in %d order(s): not shuffled", len(orders))
	}
	c := ask(bob, picked)
	if got := buy(bob, picked, c.Token, "Paris"); got != string(seckill.OutcomeAccepted) {
		t.Errorf("the right choice: %s", got)
	}
	if c := ask(alice, quiz); c.Choices != nil {
		t.Errorf("a free-answer question lists choices %v", c.Choices)
	}

	plain := e.createCampaign(5)
	if c := ask(alice, plain); c.Kind != "NONE" || c.Token != "" {
		t.Errorf("a campaign without a challenge: %+v", c)
	}
}

// readCounter counts the voucher reads of a store, and the most at once.
type readCounter struct {
	seckill.CatalogStore
	reads, inflight, most atomic.Int64
}

func (c *readCounter) Voucher(ctx context.Context, id int64) (*seckill.Voucher, error) {
	c.reads.Add(1)
	n := c.inflight.Add(1)
	defer c.inflight.Add(-1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	time.Sleep(5 * time.Millisecond) // a read that takes a while, so that callers overlap
	return c.CatalogStore.Voucher(ctx, id)
}

// Asking for challenges costs Postgres one read a campaign and second,
// however many ask at once, also for a voucher it does not know; and a
// caller asking about many made-up vouchers at once reads at most a few of
// them at a time.
func TestChallengeSettingsReads(t *testing.T) {
	e := newTestEnv(t, "")
	v, err := e.app.Catalog.AddSeckillVoucher(asUser(e.ctx, 1, true), seckill.NewSeckillVoucher{
		ShopID: 1, Title: "challenged", PayValue: 100, ActualValue: 200, Stock: 5,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour),
		Challenge: seckill.ChallengePoW, PoWBits: new(8),
	})
	if err != nil {
		t.Fatal(err)
	}
	pow := v.ID
	ask := func(svc *seckill.Challenges, callers int, voucher func(i int) int64) map[string]int {
		var mu sync.Mutex
		codes := map[string]int{}
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				c, err := svc.Challenge(asUser(e.ctx, int64(1000+i), false), voucher(i))
				code := seckill.ErrorCode(err)
				if err == nil {
					code = string(c.Kind)
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return codes
	}
	const callers = 300
	for _, tt := range []struct {
		name    string
		voucher func(i int) int64
		want    map[string]int
	}{
		{"a campaign", func(int) int64 { return pow }, map[string]int{"PROOF_OF_WORK": callers}},
		{"a voucher Postgres does not know", func(int) int64 { return 987_654_321 }, map[string]int{seckill.ENOTFOUND: callers}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := &readCounter{CatalogStore: e.app.Store}
			svc := e.challengesWith(t, store, nil, time.Now)
			if got := ask(svc, callers, tt.voucher); !maps.Equal(got, tt.want) {
				t.Errorf("answers %v, want %v", got, tt.want)
			}
			// One read; a caller that missed the cache as the first read
			// was storing it may start a second.
			if n := store.reads.Load(); n < 1 || n > 2 {
				t.Errorf("%d callers at once made %d Postgres reads, want 1 (2 at most)", callers, n)
			}
		})
	}
	t.Run("the asker who started the read leaves", func(t *testing.T) {
		store := &readCounter{CatalogStore: e.app.Store}
		svc := e.challengesWith(t, store, nil, time.Now)
		first, leave := context.WithCancel(asUser(e.ctx, 2000, false))
		left := make(chan error, 1)
		go func() { _, err := svc.Challenge(first, pow); left <- err }()
		time.Sleep(time.Millisecond) // the first asker's read is under way (it takes 5 ms)
		second := make(chan error, 1)
		go func() {
			c, err := svc.Challenge(asUser(e.ctx, 2001, false), pow)
			if err == nil && c.Kind != seckill.ChallengePoW {
				err = fmt.Errorf("kind %s", c.Kind)
			}
			second <- err
		}()
		time.Sleep(time.Millisecond)
		leave()
		<-left
		if err := <-second; err != nil {
			t.Errorf("the second asker, after the first left: %v; want its challenge", err)
		}
	})
	t.Run("many made-up vouchers", func(t *testing.T) {
		store := &readCounter{CatalogStore: e.app.Store}
		svc := e.challengesWith(t, store, nil, time.Now)
		got := ask(svc, callers, func(i int) int64 { return int64(900_000_000 + i) })
		if got[seckill.ENOTFOUND]+got[seckill.EUNAVAILABLE] != callers || got[seckill.ENOTFOUND] == 0 {
			t.Errorf("answers %v, want NOT_FOUND, or UNAVAILABLE beyond the reads allowed at once", got)
		}
		if m := store.most.Load(); m > 8 {
			t.Errorf("%d Postgres reads at once, want at most 8", m)
		}
	})
}

// failingGuard is an admission that cannot take a guard change.
type failingGuard struct{ seckill.CampaignAdmitter }

func (failingGuard) UpdateGuard(context.Context, int64, seckill.ChallengeKind, int) error {
	return errors.New("redis: connection refused")
}

// A guard change that admission cannot take is undone in Postgres whole:
// the quiz's questions as well as its kind, bits and brake, so that the
// operator who is told nothing changed finds the old questions.
func TestGuardRevertRestoresQuiz(t *testing.T) {
	e := newTestEnv(t, "")
	admin := asUser(e.ctx, 1, true)
	old := []seckill.QuizQuestion{{Question: "What is two plus two?", Answers: []string{"4"}}}
	v, err := e.app.Catalog.AddSeckillVoucher(admin, seckill.NewSeckillVoucher{
		ShopID: 1, Title: "quiz", PayValue: 100, ActualValue: 200, Stock: 5,
		BeginTime: time.Now().Add(time.Hour), EndTime: time.Now().Add(2 * time.Hour),
		Challenge: seckill.ChallengeQuiz, Quiz: old,
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := e.catalogWith(t, func(d *seckill.CatalogDeps) { d.Admission = failingGuard{e.app.Admitter} })
	_, err = svc.UpdateGuard(admin, v.ID, seckill.GuardEdit{Challenge: seckill.ChallengeQuiz, Brake: 7,
		Quiz: []seckill.QuizQuestion{{Question: "What is the capital of France?", Answers: []string{"paris"}}}})
	if seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Fatalf("UpdateGuard with admission down: %v, want UNAVAILABLE", err)
	}
	got, err := e.app.Catalog.CampaignQuiz(admin, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(old, got); diff != "" {
		t.Errorf("questions after the undone change (-want +got):\n%s", diff)
	}
	after, err := e.app.Store.Voucher(e.ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := after.Campaign; c.Challenge != seckill.ChallengeQuiz || c.Brake != 0 {
		t.Errorf("after the undone change: challenge %s brake %d, want QUIZ and 0", c.Challenge, c.Brake)
	}
}
