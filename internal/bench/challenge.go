package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"seckill/internal/bench/load"
	"seckill/internal/gqlclient"
	"seckill/internal/seckill"
)

// Challenges the bench can set on the campaign it creates (--challenge).
const (
	ChallengePoW  = "pow"
	ChallengeQuiz = "quiz"
)

// benchQuiz is the quiz the bench sets; its buyers know the answer, as
// people would.
var benchQuiz = []map[string]any{{"question": "What is two plus two?", "answers": []string{"4", "four"}}}

// challengeInput returns the campaign's challenge fields for --challenge.
func challengeInput(kind string, bits int) map[string]any {
	switch kind {
	case ChallengePoW:
		in := map[string]any{"challenge": string(seckill.ChallengePoW)}
		if bits != 0 { // 0: the server's default, which an omitted powBits takes
			in["powBits"] = bits
		}
		return in
	case ChallengeQuiz:
		return map[string]any{"challenge": string(seckill.ChallengeQuiz), "quiz": benchQuiz}
	}
	return nil
}

const answerQuery = `mutation Buy($voucherId: ID!, $answer: ChallengeAnswer) { seckill(voucherId: $voucherId, answer: $answer) { outcome orderId } }`

// solver returns the load's Prepare for a campaign with a challenge: each
// buyer asks for their challenge, solves it (the proof of work costs their
// CPU, as it would cost a browser's) and sends the purchase with the answer.
func (r *runner) solver(endpoint string, voucherID int64) func(ctx context.Context, user int) ([]byte, error) {
	client := &http.Client{Transport: load.NewTransport(max(r.spec.Concurrency, 64))}
	vid := strconv.FormatInt(voucherID, 10)
	return func(ctx context.Context, user int) ([]byte, error) {
		ans, err := gqlclient.Post(ctx, client, endpoint, strings.TrimPrefix(r.auth[user], "Bearer "),
			`query($v: ID!) { seckillChallenge(voucherId: $v) { kind token bits } }`, map[string]any{"v": vid}, 1<<16)
		if err != nil {
			return nil, err
		}
		if ans.NotJSON != nil {
			return nil, fmt.Errorf("challenge: %s answered %s: %w", endpoint, ans.Status, ans.NotJSON)
		}
		if len(ans.Errors) > 0 {
			return nil, fmt.Errorf("challenge: %v", ans.Errors)
		}
		var data *struct {
			SeckillChallenge struct {
				Kind  string
				Token *string
				Bits  *int
			}
		}
		if ans.Data != nil {
			if err := json.Unmarshal(ans.Data, &data); err != nil {
				return nil, fmt.Errorf("challenge: %w", err)
			}
		}
		if data == nil {
			return nil, fmt.Errorf("challenge: %s answered %s without data", endpoint, ans.Status)
		}
		c := data.SeckillChallenge
		answer := map[string]any(nil)
		switch seckill.ChallengeKind(c.Kind) {
		case seckill.ChallengePoW:
			if c.Token == nil || c.Bits == nil {
				return nil, fmt.Errorf("challenge: proof of work without a token or bits")
			}
			answer = map[string]any{"token": *c.Token, "solution": seckill.SolvePoW(*c.Token, *c.Bits)}
		case seckill.ChallengeQuiz:
			if c.Token == nil {
				return nil, fmt.Errorf("challenge: quiz without a token")
			}
			answer = map[string]any{"token": *c.Token, "solution": "four"}
		case seckill.ChallengeNone:
		default:
			return nil, fmt.Errorf("challenge: unknown kind %q", c.Kind)
		}
		return json.Marshal(gqlclient.Request{Query: answerQuery,
			Variables: map[string]any{"voucherId": vid, "answer": answer}})
	}
}
