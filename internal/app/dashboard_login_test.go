package app_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"seckill/web"
)

// TestDashboardLoginNoLockout runs issue 41's lockout through the served
// dashboard, its Redis limiter and the real password check, with clients
// told apart by X-Forwarded-For from a trusted proxy: a guesser at one
// address and guessers at many addresses spend the operator's name's
// failures; each guessing address is then refused (429 with Retry-After),
// and the operator, from an address that has not failed, signs in.
func TestDashboardLoginNoLockout(t *testing.T) {
	e := newDashEnv(t, func(vars map[string]string) { vars["SECKILL_TRUSTED_PROXIES"] = "127.0.0.1, ::1" })
	attempt := func(from, password string) *http.Response {
		t.Helper()
		return e.post("/admin/login", url.Values{"user": {dashAdmin}, "password": {password}}, "X-Forwarded-For", from)
	}
	refused := func(res *http.Response) bool {
		secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
		return res.StatusCode == http.StatusTooManyRequests && err == nil && secs > 0
	}
	// One address: refused before its pair's budget is spent, once the
	// name's failures are (10 attempts hold both).
	checked := 0
	for range web.DefaultLoginLimits.PerPair.Burst + 1 {
		res := attempt("192.0.2.1", "wrong")
		if refused(res) {
			break
		}
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess from one address: %s", res.Status)
		}
		checked++
	}
	if checked > web.DefaultLoginLimits.PerPair.Burst {
		t.Fatalf("%d guesses checked from one address, over its budget of %d", checked, web.DefaultLoginLimits.PerPair.Burst)
	}
	// Many addresses: the first guess of each is checked...
	addr := func(i int) string { return "203.0.113." + strconv.Itoa(1+i) }
	n := web.DefaultLoginLimits.Failures.Burst
	for i := range n {
		if res := attempt(addr(i), "wrong"); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("first guess from %s: %s", addr(i), res.Status)
		}
	}
	// ...and once the name's failures are spent, no second one.
	for i := range n {
		if res := attempt(addr(i), "wrong again"); !refused(res) {
			t.Errorf("second guess from %s: %s, Retry-After %q; want 429 with Retry-After", addr(i), res.Status, res.Header.Get("Retry-After"))
		}
	}
	start := time.Now()
	res := attempt("198.51.100.7", dashPassword)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin" {
		t.Fatalf("operator from an address that has not failed: %s", res.Status)
	}
	if took := time.Since(start); took < web.DefaultLoginSlowDown {
		t.Errorf("operator's sign-in took %v, want it slowed by %v while the name is under attack", took, web.DefaultLoginSlowDown)
	}
}
