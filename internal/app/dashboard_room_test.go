package app_test

import (
	"strconv"
	"testing"
	"time"

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
