package eventhook_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/eventhook"
	"seckill/internal/seckill"
)

// fakeDNS answers every A question with addr (and every other question
// with no answer) on a UDP port of this machine: a name that resolves
// inside the network, as a rebinding attacker's would.
func fakeDNS(t *testing.T, addr netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			q := buf[12:n] // the question: name, type, class
			end := 0
			for end < len(q) && q[end] != 0 {
				end += int(q[end]) + 1
			}
			if end+5 > len(q) {
				continue
			}
			qtype := binary.BigEndian.Uint16(q[end+1:])
			msg := append([]byte{}, buf[:2]...) // the id
			msg = append(msg, 0x81, 0x80, 0, 1) // a response, recursion available; one question
			ans := uint16(0)
			if qtype == 1 {
				ans = 1
			}
			msg = binary.BigEndian.AppendUint16(msg, ans)
			msg = append(msg, 0, 0, 0, 0)
			msg = append(msg, q[:end+5]...)
			if ans == 1 {
				ip := addr.As4()
				msg = append(msg, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
				msg = append(msg, ip[:]...)
			}
			_, _ = pc.WriteTo(msg, from)
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// countingListener is a TCP port of this machine that counts the
// connections it accepted and answers each with an HTTP server.
func countingListener(t *testing.T, h http.Handler) (port string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	srv := &httptest.Server{Listener: countingLn{ln, accepted}, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepted
}

type countingLn struct {
	net.Listener
	n *atomic.Int64
}

func (l countingLn) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

var testEvent = seckill.Event{ID: seckill.EventID(7, 1), Type: seckill.EventOrderCreated, Sequence: 1, Order: []byte(`{"id":"7"}`)}

// TestSenderRefusesAtDialTime: in production a name that resolves to
// loopback (the check at add time sees only the name) is refused when it
// is dialled, and no connection reaches the listener; with loopback in the
// allow-list the same name is delivered to.
func TestSenderRefusesAtDialTime(t *testing.T) {
	port, accepted := countingListener(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	resolver := fakeDNS(t, netip.MustParseAddr("127.0.0.1"))
	e := seckill.Endpoint{URL: "http://hooks.platform.test:" + port + "/events", Secret: "an-endpoint-secret-of-16"}
	prod := seckill.EndpointPolicy{Restrict: true}
	if err := prod.CheckURL(e.URL); err != nil {
		t.Fatalf("the name is refused at add time already: %v", err)
	}

	res := eventhook.NewSenderWithResolver(time.Second, prod, resolver).Send(t.Context(), e, testEvent)
	if res.OK() || res.Status != 0 || res.Answer != "refused: 127.0.0.1 is a loopback address" {
		t.Errorf("send to a name that resolves to loopback: %+v, want refused", res)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the listener", n)
	}

	allowed := seckill.EndpointPolicy{Restrict: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if res := eventhook.NewSenderWithResolver(time.Second, allowed, resolver).Send(t.Context(), e, testEvent); !res.OK() || accepted.Load() != 1 {
		t.Fatalf("send with loopback allowed: %+v, %d connections", res, accepted.Load())
	}
}

// TestSenderKeepsNoBody: what a receiver answers, a success or a failure,
// is recorded as its status alone; a redirect is a failure, never
// followed (the second listener hears nothing).
func TestSenderKeepsNoBody(t *testing.T) {
	const secret = "internal-service-secret-7f3a"
	innerPort, inner := countingListener(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(secret)) }))
	s := eventhook.NewSender(time.Second, seckill.EndpointPolicy{})
	for status, answer := range map[int]string{http.StatusOK: "status 200", http.StatusInternalServerError: "status 500", http.StatusFound: "status 302"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if status == http.StatusFound {
				http.Redirect(w, r, "http://127.0.0.1:"+innerPort+"/", status)
				return
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(secret))
		}))
		res := s.Send(t.Context(), seckill.Endpoint{URL: srv.URL, Secret: "an-endpoint-secret-of-16"}, testEvent)
		srv.Close()
		if res.Status != status || res.Answer != answer || strings.Contains(res.Answer, "secret") {
			t.Errorf("answered %d: %+v, want %q", status, res, answer)
		}
	}
	if n := inner.Load(); n != 0 {
		t.Errorf("the redirect was followed: %d connections", n)
	}
}

// TestSenderRefusesStoredBadURLs: a URL stored before it would be
// refused (with a password; a metadata name) is not sent to.
func TestSenderRefusesStoredBadURLs(t *testing.T) {
	s := eventhook.NewSender(time.Second, seckill.EndpointPolicy{Restrict: true})
	for _, u := range []string{"http://user:pass@hooks.example.com/", "http://metadata.google.internal/", "http://169.254.169.254/", "http://2130706433/"} {
		if res := s.Send(t.Context(), seckill.Endpoint{URL: u, Secret: "an-endpoint-secret-of-16"}, testEvent); res.OK() || res.Answer != seckill.AnswerBadURL {
			t.Errorf("send to %s: %+v", u, res)
		}
	}
}
