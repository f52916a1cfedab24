// Package stripepay is Stripe as seckill's payment provider
// (SECKILL_PAYMENT_PROVIDER=stripe), through stripe-go:
//
//   - Client opens each of our payments as a PaymentIntent (our payment id
//     in its metadata, an idempotency key derived from it) and answers its
//     client secret (seckill.PaymentOpener), and refunds through Stripe's
//     Refunds API under our refund's idempotency key
//     (seckill.PaymentProvider);
//   - Handler serves POST /webhooks/stripe: it verifies Stripe's signature
//     (webhook.go) and maps payment_intent.succeeded,
//     payment_intent.payment_failed and the refund events to our payment
//     events, naming the PaymentIntent, which the domain applies once per
//     event id, and only to the payment that PaymentIntent was opened for.
//
// Amounts are converted between our minor units and Stripe's (money.go).
package stripepay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/stripe/stripe-go/v82"

	"seckill/internal/seckill"
)

// Metadata keys we set on Stripe's objects.
const (
	MetaPaymentID = "seckill_payment_id"
	MetaOrderID   = "seckill_order_id"
)

// IntentKey is the idempotency key of a payment's PaymentIntent: asked
// again for the same payment (a buyer's app retrying createPayment), Stripe
// answers the PaymentIntent it created the first time. Stripe keeps keys
// at least 24 hours, as long as the longest time to pay
// (seckill.MaxPayWindow), and no payment is opened after its payBy.
func IntentKey(paymentID string) string { return "seckill_pi_" + paymentID }

// RefundKey is the idempotency key of a refund's send at Stripe: our
// refund's key (seckill.RefundKey), which moves to a new generation only
// when an operator sends again a refund Stripe refused.
func RefundKey(key string) string { return "seckill_" + key }

// Options configure a Client.
type Options struct {
	APIKey string // STRIPE_API_KEY, sk_live_… or sk_test_…
	// APIBase is the API's URL; empty means Stripe's
	// (https://api.stripe.com). Tests point it at stripe-mock.
	APIBase string
	// Timeout bounds one call; zero means 10 s.
	Timeout time.Duration
	Logger  *slog.Logger // stripe-go's own warnings and errors
}

// Client calls Stripe's API; it implements seckill.PaymentOpener and
// seckill.PaymentProvider.
type Client struct {
	sc *stripe.Client
}

var (
	_ seckill.PaymentOpener   = (*Client)(nil)
	_ seckill.PaymentProvider = (*Client)(nil)
)

// NewClient returns a client of Stripe's API; it refuses to build without
// an API key.
func NewClient(opts Options) (*Client, error) {
	if opts.APIKey == "" || opts.Logger == nil {
		return nil, errors.New("stripepay: an API key (STRIPE_API_KEY) and a logger are required")
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	// The refund queue and the buyer's retries are our retries; stripe-go's
	// own would only hide a slow Stripe behind a longer wait.
	retries := int64(0)
	cfg := &stripe.BackendConfig{HTTPClient: &http.Client{Timeout: opts.Timeout}, MaxNetworkRetries: &retries,
		LeveledLogger: slogLogger{opts.Logger}}
	if opts.APIBase != "" {
		cfg.URL = stripe.String(opts.APIBase)
	}
	return &Client{sc: stripe.NewClient(opts.APIKey, stripe.WithBackends(stripe.NewBackendsWithConfig(cfg)))}, nil
}

// slogLogger hands stripe-go's log lines to slog; its info and debug lines
// (one per request) are debug ones here.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Debugf(format string, v ...any) {
	s.l.Debug("stripe: " + fmt.Sprintf(format, v...))
}
func (s slogLogger) Infof(format string, v ...any) { s.l.Debug("stripe: " + fmt.Sprintf(format, v...)) }
func (s slogLogger) Warnf(format string, v ...any) { s.l.Warn("stripe: " + fmt.Sprintf(format, v...)) }
func (s slogLogger) Errorf(format string, v ...any) {
	s.l.Error("stripe: " + fmt.Sprintf(format, v...))
}

// OpenPayment implements seckill.PaymentOpener: it creates p's
// PaymentIntent (or, under the same idempotency key, finds it) and answers
// its client secret, with the PaymentIntent's id as the payment's
// reference (a refund names it). EINVALID for an amount Stripe cannot take; an error
// of Stripe's API or network is EUNAVAILABLE (the buyer may ask again).
func (c *Client) OpenPayment(ctx context.Context, p seckill.Payment) (seckill.Opened, error) {
	amount, currency, err := toStripeAmount(p.Amount, p.Currency)
	if err != nil {
		return seckill.Opened{}, err
	}
	params := &stripe.PaymentIntentCreateParams{
		Amount:   stripe.Int64(amount),
		Currency: stripe.String(currency),
		AutomaticPaymentMethods: &stripe.PaymentIntentCreateAutomaticPaymentMethodsParams{
			Enabled: stripe.Bool(true)},
		Metadata: map[string]string{MetaPaymentID: p.ID, MetaOrderID: strconv.FormatInt(p.OrderID, 10)},
	}
	params.SetIdempotencyKey(IntentKey(p.ID))
	pi, err := c.sc.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		var se *stripe.Error
		if errors.As(err, &se) && se.Type == stripe.ErrorTypeInvalidRequest && se.HTTPStatusCode == http.StatusBadRequest {
			return seckill.Opened{}, seckill.Errorf(seckill.EINVALID, "Stripe refused the payment of %s: %s",
				seckill.FormatAmount(p.Amount, p.Currency), se.Msg)
		}
		// The domain error carries the code and the safe message; the
		// log keeps Stripe's.
		return seckill.Opened{}, fmt.Errorf("%w (stripepay: create PaymentIntent for %s: %v)",
			seckill.Errorf(seckill.EUNAVAILABLE, "Stripe could not open the payment now; ask again in a moment"), p.ID, err)
	}
	if pi.ClientSecret == "" {
		return seckill.Opened{}, fmt.Errorf("stripepay: PaymentIntent %s for %s came without a client secret", pi.ID, p.ID)
	}
	return seckill.Opened{ClientSecret: pi.ClientSecret, Ref: pi.ID}, nil
}

