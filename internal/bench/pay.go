package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
)

// PayConfig makes the buyers pay (seckill-bench --pay-ratio): every buyer
// whose purchase was ACCEPTED opens their order's payment (createPayment,
// with their own token) once it is CREATED, and with probability Ratio the
// simulated provider confirms it Delay later through the signed webhook,
// as a real provider would. The others never pay: after the campaign's pay
// window their orders expire and their units go back on sale.
type PayConfig struct {
	On    bool
	Ratio float64       // 0..1
	Delay time.Duration // from createPayment to the provider's confirmation
	// Window is the pay window of the campaign the bench creates; 0 keeps
	// the server's SECKILL_PAY_WINDOW.
	Window time.Duration
	// WebhookSecret signs the provider's calls: the server's
	// SECKILL_PAYMENT_WEBHOOK_SECRET.
	WebhookSecret string
}

// payParallel bounds the payment calls in flight, so that paying does not
// crowd out the load it runs beside.
const payParallel = 32

// validate checks the payment settings against the rest of the run.
func (pc PayConfig) validate(cfg *Config) error {
	switch {
	case !pc.On:
		return nil
	case pc.Ratio < 0 || pc.Ratio > 1:
		return errors.New("--pay-ratio must be between 0 and 1")
	case pc.Delay < 0:
		return errors.New("--pay-delay must not be negative")
	case pc.Window != 0 && (pc.Window < time.Second || pc.Window%time.Second != 0 || pc.Window > 24*time.Hour):
		return errors.New("--pay-window must be whole seconds between 1s and 24h")
	case pc.Window != 0 && cfg.VoucherID != 0:
		return errors.New("--pay-window sets the pay window of the campaign the bench creates: omit --voucher")
	case len(cfg.Compare) > 0:
		return errors.New("--pay-ratio runs against the server at --url only: omit --compare")
	case pc.WebhookSecret == "":
		return errors.New("no webhook secret: the bench signs the provider's calls with the server's SECKILL_PAYMENT_WEBHOOK_SECRET")
	}
	return nil
}

// campaignInput is what the payment settings add to the campaign the bench
// creates.
func (pc PayConfig) campaignInput() map[string]any {
	if !pc.On || pc.Window == 0 {
		return nil
	}
	return map[string]any{"payWindowSeconds": int(pc.Window / time.Second)}
}

// payers pay the accepted orders of one run as they are accepted.
type payers struct {
	cfg     PayConfig
	gql     *controlClient
	webhook string
	http    *http.Client
	auth    []string        // "Bearer <token>" by user index
	parent  context.Context // the run's: when it ends, the run was interrupted
	ctx     context.Context
	stop    context.CancelFunc
	sem     chan struct{}
	wg      sync.WaitGroup

	mu        sync.Mutex
	out       report.Payments
	confirmed map[int64]bool
}

// newPayers returns the payers of the orders of the server at endpoint,
// whose webhook is /webhooks/payments beside it.
func newPayers(ctx context.Context, pc PayConfig, endpoint string, auth []string) (*payers, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("bad --url %q: %w", endpoint, err)
	}
	u.Path, u.RawQuery = "/webhooks/payments", ""
	client := &http.Client{Timeout: 15 * time.Second, Transport: load.NewTransport(payParallel)}
	pctx, stop := context.WithCancel(ctx)
	return &payers{
		cfg: pc, webhook: u.String(), http: client, auth: auth, parent: ctx, ctx: pctx, stop: stop,
		gql: &controlClient{endpoint: endpoint, http: client},
		sem: make(chan struct{}, payParallel), confirmed: map[int64]bool{},
	}, nil
}

// accepted starts paying one accepted order; it does not block.
func (p *payers) accepted(a load.Acceptance) {
	pays := rand.Float64() < p.cfg.Ratio
	p.wg.Go(func() { p.pay(a, pays) })
}

// wait waits up to timeout for every payment under way, then stops the
// rest, and returns what they did and the orders whose payment the
// provider confirmed.
func (p *payers) wait(ctx context.Context, timeout time.Duration) (report.Payments, map[int64]bool) {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
	case <-t.C:
	}
	p.stop()
	<-done
	p.http.CloseIdleConnections()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out, p.confirmed
}

