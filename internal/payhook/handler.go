package payhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"

	"seckill/internal/seckill"
)

// Service is what the webhook needs from the domain; *seckill.Service
// implements it.
type Service interface {
	// ApplyPaymentEvent applies a provider's event once per event id.
	// EINVALID (a field, or the amount or currency differ from the
	// payment's), ENOTFOUND (no such payment), ECONFLICT (the event id was
	// used for another payment).
	ApplyPaymentEvent(ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error)
}

// Handler serves POST /webhooks/payments.
type Handler struct {
	service Service
	secret  []byte
	logger  *slog.Logger
	now     func() time.Time
}

// NewHandler returns the webhook handler. An empty secret refuses every
// call (503): no unsigned event is ever applied.
func NewHandler(service Service, secret string, logger *slog.Logger) *Handler {
	return &Handler{service: service, secret: []byte(secret), logger: logger, now: time.Now}
}

// answer is the body of every response.
type answer struct {
	Status string `json:"status"`           // applied, duplicate, mismatch, refused
	Result string `json:"result,omitempty"` // the payment's status after an applied event
	Error  string `json:"error,omitempty"`
}

// ServeHTTP checks the signature over the raw body, then applies the event.
// 200: applied now or before (a duplicate). 400: malformed header, body or
// field, or a wrong amount; 401: bad signature or stale timestamp; 404:
// unknown payment; 409: event id of another payment; 413: body too large;
// 5xx: try again later. Nothing changes unless the answer is 200.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		write(w, http.StatusMethodNotAllowed, answer{Status: "refused", Error: "POST only"})
		return
	}
	if len(h.secret) == 0 {
		write(w, http.StatusServiceUnavailable, answer{Status: "refused", Error: "payment webhooks are not configured"})
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
	switch err := Verify(h.secret, r.Header.Get(Header), body, h.now()); {
	case errors.Is(err, ErrMalformed):
		write(w, http.StatusBadRequest, answer{Status: "refused", Error: err.Error()})
		return
	case err != nil:
		write(w, http.StatusUnauthorized, answer{Status: "refused", Error: err.Error()})
		return
	}
	// Checked on the raw bytes: the JSON decoder would turn bytes that are
	// not UTF-8 into U+FFFD, and two different event ids into one.
	if !utf8.Valid(body) {
		write(w, http.StatusBadRequest, answer{Status: "refused", Error: "body must be UTF-8"})
		return
	}
	var ev seckill.PaymentEvent
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ev); err != nil || dec.More() {
		write(w, http.StatusBadRequest, answer{Status: "refused", Error: "body must be one JSON event: id, type, payment_id, amount, currency"})
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
			h.logger.ErrorContext(r.Context(), "payment webhook", "event_id", ev.ID, "err", err)
			status, msg = http.StatusInternalServerError, "internal error"
		}
		write(w, status, answer{Status: "refused", Error: msg})
		return
	}
	a := answer{Status: "applied", Result: string(res.Payment.Status)}
	switch {
	case res.Outcome == seckill.AppliedMismatch:
		// A payment another provider opened: recorded, alerted, nothing
		// changed.
		a.Status = "mismatch"
	case res.Duplicate:
		a.Status = "duplicate"
	}
	write(w, http.StatusOK, a)
}

func write(w http.ResponseWriter, status int, a answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(a)
}
