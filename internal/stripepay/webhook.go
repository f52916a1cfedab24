package stripepay

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"seckill/internal/seckill"
)

// Service is what the webhook needs from the domain; *seckill.Life
// implements it.
type Service interface {
	// ApplyPaymentEvent applies a provider's event once per event id.
	// EINVALID (a field, or the amount or currency differ from the
	// payment's), ENOTFOUND (no such payment), ECONFLICT (the event id was
	// used for another payment).
	ApplyPaymentEvent(ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error)
}

// MaxBody bounds the size of a webhook call's body; Stripe's events carry
// whole objects.
const MaxBody = 512 << 10

// Tolerance is how far the signed timestamp may be from our clock, either
// way (stripe-go's default, five minutes): an older call is a replay.
const Tolerance = 5 * time.Minute

// Handler serves POST /webhooks/stripe.
type Handler struct {
	service   Service
	secret    string
	logger    *slog.Logger
	tolerance time.Duration
	now       func() time.Time
}

// NewHandler returns the webhook handler, verifying with the endpoint's
// signing secret (STRIPE_WEBHOOK_SECRET, whsec_…); it refuses to build
// without one.
func NewHandler(service Service, secret string, logger *slog.Logger) (*Handler, error) {
	if service == nil || secret == "" || logger == nil {
		return nil, errors.New("stripepay: the webhook needs the domain, a signing secret (STRIPE_WEBHOOK_SECRET) and a logger")
	}
	return &Handler{service: service, secret: secret, logger: logger, tolerance: Tolerance, now: time.Now}, nil
}

// answer is the body of every response.
type answer struct {
	Status string `json:"status"`           // applied, duplicate, ignored, mismatch, refused
	Result string `json:"result,omitempty"` // the payment's status after an applied event
	Error  string `json:"error,omitempty"`
}

// ServeHTTP verifies Stripe's signature over the raw body and its
// timestamp (within Tolerance), maps the event to ours and applies it.
// 200: applied now or before (Stripe redelivers an event under its id: a
// duplicate), an event we do not handle (ignored), or one about a
// PaymentIntent other than the one opened for its payment, or with another
// amount (mismatch: recorded and alerted, nothing changed). 400: bad or
// stale signature, a malformed event; 404: unknown payment;
// 409: event id of another payment; 413: body too large; 5xx: Stripe
// sends it again later. Nothing changes unless the answer is 200.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		write(w, http.StatusMethodNotAllowed, answer{Status: "refused", Error: "POST only"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		write(w, http.StatusRequestEntityTooLarge, answer{Status: "refused", Error: fmt.Sprintf("body larger than %d bytes", MaxBody)})
		return
	} else if err != nil {
		write(w, http.StatusBadRequest, answer{Status: "refused", Error: "could not read the body"})
		return
	}
	if err := h.verify(body, r.Header.Get("Stripe-Signature")); err != nil {
		write(w, http.StatusBadRequest, answer{Status: "refused", Error: "signature: " + err.Error()})
		return
	}
	// The API version is not checked: we read only fields every version
	// has (metadata, amount, currency, status).
	var event stripe.Event
	if err := json.Unmarshal(body, &event); err != nil {
		write(w, http.StatusBadRequest, answer{Status: "refused", Error: "body is not a Stripe event"})
		return
	}
	ev, handled, err := toPaymentEvent(event)
	if err != nil {
		write(w, http.StatusBadRequest, answer{Status: "refused", Error: err.Error()})
		return
	}
	if !handled {
		write(w, http.StatusOK, answer{Status: "ignored"})
		return
	}
	res, err := h.service.ApplyPaymentEvent(r.Context(), ev)
	if err != nil {
		code := seckill.ErrorCode(err)
		status := map[string]int{
			seckill.EINVALID:     http.StatusBadRequest,
			seckill.ENOTFOUND:    http.StatusNotFound,
			seckill.ECONFLICT:    http.StatusConflict,
			seckill.EUNAVAILABLE: http.StatusServiceUnavailable,
		}[code]
		msg := seckill.ErrorMessage(err)
		if status == 0 {
			h.logger.ErrorContext(r.Context(), "stripe webhook", "event_id", ev.ID, "err", err)
			status, msg = http.StatusInternalServerError, "internal error"
		}
		write(w, status, answer{Status: "refused", Error: msg})
		return
	}
	a := answer{Status: "applied", Result: string(res.Payment.Status)}
	switch {
	case res.Outcome == seckill.AppliedMismatch:
		// Recorded and alerted, nothing changed: a 2xx, or Stripe would
		// deliver it again for three days.
		a.Status = "mismatch"
	case res.Duplicate:
		a.Status = "duplicate"
	}
	write(w, http.StatusOK, a)
}

// Errors of the Stripe-Signature header.
var (
	errNoSignature  = errors.New("no Stripe-Signature header")
	errBadSignature = errors.New("no v1 signature matches the body")
)

