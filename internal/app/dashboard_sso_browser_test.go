package app_test

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-jose/go-jose/v4"

	"seckill/internal/auth/idp"
)

// TestDashboardSignInThroughProviderInBrowser signs operators in through a
// test identity provider in headless chromium, the provider on another
// site than the dashboard (127.0.0.1 and dashboard.test, which the browser
// maps to the test server), as in production. The sign-in page's form is
// answered with a redirect to the provider, which its Content-Security-
// Policy must allow (form-action: before, chromium refused it and the
// button did nothing); the provider's page sends the browser back with a
// link, so the way back starts on another site, and the browser must still
// carry the sign-in's state cookie (SameSite=Lax does on a top-level GET;
// Strict would not, and the sign-in would fail with 400 in every real
// browser while TestDashboardSignInThroughProvider's cookie jar passed).
// A non-operator is refused without a session, and an operator lands where
// they were going, named.
func TestDashboardSignInThroughProviderInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	p := idp.New("")
	if _, err := p.AddNew("id-key", jose.ES256); err != nil {
		t.Fatal(err)
	}
	flow := &idp.CodeFlow{ClientID: "seckill-dashboard", ClientSecret: "dashboard-secret", KeyID: "id-key", LoginPage: true}
	p.EnableCodeFlow(flow)
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	p.SetURL(ts.URL)

	public := "http://" + publicHost // port 80, which the browser maps to the test server's
	e := newDashEnv(t, func(m map[string]string) {
		m["SECKILL_AUTH_ISSUER"] = ts.URL
		m["SECKILL_AUTH_AUDIENCE"] = "seckill-api"
		m["SECKILL_AUTH_CLIENT_ID"] = flow.ClientID
		m["SECKILL_AUTH_CLIENT_SECRET"] = flow.ClientSecret
		m["SECKILL_AUTH_OPERATOR_CLAIM"] = "groups:seckill-operators"
		m["SECKILL_AUTH_REDIRECT_URL"] = public + "/admin/login/sso/callback"
	})
	srv, err := url.Parse(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, chromium, chromedp.Flag("host-resolver-rules", "MAP "+publicHost+" "+srv.Host))
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	location := func() *url.URL {
		t.Helper()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		must("location", err)
		u, err := url.Parse(loc)
		must("parse the location", err)
		return u
	}
	text := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		must("read the page", err)
		return s
	}
	// signIn starts at a page that needs a session and presses the
	// provider's button on the sign-in page it is sent to; it waits until
	// the browser is back from the provider on the dashboard's site.
	signIn := func(page string) {
		t.Helper()
		must("sign in through the provider", chromedp.Do(ctx,
			chromedp.Navigate(public+page),
			chromedp.WaitVisible(css(`[data-testid="login-sso"]`)),
			chromedp.Click(css(`[data-testid="login-sso"]`)),
			chromedp.WaitVisible(css(`#continue`)), // the provider's page
			chromedp.Click(css(`#continue`)),
		))
		// Polled from here, not in the page: the page goes away twice.
		deadline := time.Now().Add(20 * time.Second)
		for {
			loc, err := chromedp.Run(ctx, chromedp.Location())
			// Back, and the page there loaded: the location changes
			// before the document does.
			if u, perr := url.Parse(loc); err == nil && perr == nil && u.Host == publicHost &&
				(!strings.HasPrefix(u.Path, "/admin/login") || u.Path == "/admin/login/sso/callback") &&
				strings.TrimSpace(text()) != "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not back from the provider: at %s:\n%s", location(), text())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Not an operator: signed in at the provider, refused here, no session.
	flow.SignInAs("shopper-2", map[string]any{"groups": []string{"customers"}})
	signIn("/admin/jobs")
	if got := text(); location().Path != "/admin/login/sso/callback" || !strings.Contains(got, "not an operator") {
		t.Fatalf("a non-operator's sign-in ended at %s:\n%s", location(), got)
	}
	screenshots(t, ctx, "sso-refused")
	must("open the dashboard", chromedp.Do(ctx, chromedp.Navigate(public+"/admin")))
	if loc := location(); loc.Path != "/admin/login" {
		t.Fatalf("a non-operator got a session: /admin ended at %s", loc)
	}

	// An operator: a session, on the page they were going to, named.
	flow.SignInAs("op-9", map[string]any{"preferred_username": "dora", "groups": []string{"seckill-operators"}})
	exchanged := flow.Exchanged()
	signIn("/admin/jobs")
	if loc := location(); loc.Host != publicHost || loc.Path != "/admin/jobs" {
		t.Fatalf("an operator's sign-in ended at %s:\n%s", loc, text())
	}
	if flow.Exchanged() != exchanged+1 {
		t.Errorf("%d codes redeemed for one sign-in", flow.Exchanged()-exchanged)
	}
	who, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="whoami"]')?.textContent.trim() ?? ""`))
	must("read who is signed in", err)
	if !strings.Contains(who, "dora") {
		t.Errorf("signed in as %q, want the provider's dora", who)
	}
	screenshots(t, ctx, "sso-signed-in")
}
