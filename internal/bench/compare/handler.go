// Package compare holds the servers the bench measures seckill against: the
// seed's synchronous design and the ceiling (the admission script behind a
// bare handler), which it runs in process, and seckill itself on a private
// Redis of a chosen durability, which it starts as processes.
package compare

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/seckill"
)

// The comparison servers (sync, ceiling) accept the very request the load
// generator sends seckill: a POST of a GraphQL body with a bearer token.
// They verify the token with the same auth.Tokens as the real server, read only variables.voucherId, and answer in the same shape:
// {"data":{"seckill":{"outcome":"...","orderId":"..."}}}.

// PurchaseFunc decides one purchase for user.
type PurchaseFunc func(ctx context.Context, voucherID, userID int64) (seckill.Outcome, int64, error)

// PurchaseHandler adapts decide to the shared request and answer format.
func PurchaseHandler(tokens *auth.Tokens, decide PurchaseFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			writeWireError(w, http.StatusMethodNotAllowed, "BAD_REQUEST", "POST only")
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		u, err := tokens.Parse(token)
		if !ok || err != nil {
			writeWireError(w, http.StatusUnauthorized, seckill.EUNAUTHENTICATED, "invalid token")
			return
		}
		var body struct {
			Variables struct {
				VoucherID string `json:"voucherId"`
			} `json:"variables"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil {
			writeWireError(w, http.StatusBadRequest, "BAD_REQUEST", "body is not JSON")
			return
		}
		voucherID, err := strconv.ParseInt(body.Variables.VoucherID, 10, 64)
		if err != nil || voucherID <= 0 {
			writeWireError(w, http.StatusOK, seckill.EINVALID, "variables.voucherId must be a voucher id")
			return
		}
		outcome, orderID, err := decide(r.Context(), voucherID, u.ID)
		if err != nil {
			code := seckill.ErrorCode(err)
			writeWireError(w, http.StatusOK, code, seckill.ErrorMessage(err))
			return
		}
		writeOutcome(w, outcome, orderID)
	})
}

// writeOutcome answers like the GraphQL endpoint, built by hand: these
// servers are measured, and encoding/json would be most of their CPU.
func writeOutcome(w http.ResponseWriter, outcome seckill.Outcome, orderID int64) {
	b := make([]byte, 0, 96)
	b = append(b, `{"data":{"seckill":{"outcome":"`...)
	b = append(b, outcome...)
	b = append(b, `","orderId":`...)
	if orderID > 0 {
		b = append(b, '"')
		b = strconv.AppendInt(b, orderID, 10)
		b = append(b, '"')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, "}}}\n"...)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	_, _ = w.Write(b)
}

func writeWireError(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{
		"message": message, "extensions": map[string]string{"code": code}}}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// Local is an HTTP server on a free port of 127.0.0.1.
type Local struct {
	URL  string
	srv  *http.Server
	done chan error
}

// Start serves h on 127.0.0.1 with the timeouts of seckill's server.
func Start(h http.Handler, path string) (*Local, error) {
	mux := http.NewServeMux()
	mux.Handle(path, h)
	s, err := serve("127.0.0.1:0", mux)
	if err != nil {
		return nil, err
	}
	s.URL += path
	return s, nil
}

// serve serves h on addr with the timeouts of seckill's server; URL is
// its http://host:port.
func serve(addr string, h http.Handler) (*Local, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	s := &Local{
		URL: "http://" + ln.Addr().String(),
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
		},
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server, waiting briefly for requests in flight.
func (s *Local) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done // http.ErrServerClosed
}