// verify checks a Stripe-Signature header over the raw body: exactly one
// t=<unix seconds>, one or more v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
// of which one must match (two while Stripe rotates the endpoint's
// secret), other schemes ignored as Stripe documents (v0 is its test
// mode's). The header is parsed once, and the one t it holds is both the
// one signed and the one within the tolerance, either way: stripe-go's
// parser keeps the last of repeated t's, so a check of the first beside it
// (as this handler once made) could pass a t the signature did not cover.
// So the check is ours rather than stripe-go's ConstructEvent.
func (h *Handler) verify(body []byte, header string) error {
	if header == "" {
		return errNoSignature
	}
	var ts string
	var sigs [][]byte
	for item := range strings.SplitSeq(header, ",") {
		key, value, ok := strings.Cut(item, "=")
		switch {
		case !ok || key == "":
			return fmt.Errorf("malformed Stripe-Signature header: item %q is not scheme=value", item)
		case key == "t":
			if ts != "" {
				return errors.New("malformed Stripe-Signature header: more than one t")
			}
			// Only the canonical decimal spelling: the signature covers
			// the timestamp as written, and one number has one spelling.
			if n, err := strconv.ParseInt(value, 10, 64); err != nil || n < 0 || strconv.FormatInt(n, 10) != value {
				return fmt.Errorf("malformed Stripe-Signature header: t=%q is not unix seconds", value)
			}
			ts = value
		case key == "v1":
			sig, err := hex.DecodeString(value)
			if err != nil || len(sig) != sha256.Size {
				return errors.New("malformed Stripe-Signature header: a v1 is not a hex HMAC-SHA256")
			}
			sigs = append(sigs, sig)
		}
	}
	if ts == "" {
		return errors.New("malformed Stripe-Signature header: no t")
	}
	if len(sigs) == 0 {
		return errors.New("malformed Stripe-Signature header: no v1 signature")
	}
	mac := hmac.New(sha256.New, []byte(h.secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	matched := false
	for _, sig := range sigs {
		// Every one compared, so that the time taken does not say which.
		matched = hmac.Equal(sig, want) || matched
	}
	if !matched {
		return errBadSignature
	}
	n, _ := strconv.ParseInt(ts, 10, 64)
	// Too old is a replay; too far ahead could be replayed for longer
	// than the tolerance.
	if d := h.now().Sub(time.Unix(n, 0)); d > h.tolerance || d < -h.tolerance {
		return fmt.Errorf("timestamp %s is more than %s from our clock", ts, h.tolerance)
	}
	return nil
}

// toPaymentEvent maps a Stripe event to ours. handled is false for an
// event we do not act on: another type, a PaymentIntent or refund that is
// not one of our payments', a refund still pending.
func toPaymentEvent(e stripe.Event) (ev seckill.PaymentEvent, handled bool, err error) {
	if e.Data == nil {
		return ev, false, errors.New("event without data")
	}
	ev.ID = e.ID
	var amount int64
	var currency string
	var meta map[string]string
	switch e.Type {
	case stripe.EventTypePaymentIntentSucceeded, stripe.EventTypePaymentIntentPaymentFailed:
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(e.Data.Raw, &pi); err != nil {
			return ev, false, fmt.Errorf("%s: data is not a PaymentIntent", e.Type)
		}
		if pi.ID == "" {
			// The PaymentIntent decides which payment the event may be
			// about: without it, none.
			return ev, false, fmt.Errorf("%s: a PaymentIntent without an id", e.Type)
		}
		meta, currency, ev.ProviderRef = pi.Metadata, string(pi.Currency), pi.ID
		if e.Type == stripe.EventTypePaymentIntentSucceeded {
			ev.Type, amount = seckill.EventPaymentSucceeded, pi.AmountReceived
		} else {
			ev.Type, amount = seckill.EventPaymentFailed, pi.Amount
			if pi.LastPaymentError != nil {
				ev.Reason = truncate(pi.LastPaymentError.Msg)
			}
		}
	case stripe.EventTypeRefundCreated, stripe.EventTypeRefundUpdated, stripe.EventTypeRefundFailed,
		stripe.EventTypeChargeRefundUpdated:
		var rf stripe.Refund
		if err := json.Unmarshal(e.Data.Raw, &rf); err != nil {
			return ev, false, fmt.Errorf("%s: data is not a refund", e.Type)
		}
		meta, currency, amount = rf.Metadata, string(rf.Currency), rf.Amount
		if rf.PaymentIntent != nil {
			ev.ProviderRef = rf.PaymentIntent.ID
		}
		switch ans := toRefundAnswer(&rf); ans.State {
		case seckill.RefundSucceeded:
			ev.Type = seckill.EventRefundSucceeded
		case seckill.RefundRefused:
			ev.Type, ev.Reason = seckill.EventRefundFailed, truncate(ans.Reason)
		default:
			return ev, false, nil
		}
	default:
		return ev, false, nil
	}
	ev.PaymentID = meta[MetaPaymentID]
	if ev.PaymentID == "" {
		return ev, false, nil // not opened by seckill
	}
	var ok bool
	if ev.Amount, ev.Currency, ok = fromStripeAmount(amount, currency); !ok {
		return ev, false, fmt.Errorf("%s: amount %d %s does not fit the currency's minor unit", e.Type, amount, currency)
	}
	return ev, true, nil
}

func truncate(s string) string {
	if len(s) > seckill.MaxReasonLen {
		s = strings.ToValidUTF8(s[:seckill.MaxReasonLen], "")
	}
	return s
}

func write(w http.ResponseWriter, status int, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}