// pay opens a's payment as its buyer and, when pays, has the provider
// confirm it after the delay.
func (p *payers) pay(a load.Acceptance, pays bool) {
	payment, err := p.createPayment(a)
	switch {
	case err != nil:
		p.fail(a, err)
		return
	case payment == nil:
		p.count(func(o *report.Payments) { o.Closed++ })
		return
	}
	p.count(func(o *report.Payments) { o.Created++ })
	if !pays {
		p.count(func(o *report.Payments) { o.Unpaid++ })
		return
	}
	if !load.SleepUntil(p.ctx, time.Now().Add(p.cfg.Delay)) {
		p.fail(a, errors.New("stopped before paying"))
		return
	}
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.N(256))
	}
	ev := seckill.PaymentEvent{ID: fmt.Sprintf("evt_bench_%d_%x", a.OrderID, b), Type: seckill.EventPaymentSucceeded,
		PaymentID: payment.ID, Amount: payment.Amount, Currency: payment.Currency}
	p.sem <- struct{}{}
	code, body, err := payhook.Send(p.ctx, p.http, p.webhook, []byte(p.cfg.WebhookSecret), ev)
	<-p.sem
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("the webhook answered %d %s", code, load.Snippet(body))
	}
	if err != nil {
		p.fail(a, err)
		return
	}
	var res struct {
		Status, Result string
	}
	if jerr := json.Unmarshal(body, &res); jerr != nil || res.Status != "applied" {
		p.fail(a, fmt.Errorf("the webhook answered %s", load.Snippet(body)))
		return
	}
	p.count(func(o *report.Payments) {
		switch res.Result {
		case string(seckill.PaymentSucceeded):
			o.Confirmed++
			p.confirmed[a.OrderID] = true
		case string(seckill.PaymentRefundNeeded):
			o.Late++
		}
	})
}

// paymentAnswer is what createPayment answers.
type paymentAnswer struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// createPayment opens a's payment as its buyer, waiting while the order is
// still QUEUED. A nil payment says the order closed before it could be
// paid (its pay window is shorter than the wait for it to be CREATED).
func (p *payers) createPayment(a load.Acceptance) (*paymentAnswer, error) {
	token := p.auth[a.User][len("Bearer "):]
	id := strconv.FormatInt(a.OrderID, 10)
	backoff := 20 * time.Millisecond
	for {
		var out struct {
			CreatePayment paymentAnswer `json:"createPayment"`
		}
		p.sem <- struct{}{}
		err := p.gql.doAs(p.ctx, token, `mutation Pay($id: ID!) { createPayment(orderId: $id) { id amount currency } }`,
			map[string]any{"id": id}, &out)
		var ae *answerError
		if err == nil || !errors.As(err, &ae) || (ae.Code != seckill.ECONFLICT && ae.Code != seckill.ENOTFOUND) {
			<-p.sem
			if err != nil {
				return nil, err
			}
			return &out.CreatePayment, nil
		}
		// Not awaiting payment, or not found: still QUEUED, or persisted
		// between the server's two looks (try again), or closed already.
		var st struct {
			Order *struct{ Status seckill.OrderStatus } `json:"order"`
		}
		err = p.gql.doAs(p.ctx, token, `query O($id: ID!) { order(id: $id) { status } }`, map[string]any{"id": id}, &st)
		<-p.sem
		switch {
		case err != nil:
			return nil, err
		case st.Order == nil:
			return nil, fmt.Errorf("order %d not found", a.OrderID)
		case st.Order.Status.Terminal():
			return nil, nil
		}
		if !load.SleepUntil(p.ctx, time.Now().Add(backoff)) {
			return nil, p.ctx.Err()
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (p *payers) count(f func(o *report.Payments)) {
	p.mu.Lock()
	f(&p.out)
	p.mu.Unlock()
}

func (p *payers) fail(a load.Acceptance, err error) {
	if p.parent.Err() != nil {
		return // interrupted: not the server's failure
	}
	p.count(func(o *report.Payments) {
		if o.Errors++; o.ErrorExample == "" {
			o.ErrorExample = fmt.Sprintf("order %d: %v", a.OrderID, err)
		}
	})
}
