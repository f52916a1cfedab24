package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
)

// chromiumPath finds Debian's chromium. Without one the test fails in CI
// (CI=true; `make test` installs it) and is skipped elsewhere.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SECKILL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if p := "/usr/bin/chromium"; fileExists(p) {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is missing: the browser test must run in CI (make test installs it with scripts/chromium.sh)")
	}
	t.Skip("chromium is missing: install it (apt-get install chromium, or make test as root) to run the browser test")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// newBrowser returns a tab of a headless chromium in a browser context of
// its own (as a new incognito profile: its own cookies, storage and cache),
// closed when the test ends; tabs the test opens from it share that
// context. The tests of a binary share one chromium, started by the first
// (each start takes CPU from the suites make test runs beside it), and
// stopped by TestMain; a test that needs flags of its own
// (extra) starts a chromium of its own, stopped when it ends.
func newBrowser(t *testing.T, path string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	var browser context.Context
	if len(extra) > 0 {
		b, stop, err := startChromium(path, t.TempDir(), extra...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		browser = b
	} else {
		b, err := chromiums.get(path)
		if err != nil {
			t.Fatal(err)
		}
		browser = b
	}
	ctx, cancelTab := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	// A bound for a browser that hangs, not a test's budget: beside the whole
	// suite on two cores a browser test takes several times as long as
	// alone, and each step has its own wait.
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
	})
	if err := chromedp.Do(ctx); err != nil { // open the tab now
		t.Fatalf("open a tab in chromium at %s: %v", path, err)
	}
	return ctx
}

// startChromium starts a headless chromium with its profile in dir and
// returns its context and a func that stops it.
func startChromium(path, dir string, extra ...chromedp.ExecAllocatorOption) (context.Context, func(), error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		// This flag replaces chromedp's own disable-features (v0.23:
		// Translate,BlinkGenPropertyTrees), so it repeats those two, and
		// adds the omnibox's two WebUI popups: Chromium 156 renders its
		// toolbar's popups in a renderer of their own, which nobody sees
		// headless and which cost the browser more CPU in the sale page's
		// tests than the pages themselves.
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,WebUIOmniboxPopup,WebUIOmniboxAimPopup"),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	stop := func() {
		cancelBrowser()
		cancelAlloc()
	}
	if err := chromedp.Do(ctx); err != nil { // start the browser now
		stop()
		return nil, nil, fmt.Errorf("start chromium at %s: %w", path, err)
	}
	return ctx, stop, nil
}

// chromiums is the chromium the tests of this binary share.
var chromiums sharedChromium

type sharedChromium struct {
	mu      sync.Mutex
	path    string
	dir     string          // its profile
	browser context.Context // nil before the first test
	stop    func()
}

// get returns the shared chromium at path, started now if it is not
// running (or is another binary).
func (s *sharedChromium) get(path string) (context.Context, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.browser != nil && s.browser.Err() == nil && s.path == path {
		return s.browser, nil
	}
	s.close()
	dir, err := os.MkdirTemp("", "seckill-chromium-")
	if err != nil {
		return nil, err
	}
	browser, stop, err := startChromium(path, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.path, s.dir, s.browser, s.stop = path, dir, browser, stop
	return browser, nil
}

// Close stops the shared chromium, if one runs, and removes its profile.
func (s *sharedChromium) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.close()
}

func (s *sharedChromium) close() {
	if s.browser == nil {
		return
	}
	s.stop()
	_ = os.RemoveAll(s.dir)
	s.browser, s.stop = nil, nil
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// inZone makes the browser live in the time zone tz.
func inZone(tz string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: tz})
		return err
	})
}

