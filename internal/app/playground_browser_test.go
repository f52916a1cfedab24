package app_test

import (
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"seckill/playground"
)

// TestPlaygroundInBrowser loads /playground in headless chromium with
// nothing but the test server to talk to: every request the page makes,
// its WebSocket included, goes to the test server, the page's CSP is never
// violated, and GraphiQL buys through a mutation (HTTP) and follows the
// order through a subscription (WebSocket, authenticated by the headers
// editor's Authorization in connection_init).
func TestPlaygroundInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	if !playground.Built() {
		if os.Getenv("CI") != "" {
			t.Fatal(strings.TrimSpace(playground.NotBuilt) + " (make test builds it)")
		}
		t.Skip(strings.TrimSpace(playground.NotBuilt))
	}
	e, voucher, _ := newDashSale(t, "Playground sale", 5)
	token, err := e.app.Tokens.Issue(2001, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	ctx := newBrowser(t, chromium)
	base, _ := url.Parse(e.srv.URL)
	var (
		mu       sync.Mutex
		requests []string
		faults   []string
	)
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests = append(requests, ev.Request.URL)
		case *network.EventWebSocketCreated:
			requests = append(requests, ev.URL)
		case *runtime.EventExceptionThrown:
			faults = append(faults, "exception: "+exceptionText(ev.ExceptionDetails))
		}
	}); err != nil {
		t.Fatal(err)
	}
	// Record CSP violations in the page itself, before any of its scripts.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__violations = [];
			document.addEventListener("securitypolicyviolation", e =>
				window.__violations.push(e.violatedDirective + " " + e.blockedURI));`,
	}); err != nil {
		t.Fatal(err)
	}

	// run opens the playground with its editors prefilled through the URL
	// fragment, presses the run button and returns the response editor's
	// text once it contains want.
	run := func(query, want string) string {
		t.Helper()
		headers, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + token})
		frag := url.Values{"query": {query}, "headers": {string(headers)}}.Encode()
		err := chromedp.Do(ctx,
			chromedp.Navigate("about:blank"), // a new document, not a fragment change
			chromedp.Navigate(e.srv.URL+"/playground#"+frag),
			chromedp.WaitVisible(css(".graphiql-execute-button")),
			chromedp.Click(css(".graphiql-execute-button")),
		)
		if err != nil {
			t.Fatalf("run %s: %v", query, err)
		}
		var text string
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(text, want) {
			if time.Now().After(deadline) {
				t.Fatalf("run %s: the response never showed %q; it shows:\n%s", query, want, text)
			}
			time.Sleep(100 * time.Millisecond)
			text, err = chromedp.Run(ctx, chromedp.Evaluate[string](
				`(document.querySelector(".result-window") || {innerText: ""}).innerText`))
			if err != nil {
				t.Fatal(err)
			}
		}
		violations, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__violations`))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range violations {
			t.Errorf("CSP violation: %s", v)
		}
		return text
	}

	// A mutation over HTTP.
	bought := run(`mutation { seckill(voucherId: "`+strconv.FormatInt(voucher, 10)+`") { outcome orderId } }`, `"ACCEPTED"`)
	m := regexp.MustCompile(`"orderId":\s*"(\d+)"`).FindStringSubmatch(bought)
	if m == nil {
		t.Fatalf("no order id in the response:\n%s", bought)
	}
	// A subscription over WebSocket: the order reaches CREATED (the
	// workers persist it) and the stream completes.
	run(`subscription { orderStatus(orderId: "`+m[1]+`") { status } }`, `"CREATED"`)

	mu.Lock()
	defer mu.Unlock()
	wsBase := "ws://" + base.Host + "/"
	var sawPage, sawScript, sawWebSocket bool
	for _, u := range requests {
		switch {
		case u == "about:blank" || strings.HasPrefix(u, "data:"):
		case strings.HasPrefix(u, e.srv.URL+"/"):
			sawPage = sawPage || strings.HasPrefix(u, e.srv.URL+"/playground#") || u == e.srv.URL+"/playground"
			sawScript = sawScript || strings.HasPrefix(u, e.srv.URL+"/playground/assets/playground.js")
		case strings.HasPrefix(u, wsBase):
			sawWebSocket = true
		default:
			t.Errorf("the playground requested %s, outside the test server", u)
		}
	}
	if !sawPage || !sawScript || !sawWebSocket {
		t.Errorf("page %v, script %v, WebSocket %v requested; all requests:\n%s", sawPage, sawScript, sawWebSocket, strings.Join(requests, "\n"))
	}
	for _, f := range faults {
		t.Errorf("in the page: %s", f)
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Exception.Description
	}
	return d.Text
}
