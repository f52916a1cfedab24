package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"seckill/internal/gqlclient"
)

// purchaseQuery is the one operation the load generator sends. The sync and
// ceiling handlers accept the same body and read only variables.voucherId.
const purchaseQuery = `mutation Buy($voucherId: ID!) { seckill(voucherId: $voucherId) { outcome orderId } }`

// PurchaseBody returns the JSON body of a purchase of voucherID.
func PurchaseBody(voucherID int64) []byte {
	b, _ := json.Marshal(gqlclient.Request{
		Query:     purchaseQuery,
		Variables: map[string]any{"voucherId": strconv.FormatInt(voucherID, 10)},
	})
	return b
}

// purchaseResponse is what every target answers to a purchase.
type purchaseResponse struct {
	Data *struct {
		Seckill *struct {
			Outcome string  `json:"outcome"`
			OrderID *string `json:"orderId"`
		} `json:"seckill"`
	} `json:"data"`
	Errors []gqlclient.Error `json:"errors"`
}

// NewTransport returns the HTTP transport of one target: keep-alive, and
// enough idle connections per host that no connection of a burst is closed
// and dialled again.
func NewTransport(conns int) *http.Transport {
	// No Proxy: a load test of a local server never goes through one. No
	// MaxIdleConns limit, and plain HTTP/1.1 as a crowd of browsers would
	// reach an API behind a load balancer.
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: max(conns, 100),
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// result is the answer to one purchase request.
type result struct {
	outcome string // an Outcome, or "" when the request failed
	orderID int64
	err     string // kind of failure: "http 503", "UNAUTHENTICATED", "timeout", ...
	detail  string // the first message seen for this kind, for the report
}

// purchase sends one purchase and classifies the answer. It never returns
// an error: failures are results, counted by kind.
func purchase(ctx context.Context, client *http.Client, endpoint string, body []byte, authHeader string) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return result{err: "bad request", detail: err.Error()}
	}
	req.Header["Content-Type"] = []string{"application/json"}
	req.Header["Authorization"] = []string{authHeader}
	resp, err := client.Do(req)
	if err != nil {
		return result{err: ErrorKind(err), detail: err.Error()}
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return result{err: ErrorKind(err), detail: err.Error()}
	}
	if resp.StatusCode == http.StatusOK {
		if r, ok := parseOutcome(data); ok {
			return r
		}
	}
	var pr purchaseResponse
	if err := json.Unmarshal(data, &pr); err != nil {
		return result{err: "http " + strconv.Itoa(resp.StatusCode), detail: "not JSON: " + Snippet(data)}
	}
	if len(pr.Errors) > 0 {
		kind := pr.Errors[0].Extensions.Code
		if kind == "" {
			kind = "graphql error"
		}
		if resp.StatusCode != http.StatusOK {
			kind = "http " + strconv.Itoa(resp.StatusCode) + " " + kind
		}
		return result{err: kind, detail: pr.Errors[0].Message}
	}
	if resp.StatusCode != http.StatusOK || pr.Data == nil || pr.Data.Seckill == nil || pr.Data.Seckill.Outcome == "" {
		return result{err: "http " + strconv.Itoa(resp.StatusCode), detail: "unexpected answer: " + Snippet(data)}
	}
	r := result{outcome: pr.Data.Seckill.Outcome}
	if pr.Data.Seckill.OrderID != nil {
		r.orderID, _ = strconv.ParseInt(*pr.Data.Seckill.OrderID, 10, 64)
	}
	return r
}

// outcomePrefix starts the answer every target gives to a purchase that
// came to an outcome; seckill's GraphQL server and the comparison servers
// write it byte for byte so.
const outcomePrefix = `{"data":{"seckill":{"outcome":"`

// parseOutcome reads the common answer {"data":{"seckill":{"outcome":"X",
// "orderId":"N"|null}}} without encoding/json, which would be a tenth of
// the load generator's CPU. Anything else is left to encoding/json.
func parseOutcome(data []byte) (result, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(outcomePrefix))
	if !ok {
		return result{}, false
	}
	i := bytes.IndexByte(rest, '"')
	if i <= 0 {
		return result{}, false
	}
	r := result{outcome: string(rest[:i])}
	rest = rest[i+1:]
	switch {
	case bytes.HasPrefix(rest, []byte(`,"orderId":null}}}`)):
		return r, true
	case bytes.HasPrefix(rest, []byte(`,"orderId":"`)):
		rest = rest[len(`,"orderId":"`):]
		j := bytes.IndexByte(rest, '"')
		if j <= 0 || !bytes.HasPrefix(rest[j:], []byte(`"}}}`)) {
			return result{}, false
		}
		id, err := strconv.ParseInt(string(rest[:j]), 10, 64)
		if err != nil {
			return result{}, false
		}
		r.orderID = id
		return r, true
	}
	return result{}, false
}

// ErrorKind names a failed round trip, for the error counts and messages.
func ErrorKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), os.IsTimeout(err):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection reset"
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, syscall.EMFILE):
		return "out of sockets"
	}
	return "transport error"
}

// Snippet returns the start of b, for an error message.
func Snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}
