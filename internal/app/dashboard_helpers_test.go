package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"seckill/internal/app"
	"seckill/internal/config"
	"seckill/internal/store/storetest"
	"seckill/internal/testenv"
)

const (
	dashAdmin    = "ops"
	dashPassword = "a long enough password"
)

// dashEnv is a running seckill as `seckill serve` runs it: the HTTP API and
// the dashboard on a test server, the workers, the dashboard's sampler.
type dashEnv struct {
	t      *testing.T
	app    *app.App
	srv    *httptest.Server
	ctx    context.Context
	client *http.Client // a browser without JavaScript: cookies, no redirects followed
}

func newDashEnv(t *testing.T, opts ...func(vars map[string]string)) *dashEnv {
	t.Helper()
	vars := testenv.ServerVars(storetest.NewDSN(t), testenv.RedisURL(t, testenv.OwnedDB(testenv.RedisDBDashboard)))
	vars["SECKILL_USER_RATE"] = "0"
	vars["SECKILL_ADMIN_USER"] = dashAdmin
	vars["SECKILL_ADMIN_PASSWORD"] = dashPassword
	for _, o := range opts {
		o(vars)
	}
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(dashLog{t}, &slog.HandlerOptions{Level: cfg.LogLevel}))
	a, srv := testenv.StartServer(t, func(ctx context.Context) (*app.App, error) {
		a, err := app.New(ctx, cfg, logger)
		if err != nil {
			return nil, err
		}
		for _, step := range []func(context.Context) error{
			func(ctx context.Context) error { return testenv.FlushRedis(ctx, a.Redis) },
			a.EnsureConfiguredAdmin, a.Admitter.Start,
		} {
			if err := step(ctx); err != nil {
				a.Close()
				return nil, err
			}
		}
		return a, nil
	})
	srv.StartWorker()
	srv.Go(func(ctx context.Context) { _ = a.RunDashboard(ctx) })
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &dashEnv{t: t, app: a, srv: srv.HTTP, ctx: srv.Ctx, client: client}
}

// dashLog sends logs to the test's log, so they show only on failure.
type dashLog struct{ t *testing.T }

func (w dashLog) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func (e *dashEnv) get(path string, hdr ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, "GET", e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do(req, hdr...)
}

// do sends req with the headers hdr (name, value, name, value...); the
// body is closed when the test ends.
func (e *dashEnv) do(req *http.Request, hdr ...string) *http.Response {
	e.t.Helper()
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	return res
}

// post sends a form as the dashboard's own page would.
func (e *dashEnv) post(path string, form url.Values, hdr ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, "POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return e.do(req, hdr...)
}

func (e *dashEnv) login() {
	e.t.Helper()
	res := e.post("/admin/login", url.Values{"user": {dashAdmin}, "password": {dashPassword}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin" {
		e.t.Fatalf("login: %s to %q", res.Status, res.Header.Get("Location"))
	}
}

func (e *dashEnv) page(res *http.Response) *goquery.Document {
	e.t.Helper()
	d, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// createCampaign fills in the dashboard's create form and returns the new
// campaign's id.
func (e *dashEnv) createCampaign(title string, stock int, begin, end time.Time) int64 {
	e.t.Helper()
	res := e.post("/admin/campaigns", url.Values{
		"title": {title}, "shopId": {"1"}, "stock": {strconv.Itoa(stock)}, "payValue": {"100"}, "actualValue": {"500"},
		"beginTime": {begin.UTC().Format(time.RFC3339)}, "endTime": {end.UTC().Format(time.RFC3339)},
	})
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("create: %s: %s", res.Status, e.page(res).Find(`[data-testid^="error-"], [data-testid="form-error"]`).Text())
	}
	var id int64
	if _, err := fmt.Sscanf(loc, "/admin/campaigns/%d?done=create", &id); err != nil {
		e.t.Fatalf("create redirected to %q", loc)
	}
	return id
}

// newDashSale starts a dashboard, signs in and creates a campaign on sale
// from a minute ago for an hour through the form; it returns the campaign's
// id and its page's path.
func newDashSale(t *testing.T, title string, stock int) (*dashEnv, int64, string) {
	t.Helper()
	e := newDashEnv(t)
	e.login()
	now := time.Now()
	id := e.createCampaign(title, stock, now.Add(-time.Minute), now.Add(time.Hour))
	return e, id, "/admin/campaigns/" + strconv.FormatInt(id, 10)
}

// buy purchases through GraphQL as a user and returns the outcome.
func (e *dashEnv) buy(voucherID, userID int64) string {
	e.t.Helper()
	tok, err := e.app.Tokens.Issue(userID, false, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	_, raw := app.PostPurchase(e.t, e.srv.URL, tok, voucherID, nil)
	var out struct {
		Data struct {
			Seckill struct{ Outcome string } `json:"seckill"`
		} `json:"data"`
		Errors []struct{ Message string } `json:"errors"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Errors) > 0 {
		e.t.Fatalf("buy %d as %d: %v %+v", voucherID, userID, err, out.Errors)
	}
	return out.Data.Seckill.Outcome
}

func dashEventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
