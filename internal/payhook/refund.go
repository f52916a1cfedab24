package payhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"seckill/internal/seckill"
)

// The built-in provider's refund call: seckill asks the provider to refund
// a payment with a POST to SECKILL_PAYMENT_REFUND_URL, signed like the
// webhook (Seckill-Signature over "<t>.<raw body>" with the webhook's
// secret) and carrying an idempotency key derived from the payment, both
// in the body and in the Idempotency-Key header. The provider refunds once
// per key, however often the same call comes. docs/payments.md describes
// the call for whoever writes the provider's side.

// IdempotencyHeader names the header that carries a refund's key.
const IdempotencyHeader = "Idempotency-Key"

// RefundCall is the body of the refund call.
type RefundCall struct {
	IdempotencyKey string `json:"idempotency_key"`
	PaymentID      string `json:"payment_id"`
	OrderID        string `json:"order_id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
}

// RefundReply is the provider's answer to a refund call (2xx).
type RefundReply struct {
	Status   string `json:"status"` // pending, succeeded or failed
	RefundID string `json:"refund_id,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// RefundClient sends refunds to the built-in provider; it implements
// seckill.PaymentProvider.
type RefundClient struct {
	url    string
	secret []byte
	client *http.Client
	now    func() time.Time
}

var _ seckill.PaymentProvider = (*RefundClient)(nil)

// DefaultRefundTimeout bounds one refund call unless configured
// (SECKILL_PAYMENT_REFUND_TIMEOUT).
const DefaultRefundTimeout = 10 * time.Second

// NewRefundClient returns a client posting refund calls to url, signed
// with secret, each given timeout to answer.
func NewRefundClient(url, secret string, timeout time.Duration) *RefundClient {
	return &RefundClient{url: url, secret: []byte(secret), client: &http.Client{Timeout: timeout}, now: time.Now}
}

// Refund implements seckill.PaymentProvider. A 2xx answer says where the
// refund stands; 400, 404, 409 and 422 are the provider's refusal (409: the
// key came with another refund, which it will never accept); any other
// answer, or none, is an error: nothing was decided, send it again.
func (c *RefundClient) Refund(ctx context.Context, r seckill.RefundRequest) (seckill.RefundAnswer, error) {
	body, err := json.Marshal(RefundCall{IdempotencyKey: r.Key, PaymentID: r.PaymentID,
		OrderID: strconv.FormatInt(r.OrderID, 10), Amount: r.Amount, Currency: r.Currency})
	if err != nil {
		return seckill.RefundAnswer{}, fmt.Errorf("payhook: encode refund: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return seckill.RefundAnswer{}, fmt.Errorf("payhook: refund: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyHeader, r.Key)
	req.Header.Set(Header, Sign(c.secret, c.now(), body))
	res, err := c.client.Do(req)
	if err != nil {
		return seckill.RefundAnswer{}, fmt.Errorf("payhook: refund %s: %w", r.Key, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, MaxBody))
	if err != nil {
		return seckill.RefundAnswer{}, fmt.Errorf("payhook: refund %s: read answer: %w", r.Key, err)
	}
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		var rep RefundReply
		if err := json.Unmarshal(raw, &rep); err != nil {
			return seckill.RefundAnswer{}, fmt.Errorf("payhook: refund %s: answer %d is not a refund: %q", r.Key, res.StatusCode, short(raw))
		}
		ans := seckill.RefundAnswer{State: seckill.RefundState(rep.Status), ProviderID: rep.RefundID, Reason: rep.Reason}
		switch ans.State {
		case seckill.RefundPending, seckill.RefundSucceeded, seckill.RefundRefused:
			return ans, nil
		}
		return seckill.RefundAnswer{}, fmt.Errorf("payhook: refund %s: unknown status %q", r.Key, rep.Status)
	case res.StatusCode == http.StatusBadRequest, res.StatusCode == http.StatusNotFound,
		res.StatusCode == http.StatusConflict, res.StatusCode == http.StatusUnprocessableEntity:
		return seckill.RefundAnswer{State: seckill.RefundRefused, Reason: fmt.Sprintf("%d %s", res.StatusCode, short(raw))}, nil
	}
	return seckill.RefundAnswer{}, fmt.Errorf("payhook: refund %s: answer %d %s", r.Key, res.StatusCode, short(raw))
}

// short is an answer's body as a log or an operator may read it.
func short(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// ErrNotRefundCall is what ParseRefundCall answers for a body that is not
// one refund call.
var ErrNotRefundCall = errors.New("body must be one JSON refund call: idempotency_key, payment_id, order_id, amount, currency")

// ParseRefundCall checks a refund call as a provider receives it: its
// signature over the raw body at now, its header key, its fields. It
// returns ErrMalformed, ErrStale or ErrSignature for the signature, and
// ErrNotRefundCall for the body.
func ParseRefundCall(secret []byte, header http.Header, body []byte, now time.Time) (RefundCall, error) {
	if err := Verify(secret, header.Get(Header), body, now); err != nil {
		return RefundCall{}, err
	}
	var call RefundCall
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&call); err != nil || dec.More() {
		return RefundCall{}, ErrNotRefundCall
	}
	if call.IdempotencyKey == "" || call.IdempotencyKey != header.Get(IdempotencyHeader) ||
		!seckill.ValidPaymentID(call.PaymentID) || call.Amount < 0 || !seckill.ValidCurrency(call.Currency) {
		return RefundCall{}, ErrNotRefundCall
	}
	if _, err := seckill.ParseID("order_id", call.OrderID); err != nil {
		return RefundCall{}, ErrNotRefundCall
	}
	return call, nil
}
