package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
	"seckill/salepage"
)

// salePageEnv is a running seckill with the dashboard's setup and a
// headless chromium to open sale pages in.
type salePageEnv struct {
	*dashEnv
	browser context.Context
}

func newSalePageEnv(t *testing.T, opts ...func(vars map[string]string)) *salePageEnv {
	t.Helper()
	chromium := chromiumPath(t)
	if !salepage.Built() {
		if os.Getenv("CI") != "" {
			t.Fatal(strings.TrimSpace(salepage.NotBuilt) + " (make test builds it)")
		}
		t.Skip(strings.TrimSpace(salepage.NotBuilt))
	}
	e := newDashEnv(t, opts...)
	return &salePageEnv{dashEnv: e, browser: newBrowser(t, chromium)}
}

// addCampaign creates a campaign through GraphQL as an admin; extra adds
// fields of AddSeckillVoucherInput (challenge, quiz, powBits).
func (e *salePageEnv) addCampaign(title string, stock int, begin time.Time, extra map[string]any) int64 {
	e.t.Helper()
	in := map[string]any{
		"shopId": "1", "title": title, "payValue": 100, "actualValue": 500, "stock": stock,
		"beginTime": begin.UTC().Format(time.RFC3339Nano), "endTime": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}
	for k, v := range extra {
		in[k] = v
	}
	var out struct {
		Data struct {
			AddSeckillVoucher struct{ ID string } `json:"addSeckillVoucher"`
		} `json:"data"`
		Errors []struct{ Message string } `json:"errors"`
	}
	e.graphql(e.userToken(1, true), `mutation($in: AddSeckillVoucherInput!) { addSeckillVoucher(input: $in) { id } }`,
		map[string]any{"in": in}, &out)
	if len(out.Errors) > 0 {
		e.t.Fatalf("addSeckillVoucher: %+v", out.Errors)
	}
	id, err := strconv.ParseInt(out.Data.AddSeckillVoucher.ID, 10, 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *salePageEnv) userToken(id int64, admin bool) string {
	e.t.Helper()
	tok, err := e.app.Tokens.Issue(id, admin, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func (e *salePageEnv) graphql(token, query string, vars map[string]any, out any) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.srv.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		e.t.Fatal(err)
	}
}

// pay confirms a payment as the provider would: a signed
// payment.succeeded to the webhook (what `seckill payments simulate` sends).
func (e *salePageEnv) pay(paymentID string) {
	e.t.Helper()
	ev := seckill.PaymentEvent{ID: fmt.Sprintf("evt_sale_%d", time.Now().UnixNano()), Type: seckill.EventPaymentSucceeded,
		PaymentID: paymentID, Amount: 100, Currency: "CNY"}
	body, _ := json.Marshal(ev)
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.srv.URL+"/webhooks/payments", bytes.NewReader(body))
	req.Header.Set(payhook.Header, payhook.Sign([]byte(config.DevWebhookSecret), time.Now(), body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("webhook: %s", res.Status)
	}
}

// onNewDocument runs src in the tab of ctx before any script of every
// page it loads.
func onNewDocument(ctx context.Context, src string) error {
	if err := chromedp.Do(ctx); err != nil { // the tab, now
		return err
	}
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src})
	return err
}

// skewClock is a script that makes the page's clock (Date and Date.now)
// run off by skew from the real one.
func skewClock(skew time.Duration) string {
	return fmt.Sprintf(`(() => {
		const skew = %d, Real = Date;
		class Skewed extends Real {
			constructor(...a) { if (a.length === 0) super(Real.now() + skew); else super(...a); }
			static now() { return Real.now() + skew; }
		}
		window.Date = Skewed;
	})();`, skew.Milliseconds())
}

