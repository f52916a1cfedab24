package app

import (
	"net/http"
	"testing"
)

// forwardedFor is a client that sends each request with the
// X-Forwarded-For header xff() returns.
func forwardedFor(xff func() string) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Forwarded-For", xff())
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAddressLimitThroughHTTP: the per-address limit through the real
// handler, Redis and Postgres. From an untrusted peer, X-Forwarded-For
// changes nothing: users who forge a new address each time still share
// their peer's limit. Behind a trusted proxy the chain names the client.
func TestAddressLimitThroughHTTP(t *testing.T) {
	limits := func(m map[string]string) {
		m["SECKILL_ADDRESS_RATE"] = "0.001" // nothing refills during the test
		m["SECKILL_ADDRESS_BURST"] = "3"
	}
	buyAll := func(t *testing.T, e *testEnv, voucher int64, users []int64, xff []string) []string {
		t.Helper()
		var got []string
		for i, u := range users {
			p, err := e.buy(forwardedFor(func() string { return xff[i] }), e.token(u, false), voucher)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Outcome)
		}
		return got
	}
	count := func(outcomes []string, want string) int {
		n := 0
		for _, o := range outcomes {
			if o == want {
				n++
			}
		}
		return n
	}

	t.Run("untrusted peer", func(t *testing.T) {
		e := newTestEnv(t, "", limits)
		v := e.createCampaign(100)
		got := buyAll(t, e, v, []int64{1, 2, 3, 4, 5, 6},
			[]string{"203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4", "203.0.113.5", "203.0.113.6"})
		if count(got, "ACCEPTED") != 3 || count(got, "RATE_LIMITED") != 3 {
			t.Errorf("outcomes %v: want 3 ACCEPTED and 3 RATE_LIMITED (one address: the peer)", got)
		}
	})
	t.Run("trusted proxy", func(t *testing.T) {
		e := newTestEnv(t, "", limits, func(m map[string]string) { m["SECKILL_TRUSTED_PROXIES"] = "127.0.0.1, ::1" })
		v := e.createCampaign(100)
		got := buyAll(t, e, v, []int64{1, 2, 3, 4, 5, 6, 7},
			[]string{"203.0.113.1", "203.0.113.1", "203.0.113.1", "6.6.6.6, 203.0.113.1", // one client, one forging
				"203.0.113.2", "203.0.113.3", "198.51.100.9, 127.0.0.1"})
		want := []string{"ACCEPTED", "ACCEPTED", "ACCEPTED", "RATE_LIMITED", "ACCEPTED", "ACCEPTED", "ACCEPTED"}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("outcomes %v, want %v", got, want)
				break
			}
		}
	})
}
