package stripepay

import (
	"context"
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
	"github.com/stripe/stripe-go/v82/webhook"

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

// Tolerance is how far the signed timestamp may be from our clock
// (stripe-go's default, five minutes): an older call is a replay.
const Tolerance = webhook.DefaultTolerance

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
	Status string `json:"status"`           // applied, duplicate, ignored, refused
	Result string `json:"result,omitempty"` // the payment's status after an applied event
	Error  string `json:"error,omitempty"`
}

// ServeHTTP verifies Stripe's signature over the raw body and its
// timestamp (within Tolerance), maps the event to ours and applies it.
// 200: applied now or before (Stripe redelivers an event under its id: a
// duplicate), or an event we do not handle (ignored). 400: bad or stale
// signature, a malformed event, or a wrong amount; 404: unknown payment;
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
	// The API version is not checked: we read only fields every version
	// has (metadata, amount, currency, status).
	event, err := webhook.ConstructEventWithOptions(body, r.Header.Get("Stripe-Signature"), h.secret,
		webhook.ConstructEventOptions{Tolerance: h.tolerance, IgnoreAPIVersionMismatch: true})
	if err == nil && signedAt(r.Header.Get("Stripe-Signature")).After(h.now().Add(h.tolerance)) {
		// stripe-go refuses only old timestamps; one from the future could
		// be replayed for longer than the tolerance.
		err = errors.New("timestamp is in the future")
	}
	if err != nil {
		write(w, http.StatusBadRequest, answer{Status: "refused", Error: "signature: " + err.Error()})
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
	if res.Duplicate {
		a.Status = "duplicate"
	}
	write(w, http.StatusOK, a)
}

// signedAt is the t= timestamp of a Stripe-Signature header that
// stripe-go has verified.
func signedAt(header string) time.Time {
	for part := range strings.SplitSeq(header, ",") {
		if v, ok := strings.CutPrefix(part, "t="); ok {
			if t, err := strconv.ParseInt(v, 10, 64); err == nil {
				return time.Unix(t, 0)
			}
		}
	}
	return time.Time{}
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
		meta, currency = pi.Metadata, string(pi.Currency)
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
