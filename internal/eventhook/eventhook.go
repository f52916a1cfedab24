// Package eventhook is the platform's edge: it posts order events
// (seckill.Event) to the platform's endpoints, signed with each endpoint's
// secret in the Seckill-Signature header of internal/signature, the scheme
// the payment provider's webhook uses (docs/events.md).
package eventhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"seckill/internal/seckill"
	"seckill/internal/signature"
)

// Headers every call carries besides the signature: the event's id, type and
// sequence, so a receiver can route or deduplicate before it parses.
const (
	HeaderEventID   = "Seckill-Event-Id"
	HeaderEventType = "Seckill-Event-Type"
)

// Sender posts events over HTTP; it implements seckill.EventSender.
type Sender struct {
	client *http.Client
	now    func() time.Time
}

// NewSender returns a Sender whose calls each give up after timeout.
func NewSender(timeout time.Duration) *Sender {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64 // a batch is sent many at a time to one host
	return &Sender{client: &http.Client{Timeout: timeout, Transport: tr,
		// A redirect would resend the signed body elsewhere: answer it as it is.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		now: time.Now}
}

// Body is the JSON body of ev, exactly as it is signed and sent.
func Body(ev seckill.Event) ([]byte, error) {
	return json.Marshal(ev)
}

// Send implements seckill.EventSender.
func (s *Sender) Send(ctx context.Context, e seckill.Endpoint, ev seckill.Event) seckill.SendResult {
	body, err := Body(ev)
	if err != nil {
		return seckill.SendResult{Answer: "encode event: " + err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return seckill.SendResult{Answer: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "seckill-events/1")
	req.Header.Set(HeaderEventID, ev.ID)
	req.Header.Set(HeaderEventType, string(ev.Type))
	req.Header.Set(signature.Header, signature.Sign([]byte(e.Secret), s.now(), body))
	res, err := s.client.Do(req)
	if err != nil {
		return seckill.SendResult{Answer: describe(err)}
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, seckill.MaxAnswerLen))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // so the connection is reused
	return seckill.SendResult{Status: res.StatusCode, Answer: strings.ToValidUTF8(string(answer), "")}
}

// describe says why a call got no answer, without the URL (it may carry a
// token).
func describe(err error) string {
	var uerr interface{ Timeout() bool }
	if errors.As(err, &uerr) && uerr.Timeout() {
		return "no answer: timed out"
	}
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Sprintf("no answer: %v", uerr.Err)
	}
	return "no answer: " + err.Error()
}