// openSale opens the sale page of voucher in a new tab as the buyer with
// token (in the URL fragment), its clock off by skew, the browser's
// language lang, on a phone's screen (360 px wide).
func (e *salePageEnv) openSale(voucher int64, token string, skew time.Duration, lang string) context.Context {
	e.t.Helper()
	ctx, cancel := chromedp.NewContext(e.browser)
	e.t.Cleanup(func() {
		// The page never needs what its Content-Security-Policy forbids.
		if v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__violations || []`)); err == nil && len(v) > 0 {
			e.t.Errorf("CSP violations: %v", v)
		}
		cancel()
	})
	script := skewClock(skew) + fmt.Sprintf(`Object.defineProperty(navigator, "language", {get: () => %q});`, lang) +
		`window.__violations = [];
		document.addEventListener("securitypolicyviolation", e => window.__violations.push(e.violatedDirective + " " + e.blockedURI));`
	if err := onNewDocument(ctx, script); err != nil {
		e.t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(360, 780),
		chromedp.Navigate(fmt.Sprintf("%s/sale/%d#token=%s", e.srv.URL, voucher, token))); err != nil {
		e.t.Fatalf("open the sale page: %v", err)
	}
	return ctx
}

// waitFor polls the JavaScript expression js in the page until it is
// true, or fails the test after timeout with what the page says.
func waitFor(t *testing.T, ctx context.Context, timeout time.Duration, what, js string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			msg, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("timed out after %v waiting for %s (%v); the page says:\n%s", timeout, what, err, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func evalString(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return s
}

// saleShot saves a screenshot of the page into the test's artifact
// directory (and SECKILL_SCREENSHOTS, as the dashboard's).
func saleShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	// Every page is looked at on a phone: nothing wider than its 360 px.
	if wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`innerWidth <= 360 && document.documentElement.scrollWidth > innerWidth`)); err != nil || wide {
		t.Errorf("%s: wider than the phone's screen (%v)", name, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	screenshots(t, ctx, "sale-"+name)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(360, 780)); err != nil { // screenshots leaves it wide
		t.Fatal(err)
	}
}

const (
	jsStatus  = `(document.body.dataset.status || "")`
	jsOutcome = `(document.body.dataset.outcome || "")`
)

// TestSalePageInBrowser buys through the real sale page in headless
// chromium on a phone-sized screen: on two pages, one whose clock is two
// minutes ahead and one three minutes behind, the countdown and the button
// follow the server's clock (each button opens within a few hundred ms of
// the server's open, not minutes early or late); the first page's order
// reaches CREATED by subscription, is paid (the provider's webhook) and
// shows PAID. A page in a frame gets its token by postMessage from its
// parent only, and buys. Then a quiz campaign (the buyer picks the answer with the
// keyboard) and a proof-of-work one (solved in a Web Worker) each buy, and
// the quiz order is cancelled from the page.
func TestSalePageInBrowser(t *testing.T) {
	e := newSalePageEnv(t)

	// The page as a CDN sees it: public, short-lived, no cookie; its
	// assets immutable.
	res := e.get("/sale/1")
	if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != salepage.PageCache || len(res.Header.Values("Set-Cookie")) > 0 {
		t.Errorf("GET /sale/1: %s, Cache-Control %q, Set-Cookie %q", res.Status, res.Header.Get("Cache-Control"), res.Header.Values("Set-Cookie"))
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "; frame-ancestors 'self'") {
		t.Errorf("GET /sale/1: CSP %q, want frame-ancestors 'self' by default", csp)
	}
	if res := e.get("/time"); res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("GET /time: %s, Cache-Control %q", res.Status, res.Header.Get("Cache-Control"))
	}

	// The clock: the sale opens in 12 s on the server's clock: time for
	// three pages to load, even with the whole suite beside them on two
	// cores.
	const skew = 2 * time.Minute
	begin := time.Now().Add(12 * time.Second).Truncate(time.Second)
	v := e.addCampaign("Skewed clock sale", 3, begin, nil)
	// Its stock beside the page, for a CDN to absorb the pages' polling.
	if res := e.get(fmt.Sprintf("/sale/%d/stock", v)); res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != salepage.SaleCache ||
		len(res.Header.Values("Set-Cookie")) > 0 {
		t.Errorf("GET /sale/%d/stock: %s, Cache-Control %q, Set-Cookie %q", v, res.Status, res.Header.Get("Cache-Control"), res.Header.Values("Set-Cookie"))
	} else {
		var st salepage.Stock
		err := json.NewDecoder(res.Body).Decode(&st)
		rev := st.Rev
		st.Rev = ""
		if err != nil || st != (salepage.Stock{Stock: 3, Remaining: 3, Status: seckill.CampaignScheduled}) || rev == "" {
			t.Errorf("GET /sale/%d/stock: %+v (%v)", v, st, err)
		}
	}
	if res := e.get("/sale/999999999/stock"); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /sale/999999999/stock: %s, want 404", res.Status)
	}
	// Its campaign beside the page too, what every page load reads: the
	// same values as the API's, times to the microsecond (a campaign
	// opening at a fraction of a second, with a room and a proof of work).
	exactBegin := time.Now().Add(10 * time.Minute).Truncate(time.Second).Add(123456 * time.Microsecond)
	exact := e.addCampaign("Exact times", 7, exactBegin, map[string]any{
		"endTime":  exactBegin.Add(time.Hour + 250*time.Millisecond).UTC().Format(time.RFC3339Nano),
		"subTitle": "to the microsecond", "challenge": "PROOF_OF_WORK", "powBits": 12,
		"waitingRoom": map[string]any{"opensSecondsBefore": 30, "admitPerSecond": 40, "passSeconds": 20},
	})
	for _, id := range []int64{v, exact} {
		res := e.get(fmt.Sprintf("/sale/%d/campaign", id))
		var page map[string]any
		if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != salepage.SaleCache || len(res.Header.Values("Set-Cookie")) > 0 ||
			json.NewDecoder(res.Body).Decode(&page) != nil {
			t.Fatalf("GET /sale/%d/campaign: %s, Cache-Control %q, Set-Cookie %q", id, res.Status, res.Header.Get("Cache-Control"), res.Header.Values("Set-Cookie"))
		}
		var api struct {
			Data struct {
				Voucher map[string]any `json:"voucher"`
			} `json:"data"`
		}
		e.graphql(e.userToken(3000, false), `query($id: ID!) { voucher(id: $id) { title subTitle payValue actualValue
			seckill { stock remaining status beginTime endTime challenge powBits waitingRoom { opensAt admitPerSecond passSeconds } } } }`,
			map[string]any{"id": strconv.FormatInt(id, 10)}, &api)
		want := api.Data.Voucher
		if want == nil {
			t.Fatalf("voucher %d: no answer from the API", id)
		}
		maps.Copy(want, want["seckill"].(map[string]any))
		delete(want, "seckill")
		if want["subTitle"] == nil {
			want["subTitle"] = ""
		}
		// Beyond the API's fields: the payments' currency, in which the
		// page shows prices (the server's default here).
		want["currency"], want["minorDigits"] = "CNY", float64(2)
		// And the rev the stock answers carry (salepage.TestRev).
		if rev, _ := page["rev"].(string); len(rev) != 16 {
			t.Errorf("GET /sale/%d/campaign: rev %q", id, page["rev"])
		}
		delete(page, "rev")
		if diff := cmp.Diff(want, page); diff != "" {
			t.Errorf("GET /sale/%d/campaign against the API (-api +page):\n%s", id, diff)
		}
	}
	if got := e.get(fmt.Sprintf("/sale/%d/campaign", exact)); got.StatusCode == http.StatusOK {
		var c salepage.Campaign
		if err := json.NewDecoder(got.Body).Decode(&c); err != nil || c.WaitingRoom == nil || !c.BeginTime.Equal(exactBegin.Truncate(time.Microsecond)) ||
			!c.WaitingRoom.OpensAt.Equal(c.BeginTime.Add(-30*time.Second)) {
			t.Errorf("GET /sale/%d/campaign: beginTime %v, room %+v (%v), want %v and 30 s before", exact, c.BeginTime, c.WaitingRoom, err, exactBegin)
		}
	}
	if res := e.get("/sale/999999999/campaign"); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /sale/999999999/campaign: %s, want 404", res.Status)
	}
	// A page loaded without a token yet (the stampede before a sale) shows
	// the campaign and counts down to its room without a GraphQL request.
	anon := e.openSale(exact, "", 0, "en-US")
	waitFor(t, anon, 15*time.Second, "the page ready without a token",
		`document.body.dataset.ready === "true" && document.getElementById("title").textContent === "Exact times" && document.getElementById("countdown").dataset.to === "room"`)
	if n, err := chromedp.Run(anon, chromedp.Evaluate[int](`performance.getEntriesByType("resource").filter(r => r.name.endsWith("/graphql")).length`)); err != nil || n != 0 {
		t.Errorf("a page without a token sent %d GraphQL requests (%v), want 0", n, err)
	}
	ctx := e.openSale(v, e.userToken(3001, false), skew, "en-US")
	// A second buyer whose clock is three minutes behind.
	behind := e.openSale(v, e.userToken(3006, false), -3*time.Minute, "en-US")
	// Each page records when its button opens, on the real clock
	// (performance.timeOrigin is not skewed).
	const watchOpen = `(() => {
		const b = document.getElementById("buy");
		new MutationObserver(() => { if (!b.disabled && !window.__openedAt) window.__openedAt = performance.timeOrigin + performance.now(); })
			.observe(b, {attributes: true});
		return true;
	})()`
	for _, c := range []context.Context{ctx, behind} {
		waitFor(t, c, 15*time.Second, "the page to be ready", `document.body.dataset.ready === "true"`)
		if _, err := chromedp.Run(c, chromedp.Evaluate[bool](watchOpen)); err != nil {
			t.Fatal(err)
		}
	}
	for c, want := range map[context.Context]time.Duration{ctx: -skew, behind: 3 * time.Minute} {
		if off, _ := strconv.Atoi(evalString(t, c, `document.body.dataset.offset`)); time.Duration(off)*time.Millisecond > want+2*time.Second ||
			time.Duration(off)*time.Millisecond < want-2*time.Second {
			t.Errorf("the page measured an offset of %d ms from the server, want about %v", off, want)
		}
		secs, _ := strconv.Atoi(evalString(t, c, `document.getElementById("countdown").dataset.seconds`))
		if left := time.Until(begin); secs < int(left.Seconds())-1 || secs > int(left.Seconds())+2 {
			t.Errorf("countdown shows %d s, the server opens in %v", secs, left)
		}
		if ok, _ := chromedp.Run(c, chromedp.Evaluate[bool](`document.getElementById("buy").disabled`)); !ok && time.Until(begin) > 0 {
			t.Fatalf("the buy button is enabled %v before the open", time.Until(begin))
		}
	}
	if u := evalString(t, ctx, `location.href`); strings.Contains(u, "token") {
		t.Errorf("the token stays in the address bar: %s", u)
	}
	saleShot(t, ctx, "countdown")
	for name, c := range map[string]context.Context{"ahead": ctx, "behind": behind} {
		waitFor(t, c, 15*time.Second, "the button to open", `window.__openedAt !== undefined`)
		ms, err := chromedp.Run(c, chromedp.Evaluate[float64](`window.__openedAt`))
		if err != nil {
			t.Fatal(err)
		}
		opened := time.UnixMilli(int64(ms))
		// A page on the device's clock would open minutes off (skew, and 3
		// minutes behind). Late by up to 5 s is a loaded machine: the page
		// wakes on a timer at each whole second, and a loaded machine fires
		// it seconds late.
		if d := opened.Sub(begin); d < -300*time.Millisecond || d > 5*time.Second {
			t.Errorf("the page whose clock is %s opened its button %v from the server's open", name, d)
		} else {
			t.Logf("the page whose clock is %s opened its button %v after the server's open", name, d.Round(time.Millisecond))
		}
	}
	// A keyboard buyer: focus the button and press Enter.
	if err := chromedp.Do(ctx, chromedp.Focus(css("#buy")), chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 20*time.Second, "CREATED", jsStatus+` === "CREATED"`)
	saleShot(t, ctx, "created")
	// What is left comes from the stock endpoint (cached up to 3 s), not
	// from GraphQL.
	waitFor(t, ctx, 15*time.Second, "2 left", `document.body.dataset.remaining === "2" && document.getElementById("left").textContent.startsWith("2 ")`)
	if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`performance.getEntriesByType("resource").some(r => r.name.endsWith("/sale/`+strconv.FormatInt(v, 10)+`/stock"))`)); !ok {
		t.Error("the page never read GET /sale/{id}/stock")
	}
	// And the campaign from its GET.
	if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`performance.getEntriesByType("resource").some(r => r.name.endsWith("/sale/`+strconv.FormatInt(v, 10)+`/campaign"))`)); !ok {
		t.Error("the page never read GET /sale/{id}/campaign")
	}
	// Prices in the payments' currency and its minor unit, as the
	// browser's language writes them (CNY in English: "CN¥1.00").
	if got := evalString(t, ctx, `document.getElementById("price").textContent`); !strings.Contains(got, "1.00") || !strings.Contains(got, "¥") {
		t.Errorf("the price reads %q, want 1.00 in yuan", got)
	}
	// The button shows while the order is CREATED; a click on a hidden one
	// would wait for it as long as the browser's context lasts.
	waitFor(t, ctx, 20*time.Second, "the pay button", `!document.getElementById("pay").hidden`)
	if err := chromedp.Do(ctx, chromedp.Click(css("#pay"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "a payment", `document.body.dataset.paymentId !== undefined`)
	e.pay(evalString(t, ctx, `document.body.dataset.paymentId`))
	waitFor(t, ctx, 20*time.Second, "PAID", jsStatus+` === "PAID"`)
	saleShot(t, ctx, "paid")
	// Loaded again, the page shows the buyer's order, not a buy button.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"),
		chromedp.Navigate(fmt.Sprintf("%s/sale/%d#token=%s", e.srv.URL, v, e.userToken(3001, false)))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "PAID after a reload", jsStatus+` === "PAID"`)
	if ok, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("buy").disabled`)); !ok {
		t.Error("the buy button is enabled for a buyer who holds an order")
	}

	// The token by postMessage from the app that frames the page (here a
	// page of the same origin, so that the test can look into the frame).
	// A message from anyone but the parent is ignored.
	app, cancelApp := chromedp.NewContext(e.browser)
	defer cancelApp()
	if err := chromedp.Do(app, chromedp.Navigate(e.srv.URL+"/healthz")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(app, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
		document.body.replaceChildren();
		const f = document.createElement("iframe");
		f.id = "sale"; f.src = "/sale/%d"; f.width = 360; f.height = 700;
		document.body.append(f);
		return true;
	})()`, v))); err != nil {
		t.Fatal(err)
	}
	const frame = `document.getElementById("sale").contentDocument`
	waitFor(t, app, 15*time.Second, "the framed page", frame+`.body.dataset.ready === "true"`)
	if got := evalString(t, app, frame+`.getElementById("message").textContent`); !strings.Contains(got, "did not get your buyer token") {
		t.Errorf("without a token the page says %q", got)
	}
	// Not the parent: a sibling frame.
	if _, err := chromedp.Run(app, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
		const other = document.createElement("iframe");
		document.body.append(other);
		other.contentWindow.eval('parent.document.getElementById("sale").contentWindow.postMessage({type: "seckill:token", token: %q}, "*")');
		return true;
	})()`, e.userToken(3005, false)))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if ok, _ := chromedp.Run(app, chromedp.Evaluate[bool](frame+`.getElementById("buy").disabled`)); !ok {
		t.Error("the page took a token from a window other than its parent")
	}
	if _, err := chromedp.Run(app, chromedp.Evaluate[bool](fmt.Sprintf(
		`document.getElementById("sale").contentWindow.postMessage({type: "seckill:token", token: %q}, location.origin), true`, e.userToken(3004, false)))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, app, 10*time.Second, "the button with the token", `!`+frame+`.getElementById("buy").disabled`)
	if _, err := chromedp.Run(app, chromedp.Evaluate[bool](frame+`.getElementById("buy").click(), true`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, app, 20*time.Second, "CREATED in the frame", frame+`.body.dataset.status === "CREATED"`)
	// Pay in the frame: the payment goes to the app that handed the token,
	// which runs its provider's payment UI, with what it needs.
	if _, err := chromedp.Run(app, chromedp.Evaluate[bool](`(() => {
		window.__payments = [];
		window.addEventListener("message", (ev) => {
			if (ev.data && ev.data.type === "seckill:payment") window.__payments.push({ data: ev.data, origin: ev.origin });
		});
		`+frame+`.getElementById("pay").click();
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, app, 10*time.Second, "the payment handed to the app", `window.__payments.length === 1`)
	var handed struct {
		Data struct {
			Type, VoucherID, OrderID, PaymentID, Currency, PayBy string
			Amount                                               int64
			ClientSecret                                         *string
		}
		Origin string
	}
	got, err := chromedp.Run(app, chromedp.Evaluate[string](`JSON.stringify(window.__payments[0])`))
	if err != nil || json.Unmarshal([]byte(got), &handed) != nil {
		t.Fatalf("the payment message: %q, %v", got, err)
	}
	d := handed.Data
	if d.VoucherID != strconv.FormatInt(v, 10) || d.OrderID != evalString(t, app, frame+`.body.dataset.orderId`) ||
		d.PaymentID == "" || d.PaymentID != evalString(t, app, frame+`.body.dataset.paymentId`) ||
		d.Amount != 100 || d.Currency != "CNY" || d.PayBy == "" || d.ClientSecret != nil || handed.Origin != e.srv.URL {
		t.Errorf("the app was handed %s; want this order's payment of 100 CNY, no clientSecret with the built-in provider, from %s", got, e.srv.URL)
	}

	// A quiz, answered with the keyboard, then the order cancelled.
	quiz := e.addCampaign("Quiz sale", 3, time.Now().Add(-time.Minute), map[string]any{
		"challenge": "QUIZ", "quiz": []map[string]any{{"question": "2 + 2?", "answers": []string{"four"},
			"choices": []string{"three", "four", "five", "six"}}},
	})
	ctx = e.openSale(quiz, e.userToken(3002, false), 0, "en-GB")
	waitFor(t, ctx, 15*time.Second, "the quiz", `!document.getElementById("quiz").hidden`)
	saleShot(t, ctx, "quiz")
	answerQuiz := func(choice string) {
		t.Helper()
		idx := evalString(t, ctx, `String([...document.querySelectorAll("#quiz-choices input")].findIndex(i => i.value === "`+choice+`"))`)
		if err := chromedp.Do(ctx,
			chromedp.Focus(css("#choice-"+idx)), chromedp.KeyEvent(" "),
			chromedp.Focus(css("#quiz button")), chromedp.KeyEvent("\r"),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, 10*time.Second, "the buy button after the answer", `!document.getElementById("buy").disabled`)
		if err := chromedp.Do(ctx, chromedp.Click(css("#buy"))); err != nil {
			t.Fatal(err)
		}
	}
	// A wrong answer: the page says so, and asks a new question only after
	// the wait the server gave (retryAfter, 2 s).
	answerQuiz("three")
	waitFor(t, ctx, 10*time.Second, "the wrong answer", jsOutcome+` === "CHALLENGE_WRONG"`)
	wrongAt := time.Now()
	if got := evalString(t, ctx, `document.getElementById("message").textContent`); !strings.Contains(got, "wrong") || !strings.Contains(got, "2 s") {
		t.Errorf("after a wrong answer the page says %q", got)
	}
	waitFor(t, ctx, 10*time.Second, "a new question", `!document.getElementById("quiz").hidden`)
	if waited := time.Since(wrongAt); waited < 1800*time.Millisecond {
		t.Errorf("a new question came %v after the wrong answer, before the 2 s wait", waited)
	}
	answerQuiz("four")
	waitFor(t, ctx, 20*time.Second, "CREATED after the quiz", jsStatus+` === "CREATED"`)
	if err := chromedp.Do(ctx, chromedp.Click(css("#cancel"))); err != nil {
		t.Fatal(err)
	}
	// The cancellation's close and the unit's return are group commits
	// that a loaded machine may hold for seconds; the page hears the
	// status by subscription.
	waitFor(t, ctx, 30*time.Second, "CANCELLED", jsStatus+` === "CANCELLED"`)
	saleShot(t, ctx, "cancelled")

	// Proof of work, in the page's Web Worker.
	pow := e.addCampaign("Proof-of-work sale", 3, time.Now().Add(-time.Minute), map[string]any{
		"challenge": "PROOF_OF_WORK", "powBits": 12,
	})
	ctx = e.openSale(pow, e.userToken(3003, false), 0, "zh-CN")
	waitFor(t, ctx, 20*time.Second, "the proof of work", `!document.getElementById("buy").disabled`)
	if err := chromedp.Do(ctx, chromedp.Click(css("#buy"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 20*time.Second, "CREATED after the proof of work", jsStatus+` === "CREATED"`)
	// A browser in Chinese gets the page in Chinese.
	for sel, want := range map[string]string{"#buy": "立即抢购", "#order-status": "订单已创建", "#pay": "去付款"} {
		if got := evalString(t, ctx, `document.querySelector("`+sel+`").textContent`); !strings.Contains(got, want) {
			t.Errorf("in Chinese, %s says %q, want %q", sel, got, want)
		}
	}
	saleShot(t, ctx, "pow-zh")
}

// TestSalePageFiftyBuyers opens 50 sale pages at once, each its own
// buyer (its own token in its fragment), on a campaign of 10 units that
// opens a few seconds later; each buyer presses the button when it opens.
// Exactly 10 pages show an order, 40 show sold out. The pages are 50
// frames of one tab (each a document with its own scripts, clock sync and
// WebSocket): on two cores 50 tabs take many times as long to open as 50 frames.
func TestSalePageFiftyBuyers(t *testing.T) {
	e := newSalePageEnv(t)
	const pages, stock = 50, 10
	begin := time.Now().Add(10 * time.Second)
	v := e.addCampaign("Fifty buyers", stock, begin, nil)
	srcs := make([]string, pages)
	for i := range srcs {
		srcs[i] = fmt.Sprintf("/sale/%d#token=%s", v, e.userToken(int64(4000+i), false))
	}
	list, _ := json.Marshal(srcs)
	ctx, cancel := chromedp.NewContext(e.browser)
	defer cancel()
	// A page of the server's origin to hold the frames, so the test can
	// read them; each buyer presses its button as soon as it is enabled.
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/healthz")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		document.body.replaceChildren();
		for (const src of `+string(list)+`) {
			const f = document.createElement("iframe");
			f.src = src; f.width = 360; f.height = 640;
			document.body.append(f);
		}
		setInterval(() => {
			for (const f of document.querySelectorAll("iframe")) {
				const b = f.contentDocument && f.contentDocument.getElementById("buy");
				if (b && !b.disabled && !f.pressed) { f.pressed = true; b.click(); }
			}
		}, 20);
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	const frames = `[...document.querySelectorAll("iframe")].map(f => f.contentDocument && f.contentDocument.body && f.contentDocument.body.dataset)`
	// Fifty pages load beside the whole suite on two cores, which on a
	// loaded machine can take longer than the time to the open. A page
	// that is ready after the open buys late, which the checks below allow.
	waitFor(t, ctx, time.Until(begin)+60*time.Second, "50 pages ready", frames+`.filter(d => d && d.ready === "true").length === 50`)
	if wait := time.Until(begin); wait > 0 {
		t.Logf("%d pages ready %v before the sale", pages, wait.Round(time.Millisecond))
	} else {
		// The machine was too slow to open them in time: the pages still
		// buy (their buttons open at once), but not all at the open.
		t.Logf("the %d pages took until %v after the open", pages, -wait.Round(time.Millisecond))
	}
	waitFor(t, ctx, max(time.Until(begin), 0)+30*time.Second, "every page to end",
		frames+`.filter(d => (d.outcome === "ACCEPTED" && d.orderId) || d.outcome === "SOLD_OUT").length === 50`)
	counts, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]int](frames+`.reduce((m, d) => (m[d.outcome] = (m[d.outcome] || 0) + 1, m), {})`))
	if err != nil {
		t.Fatal(err)
	}
	if counts["ACCEPTED"] != stock || counts["SOLD_OUT"] != pages-stock {
		t.Errorf("pages by outcome %v, want %d ACCEPTED (an order) and %d SOLD_OUT", counts, stock, pages-stock)
	}
	saleShot(t, ctx, "fifty")
}

// roomRecord is what a page of TestSalePageWaitingRoom went through, as
// recordRoomJS saw it every 20 ms.
type roomRecord struct {
	RoomCountdown bool     `json:"roomCountdown"` // counted down to the room's open
	States        []string `json:"states"`        // the room's states, in order
	Positions     []int    `json:"positions"`     // "N ahead of you" while WAITING, in order
	OpenedAt      float64  `json:"openedAt"`      // Unix ms when the buy button first opened
	OpenedState   string   `json:"openedState"`   // the room's state then
	TurnAt        float64  `json:"turnAt"`        // the turn the page was given, server Unix ms
	Outcome       string   `json:"outcome"`
	Room          string   `json:"room"`
	OrderID       string   `json:"orderId"`
}

// recordRoomJS defines __record(doc, rec), which notes into rec what the
// sale page in doc shows now, and presses its button the moment it opens
// when rec.press.
const recordRoomJS = `window.__newRecord = (press) => ({press, roomCountdown: false, states: [], positions: [], openedAt: 0, openedState: "", turnAt: 0});
window.__record = (d, r) => {
	if (!d || !d.body) return;
	const ds = d.body.dataset;
	const cd = d.getElementById("countdown");
	if (cd && cd.dataset.to === "room") r.roomCountdown = true;
	if (ds.room && r.states[r.states.length - 1] !== ds.room) r.states.push(ds.room);
	if (ds.room === "WAITING" && ds.position && r.positions[r.positions.length - 1] !== +ds.position) r.positions.push(+ds.position);
	const b = d.getElementById("buy");
	if (b && !b.disabled && !r.openedAt) {
		r.openedAt = performance.timeOrigin + performance.now();
		r.openedState = ds.room || "";
		r.turnAt = +(ds.turnAt || 0);
		if (r.press) b.click();
	}
	r.outcome = ds.outcome || ""; r.room = ds.room || ""; r.orderId = ds.orderId || "";
};
true`

// TestSalePageWaitingRoom sells 3 units through a waiting room (open 5 s
// before the sale, a turn a second, so that the line is seen moving at the
// room's updates a second; passes of 10 s) to 6 buyers: 5 pages
// in frames of one tab, pressing Buy the moment it opens, and one in a tab
// of its own at 360 px that presses it by keyboard. Every page counts down
// to the room's open, joins at it and shows BEFORE_OPEN; the tab, loaded
// again, keeps its place from sessionStorage, and with a forged ticket
// there joins again to the same place. After the open each page shows its
// position going down, its button opens only at its turn (YOUR_TURN), the
// purchases with the pass succeed: exactly 3 orders, the rest end at
// SOLD_OUT. A seventh buyer, joining after the open, whose purchase is
// forced before a turn, is told PASS_REQUIRED.
func TestSalePageWaitingRoom(t *testing.T) {
	e := newSalePageEnv(t)
	const frames, stock, opensBefore = 5, 3, 8
	// The pages have until the room opens to load: seven pages with the
	// whole suite beside them on two cores can take over 15 s, and a page
	// that loads after the open cannot show that it joined before it (the
	// frames' check below would have no time left). From the open to the
	// sale, the pages join and the tab reloads twice, which a loaded
	// machine needs the 8 s for.
	begin := time.Now().Add(35 * time.Second).Truncate(time.Second)
	opens := begin.Add(-opensBefore * time.Second)
	v := e.addCampaign("Waiting room sale", stock, begin, map[string]any{
		"waitingRoom": map[string]any{"opensSecondsBefore": opensBefore, "admitPerSecond": 1, "passSeconds": 10},
	})

	// The same room with a proof of work as well, for one buyer whose
	// browser speaks Chinese: the purchase at the turn carries both the
	// pass and the answer.
	powRoom := e.addCampaign("Waiting room and proof of work", 1, begin, map[string]any{
		"challenge": "PROOF_OF_WORK", "powBits": 10,
		"waitingRoom": map[string]any{"opensSecondsBefore": opensBefore, "admitPerSecond": 2, "passSeconds": 10},
	})

	// The keyboard buyer's tab, and the frames' tab.
	tab := e.openSale(v, e.userToken(5000, false), 0, "en-US")
	zh := e.openSale(powRoom, e.userToken(5200, false), 0, "zh-CN")
	srcs := make([]string, frames)
	for i := range srcs {
		srcs[i] = fmt.Sprintf("/sale/%d#token=%s", v, e.userToken(int64(5001+i), false))
	}
	list, _ := json.Marshal(srcs)
	ctx, cancel := chromedp.NewContext(e.browser)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/healthz")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](recordRoomJS)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		document.body.replaceChildren();
		window.__recs = [];
		for (const src of `+string(list)+`) {
			const f = document.createElement("iframe");
			f.src = src; f.width = 360; f.height = 640;
			document.body.append(f);
			__recs.push(__newRecord(true));
		}
		setInterval(() => document.querySelectorAll("iframe").forEach((f, i) => __record(f.contentDocument, __recs[i])), 20);
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	const frameData = `[...document.querySelectorAll("iframe")].map(f => (f.contentDocument && f.contentDocument.body && f.contentDocument.body.dataset) || {})`
	waitFor(t, ctx, time.Until(opens)+10*time.Second, "the frames ready", frameData+`.filter(d => d.ready === "true").length === `+strconv.Itoa(frames))
	waitFor(t, tab, time.Until(opens)+10*time.Second, "the tab ready", `document.body.dataset.ready === "true"`)
	waitFor(t, zh, time.Until(opens)+10*time.Second, "the Chinese tab ready", `document.body.dataset.ready === "true"`)
	if _, err := chromedp.Run(zh, chromedp.Evaluate[bool](recordRoomJS+`;
		window.__rec = __newRecord(true);
		setInterval(() => __record(document, __rec), 20), true`)); err != nil {
		t.Fatal(err)
	}
	t.Logf("the pages ready %v before the room's open", time.Until(opens).Round(time.Millisecond))
	readyBeforeOpen := time.Until(opens) > 300*time.Millisecond
	if wait := time.Until(opens); readyBeforeOpen {
		// Before the room opens: a countdown to it, and the button closed.
		cd := evalString(t, tab, `document.getElementById("countdown").textContent`)
		if !strings.Contains(cd, "waiting room opens in") || evalString(t, tab, `document.getElementById("countdown").dataset.to`) != "room" {
			t.Errorf("%v before the room opens the countdown says %q", wait, cd)
		}
		saleShot(t, tab, "room-countdown")
	} else {
		t.Logf("the pages took until %v after the room's open to load", -wait.Round(time.Millisecond))
	}

	// At the open every page joins (before the sale: places are drawn at
	// the sale's open) and hears BEFORE_OPEN.
	waitFor(t, ctx, time.Until(opens)+5*time.Second, "every frame in the room",
		frameData+`.filter(d => d.room === "BEFORE_OPEN" && d.joinedBeforeOpen === "true").length === `+strconv.Itoa(frames))
	waitFor(t, tab, time.Until(opens)+5*time.Second, "the tab in the room",
		`document.body.dataset.room === "BEFORE_OPEN" && document.body.dataset.joinedBeforeOpen === "true"`)
	if ok, _ := chromedp.Run(tab, chromedp.Evaluate[bool](`document.getElementById("buy").disabled`)); !ok {
		t.Error("the buy button is open in the waiting room before the sale")
	}
	if got := evalString(t, tab, `document.getElementById("room-state").textContent`); !strings.Contains(got, "drawn at random") {
		t.Errorf("BEFORE_OPEN says %q", got)
	}
	waitFor(t, tab, 3*time.Second, "6 joined", `document.body.dataset.joined === "6"`)
	saleShot(t, tab, "room-before-open")

	// A reload keeps the place: the ticket is in sessionStorage, so the
	// page follows the room without joining again.
	const stored = `Object.keys(sessionStorage).filter(k => k.startsWith("seckill:room:")).map(k => sessionStorage.getItem(k)).join(",")`
	ticket := evalString(t, tab, stored)
	if ticket == "" || strings.Contains(ticket, ",") {
		t.Fatalf("the tab's sessionStorage holds tickets %q, want one", ticket)
	}
	saleURL := fmt.Sprintf("%s/sale/%d#token=%s", e.srv.URL, v, e.userToken(5000, false))
	// reload loads the sale page again in the tab and says whether it shows
	// the room still open to it. Shown a final state (the units sold) after
	// the sale's open, it says false: on a loaded machine the reloads can
	// take until the last unit is gone, and these checks are of the room
	// before the sale.
	reload := func(what string) bool {
		t.Helper()
		if err := chromedp.Do(tab, chromedp.Navigate("about:blank"), chromedp.Navigate(saleURL)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, tab, 10*time.Second, "the room after a reload", `!!document.body.dataset.room`)
		switch room := evalString(t, tab, `document.body.dataset.room`); {
		case room == "BEFORE_OPEN" || room == "WAITING" || room == "YOUR_TURN":
			return true
		case !time.Now().Before(begin):
			t.Logf("SKIPPED the checks after %s: the page came up %v after the sale's open, and the room said %s",
				what, time.Since(begin).Round(time.Millisecond), room)
			return false
		default:
			t.Fatalf("after %s the room says %s %v before the sale", what, room, time.Until(begin).Round(time.Millisecond))
			return false
		}
	}
	// Reloaded after the sale's open, the page meets a line that moves, or a
	// sale sold out: these checks need the time for two reloads.
	if left := time.Until(begin); left < 3*time.Second {
		t.Logf("SKIPPED the reloads: only %v left before the sale when the pages were in the room", left.Round(time.Millisecond))
	} else if reload("a reload") {
		if got := evalString(t, tab, `document.body.dataset.joinedBeforeOpen || "not joined"`); got != "not joined" {
			t.Errorf("after a reload the page joined again (joinedBeforeOpen %s) rather than use its ticket", got)
		}
		// A ticket the server refuses (INVALID_INPUT, field ticket): join again,
		// to the same place (the same ticket).
		if _, err := chromedp.Run(tab, chromedp.Evaluate[bool](`Object.keys(sessionStorage).filter(k => k.startsWith("seckill:room:")).forEach(k => sessionStorage.setItem(k, "forged.ticket")), true`)); err != nil {
			t.Fatal(err)
		}
		if reload("a forged ticket") {
			waitFor(t, tab, 5*time.Second, "joining again after a forged ticket", `document.body.dataset.joinedBeforeOpen === "true"`)
			if got := evalString(t, tab, stored); got != ticket {
				t.Errorf("joining again stored ticket %q, want the first one %q", got, ticket)
			}
		}
	}
	if _, err := chromedp.Run(tab, chromedp.Evaluate[bool](recordRoomJS+`;
		window.__rec = __newRecord(false);
		setInterval(() => __record(document, __rec), 20), true`)); err != nil {
		t.Fatal(err)
	}

	// The sale opens: the line as the frames show it, and a seventh buyer
	// who joins now, behind the six.
	time.Sleep(time.Until(begin))
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](frameData+`.filter(d => d.room === "WAITING" && d.position).length`)); n >= 2 {
			saleShot(t, ctx, "room-waiting")
			break
		}
	}
	late := e.openSale(v, e.userToken(5100, false), 0, "en-US")

	// The late buyer's purchase, forced before any turn of theirs (the page
	// never sends one: its button is closed), is sent the moment the page
	// is in line, while units are left; it must be told PASS_REQUIRED. Once
	// the others have bought the last unit the server answers SOLD_OUT
	// from its sold-out mark before it looks at a pass, so on a loaded
	// machine whose page comes up (or is still shown WAITING) after the
	// sell-out there is no line to jump, and nothing to assert here
	// (TestWaitingRoomPasses refuses a purchase without a pass on the
	// server alone).
	waitFor(t, late, 10*time.Second, "the late buyer in line", `["WAITING", "SOLD_OUT"].includes(document.body.dataset.room)`)
	forced := evalString(t, late, `document.body.dataset.room`) == "WAITING"
	if forced {
		// What the page says with the answer is kept as it comes: the room's
		// next update may replace it with the sell-out's.
		if _, err := chromedp.Run(late, chromedp.Evaluate[bool](`(() => {
			window.__forced = "";
			new MutationObserver((_, o) => {
				if (document.body.dataset.outcome) {
					window.__forced = document.body.dataset.outcome + ": " + document.getElementById("message").textContent;
					o.disconnect();
				}
			}).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
			const b = document.getElementById("buy"); b.disabled = false; b.click();
			return true;
		})()`)); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("the late buyer's page came up after the sell-out: no purchase to force")
	}

	// The keyboard buyer: at its turn the button opens and has the focus;
	// Enter buys. (Sold out before its turn, it never opens.)
	waitFor(t, tab, 15*time.Second, "the tab's turn or the end", `__rec.openedAt > 0 || ["SOLD_OUT", "MISSED", "ENDED"].includes(document.body.dataset.room)`)
	if evalString(t, tab, `String(__rec.openedAt > 0)`) == "true" {
		// Unless the others sold the last unit meanwhile (on a loaded
		// machine the check can come a second after the turn): the button
		// then closes, and the focus leaves it.
		if got := evalString(t, tab, `document.body.dataset.room + " " + document.activeElement.id`); got != "YOUR_TURN buy" && !strings.HasPrefix(got, "SOLD_OUT ") {
			t.Errorf("at the turn the room and the focus are %q, not YOUR_TURN and the buy button", got)
		}
		saleShot(t, tab, "room-your-turn")
		if err := chromedp.Do(tab, chromedp.KeyEvent("\r")); err != nil {
			t.Fatal(err)
		}
	}

	if forced {
		waitFor(t, late, 10*time.Second, "the forced purchase's answer", `window.__forced !== ""`)
		switch got := evalString(t, late, `window.__forced`); {
		case strings.HasPrefix(got, "SOLD_OUT: "):
			t.Logf("the late buyer's forced purchase reached the server after the sell-out: SOLD_OUT, not PASS_REQUIRED")
		case !strings.HasPrefix(got, "PASS_REQUIRED: ") || !strings.Contains(got, "wait for your turn"):
			t.Errorf("the forced purchase's answer and message: %q, want PASS_REQUIRED and to wait for one's turn", got)
		default:
			saleShot(t, late, "room-pass-required")
		}
	}

	// Every buyer ends with an order or sold out.
	const ended = `(r => (r.outcome === "ACCEPTED" && !!r.orderId) || r.outcome === "SOLD_OUT" || r.room === "SOLD_OUT")`
	waitFor(t, ctx, 20*time.Second, "every frame to end", `__recs.every(`+ended+`)`)
	waitFor(t, tab, 10*time.Second, "the tab to end", ended+`(__rec)`)
	recs, err := chromedp.Run(ctx, chromedp.Evaluate[[]roomRecord](`__recs`))
	if err != nil {
		t.Fatal(err)
	}
	own, err := chromedp.Run(tab, chromedp.Evaluate[roomRecord](`__rec`))
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, own)
	orders, down := 0, false
	for i, r := range recs {
		t.Logf("buyer %d: states %v, positions %v, opened at %s (turn %s), outcome %q, room %q", i, r.States, r.Positions,
			msTime(r.OpenedAt), msTime(r.TurnAt), r.Outcome, r.Room)
		if i < frames && !r.RoomCountdown && readyBeforeOpen {
			t.Errorf("buyer %d never counted down to the room's open", i)
		}
		if len(r.States) == 0 || r.States[0] != "BEFORE_OPEN" && i < frames {
			t.Errorf("buyer %d's room went through %v, not from BEFORE_OPEN", i, r.States)
		}
		for k := 1; k < len(r.Positions); k++ {
			if r.Positions[k] > r.Positions[k-1] {
				t.Errorf("buyer %d's position went up: %v", i, r.Positions)
			}
			down = true
		}
		if r.OpenedAt > 0 {
			if r.OpenedState != "YOUR_TURN" {
				t.Errorf("buyer %d's button opened in state %q, not at its turn", i, r.OpenedState)
			}
			if r.TurnAt == 0 || r.OpenedAt < r.TurnAt-50 {
				t.Errorf("buyer %d's button opened at %s, before its turn at %s", i, msTime(r.OpenedAt), msTime(r.TurnAt))
			}
		}
		if r.Outcome == "ACCEPTED" {
			orders++
			if r.OpenedAt == 0 {
				t.Errorf("buyer %d bought with its button never open", i)
			}
		}
	}
	if orders != stock {
		t.Errorf("%d pages show an order, want %d", orders, stock)
	}
	if !down {
		t.Error("no page saw its position go down")
	}
	saleShot(t, tab, "room-end")

	// The buyer with the proof of work bought at their turn, with the pass
	// and the answer, the page in Chinese.
	waitFor(t, zh, 10*time.Second, "the order with the proof of work", jsOutcome+` === "ACCEPTED"`)
	if r, err := chromedp.Run(zh, chromedp.Evaluate[roomRecord](`__rec`)); err != nil || r.OpenedState != "YOUR_TURN" ||
		len(r.States) == 0 || r.States[0] != "BEFORE_OPEN" {
		t.Errorf("the buyer with the proof of work: %+v (%v)", r, err)
	}
	if got := evalString(t, zh, `document.getElementById("room-title").textContent`); got != "排队等候室" {
		t.Errorf("in Chinese the room's card is titled %q", got)
	}
	saleShot(t, zh, "room-pow-zh")

	// The database agrees: exactly 3 orders (the forced purchase made none).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var out struct {
			Data struct {
				Voucher struct {
					Seckill struct{ Remaining, Sold int }
				}
			}
		}
		e.graphql(e.userToken(1, true), `query($id: ID!) { voucher(id: $id) { seckill { remaining sold } } }`,
			map[string]any{"id": strconv.FormatInt(v, 10)}, &out)
		s := out.Data.Voucher.Seckill
		if s.Remaining == 0 && s.Sold == stock {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the campaign has %d sold and %d remaining, want %d and 0", s.Sold, s.Remaining, stock)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// msTime shows Unix milliseconds as a time of day (or "never" for 0).
func msTime(ms float64) string {
	if ms == 0 {
		return "never"
	}
	return time.UnixMilli(int64(ms)).Format("15:04:05.000")
}

// TestSalePageFrameAncestors: SECKILL_SALE_FRAME_ANCESTORS reaches the
// page's Content-Security-Policy and the browser keeps to it: with 'none'
// even a page of the same origin cannot frame the sale page (by default,
// 'self', TestSalePageInBrowser's frames load), which still opens in a tab.
func TestSalePageFrameAncestors(t *testing.T) {
	e := newSalePageEnv(t, func(vars map[string]string) { vars["SECKILL_SALE_FRAME_ANCESTORS"] = "'none'" })
	if csp := e.get("/sale/1").Header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "; frame-ancestors 'none'") {
		t.Errorf("CSP %q, want frame-ancestors 'none'", csp)
	}
	v := e.addCampaign("Not framed", 1, time.Now().Add(-time.Minute), nil)
	ctx, cancel := chromedp.NewContext(e.browser)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+"/healthz")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
		document.body.replaceChildren();
		const f = document.createElement("iframe");
		f.id = "sale"; f.src = "/sale/%d";
		f.onload = () => { window.__loaded = true; };
		document.body.append(f);
		return true;
	})()`, v))); err != nil {
		t.Fatal(err)
	}
	// A blocked frame loads the browser's error page, which is not of our
	// origin: its document cannot be read, and the sale page never runs.
	waitFor(t, ctx, 10*time.Second, "the frame to settle", `window.__loaded === true`)
	time.Sleep(500 * time.Millisecond)
	if ran, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { try { const d = document.getElementById("sale").contentDocument; return !!(d && d.getElementById("buy")); } catch (e) { return false; } })()`)); ran {
		t.Error("the sale page loaded in a frame under frame-ancestors 'none'")
	}
	tab := e.openSale(v, e.userToken(6101, false), 0, "en-US")
	waitFor(t, tab, 15*time.Second, "the page in a tab", `document.body.dataset.ready === "true"`)
}

// TestSalePageProofOfWork solves a proof of work of 18 bits (a quarter of
// the default's million hashes, so that a loaded machine still solves it
// in seconds) in the page's Web Worker, in headless Chromium, and buys with
// it; it logs the time and the hash rate that docs/challenge.md quotes (a
// measurement, bounded only by the wait).
func TestSalePageProofOfWork(t *testing.T) {
	e := newSalePageEnv(t)
	v := e.addCampaign("Proof of work", 1, time.Now().Add(-time.Minute), map[string]any{
		"challenge": "PROOF_OF_WORK", "powBits": 18,
	})
	ctx := e.openSale(v, e.userToken(3100, false), 0, "en")
	waitFor(t, ctx, 120*time.Second, "the proof of work at 18 bits", `!document.getElementById("buy").disabled`)
	ms, err := strconv.Atoi(evalString(t, ctx, `document.body.dataset.powMs`))
	if err != nil {
		t.Fatal(err)
	}
	tried, err := strconv.Atoi(evalString(t, ctx, `document.body.dataset.powTried`))
	if err != nil || tried < 1 {
		t.Fatalf("hashes tried %d %v", tried, err)
	}
	t.Logf("proof of work at 18 bits: %d hashes in %d ms (%.0f k hashes a second) in headless Chromium", tried, ms,
		float64(tried)/float64(max(ms, 1)))
	if err := chromedp.Do(ctx, chromedp.Click(css("#buy"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 20*time.Second, "CREATED after the proof of work", jsStatus+` === "CREATED"`)
}
