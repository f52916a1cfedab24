package testenv

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// StripeMock is a private stripe-mock (github.com/stripe/stripe-mock, the
// go.mod tool: Stripe's API model, answering fixtures shaped by the
// request) behind a proxy that records every request, since the mock
// keeps no state a test could read back. It is killed when the test ends.
type StripeMock struct {
	// URL is the proxy's: point the Stripe client's API base at it.
	URL string

	mu       sync.Mutex
	requests []StripeRequest
}

// StripeRequest is one request the Stripe client sent.
type StripeRequest struct {
	Method, Path   string
	IdempotencyKey string
	Form           url.Values // the form body, or the query of a GET
}

// StartStripeMock builds stripe-mock once (go tool's cache keeps it), starts
// it on a free loopback port and waits until it answers.
func StartStripeMock(tb testing.TB) *StripeMock {
	tb.Helper()
	out, err := exec.Command("go", "tool", "-n", "stripe-mock").Output()
	if err != nil {
		tb.Fatalf("build stripe-mock (go tool -n stripe-mock): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	// -http-port alone serves plain HTTP only (with -http-addr the mock
	// also opens its default HTTPS port, which parallel packages share).
	cmd := exec.Command(strings.TrimSpace(string(out)), "-http-port", port)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start stripe-mock: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	target, _ := url.Parse("http://127.0.0.1:" + port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", target.Host, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("stripe-mock did not listen on %s: %s", port, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	m := &StripeMock{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form := r.URL.Query()
		if len(body) > 0 {
			form, _ = url.ParseQuery(string(body))
		}
		m.mu.Lock()
		m.requests = append(m.requests, StripeRequest{Method: r.Method, Path: r.URL.Path,
			IdempotencyKey: r.Header.Get("Idempotency-Key"), Form: form})
		m.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	m.URL = srv.URL
	return m
}

// Requests returns the requests sent so far to paths starting with
// prefix, oldest first.
func (m *StripeMock) Requests(prefix string) []StripeRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []StripeRequest
	for _, r := range m.requests {
		if strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}
