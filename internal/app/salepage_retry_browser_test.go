package app_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// tapAnswer is what purchaseTap answers one purchase with instead of the
// server: a status, headers and body, or a network failure.
type tapAnswer struct {
	name    string // for the test's messages
	status  int64
	headers map[string]string
	body    string
	fail    bool
	wait    time.Duration // what the page must wait before the next purchase
	message string        // what the page must say meanwhile
}

// purchaseTap holds the purchases (seckill mutations) a tab sends, through
// the DevTools fetch domain: it notes when each left and answers the first
// ones from its script, the rest by the server.
type purchaseTap struct {
	mu     sync.Mutex
	at     []time.Time
	script []tapAnswer
}

func (p *purchaseTap) times() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.at...)
}

// tapPurchases starts holding the purchases of the tab ctx.
func tapPurchases(t *testing.T, ctx context.Context, script []tapAnswer) *purchaseTap {
	t.Helper()
	p := &purchaseTap{script: script}
	err := chromedp.Listen(ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		var body []byte
		for _, d := range e.Request.PostDataEntries {
			body = append(body, d.Bytes...)
		}
		var ans *tapAnswer
		if e.Request.Method == "POST" && bytes.Contains(body, []byte("seckill(voucherId:")) {
			p.mu.Lock()
			p.at = append(p.at, time.Now())
			if len(p.script) > 0 {
				ans = &p.script[0]
				p.script = p.script[1:]
			}
			p.mu.Unlock()
		}
		// Not in the listener: a command waits for the browser, which
		// waits for the listener.
		go func() {
			var err error
			switch {
			case ans == nil:
				_, err = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
			case ans.fail:
				_, err = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonConnectionRefused})
			default:
				hdr := []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}}
				for k, v := range ans.headers {
					hdr = append(hdr, &fetch.HeaderEntry{Name: k, Value: v})
				}
				_, err = chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: e.RequestID,
					ResponseCode: ans.status, ResponseHeaders: hdr, Body: []byte(ans.body)})
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("answering a held request: %v", err)
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/graphql"}}}); err != nil {
		t.Fatal(err)
	}
	return p
}

// recordMessagesJS notes every text the page's message shows, and every
// outcome it records, in order.
const recordMessagesJS = `(() => {
	window.__messages = []; window.__outcomes = [];
	const m = document.getElementById("message");
	new MutationObserver(() => __messages.push(m.textContent)).observe(m, {childList: true, characterData: true, subtree: true});
	new MutationObserver(() => __outcomes.push(document.body.dataset.outcome)).observe(document.body, {attributes: true, attributeFilter: ["data-outcome"]});
	return true;
})()`

