package app_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"seckill/internal/auth"
	"seckill/internal/auth/idp"
)

// publicHost is the dashboard's name as the provider knows it (the
// registered redirect URL); the test's browser maps it to the test server,
// as a reverse proxy would.
const publicHost = "dashboard.test"

// TestDashboardSignInThroughProvider drives an operator's sign-in through
// a test identity provider that issues a code and tokens: the
// authorization code flow with PKCE, the operator claim deciding, the
// local accounts still beside it.
func TestDashboardSignInThroughProvider(t *testing.T) {
	p := idp.New("")
	if _, err := p.AddNew("id-key", jose.ES256); err != nil {
		t.Fatal(err)
	}
	flow := &idp.CodeFlow{ClientID: "seckill-dashboard", ClientSecret: "dashboard-secret", KeyID: "id-key"}
	p.EnableCodeFlow(flow)
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	p.SetURL(ts.URL)

	e := newDashEnv(t, func(m map[string]string) {
		m["SECKILL_AUTH_ISSUER"] = ts.URL
		m["SECKILL_AUTH_AUDIENCE"] = "seckill-api"
		m["SECKILL_AUTH_CLIENT_ID"] = flow.ClientID
		m["SECKILL_AUTH_CLIENT_SECRET"] = flow.ClientSecret
		m["SECKILL_AUTH_REDIRECT_URL"] = "http://" + publicHost + "/admin/login/sso/callback"
		m["SECKILL_AUTH_OPERATOR_CLAIM"] = "groups:seckill-operators"
	})

	// The sign-in page offers both; its forms may go on to the provider.
	login := e.get("/admin/login")
	if csp := login.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+ts.URL+";") {
		t.Errorf("the sign-in page's Content-Security-Policy %q does not let its form go on to the provider", csp)
	}
	doc := e.page(login)
	if doc.Find(`[data-testid="login-form"]`).Length() != 1 || doc.Find(`[data-testid="login-sso"]`).Length() != 1 {
		t.Fatal("the sign-in page does not offer both the password and the provider")
	}

	// start begins a sign-in and returns the provider's authorization URL.
	start := func(next string) *url.URL {
		t.Helper()
		res := e.post("/admin/login/sso", url.Values{"next": {next}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST /admin/login/sso: %s", res.Status)
		}
		u, err := url.Parse(res.Header.Get("Location"))
		if err != nil || !strings.HasPrefix(u.String(), ts.URL+"/authorize") {
			t.Fatalf("sent to %q, want the provider's /authorize", res.Header.Get("Location"))
		}
		q := u.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" ||
			q.Get("client_id") != flow.ClientID || !strings.Contains(q.Get("scope"), "openid") {
			t.Fatalf("authorization request %v: want PKCE S256, state, nonce, the client and scope openid", q)
		}
		return u
	}
	// authorize lets the provider sign the user in and returns the
	// dashboard's callback it sends the browser back to.
	authorize := func(u *url.URL) string {
		t.Helper()
		res, err := http.DefaultClient.Do(&http.Request{Method: "GET", URL: u})
		if err == nil {
			defer res.Body.Close()
		}
		// DefaultClient follows redirects: it stops at the unknown host.
		var ue *url.Error
		if err == nil || !asURLError(err, &ue) || !strings.Contains(ue.URL, publicHost) {
			t.Fatalf("the provider's redirect: %v", err)
		}
		cb, _ := url.Parse(ue.URL)
		return strings.Replace(cb.String(), "http://"+publicHost, e.srv.URL, 1)
	}
	callback := func(cb string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(e.ctx, "GET", cb, nil)
		return e.do(req)
	}

	// Not an operator: signed in at the provider, refused here, no session.
	flow.SignInAs("shopper-1", map[string]any{"email": "shopper@example.com", "groups": []string{"customers"}})
	res := callback(authorize(start("/admin")))
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "not an operator") {
		t.Fatalf("a non-operator's callback: %s %s", res.Status, body)
	}
	if res := e.get("/admin"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a non-operator got a session: GET /admin %s", res.Status)
	}

	// An operator: a session, back where they were going.
	flow.SignInAs("op-7", map[string]any{"preferred_username": "carol", "groups": []string{"seckill-operators"}})
	cb := authorize(start("/admin/jobs"))
	res = callback(cb)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/jobs" {
		t.Fatalf("an operator's callback: %s to %q", res.Status, res.Header.Get("Location"))
	}
	res = e.get("/admin")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin after the sign-in: %s", res.Status)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self';") {
		t.Errorf("a dashboard page's Content-Security-Policy %q lets forms go elsewhere", csp)
	}
	var n int
	if err := e.app.DB.NewRaw(`SELECT count(*) FROM admin_user WHERE name = 'sso:carol' AND subject = 'op-7' AND password_hash IS NULL`).Scan(e.ctx, &n); err != nil || n != 1 {
		t.Errorf("the operator's row: %d, %v", n, err)
	}

	// A callback without this browser's state never reaches the provider.
	exchanged := flow.Exchanged()
	res = callback(strings.Replace(cb, "state=", "x=", 1))
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a callback without this browser's state: %s, want 400", res.Status)
	}
	if flow.Exchanged() != exchanged {
		t.Error("a callback with the wrong state reached the provider")
	}

	// The same code again (a replay), under a new sign-in's state: the
	// provider redeems a code once.
	u2 := start("/admin")
	replay, _ := url.Parse(cb)
	q := replay.Query()
	q.Set("state", u2.Query().Get("state"))
	replay.RawQuery = q.Encode()
	if res := callback(replay.String()); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a replayed code: %s, want 401", res.Status)
	}

	// PKCE: a code redeemed without its verifier is refused. The browser's
	// cookie is altered to carry another verifier.
	u3 := start("/admin")
	cb3 := authorize(u3)
	base, _ := url.Parse(e.srv.URL + "/admin/login/sso")
	for _, c := range e.client.Jar.Cookies(base) {
		if c.Name == "seckill_sso" {
			pending, err := auth.DecodePending(c.Value)
			if err != nil {
				t.Fatal(err)
			}
			pending.Verifier = "another-verifier-another-verifier-another-verifier"
			e.client.Jar.SetCookies(base, []*http.Cookie{{Name: "seckill_sso", Value: auth.EncodePending(pending), Path: "/admin/login/sso"}})
		}
	}
	if res := callback(cb3); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a code redeemed with another verifier: %s, want 401", res.Status)
	}

	// A callback from another browser's sign-in (login CSRF): its state is
	// not this browser's.
	other := newCookieClient()
	if res := e.postAs(other, "/admin/login/sso", url.Values{}); res.StatusCode != http.StatusSeeOther {
		t.Fatal(res.Status)
	}
	u := start("/admin") // this browser's own sign-in under way
	attacker := authorize(u)
	req, _ := http.NewRequestWithContext(e.ctx, "GET", attacker, nil)
	res, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("another browser's callback: %s, want 400", res.Status)
	}

	// The local accounts sign in beside the provider.
	e.client.Jar = newCookieClient().Jar
	e.login()
}

func asURLError(err error, target **url.Error) bool {
	ue, ok := err.(*url.Error)
	if ok {
		*target = ue
	}
	return ok
}

// newCookieClient is another browser: its own cookies, no redirects followed.
func newCookieClient() *http.Client {
	jar, _ := newJar()
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// postAs posts a form from browser c as the dashboard's page would.
func (e *dashEnv) postAs(c *http.Client, path string, form url.Values) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	return res
}

func newJar() (http.CookieJar, error) { return cookiejar.New(nil) }
