package app_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"seckill/internal/seckill"
)

// TestSalePageFollowsCampaignEdits: pages opened before an operator edits
// the sale follow the edit without a reload. The sale is moved from ten
// minutes away to a few seconds away: the open page's countdown and button
// follow, and its buyer buys at the new moment. Then the operator ends it
// early: a page still open shows it closed. Before, pages kept the window
// they loaded, so they counted down to a moment the sale no longer had.
func TestSalePageFollowsCampaignEdits(t *testing.T) {
	e := newSalePageEnv(t)
	admin := seckill.NewContextWithUser(e.ctx, &seckill.User{ID: 1, Admin: true})
	end := time.Now().Add(time.Hour).Truncate(time.Second)
	v := e.addCampaign("Moved sale", 3, time.Now().Add(10*time.Minute).Truncate(time.Second), nil)
	ctx := e.openSale(v, e.userToken(4101, false), 0, "en")
	other := e.openSale(v, e.userToken(4102, false), 0, "en")
	waitFor(t, ctx, 15*time.Second, "the countdown to the first window",
		`document.body.dataset.ready === "true" && Number(document.getElementById("countdown").dataset.seconds) > 500`)

	begin := time.Now().Add(6 * time.Second).Truncate(time.Second)
	if _, err := e.app.Catalog.UpdateCampaign(admin, v, seckill.CampaignEdit{Title: "Moved sale, sooner", BeginTime: begin, EndTime: end}); err != nil {
		t.Fatal(err)
	}
	// The pages read the stock every 5 s or so (cached up to 3 s): within
	// some 10 s they read the campaign again.
	waitFor(t, ctx, 15*time.Second, "the countdown to the new window",
		`Number(document.getElementById("countdown").dataset.seconds) < 10 && document.getElementById("title").textContent === "Moved sale, sooner"`)
	saleShot(t, ctx, "moved")
	waitFor(t, ctx, time.Until(begin)+5*time.Second, "the button to open at the new moment", `!document.getElementById("buy").disabled`)
	if err := chromedp.Do(ctx, chromedp.Click(css("#buy"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, 20*time.Second, "CREATED", jsStatus+` === "CREATED"`)

	if _, err := e.app.Catalog.EndCampaign(admin, v); err != nil {
		t.Fatal(err)
	}
	waitFor(t, other, 15*time.Second, "the page to show the sale over",
		`document.getElementById("buy").disabled && document.getElementById("countdown").textContent === "The sale is over"`)
	saleShot(t, other, "ended")
}
