package payhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"seckill/internal/seckill"
)

// DevProvider is a payment provider for development (seckill payments
// provider): it answers the refund call as a real provider would, refunding
// once per idempotency key, and confirms each refund with a signed
// refund.succeeded (or, when told to refuse, refund.failed) event to the
// webhook, redelivered until the webhook answers 2xx. It keeps its refunds
// in memory.
type DevProvider struct {
	secret  []byte
	webhook string
	refuse  bool
	delay   time.Duration
	logger  *slog.Logger
	client  *http.Client
	now     func() time.Time

	mu      sync.Mutex
	refunds map[string]*devRefund // by idempotency key
	wake    chan struct{}
}

// DevProviderOptions configure a DevProvider.
type DevProviderOptions struct {
	Secret  string        // signs the webhook events and checks the refund calls
	Webhook string        // the webhook's URL, e.g. http://localhost:8080/webhooks/payments
	Refuse  bool          // refuse every refund (refund.failed)
	Delay   time.Duration // how long after a refund call its event is sent
	Logger  *slog.Logger
}

type devRefund struct {
	ID        string     `json:"refund_id"`
	Call      RefundCall `json:"call"`
	Status    string     `json:"status"` // pending until the webhook took the event, then succeeded or failed
	Calls     int        `json:"calls"`  // refund calls with this key
	Delivered bool       `json:"delivered"`
	due       time.Time
	tries     int
}

// NewDevProvider returns a development provider.
func NewDevProvider(opts DevProviderOptions) (*DevProvider, error) {
	if opts.Secret == "" || opts.Webhook == "" || opts.Logger == nil {
		return nil, errors.New("payhook: the development provider needs a secret, the webhook's URL and a logger")
	}
	return &DevProvider{secret: []byte(opts.Secret), webhook: opts.Webhook, refuse: opts.Refuse, delay: opts.Delay,
		logger: opts.Logger, client: &http.Client{Timeout: 10 * time.Second}, now: time.Now,
		refunds: map[string]*devRefund{}, wake: make(chan struct{}, 1)}, nil
}

// ServeHTTP serves POST /refunds (the refund call) and GET /refunds (what it
// refunded, as JSON).
func (p *DevProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/refunds" && r.Method == http.MethodPost:
		p.refund(w, r)
	case r.URL.Path == "/refunds" && r.Method == http.MethodGet:
		p.mu.Lock()
		list := make([]*devRefund, 0, len(p.refunds))
		for _, rf := range p.refunds {
			list = append(list, rf)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
		p.mu.Unlock()
	default:
		http.Error(w, "the development payment provider serves POST and GET /refunds", http.StatusNotFound)
	}
}

func (p *DevProvider) refund(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, RefundReply{Status: "failed", Reason: "could not read the body"})
		return
	}
	call, err := ParseRefundCall(p.secret, r.Header, body, p.now())
	switch {
	case errors.Is(err, ErrStale), errors.Is(err, ErrSignature):
		writeJSON(w, http.StatusUnauthorized, RefundReply{Status: "failed", Reason: err.Error()})
		return
	case err != nil:
		writeJSON(w, http.StatusBadRequest, RefundReply{Status: "failed", Reason: err.Error()})
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rf, ok := p.refunds[call.IdempotencyKey]
	if ok && rf.Call != call {
		writeJSON(w, http.StatusConflict, RefundReply{Status: "failed", Reason: "this idempotency key came with another refund"})
		return
	}
	if !ok {
		rf = &devRefund{ID: "re_" + call.IdempotencyKey, Call: call, Status: "pending", due: p.now().Add(p.delay)}
		p.refunds[call.IdempotencyKey] = rf
		p.logger.Info("refund accepted", "refund_id", rf.ID, "payment_id", call.PaymentID,
			"amount", seckill.FormatAmount(call.Amount, call.Currency))
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	rf.Calls++
	// The same answer for every call with the key: the refund is under
	// way until the webhook has its event.
	writeJSON(w, http.StatusOK, RefundReply{Status: "pending", RefundID: rf.ID})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Run delivers the refunds' events until ctx ends: each due one is signed
// and posted to the webhook, and posted again with a backoff (from a
// second up to a minute) until the webhook answers 2xx, as a provider
// redelivers.
func (p *DevProvider) Run(ctx context.Context) {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		for _, rf := range p.due() {
			p.deliver(ctx, rf)
		}
		t.Reset(p.untilNext())
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-t.C:
		}
	}
}

func (p *DevProvider) due() []*devRefund {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	var out []*devRefund
	for _, rf := range p.refunds {
		if !rf.Delivered && !rf.due.After(now) {
			out = append(out, rf)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].due.Before(out[j].due) })
	return out
}

func (p *DevProvider) untilNext() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := time.Minute
	for _, rf := range p.refunds {
		if !rf.Delivered {
			next = min(next, max(time.Until(rf.due), 10*time.Millisecond))
		}
	}
	return next
}

func (p *DevProvider) deliver(ctx context.Context, rf *devRefund) {
	p.mu.Lock()
	call := rf.Call
	p.mu.Unlock()
	ev := seckill.PaymentEvent{ID: "evt_" + rf.ID, Type: seckill.EventRefundSucceeded, PaymentID: call.PaymentID,
		Amount: call.Amount, Currency: call.Currency}
	if p.refuse {
		ev.Type, ev.Reason = seckill.EventRefundFailed, "refused by the development provider (--refuse)"
	}
	status, body, err := Send(ctx, p.client, p.webhook, p.secret, ev)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && status >= 200 && status < 300 {
		rf.Delivered, rf.Status = true, "succeeded"
		if p.refuse {
			rf.Status = "failed"
		}
		p.logger.Info("refund confirmed to the webhook", "refund_id", rf.ID, "event", ev.Type, "answer", short(body))
		return
	}
	rf.tries++
	backoff := min(time.Second<<min(rf.tries-1, 6), time.Minute)
	rf.due = p.now().Add(backoff)
	p.logger.Warn("webhook did not take the refund's event; sending it again later",
		"refund_id", rf.ID, "status", status, "err", err, "retry_in", backoff.String())
}

// DevProviderBanner is what `seckill payments provider` prints when it
// starts.
func DevProviderBanner(addr, webhook string, refuse bool) string {
	verdict := "refunds every payment"
	if refuse {
		verdict = "refuses every refund"
	}
	return fmt.Sprintf("development payment provider on http://%s (%s)\n  refund call   POST http://%s/refunds  (SECKILL_PAYMENT_REFUND_URL)\n  refunds made  GET  http://%s/refunds\n  confirms to   %s\n",
		addr, verdict, addr, addr, webhook)
}
