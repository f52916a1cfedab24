package app_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
)

// Each management action changes Postgres and admission at once, and is
// audited; admission answers accordingly.
func TestDashboardManagesCampaigns(t *testing.T) {
	e, id, path := newDashSale(t, "Dashboard sale", 1)

	campaign := func() *seckill.Campaign {
		t.Helper()
		v, err := e.app.Store.Voucher(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return v.Campaign
	}
	act := func(action string, form url.Values) {
		t.Helper()
		res := e.post(path+"/"+action, form)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %s: %s", action, res.Status, e.page(res).Find(`[data-testid="action-error"], [data-testid="error-stock"]`).Text())
		}
	}

	act("pause", nil)
	if !campaign().Paused {
		t.Error("pause: Postgres is not paused")
	}
	if got := e.buy(id, 101); got != string(seckill.OutcomePaused) {
		t.Errorf("buy while paused: %s", got)
	}
	act("resume", nil)
	if campaign().Paused {
		t.Error("resume: Postgres is still paused")
	}
	if got := e.buy(id, 101); got != string(seckill.OutcomeAccepted) {
		t.Errorf("buy after resume: %s", got)
	}
	if got := e.buy(id, 102); got != string(seckill.OutcomeSoldOut) {
		t.Errorf("buy the second of one unit: %s", got)
	}

	// Invalid input changes nothing.
	res := e.post(path+"/stock", url.Values{"stock": {"0"}})
	if msg := e.page(res).Find(`[data-testid="error-stock"]`).Text(); res.StatusCode != http.StatusUnprocessableEntity || msg != "stock to add must be between 1 and 10000000" {
		t.Errorf("add 0: %s %q", res.Status, msg)
	}
	act("stock", url.Values{"stock": {"2"}})
	if c := campaign(); c.InitialStock != 3 {
		t.Errorf("add 2: initial stock %d, want 3", c.InitialStock)
	}
	for _, user := range []int64{102, 103} {
		if got := e.buy(id, user); got != string(seckill.OutcomeAccepted) {
			t.Errorf("buy an added unit as %d: %s", user, got)
		}
	}
	if got := e.buy(id, 104); got != string(seckill.OutcomeSoldOut) {
		t.Errorf("buy past the added units: %s", got)
	}

	act("end", nil)
	if c := campaign(); c.EndTime.After(time.Now()) {
		t.Errorf("end: Postgres ends at %v", c.EndTime)
	}
	if got := e.buy(id, 105); got != string(seckill.OutcomeEnded) {
		t.Errorf("buy after the end: %s", got)
	}
	res = e.post(path+"/pause", nil)
	if res.StatusCode != http.StatusConflict {
		t.Errorf("pause after the end: %s", res.Status)
	}

	entries, err := e.app.Store.AuditLog(e.ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range entries {
		got = append(got, en.Action)
		if en.Actor != dashAdmin || en.At.IsZero() {
			t.Errorf("audit entry %+v", en)
		}
	}
	want := []string{"end", "add_stock", "resume", "pause", "create"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit log, newest first (-want +got):\n%s", diff)
	}

	// The campaign page shows the audit log and, once the workers wrote
	// the orders, a consistent balance.
	dashEventually(t, 10*time.Second, "the three orders to be persisted", func() bool {
		tot, err := e.app.Store.CampaignTotals(e.ctx, id)
		return err == nil && tot.Orders == 3
	})
	page := e.page(e.get(path))
	if n := page.Find(`[data-testid="audit-entry"]`).Length(); n != 5 {
		t.Errorf("%d audit entries on the page", n)
	}
	if st := page.Find(`[data-testid="consistency"]`).AttrOr("data-state", ""); st != "ok" {
		t.Errorf("consistency %q: %s", st, page.Find(`[data-testid="consistency"]`).Text())
	}
	for tid, want := range map[string]string{"stat-initial": "3", "stat-remaining": "0", "stat-queued": "0", "stat-sold": "3"} {
		if got := strings.TrimSpace(page.Find(`[data-testid="` + tid + `"]`).Text()); got != want {
			t.Errorf("%s = %q, want %q", tid, got, want)
		}
	}
	if n := page.Find(`[data-testid="order-row"]`).Length(); n != 3 {
		t.Errorf("%d orders listed", n)
	}
	search := e.page(e.get(path + "?by=user&q=103"))
	if rows := search.Find(`[data-testid="order-row"]`); rows.Length() != 1 || !strings.Contains(rows.Text(), "103") {
		t.Errorf("orders of user 103: %q", rows.Text())
	}
}

// Editing is for campaigns that have not started; it moves the window in
// admission too.
func TestDashboardEditsScheduledCampaign(t *testing.T) {
	e := newDashEnv(t)
	e.login()
	now := time.Now()
	id := e.createCampaign("Later", 5, now.Add(time.Hour), now.Add(2*time.Hour))
	path := "/admin/campaigns/" + strconv.FormatInt(id, 10)
	if got := e.buy(id, 201); got != string(seckill.OutcomeNotStarted) {
		t.Fatalf("buy before the start: %s", got)
	}
	form := url.Values{"title": {"Now"}, "subTitle": {"moved"}, "rules": {""},
		"beginTime": {now.Add(-time.Minute).UTC().Format(time.RFC3339)}, "endTime": {now.Add(time.Hour).UTC().Format(time.RFC3339)}}
	if res := e.post(path+"/edit", form); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %s %s", res.Status, e.page(res).Find(`[data-testid^="error-"]`).Text())
	}
	v, err := e.app.Store.Voucher(e.ctx, id)
	if err != nil || v.Title != "Now" || v.SubTitle != "moved" || v.Campaign.BeginTime.After(now) {
		t.Fatalf("after edit: %+v %v", v, err)
	}
	if got := e.buy(id, 201); got != string(seckill.OutcomeAccepted) {
		t.Errorf("buy after moving the start: %s", got)
	}
	// Started now: the form is refused.
	if res := e.post(path+"/edit", form); res.StatusCode != http.StatusConflict {
		t.Errorf("edit after the start: %s", res.Status)
	}
}

