// Package eventhook is the platform's edge: it posts order events
// (seckill.Event) to the platform's endpoints, signed with each endpoint's
// secret in the Seckill-Signature header of internal/signature, the scheme
// the payment provider's webhook uses (docs/events.md).
package eventhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
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
	policy seckill.EndpointPolicy
	now    func() time.Time
}

// NewSender returns a Sender whose calls each give up after timeout and
// connect only to addresses policy takes. The check is made on the address
// each connection dials, after the name was resolved (a name may resolve
// inside the network later than when the endpoint was added), and no
// proxy comes between: the address checked is the address reached.
func NewSender(timeout time.Duration, policy seckill.EndpointPolicy) *Sender {
	return newSender(timeout, policy, nil)
}

// newSender is NewSender resolving names with resolver (nil: the
// system's).
func newSender(timeout time.Duration, policy seckill.EndpointPolicy, resolver *net.Resolver) *Sender {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Resolver: resolver,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("eventhook: dial %q: not an address", address)
			}
			return policy.CheckAddr(ap.Addr())
		}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = dialer.DialContext
	tr.MaxIdleConnsPerHost = 64 // a batch is sent many at a time to one host
	return &Sender{client: &http.Client{Timeout: timeout, Transport: tr,
		// A redirect would resend the signed body elsewhere, maybe inside:
		// it is answered as it is (a failure), never followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		policy: policy, now: time.Now}
}

// Body is the JSON body of ev, exactly as it is signed and sent.
func Body(ev seckill.Event) ([]byte, error) {
	return json.Marshal(ev)
}

// Send implements seckill.EventSender. Its answer is a short reason of
// ours (seckill.AnswerStatus, seckill.AnswerTimeout, …): the receiver's
// body is never read into it.
func (s *Sender) Send(ctx context.Context, e seckill.Endpoint, ev seckill.Event) seckill.SendResult {
	// Checked again at every send: an endpoint stored before the policy
	// (or under another) is refused the same way.
	if err := s.policy.CheckURL(e.URL); err != nil {
		return seckill.SendResult{Answer: seckill.AnswerBadURL}
	}
	body, err := Body(ev)
	if err != nil {
		return seckill.SendResult{Answer: seckill.AnswerNoAnswer}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return seckill.SendResult{Answer: seckill.AnswerBadURL}
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
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // so the connection is reused
	return seckill.SendResult{Status: res.StatusCode, Answer: seckill.AnswerStatus(res.StatusCode)}
}

// describe says in a few words of ours why a call got no answer: never
// the error's text, which may carry the URL (and a token in it).
func describe(err error) string {
	var refused *seckill.RefusedAddrError
	var dns *net.DNSError
	var timeout interface{ Timeout() bool }
	var cert *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &refused):
		return refused.Error()
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return seckill.AnswerNoHost
		}
		if dns.IsTimeout {
			return seckill.AnswerTimeout
		}
		return seckill.AnswerDNS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return seckill.AnswerTimeout
	case errors.Is(err, context.Canceled):
		return seckill.AnswerCancelled
	case errors.Is(err, syscall.ECONNREFUSED):
		return seckill.AnswerRefused
	case errors.Is(err, syscall.ECONNRESET):
		return seckill.AnswerReset
	case errors.As(err, &cert), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &record):
		return seckill.AnswerTLS
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return seckill.AnswerClosed
	}
	return seckill.AnswerNoAnswer
}
