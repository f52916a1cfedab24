package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"pgregory.net/rapid"

	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
	"seckill/jobs"
)

// The refunds of the order's life model (life_model_test.go): the provider
// the test plays behind the signed refund call, and the model's refund
// actions.

// newRefundEnv starts a seckill, without workers (the test runs what they
// would), whose refunds go to a provider the test plays over the refund
// call: it may accept, confirm, refuse, fail or time out on each send.
func newRefundEnv(t *testing.T, opts ...envOption) (*modelProvider, *testEnv) {
	t.Helper()
	provider := &modelProvider{refunds: map[string]*providerRefund{}}
	srv := httptest.NewServer(provider)
	t.Cleanup(srv.Close)
	e := newTestEnv(t, "", append([]envOption{func(m map[string]string) {
		m["SECKILL_USER_RATE"] = "0"
		m["SECKILL_PAYMENT_REFUND_URL"] = srv.URL + "/refunds"
		m["SECKILL_REFUND_MAX_SENDS"] = fmt.Sprint(modelMaxSends)
		m["SECKILL_REFUND_CONFIRM_WAIT"] = "1m"
	}}, opts...)...)
	return provider, e
}

// modelProvider is the payment provider of the model test, behind the
// built-in provider's signed refund call: it refunds once per idempotency
// key, and answers each send as the test draws.
type modelProvider struct {
	mu      sync.Mutex
	refunds map[string]*providerRefund // by key
	next    providerAnswer
	script  []providerAnswer // answers of the next calls, before next
	calls   int              // refund calls that reached it
}

type providerRefund struct {
	paymentID string
	amount    int64
	calls     int
	failed    bool // the provider failed it afterwards (refund.failed): no money moved
}

// providerAnswer is how the provider answers the next send.
type providerAnswer int

const (
	answerPending providerAnswer = iota // accepted; a webhook confirms it later
	answerDone                          // refunded and confirmed at once
	answerRefuse                        // refused: no money moves
	answerDown                          // unavailable: nothing happens
	answerTimeout                       // refunded, but the answer is lost
	answerHang                          // refunded, and answered after the client gave up
)

func (p *modelProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	call, err := payhook.ParseRefundCall([]byte(config.DevWebhookSecret), r.Header, body, time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.calls++
	next := p.next
	if len(p.script) > 0 {
		next, p.script = p.script[0], p.script[1:]
	}
	rf, ok := p.refunds[call.IdempotencyKey]
	switch {
	case next == answerRefuse && ok:
		// A refusal under a key it had accepted is that refund failing (as
		// refund.failed tells): no money moved under it. The server then
		// sends under a new key, and a refund left standing here would be
		// counted twice.
		rf.failed = true
	case next != answerDown && next != answerRefuse:
		if !ok {
			rf = &providerRefund{paymentID: call.PaymentID, amount: call.Amount}
			p.refunds[call.IdempotencyKey] = rf
		}
		rf.calls++
	}
	p.mu.Unlock()
	reply := func(status string) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(payhook.RefundReply{Status: status, Reason: "card closed"})
	}
	switch next {
	case answerDown:
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	case answerRefuse:
		reply("failed")
	case answerTimeout:
		// The refund is made; the answer never arrives.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	case answerHang:
		time.Sleep(700 * time.Millisecond) // past the client's timeout
		reply("pending")
	case answerDone:
		reply("succeeded")
	default:
		reply("pending")
	}
}

// callsSoFar returns how many refund calls reached the provider.
func (p *modelProvider) callsSoFar() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// paidBack is what the provider has paid back for a payment, and under how
// many keys.
func (p *modelProvider) paidBack(paymentID string) (amount int64, keys int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rf := range p.refunds {
		if rf.paymentID == paymentID && !rf.failed {
			amount += rf.amount
			keys++
		}
	}
	return amount, keys
}

// fail is the provider failing every refund it holds of a payment, as it
// tells with refund.failed.
func (p *modelProvider) fail(paymentID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rf := range p.refunds {
		if rf.paymentID == paymentID {
			rf.failed = true
		}
	}
}

// answer sets how the provider answers the next send.
func (p *modelProvider) answer(a providerAnswer) {
	p.mu.Lock()
	p.next = a
	p.mu.Unlock()
}

