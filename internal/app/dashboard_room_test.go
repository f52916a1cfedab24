package app_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"seckill/internal/app"
)

// A campaign with a waiting room shows its settings, and its layers as
// the domain's funnel counts them, on its page.
func TestDashboardWaitingRoom(t *testing.T) {
	e := newDashEnv(t)
	e.login()
	token := func(u int64, admin bool) string {
		tok, err := e.app.Tokens.Issue(u, admin, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	sale := app.StartRoomSale(t, e.srv.URL, token, 9001)
	path := "/admin/campaigns/" + strconv.FormatInt(sale.VoucherID, 10)

	dashEventually(t, 10*time.Second, "the page to show the room as the funnel counts it", func() bool {
		f1, err := e.app.Rooms.Funnel(e.ctx, sale.VoucherID)
		if err != nil {
			t.Fatal(err)
		}
		page := e.page(e.get(path))
		f2, err := e.app.Rooms.Funnel(e.ctx, sale.VoucherID)
		if err != nil {
			t.Fatal(err)
		}
		if f1 != f2 || f1.Joined != int64(sale.Joined) || f1.Admitted != int64(sale.Admitted) {
			return false // the line moved meanwhile, or the room's view is not current yet
		}
		got := map[string]string{}
		for _, id := range []string{"room-joined", "room-waiting", "room-let-through", "room-passes-live", "room-expired", "room-admitted", "room-unused", "room-rate", "room-pass", "room-opens"} {
			got[id] = page.Find(`[data-testid="` + id + `"]`).Text()
		}
		n := func(v int64) string { return strconv.FormatInt(v, 10) }
		want := map[string]string{
			"room-joined": n(f1.Joined), "room-waiting": n(f1.Waiting), "room-let-through": n(f1.LetThrough),
			"room-passes-live": n(f1.PassesLive), "room-expired": n(f1.Expired), "room-admitted": "2",
			"room-unused": n(f1.LetThrough - 2), "room-rate": "1", "room-pass": "10 seconds", "room-opens": "1 minute",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("waiting room on the page (-want +got):\n%s", diff)
		}
		return true
	})
}

// TestDashboardWaitingRoomInBrowser: in headless chromium, a room
// campaign's page shows its layers and follows the room without a reload
// as another buyer joins.
func TestDashboardWaitingRoomInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	e := newDashEnv(t)
	ctx := newBrowser(t, chromium)
	base := e.srv.URL
	token := func(u int64, admin bool) string {
		tok, err := e.app.Tokens.Issue(u, admin, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	sale := app.StartRoomSale(t, base, token, 9101)
	waitFor := func(what, expr string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(20*time.Second)))
		if err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
			t.Fatalf("waiting for %s: %v\n%s", what, err, text)
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/admin/login"),
		chromedp.SendKeys(css(`[data-testid="login-user"]`), dashAdmin),
		chromedp.SendKeys(css(`[data-testid="login-password"]`), dashPassword),
		chromedp.Click(css(`[data-testid="login-submit"]`)),
		chromedp.WaitVisible(css(`[data-testid="campaigns-table"]`)),
		chromedp.Navigate(base+"/admin/campaigns/"+strconv.FormatInt(sale.VoucherID, 10)),
		chromedp.WaitVisible(css(`[data-testid="room"]`)),
		chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`),
	); err != nil {
		t.Fatal(err)
	}
	n := func(tid string) string {
		return `Number(document.querySelector('[data-testid="` + tid + `"]').textContent.replace(/,/g, ""))`
	}
	adds := n("room-waiting") + ` + ` + n("room-let-through") + ` === ` + n("room-joined") + ` && ` +
		n("room-passes-live") + ` + ` + n("room-expired") + ` === ` + n("room-let-through")
	waitFor("the room's layers", n("room-joined")+` === 8 && `+n("room-admitted")+` === 2 && `+adds)
	screenshots(t, ctx, "campaign-room")

	app.JoinRoom(t, base, token(9200, false), sale.VoucherID)
	waitFor("a ninth joiner without a reload", `window.__noReload === 42 && `+n("room-joined")+` === 9 && `+adds)
}