// screenshots saves the page as name-wide.png (1280 px) and name-phone.png
// (390 px) into SECKILL_SCREENSHOTS when it names a directory, for people
// to look at; otherwise it does nothing.
func screenshots(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SECKILL_SCREENSHOTS")
	if dir == "" {
		return
	}
	for _, v := range []struct {
		suffix string
		w, h   int64
	}{{"wide", 1280, 900}, {"phone", 390, 844}} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(v.w, v.h), chromedp.Sleep(300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name+"-"+v.suffix+".png"), png, 0o644)
		}
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardInBrowser drives the real dashboard in headless chromium
// against real Postgres and Redis: everything needs a session; an operator
// signs in, creates a campaign through the form, watches remaining fall and
// sold rise while buyers buy through GraphQL, without reloading; the Asynq
// monitor loads under /admin/queues/.
func TestDashboardInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	e := newDashEnv(t)
	ctx := newBrowser(t, chromium)
	base := e.srv.URL
	// The operator is in Shanghai (UTC+8), not in the server's UTC.
	if err := chromedp.Do(ctx, inZone("Asia/Shanghai")); err != nil {
		t.Fatal(err)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		must("location", err)
		return loc
	}
	waitFor := func(what, expr string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(20*time.Second)))
		if err != nil {
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
			t.Fatalf("waiting for %s: %v\npage %s:\n%s", what, err, location(), html)
		}
	}

	// Without a session every page, the Asynq monitor's too, sends the
	// browser to sign in.
	for _, p := range []string{"/admin", "/admin/", "/admin/jobs", "/admin/campaigns/new", "/admin/campaigns/1", "/admin/queues", "/admin/queues/"} {
		must("open "+p, chromedp.Do(ctx, chromedp.Navigate(base+p)))
		if loc := location(); !strings.HasPrefix(loc, base+"/admin/login?next=") {
			t.Errorf("%s without a session ended at %s", p, loc)
		}
	}

	// Sign in.
	must("sign in", chromedp.Do(ctx,
		chromedp.Navigate(base+"/admin/login"),
		chromedp.SendKeys(css(`[data-testid="login-user"]`), dashAdmin),
		chromedp.SendKeys(css(`[data-testid="login-password"]`), dashPassword),
		chromedp.Click(css(`[data-testid="login-submit"]`)),
		chromedp.WaitVisible(css(`[data-testid="campaigns-table"]`)),
	))

	// The form checks itself before it is sent: every invalid field at
	// once, in the labels it shows, stock 0 included; nothing is sent.
	must("submit an invalid form", chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid="new-campaign"]`)),
		chromedp.WaitVisible(css(`[data-testid="campaign-form"]`)),
		chromedp.SendKeys(css(`[data-testid="input-stock"]`), "0"),
		chromedp.SendKeys(css(`[data-testid="input-payValue"]`), "500"),
		chromedp.SendKeys(css(`[data-testid="input-actualValue"]`), "100"),
		chromedp.Click(css(`[data-testid="submit"]`)),
	))
	errorsShown, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => {
		const out = {};
		document.querySelectorAll('[data-testid^="error-"]:not(.hidden)').forEach(el => {
			out[el.dataset.testid.slice(6)] = el.textContent.trim();
		});
		out.summary = document.querySelector('[data-testid="form-error"]:not(.hidden) [data-summary-text]')?.textContent.trim() ?? "";
		return out;
	})()`))
	must("read the form's errors", err)
	wantErrors := map[string]string{
		"title": "“Title” is required", "stock": "“Stock” must be between 1 and 10000000",
		"actualValue": "“Worth” must be at least “Pays”", "summary": "Check 3 fields: Title, Stock, Worth.",
	}
	if diff := cmp.Diff(wantErrors, errorsShown); diff != "" || location() != base+"/admin/campaigns/new" {
		t.Errorf("the form checked itself at %s (-want +got):\n%s", location(), diff)
	}
	screenshots(t, ctx, "form-errors")

	// Create a campaign through the form; it starts a minute ago, in the
	// browser's own zone.
	must("create", chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`["stock", "payValue", "actualValue"].forEach(f =>
			document.querySelector('[data-testid="input-' + f + '"]').value = "")`),
		chromedp.SendKeys(css(`[data-testid="input-title"]`), "Browser sale"),
		chromedp.SendKeys(css(`[data-testid="input-stock"]`), "5"),
		chromedp.SendKeys(css(`[data-testid="input-payValue"]`), "100"),
		chromedp.SendKeys(css(`[data-testid="input-actualValue"]`), "500"),
		chromedp.Evaluate[chromedp.Void](`(() => {
			const pad = n => String(n).padStart(2, "0");
			const d = new Date(Date.now() - 60000);
			document.querySelector('[data-testid="input-beginTime"]').value =
				d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes());
		})()`),
		chromedp.Click(css(`[data-testid="submit"]`)),
		chromedp.WaitVisible(css(`[data-testid="campaign-title"]`)),
	))
	var id int64
	if _, err := fmt.Sscanf(strings.TrimPrefix(location(), base), "/admin/campaigns/%d?done=create", &id); err != nil {
		t.Fatalf("after create the browser is at %s", location())
	}
	title, err := chromedp.Run(ctx, chromedp.Text(css(`[data-testid="campaign-title"]`)))
	must("title", err)
	if title != "Browser sale" {
		t.Errorf("campaign title %q", title)
	}

	// The list shows it: 5 remaining, 0 sold.
	row := `document.querySelector('[data-testid="campaign-row"][data-voucher-id="` + strconv.FormatInt(id, 10) + `"]')`
	cell := func(tid string) string {
		return row + `.querySelector('[data-testid="` + tid + `"]').textContent.trim()`
	}
	must("open the list", chromedp.Do(ctx, chromedp.Navigate(base+"/admin")))
	waitFor("the new campaign in the list", row+` !== null && `+cell("remaining")+` === "5" && `+cell("sold")+` === "0"`)
	// Times read in the viewer's zone, named: the script replaced the UTC
	// text.
	local, err := chromedp.Run(ctx, chromedp.Evaluate[string](row+`.querySelector("time").textContent`))
	must("time", err)
	if !strings.HasSuffix(local, "GMT+8") {
		t.Errorf("begin time %q is not in the viewer's zone, named", local)
	}
	// A marker that a reload would lose.
	must("mark the page", chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`)))

	// Buyers buy through GraphQL; the workers persist the orders.
	for user := int64(1); user <= 3; user++ {
		if got := e.buy(id, 9000+user); got != "ACCEPTED" {
			t.Fatalf("buy as %d: %s", 9000+user, got)
		}
	}
	waitFor("remaining 2 and sold 3 without a reload",
		`window.__noReload === 42 && `+cell("remaining")+` === "2" && `+cell("sold")+` === "3"`)

	// The campaign page follows live too, and the books balance.
	must("open the campaign", chromedp.Do(ctx, chromedp.Navigate(base+"/admin/campaigns/"+strconv.FormatInt(id, 10))))
	stat := func(tid string) string {
		return `document.querySelector('[data-testid="` + tid + `"]').textContent.trim()`
	}
	waitFor("the campaign's numbers", stat("stat-remaining")+` === "2" && `+stat("stat-sold")+` === "3"`)

	// The operator brakes the sale to one admission a second; the challenge
	// is fixed once the sale has started, so the form offers the brake only.
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="guard-input-challenge"]').length`)); err != nil || n != 0 {
		t.Errorf("a started campaign offers the challenge: %d %v", n, err)
	}
	must("brake", chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="guard-input-brake"]').value = ""`),
		chromedp.SendKeys(css(`[data-testid="guard-input-brake"]`), "1"),
		chromedp.Click(css(`[data-testid="guard-submit"]`)),
		chromedp.WaitVisible(css(`[data-testid="notice"]`)),
	))
	waitFor("the brake saved", `location.search === "?done=guard" && `+stat("guard-brake")+` === "at most 1 admissions a second"`)
	waitFor("the campaign's numbers", stat("stat-remaining")+` === "2"`)
	must("mark the page", chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.__noReload = 43`)))
	if got := e.buy(id, 9004); got != "ACCEPTED" {
		t.Fatalf("fourth buy: %s", got)
	}
	if got := e.buy(id, 9005); got != "RATE_LIMITED" {
		t.Errorf("a second admission within the brake's second: %s, want RATE_LIMITED", got)
	}
	waitFor("remaining 1 and sold 4 on the campaign page",
		`window.__noReload === 43 && `+stat("stat-remaining")+` === "1" && `+stat("stat-sold")+` === "4" && `+
			`document.querySelector('[data-testid="consistency"]').dataset.state === "ok"`)
	waitFor("the audit entry of the creation", `document.querySelector('[data-testid="audit-entry"][data-action="create"]') !== null`)
	who, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="audit-entry"][data-action="create"] [data-testid="audit-who"]').textContent.replace(/\s+/g, " ").trim()`))
	must("audit who", err)
	if who != "operator "+dashAdmin {
		t.Errorf("audit entry made by %q", who)
	}

	// After the purchase: a payment shows without a reload; the operator
	// cancels an unpaid order with its button and its unit is back.
	orderOf := func(user int64) int64 {
		os, err := e.app.Store.OrdersByUser(e.ctx, user, 1)
		if err != nil || len(os) != 1 {
			t.Fatalf("orders of %d: %v %v", user, os, err)
		}
		return os[0].ID
	}
	waitFor("four orders awaiting payment", stat("stat-awaiting")+` === "4"`)
	pay, err := e.app.Life.CreatePayment(seckill.NewContextWithUser(e.ctx, &seckill.User{ID: 9001}), orderOf(9001))
	must("create payment", err)
	_, err = e.app.Life.ApplyPaymentEvent(e.ctx, seckill.PaymentEvent{ID: "evt_browser", Type: seckill.EventPaymentSucceeded,
		PaymentID: pay.ID, Amount: pay.Amount, Currency: pay.Currency})
	must("pay", err)
	waitFor("the payment on the live page", `window.__noReload === 43 && `+stat("stat-paid")+` === "1" && `+
		stat("stat-awaiting")+` === "3" && `+stat("funnel-paid")+` === "1" && `+stat("stat-revenue")+` === "1.00 CNY" && `+
		`document.querySelector('[data-testid="consistency"]').dataset.state === "ok"`)
	// 9002 opens a payment it will pay only after its order is cancelled:
	// the provider's late success is owed back.
	late, err := e.app.Life.CreatePayment(seckill.NewContextWithUser(e.ctx, &seckill.User{ID: 9002}), orderOf(9002))
	must("create the payment paid late", err)
	must("reload for the order list", chromedp.Do(ctx, chromedp.Reload()))
	cancelButton := `[data-testid="order-row"][data-order-id="` + strconv.FormatInt(orderOf(9002), 10) + `"] [data-testid="cancel-order"] button`
	must("cancel an unpaid order", chromedp.Do(ctx, chromedp.Click(css(cancelButton))))
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(location(), "done=cancel"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cancel did not come back to the campaign: %s", location())
		}
	}
	must("the campaign page after the cancel", chromedp.Do(ctx, chromedp.WaitVisible(css(`[data-testid="consistency"]`))))
	waitFor("the cancelled order's unit back", stat("stat-cancelled")+` === "1" && `+stat("stat-remaining")+` === "2" && `+
		`document.querySelector('[data-testid="consistency"]').dataset.state === "ok" && `+
		`document.querySelector('[data-testid="audit-entry"][data-action="cancel_order"]') !== null`)
	_, err = e.app.Life.ApplyPaymentEvent(e.ctx, seckill.PaymentEvent{ID: "evt_browser_late", Type: seckill.EventPaymentSucceeded,
		PaymentID: late.ID, Amount: late.Amount, Currency: late.Currency})
	must("pay late", err)
	waitFor("the refund owed on the live page", stat("refunds-owed")+` === "1" && `+stat("refunds-owed-amount")+` === "1.00 CNY"`)
	must("reload for the refunds", chromedp.Do(ctx, chromedp.Reload()))
	waitFor("the refund in the list", `document.querySelector('[data-testid="refund-row"][data-payment-id="`+late.ID+`"][data-status="REFUND_NEEDED"]') !== null && `+
		`document.querySelector('[data-testid="refunds-off"]') !== null`)
	screenshots(t, ctx, "campaign")
	must("open the list", chromedp.Do(ctx, chromedp.Navigate(base+"/admin")))
	waitFor("the list", row+` !== null`)
	screenshots(t, ctx, "campaigns")
	must("open the queues", chromedp.Do(ctx, chromedp.Navigate(base+"/admin/jobs")))
	waitFor("the queues", `document.querySelector('[data-testid="queue-row"]') !== null`)
	screenshots(t, ctx, "queues")

	// The Asynq monitor loads under /admin/queues/ and lists the queue. The
	// process wrote its own purchases without the queue (direct.go): a
	// requeue, as the reconciler makes, gives the queue a task (the order
	// is in Postgres already, so it changes nothing).
	must("requeue an order", e.app.Enqueuer.RequeuePersist(e.ctx, seckill.Admission{
		OrderID: orderOf(9001), VoucherID: id, UserID: 9001, AdmittedAt: time.Now()}))
	must("open the monitor", chromedp.Do(ctx, chromedp.Navigate(base+"/admin/queues/")))
	if loc := location(); loc != base+"/admin/queues/" {
		t.Fatalf("monitor at %s", loc)
	}
	waitFor("asynqmon to list the orders queue", `(() => {
		const root = document.querySelector("#root");
		return root !== null && root.innerText.includes("orders");
	})()`)
	screenshots(t, ctx, "asynqmon")
	// And it leads back to the dashboard.
	must("back from the monitor", chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid="back-to-dashboard"]`)),
		chromedp.WaitVisible(css(`[data-testid="campaigns-table"]`)),
	))
	if loc := location(); loc != base+"/admin" {
		t.Errorf("back from the monitor at %s", loc)
	}

	// Order events: add an endpoint (a receiver of the test's), which
	// shows its secret once and is listed healthy; its deliveries page
	// opens; disabling it from the list says so.
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(receiver.Close)
	must("add an endpoint", chromedp.Do(ctx,
		chromedp.Navigate(base+"/admin/events"),
		chromedp.WaitVisible(css(`[data-testid="endpoints-table"]`)),
		chromedp.SendKeys(css(`[data-testid="endpoint-url"]`), receiver.URL+"/hooks/seckill"),
		chromedp.Click(css(`[data-testid="add-endpoint-button"]`)),
		chromedp.WaitVisible(css(`[data-testid="new-secret"]`)),
	))
	endpointRow := `document.querySelector('[data-testid="endpoint-row"]')`
	waitFor("the endpoint listed healthy", endpointRow+` !== null && `+endpointRow+`.querySelector('[data-testid="endpoint-state"]').innerText.trim() === "healthy"`)
	if secret := evalString(t, ctx, `document.querySelector('[data-testid="new-secret"]').textContent.trim()`); len(secret) < 16 {
		t.Errorf("the new endpoint's secret %q", secret)
	}
	screenshots(t, ctx, "events")
	must("open its deliveries", chromedp.Do(ctx,
		chromedp.Click(css(`[data-testid="endpoint-link"]`)),
		chromedp.WaitVisible(css(`[data-testid="deliveries-table"]`)),
	))
	screenshots(t, ctx, "deliveries")
	must("disable it", chromedp.Do(ctx,
		chromedp.Navigate(base+"/admin/events"),
		chromedp.Click(css(`[data-testid="toggle-endpoint"] button`)),
	))
	// The form's answer sends the browser back to the list: polled from
	// here, as the page goes away in between.
	for deadline := time.Now().Add(20 * time.Second); ; {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](endpointRow+`?.querySelector('[data-testid="endpoint-state"]').innerText.trim() ?? ""`))
		if err == nil && state == "disabled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the endpoint is listed %q (%v), want disabled", state, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Disabled, it can be deleted, after the browser asks: declined, it
	// stays; confirmed, it is gone from the list.
	must("decline to delete it", chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => false; window.__stayed = true`),
		chromedp.Click(css(`[data-testid="delete-endpoint"] button`)),
		chromedp.Sleep(500*time.Millisecond), // a form sent would have left the page by now
	))
	if evalString(t, ctx, `String(window.__stayed === true)`) != "true" {
		t.Fatal("declining the delete left the page")
	}
	if n := evalString(t, ctx, `String(document.querySelectorAll('[data-testid="endpoint-row"]').length)`); n != "1" {
		t.Fatalf("%s endpoints after declining the delete, want 1", n)
	}
	must("delete it", chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`),
		chromedp.Click(css(`[data-testid="delete-endpoint"] button`)),
	))
	for deadline := time.Now().Add(20 * time.Second); ; {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.readyState === "complete" && location.pathname === "/admin/events" ? document.querySelectorAll('[data-testid="endpoint-row"]').length : -1`))
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d endpoints listed after the delete (%v), want none", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Sign out: the session is gone.
	must("sign out", chromedp.Do(ctx,
		chromedp.Navigate(base+"/admin"),
		chromedp.Click(css(`[data-testid="logout"]`)),
		chromedp.WaitVisible(css(`[data-testid="login-form"]`)),
		chromedp.Navigate(base+"/admin"),
	))
	if loc := location(); !strings.HasPrefix(loc, base+"/admin/login") {
		t.Errorf("after signing out /admin is at %s", loc)
	}
}