// scheduled reports whether a send of s's refund is scheduled (an Asynq
// task), and in how long.
func (e *testEnv) scheduled(s seckill.RefundSend) (time.Duration, bool) {
	insp := asynq.NewInspectorFromRedisClient(e.app.Redis)
	info, err := insp.GetTaskInfo(jobs.QueueOrders, jobs.RefundTaskID(s))
	if err != nil {
		return 0, false
	}
	if info.State == asynq.TaskStatePending {
		return 0, true
	}
	return time.Until(info.NextProcessAt).Round(time.Minute), true
}

// refundSend runs one send of a refund, with the provider answering as
// drawn; it is the task that the worker would run.
func (m *lifeModel) refundSend(rt *rapid.T) {
	p := m.drawPayment(rt)
	ans := providerAnswer(rapid.IntRange(0, 4).Draw(rt, "answer"))
	final := rapid.IntRange(0, 5).Draw(rt, "final") == 0
	m.provider.answer(ans)
	err := m.refunds.Send(m.e.ctx, p.id, final)
	rt.Logf("refund send of %s (%s, send %d) answered %d, final %v: %v", p.id, p.status, p.sends, ans, final, err)
	if p.status != seckill.PaymentRefundNeeded && p.status != seckill.PaymentRefunding {
		if err != nil {
			rt.Fatalf("send of a %s refund: %v", p.status, err)
		}
		return // nothing to send
	}
	if p.sends >= modelMaxSends {
		p.status = seckill.PaymentRefundFailed
		if err != nil {
			rt.Fatalf("send after the last: %v", err)
		}
		return
	}
	p.sends++
	p.status = seckill.PaymentRefunding
	switch ans {
	case answerPending:
		if err != nil {
			rt.Fatalf("send: %v", err)
		}
		// It is sent again after ConfirmWait unless confirmed by then.
		next := seckill.RefundSend{PaymentID: p.id, Generation: p.gen, Round: p.round, Sends: p.sends}
		if d, ok := m.e.scheduled(next); !ok || d != time.Minute {
			rt.Fatalf("after an unconfirmed send of %s: next send scheduled %v (%v), want in 1m", p.id, ok, d)
		}
	case answerDone:
		p.status = seckill.PaymentRefunded
	case answerRefuse:
		p.status, p.refused = seckill.PaymentRefundFailed, true
	case answerDown, answerTimeout:
		if final {
			p.status, p.refused = seckill.PaymentRefundFailed, false
			if err != nil {
				rt.Fatalf("last send: %v", err)
			}
		} else if err == nil {
			rt.Fatalf("send to a provider that did not answer: no error to retry on")
		}
	}
}

// refundConfirm is the provider's webhook about a refund: its
// confirmation or refusal, for any payment (not owed back ones included:
// nothing must change then).
func (m *lifeModel) refundConfirm(rt *rapid.T) {
	p := m.drawPayment(rt)
	typ := rapid.SampledFrom([]string{seckill.EventRefundSucceeded, seckill.EventRefundFailed}).Draw(rt, "type")
	if typ == seckill.EventRefundFailed {
		m.provider.fail(p.id)
	}
	m.deliverOne(rt, paymentEvent(&seckill.Payment{ID: p.id, Amount: m.amount, Currency: "CNY"}, typ))
}

// refundRetry is an operator sending a failed refund again.
func (m *lifeModel) refundRetry(rt *rapid.T) {
	p := m.drawPayment(rt)
	_, err := m.refunds.Retry(asUser(m.e.ctx, 1, true), p.id)
	if p.status != seckill.PaymentRefundFailed {
		wantCode(rt, fmt.Sprintf("retry of a %s refund", p.status), err, seckill.ECONFLICT)
		return
	}
	if err != nil {
		rt.Fatalf("retry of a failed refund: %v", err)
	}
	if p.refused {
		p.gen++
	}
	p.status, p.round, p.sends, p.refused = seckill.PaymentRefundNeeded, p.round+1, 0, false
	if _, ok := m.e.scheduled(seckill.RefundSend{PaymentID: p.id, Generation: p.gen, Round: p.round}); !ok {
		rt.Fatalf("retry of %s scheduled no send", p.id)
	}
}
