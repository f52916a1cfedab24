// Package payhook is the payment provider's edge: the webhook through which
// the provider confirms payments (POST /webhooks/payments), the signature
// it carries, and a client that signs and sends events the way a provider
// does (seckill payments simulate, tests).
//
// Signature: internal/signature's Seckill-Signature header, keyed with
// SECKILL_PAYMENT_WEBHOOK_SECRET; each event id is applied once, so a
// signed call cannot be replayed within the tolerance either.
package payhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"seckill/internal/seckill"
	"seckill/internal/signature"
)

// Header names the signature header.
const Header = signature.Header

// Tolerance is how far a signed timestamp may be from the server's clock.
const Tolerance = signature.Tolerance

// MaxBody bounds the size of a webhook call's body.
const MaxBody = 64 << 10

// Errors of Verify; the handler answers them with 400 or 401.
var (
	ErrMalformed = signature.ErrMalformed
	ErrStale     = signature.ErrStale
	ErrSignature = signature.ErrSignature
)

// Sign returns the signature header value for body sent at t
// (signature.Sign).
func Sign(secret []byte, t time.Time, body []byte) string { return signature.Sign(secret, t, body) }

// Verify checks a signature header against body at now (signature.Verify).
func Verify(secret []byte, header string, body []byte, now time.Time) error {
	return signature.Verify(secret, header, body, now)
}

// Send signs ev with secret, as the provider does, and posts it to url (the
// webhook's full URL). It returns the answer's status and body.
func Send(ctx context.Context, client *http.Client, url string, secret []byte, ev seckill.PaymentEvent) (int, []byte, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, nil, fmt.Errorf("payhook: encode event: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("payhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(Header, Sign(secret, time.Now(), body))
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("payhook: send event %s: %w", ev.ID, err)
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, MaxBody))
	if err != nil {
		return res.StatusCode, nil, fmt.Errorf("payhook: read answer: %w", err)
	}
	return res.StatusCode, answer, nil
}