func TestDashboardAccess(t *testing.T) {
	e := newDashEnv(t)
	userToken, _ := e.app.Tokens.Issue(7, false, time.Hour)
	adminToken, _ := e.app.Tokens.Issue(1, true, time.Hour)
	for _, tok := range []string{"", userToken, adminToken} {
		for _, p := range []string{"/admin", "/admin/jobs", "/admin/campaigns/new", "/admin/queues/", "/admin/queues/api/queues"} {
			res := e.get(p, "Authorization", "Bearer "+tok)
			if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/admin/login") {
				t.Errorf("GET %s with token %.10q: %s", p, tok, res.Status)
			}
		}
		res := e.post("/admin/campaigns", url.Values{"title": {"x"}}, "Authorization", "Bearer "+tok)
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST with token %.10q: %s", tok, res.Status)
		}
	}

	e.login()
	res := e.get("/admin/queues/api/queues")
	var queues struct {
		Queues []any `json:"queues"`
	}
	if err := json.NewDecoder(res.Body).Decode(&queues); res.StatusCode != http.StatusOK || err != nil {
		t.Errorf("asynqmon API with a session: %s, %v", res.Status, err)
	}
	if res := e.get("/admin/queues/"); res.StatusCode != http.StatusOK {
		t.Errorf("asynqmon UI: %s", res.Status)
	}
	// A cross-site form cannot act with the operator's cookie.
	res = e.post("/admin/campaigns", url.Values{"title": {"x"}}, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %s", res.Status)
	}
	// Signing out ends the session for good.
	if res := e.post("/admin/logout", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %s", res.Status)
	}
	if res := e.get("/admin"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout: %s", res.Status)
	}
}