// Refund implements seckill.PaymentProvider: it refunds the payment's
// PaymentIntent, the reference OpenPayment answered (or, for a payment
// opened without one, the PaymentIntent Stripe's search finds by our
// payment id in its metadata), whole under the refund's idempotency key. Stripe's refusal
// (a 4xx about the refund) is RefundRefused; anything else, an
// unauthorized key included, is an error: nothing was decided.
func (c *Client) Refund(ctx context.Context, r seckill.RefundRequest) (seckill.RefundAnswer, error) {
	amount, _, err := toStripeAmount(r.Amount, r.Currency)
	if err != nil {
		return seckill.RefundAnswer{State: seckill.RefundRefused, Reason: seckill.ErrorMessage(err)}, nil
	}
	pi := r.ProviderRef
	if pi == "" {
		if pi, err = c.intentOf(ctx, r.PaymentID); err != nil {
			return seckill.RefundAnswer{}, err
		}
	}
	params := &stripe.RefundCreateParams{
		PaymentIntent: stripe.String(pi),
		Amount:        stripe.Int64(amount),
		Reason:        stripe.String(string(stripe.RefundReasonRequestedByCustomer)),
		Metadata: map[string]string{MetaPaymentID: r.PaymentID, MetaOrderID: strconv.FormatInt(r.OrderID, 10),
			"seckill_refund_key": r.Key},
	}
	params.SetIdempotencyKey(RefundKey(r.Key))
	rf, err := c.sc.V1Refunds.Create(ctx, params)
	if err != nil {
		var se *stripe.Error
		if errors.As(err, &se) {
			switch {
			case se.Code == stripe.ErrorCodeChargeAlreadyRefunded:
				return seckill.RefundAnswer{State: seckill.RefundSucceeded, Reason: se.Msg}, nil
			case se.Type == stripe.ErrorTypeInvalidRequest && (se.HTTPStatusCode == http.StatusBadRequest ||
				se.HTTPStatusCode == http.StatusPaymentRequired || se.HTTPStatusCode == http.StatusNotFound):
				return seckill.RefundAnswer{State: seckill.RefundRefused, Reason: fmt.Sprintf("%d %s", se.HTTPStatusCode, se.Msg)}, nil
			}
		}
		return seckill.RefundAnswer{}, fmt.Errorf("stripepay: refund %s: %w", r.Key, err)
	}
	return toRefundAnswer(rf), nil
}

// toRefundAnswer says where a Stripe refund stands, as the domain reads it.
func toRefundAnswer(rf *stripe.Refund) seckill.RefundAnswer {
	ans := seckill.RefundAnswer{ProviderID: rf.ID}
	switch rf.Status {
	case stripe.RefundStatusSucceeded:
		ans.State = seckill.RefundSucceeded
	case stripe.RefundStatusFailed, stripe.RefundStatusCanceled:
		ans.State, ans.Reason = seckill.RefundRefused, "Stripe: refund "+string(rf.Status)
		if rf.FailureReason != "" {
			ans.Reason += ": " + string(rf.FailureReason)
		}
	default: // pending, requires_action: refund.updated or refund.failed confirms it
		ans.State = seckill.RefundPending
	}
	return ans
}

// intentOf returns the id of the PaymentIntent opened for our payment.
// Stripe's search is eventually consistent (new objects show within about
// a minute); a refund is sent only after Stripe's webhook confirmed the
// payment, and a send that finds nothing is an error, sent again later.
func (c *Client) intentOf(ctx context.Context, paymentID string) (string, error) {
	if !seckill.ValidPaymentID(paymentID) { // it goes into a query
		return "", fmt.Errorf("stripepay: malformed payment id %q", paymentID)
	}
	params := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{
		Query: fmt.Sprintf("metadata['%s']:'%s'", MetaPaymentID, paymentID), Limit: stripe.Int64(2)}}
	var ids []string
	for pi, err := range c.sc.V1PaymentIntents.Search(ctx, params) {
		if err != nil {
			return "", fmt.Errorf("stripepay: search the PaymentIntent of %s: %w", paymentID, err)
		}
		ids = append(ids, pi.ID)
		if len(ids) == 2 {
			break
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("stripepay: no PaymentIntent found for %s (yet: Stripe's search lags about a minute)", paymentID)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("stripepay: more than one PaymentIntent for %s (%s, %s): refund it by hand", paymentID, ids[0], ids[1])
}