// TestSalePageRetries forces every answer the page retries on its
// purchase and checks that it waits what it is told plus its jitter (up
// to 0.5 s), says why meanwhile, and never loops: RATE_LIMITED (2 s twice),
// TRY_AGAIN (1 s), UNAVAILABLE as a resolver's error (extensions.retryAfter
// 1) and as the overloaded server's 503 (Retry-After: 2, no extension), a
// connection refused (1 s); then the server's own answer, ACCEPTED. Then
// a real RATE_LIMITED: a campaign braked to one admission a second, which
// another buyer has just taken; the page waits 1 s and buys.
func TestSalePageRetries(t *testing.T) {
	e := newSalePageEnv(t)
	const slack = 1500 * time.Millisecond // beyond the jitter: make test runs suites side by side, with the race detector
	v := e.addCampaign("Retry sale", 3, time.Now().Add(-time.Minute), nil)
	ctx := e.openSale(v, e.userToken(6001, false), 0, "en-US")
	waitFor(t, ctx, 15*time.Second, "the page ready", `document.body.dataset.ready === "true" && !document.getElementById("buy").disabled`)
	outcome := func(o string, s int) string {
		return fmt.Sprintf(`{"data":{"seckill":{"outcome":%q,"orderId":null,"message":"","retryAfter":%d}}}`, o, s)
	}
	script := []tapAnswer{
		{name: "RATE_LIMITED 2", status: 200, body: outcome("RATE_LIMITED", 2), wait: 2 * time.Second, message: "Too many attempts; trying again in 2 s"},
		{name: "RATE_LIMITED 2 again", status: 200, body: outcome("RATE_LIMITED", 2), wait: 2 * time.Second, message: "Too many attempts; trying again in 2 s"},
		{name: "TRY_AGAIN 1", status: 200, body: outcome("TRY_AGAIN", 1), wait: time.Second, message: "Units are being moved; trying again in 1 s"},
		{name: "UNAVAILABLE, extensions.retryAfter 1", status: 200, wait: time.Second, message: "The service is busy; trying again in 1 s",
			body: `{"errors":[{"message":"service unavailable; try again","extensions":{"code":"UNAVAILABLE","retryAfter":1}}],"data":null}`},
		{name: "UNAVAILABLE 503, Retry-After 2", status: 503, headers: map[string]string{"Retry-After": "2"}, wait: 2 * time.Second,
			message: "The service is busy; trying again in 2 s",
			body:    `{"errors":[{"message":"server overloaded; try again","extensions":{"code":"UNAVAILABLE"}}]}`},
		{name: "connection refused", fail: true, wait: time.Second, message: "No connection; trying again in 1 s"},
	}
	tap := tapPurchases(t, ctx, script)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](recordMessagesJS)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(css("#buy"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 30*time.Second, "the order after the retries", jsOutcome+` === "ACCEPTED" && !!document.body.dataset.orderId`)
	// Held a little longer: nothing more is sent once it bought.
	time.Sleep(1500 * time.Millisecond)
	at := tap.times()
	if len(at) != len(script)+1 {
		t.Fatalf("the page sent %d purchases, want %d (one per forced answer, and the one that bought)", len(at), len(script)+1)
	}
	for i, a := range script {
		gap := at[i+1].Sub(at[i])
		t.Logf("after %s the page waited %v", a.name, gap.Round(time.Millisecond))
		if gap < a.wait || gap > a.wait+500*time.Millisecond+slack {
			t.Errorf("after %s the page sent again after %v, want %v plus up to 0.5 s of jitter", a.name, gap.Round(time.Millisecond), a.wait)
		}
	}
	msgs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`__messages`))
	if err != nil {
		t.Fatal(err)
	}
	rest := msgs
	for _, a := range script {
		k := 0
		for k < len(rest) && !strings.Contains(rest[k], a.message) {
			k++
		}
		if k == len(rest) {
			t.Errorf("after %s the page never said %q; it said, in order: %q", a.name, a.message, msgs)
			break
		}
		rest = rest[k+1:]
	}
	if got := evalString(t, ctx, `document.getElementById("message").dataset.kind`); got == "wait" {
		t.Errorf("after the order the message is still a wait: %q", evalString(t, ctx, `document.getElementById("message").textContent`))
	}
	saleShot(t, ctx, "retried")

	// The server's own RATE_LIMITED: the brake admits one a second, and
	// another buyer has just been admitted.
	braked := e.addCampaign("Braked sale", 3, time.Now().Add(-time.Minute), map[string]any{"brake": 1})
	ctx = e.openSale(braked, e.userToken(6002, false), 0, "en-US")
	waitFor(t, ctx, 15*time.Second, "the braked page ready", `document.body.dataset.ready === "true" && !document.getElementById("buy").disabled`)
	tap = tapPurchases(t, ctx, nil)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](recordMessagesJS)); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Data struct{ Seckill struct{ Outcome string } }
	}
	e.graphql(e.userToken(6003, false), `mutation($id: ID!) { seckill(voucherId: $id) { outcome } }`,
		map[string]any{"id": strconv.FormatInt(braked, 10)}, &out)
	if out.Data.Seckill.Outcome != "ACCEPTED" {
		t.Fatalf("the first buyer of the braked sale: %q", out.Data.Seckill.Outcome)
	}
	if err := chromedp.Do(ctx, chromedp.Click(css("#buy"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 15*time.Second, "the braked order", jsOutcome+` === "ACCEPTED" && !!document.body.dataset.orderId`)
	time.Sleep(time.Second)
	outcomes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`__outcomes`))
	if err != nil {
		t.Fatal(err)
	}
	at = tap.times()
	if len(at) != 2 || strings.Join(outcomes, ",") != "RATE_LIMITED,ACCEPTED" {
		t.Fatalf("braked: %d purchases with outcomes %v, want 2: RATE_LIMITED then ACCEPTED", len(at), outcomes)
	}
	gap := at[1].Sub(at[0])
	t.Logf("after the brake's RATE_LIMITED the page waited %v", gap.Round(time.Millisecond))
	if gap < time.Second || gap > 1500*time.Millisecond+slack {
		t.Errorf("after the brake's RATE_LIMITED (no retryAfter: 1 s) the page sent again after %v", gap.Round(time.Millisecond))
	}
	msgs2, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`__messages`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(msgs2, "\n"), "Too many attempts; trying again in 1 s") {
		t.Errorf("braked: the page said %q, not that it tries again in 1 s", msgs2)
	}
}
