package app

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"seckill/internal/seckill"
)

// TestChallengeFlow goes through the real HTTP handler, Postgres and Redis:
// an operator creates a QUIZ campaign and a PROOF_OF_WORK one, a buyer asks
// for a challenge, answers it and buys; a bot that skips the challenge, a
// wrong answer and a reused one get nothing.
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
		Bits     *int
	}
	ask := func(token string, voucher int64) challenge {
		var data struct{ SeckillChallenge challenge }
		res, err := e.gql(nil, token, `query($v: ID!) { seckillChallenge(voucherId: $v) { kind token question bits expiresAt } }`,
			map[string]any{"v": strconv.FormatInt(voucher, 10)}, &data)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("seckillChallenge: %v %+v", err, res)
		}
		return data.SeckillChallenge
	}
	buy := func(token string, voucher int64, tok, solution string) string {
		var data struct{ Seckill purchase }
		res, err := e.gql(nil, token, `mutation($v: ID!, $a: ChallengeAnswer) { seckill(voucherId: $v, answer: $a) { outcome orderId } }`,
			map[string]any{"v": strconv.FormatInt(voucher, 10), "a": map[string]any{"token": tok, "solution": solution}}, &data)
		if err != nil || len(res.Errors) > 0 {
			t.Fatalf("seckill: %v %+v", err, res)
		}
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
	if got := buy(alice, quiz, q.Token, "five"); got != string(seckill.OutcomeChallengeWrong) {
		t.Errorf("wrong answer: %s", got)
	}
	if got := buy(bob, quiz, q.Token, "four"); got != string(seckill.OutcomeChallengeNotYours) {
		t.Errorf("alice's challenge used by bob: %s", got)
	}
	if got := buy(alice, quiz, q.Token, " Four "); got != string(seckill.OutcomeAccepted) {
		t.Errorf("right answer: %s", got)
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
	if got := buy(alice, quiz, p.Token, seckill.SolvePoW(p.Token, 8)); got != string(seckill.OutcomeChallengeNotYours) {
		t.Errorf("a proof of work for another campaign: %s", got)
	}
	// The funnel counts where each attempt stopped.
	for layer, least := range map[string]float64{seckill.LayerChallengeMissing: 1, seckill.LayerChallengeWrong: 4, seckill.LayerAdmitted: 3} {
		if got := testutil.ToFloat64(e.app.Metrics.Funnel.WithLabelValues(layer)); got < least {
			t.Errorf("funnel layer %s counted %v, want at least %v", layer, got, least)
		}
	}
	plain := e.createCampaign(5)
	if c := ask(alice, plain); c.Kind != "NONE" || c.Token != "" {
		t.Errorf("a campaign without a challenge: %+v", c)
	}
}
