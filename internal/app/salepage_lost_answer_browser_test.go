package app_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"seckill/internal/seckill"
)

// loseFirstPurchaseAnswer makes the page's first purchase reach the server
// and its answer never reach the page, as when the network drops it: the
// page sees a network error (window.__lost is set then).
const loseFirstPurchaseAnswer = `(() => {
	const real = window.fetch;
	let lost = false;
	window.fetch = async (input, init) => {
		const res = await real(input, init);
		if (!lost && init && typeof init.body === "string" && init.body.includes("seckill(")) {
			lost = true;
			window.__lost = true;
			throw new TypeError("Failed to fetch");
		}
		return res;
	};
})();`

// TestSalePageLostAnswerThenSoldOut: a buyer's purchase is ACCEPTED and the
// answer is lost; the page retries, and by then the sale has sold out and
// the server answers SOLD_OUT from its sold-out mark, without asking
// whether this buyer holds an order (other buyers' purchases keep the mark
// fresh). The page must not tell the buyer the sale is sold out: it looks
// for their order and follows it. Before, it said "sold out" and the order
// expired unpaid.
func TestSalePageLostAnswerThenSoldOut(t *testing.T) {
	e := newSalePageEnv(t)
	begin := time.Now().Add(3 * time.Second).Truncate(time.Second)
	v := e.addCampaign("Lost answer", 1, begin, nil)

	ctx, cancel := chromedp.NewContext(e.browser)
	t.Cleanup(cancel)
	if err := onNewDocument(ctx, loseFirstPurchaseAnswer); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(360, 780),
		chromedp.Navigate(fmt.Sprintf("%s/sale/%d#token=%s", e.srv.URL, v, e.userToken(4201, false)))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, time.Until(begin)+10*time.Second, "the button to open", `!document.getElementById("buy").disabled`)
	if err := chromedp.Do(ctx, chromedp.Click(css("#buy"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 10*time.Second, "the purchase whose answer is lost", `window.__lost === true`)

	// Other buyers come while the page waits to retry: their SOLD_OUT keeps
	// this process's mark fresh, so the retry is answered from it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var soldOut, others int
	wg.Go(func() {
		for u := int64(5000); ; u++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			res, err := e.app.Purchases.Purchase(seckill.NewContextWithUser(e.ctx, &seckill.User{ID: u}), v)
			if err == nil && res.Outcome == seckill.OutcomeSoldOut {
				soldOut++
			} else {
				others++
			}
		}
	})
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()

	// A page that said "sold out" stays so: the wait then fails, with
	// what the page says.
	waitFor(t, ctx, 15*time.Second, "the page to follow the buyer's order", jsStatus+` === "CREATED"`)
	halt()
	t.Logf("the retry was answered %s; other buyers meanwhile: %d SOLD_OUT, %d else", evalString(t, ctx, jsOutcome), soldOut, others)
	if soldOut == 0 {
		t.Error("no other buyer was answered SOLD_OUT: the sold-out mark was not exercised")
	}
	saleShot(t, ctx, "lost-answer")
}
