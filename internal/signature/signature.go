// Package signature is the HMAC signature that seckill's webhooks carry, in
// both directions: the payment provider's calls to seckill
// (internal/payhook) and seckill's order events to the platform
// (internal/eventhook). The header
//
//	Seckill-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>
//
// carries an HMAC keyed with the endpoint's secret over "<t>.<raw body>".
// Several v1= entries may be given (while a secret is rotated); one must
// match. A timestamp more than Tolerance away from the receiver's clock is
// refused, so a captured call cannot be replayed later; the event id, applied
// once, keeps it from being replayed sooner.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header names the signature header.
const Header = "Seckill-Signature"

// Tolerance is how far a signed timestamp may be from the server's clock.
const Tolerance = 5 * time.Minute

// Errors of Verify; a receiver answers them with 400 or 401.
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
