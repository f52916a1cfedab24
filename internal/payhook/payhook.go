// Package payhook is the payment provider's edge: the webhook through which
// the provider confirms payments (POST /webhooks/payments), the signature
// it carries, and a client that signs and sends events the way a provider
// does (seckill payments simulate, tests).
//
// Signature: the header
//
//	Seckill-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>
//
// where the HMAC, keyed with SECKILL_PAYMENT_WEBHOOK_SECRET, is taken over
// "<t>.<raw body>". Several v1= entries may be given (while a secret is
// rotated); one must match. A timestamp more than Tolerance away from the
// server's clock is refused, so a captured call cannot be replayed later,
// and each event id is applied once, so it cannot be replayed sooner.
package payhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// Header names the signature header.
const Header = "Seckill-Signature"

// Tolerance is how far a signed timestamp may be from the server's clock.
const Tolerance = 5 * time.Minute

// MaxBody bounds the size of a webhook call's body.
const MaxBody = 64 << 10

// Errors of Verify; the handler answers them with 400 or 401.
var (
	ErrMalformed = errors.New("malformed " + Header + " header: want t=<unix>,v1=<hex>")
	ErrStale     = errors.New("timestamp outside the tolerance of 5 minutes")
	ErrSignature = errors.New("signature does not match")
)

// Sign returns the signature header value for body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a signature header against body at now. It runs in time
// linear in the header's length and compares in constant time.
func Verify(secret []byte, header string, body []byte, now time.Time) error {
	if header == "" || len(header) > 1024 {
		return ErrMalformed
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformed
		}
		switch k {
		case "t":
			if ts != "" {
				return ErrMalformed
			}
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return ErrMalformed
			}
			sigs = append(sigs, sig)
		}
		// Other schemes are ignored, as providers add them.
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 || sec <= 0 {
		return ErrMalformed
	}
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return ErrStale
	}
	want := mac(secret, ts, body)
	ok := false
	for _, sig := range sigs {
		ok = hmac.Equal(want, sig) || ok
	}
	if !ok {
		return ErrSignature
	}
	return nil
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
