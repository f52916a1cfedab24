package views_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"

	"seckill/web/views"
)

func render(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func byTestID(id string) string { return `[data-testid="` + id + `"]` }

func text(s *goquery.Selection) string { return strings.TrimSpace(s.Text()) }

var at = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func TestCampaignsFragment(t *testing.T) {
	doc := render(t, views.CampaignsFragment(views.CampaignsLive{
		Src: "/admin/live/campaigns",
		Rows: []views.CampaignRow{
			{ID: 5, Title: "100 off <b>200</b>", Status: "ACTIVE", Begin: at, End: at.Add(time.Hour),
				Initial: 100000, Remaining: 1234, Queued: 7, Sold: 98759, Known: true, Spark: views.NewSpark([]float64{0, 3, 1})},
			{ID: 4, Title: "lost", Status: "ENDED", Initial: 10, Sold: 2},
		},
		Queues: views.QueuesLive{Rows: []views.QueueRow{{Queue: views.Queue{Name: "orders", Pending: 3, Active: 2, Retry: 1}, MonitorURL: "/admin/queues/queues/orders"}}},
	}))

	rows := doc.Find(byTestID("campaign-row"))
	if rows.Length() != 2 {
		t.Fatalf("%d rows", rows.Length())
	}
	row := doc.Find(byTestID("campaign-row") + `[data-voucher-id="5"]`)
	for id, want := range map[string]string{
		"title": "100 off <b>200</b>", "status": "active", "initial-stock": "100,000",
		"remaining": "1,234", "queued": "7", "sold": "98,759",
	} {
		if got := text(row.Find(byTestID(id))); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	if cls, _ := row.Find(byTestID("remaining")).Attr("class"); !strings.Contains(cls, "num") {
		t.Errorf("remaining is not right-aligned: class %q", cls)
	}
	if d, _ := row.Find(byTestID("sparkline") + " path").Last().Attr("d"); !strings.HasPrefix(d, "M0.0 25.0 L60.0 1.0") {
		t.Errorf("sparkline path %q", d)
	}
	// A campaign Redis does not hold shows no live numbers rather than 0.
	lost := doc.Find(byTestID("campaign-row") + `[data-voucher-id="4"]`)
	if got := text(lost.Find(byTestID("remaining"))); got != "—" {
		t.Errorf("remaining of a campaign Redis lacks = %q", got)
	}
	if dt, _ := row.Find("time").First().Attr("datetime"); dt != "2026-12-01T10:00:00Z" {
		t.Errorf("begin datetime %q", dt)
	}
	if title, _ := row.Find("time").First().Attr("title"); title != "2026-12-01 10:00:00 UTC" {
		t.Errorf("begin title %q", title)
	}
	q := doc.Find(byTestID("queue-summary") + `[data-queue="orders"]`)
	if got := strings.Join(strings.Fields(text(q)), " "); !strings.Contains(got, "3 pending, 2 active, 1 retrying") {
		t.Errorf("queue summary %q", got)
	}
}

func TestCampaignsPageIsLive(t *testing.T) {
	doc := render(t, views.Campaigns(views.CampaignsPage{
		Meta: views.Meta{Title: "Campaigns", Admin: "alice", Nav: views.NavCampaigns},
		Live: views.CampaignsLive{Src: "/admin/live/campaigns"},
	}))
	live := doc.Find(byTestID("campaigns-live"))
	if src, _ := live.Attr("data-live-src"); src != "/admin/live/campaigns" {
		t.Errorf("live source %q", src)
	}
	if doc.Find(byTestID("no-campaigns")).Length() != 1 {
		t.Error("no empty-state message")
	}
	if got := text(doc.Find(byTestID("whoami"))); got != "alice" {
		t.Errorf("whoami %q", got)
	}
	if doc.Find(`form[action="/admin/logout"][method="post"]`).Length() != 1 {
		t.Error("no sign-out form (POST)")
	}
	if href, _ := doc.Find(byTestID("nav-asynqmon")).Attr("href"); href != "/admin/queues/" {
		t.Errorf("asynqmon link %q", href)
	}
	// Nothing comes from another origin.
	doc.Find("script[src], link[href]").Each(func(_ int, s *goquery.Selection) {
		src := s.AttrOr("src", s.AttrOr("href", ""))
		if !strings.HasPrefix(src, "/admin/static/") {
			t.Errorf("asset %q is not served by the dashboard", src)
		}
	})
}

func TestCampaignPage(t *testing.T) {
	p := views.CampaignPage{
		Meta: views.Meta{Title: "t", Admin: "alice"},
		Campaign: views.CampaignView{ID: 9, Title: "Sale", Status: "PAUSED", Paused: true, Begin: at, End: at.Add(time.Hour),
			PayWindow: 90*time.Minute + time.Second, PayValue: 100, ActualValue: 250, Currency: "CNY"},
		Live: views.CampaignLive{
			Src: "/admin/campaigns/9/live", Status: "PAUSED", Initial: 10, Remaining: 4, Queued: 1, Sold: 5, Failed: 2, Known: true,
			Awaiting: 3, Paid: 2, Revenue: 12345, Currency: "CNY", Cancelled: 1, Expired: 4, OldestPayBy: at,
			RefundsOwed: views.RefundTally{Count: 1, Amount: "1.00 CNY"}, RefundsSent: views.RefundTally{Amount: "—"},
			RefundsDone: views.RefundTally{Count: 2, Amount: "2.00 CNY"}, RefundsFailed: views.RefundTally{Count: 1, Amount: "1.00 CNY"},
			RefundsStuck: 1,
			Balance:      views.Balance{State: views.BalanceOK, Initial: 10, Remaining: 4, Queued: 1, Awaiting: 3, Paid: 2, Failed: 2},
			Charts: []views.Chart{views.NewChart("chart-outcomes", "Admissions", "", "/s", at.Add(-time.Minute), at,
				views.Series{Name: "accepted", Class: "s-accepted", Points: []views.Point{{At: at.Add(-30 * time.Second), V: 3}, {At: at, V: 8}}})},
		},
		Orders: views.OrdersView{Action: "/admin/campaigns/9", By: "user", Query: "42",
			Rows:  []views.OrderRow{{ID: 38654705665, UserID: 42, Status: "FAILED", At: at, Reason: "no stock left"}},
			Older: "/admin/campaigns/9?before=1"},
		Audit: []views.AuditRow{{At: at, Actor: "alice", Action: "pause", Detail: ""},
			{At: at, Actor: "479999999999", API: true, Action: "create"}},
		StockError: "stock to add must be between 1 and 10000000",
		StockValue: "0",
		Refunds: views.RefundList{Sending: true, Rows: []views.RefundRow{
			{PaymentID: "pay_1", OrderID: 38654705666, UserID: 7, Amount: "1.00 CNY", Status: "REFUND_FAILED", OwedAt: at,
				SentAt: at, Sends: 6, Error: "refused: card closed", Retry: "/admin/campaigns/9/refunds/pay_1/retry"},
			{PaymentID: "pay_2", OrderID: 38654705667, UserID: 8, Amount: "1.00 CNY", Status: "REFUND_NEEDED", OwedAt: at},
		}},
	}
	doc := render(t, views.Campaign(p))
	for id, want := range map[string]string{
		"stat-initial": "10", "stat-remaining": "4", "stat-queued": "1", "stat-sold": "5", "stat-failed": "2",
		"stat-awaiting": "3", "stat-paid": "2", "stat-revenue": "123.45 CNY", "stat-cancelled": "1", "stat-expired": "4",
		"refunds-owed": "1", "refunds-owed-amount": "1.00 CNY", "refunds-sent": "0",
		"refunds-done": "2", "refunds-done-amount": "2.00 CNY", "refunds-failed": "1",
		"refunds-stuck":   "1 owed for more than an hour without the provider's confirmation.",
		"campaign-price":  "pays 1.00 CNY, worth 2.50 CNY",
		"funnel-admitted": "13", "funnel-created": "10", "funnel-paid": "2",
		"consistency-state": "ok", "error-stock": p.StockError,
		"campaign-pay-window": "1 hour 30 minutes 1 second to pay an order, or it expires",
	} {
		if got := text(doc.Find(byTestID(id))); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	// Only the failed refund can be sent again, by a POST to its URL.
	rows := doc.Find(byTestID("refund-row"))
	if rows.Length() != 2 || rows.First().Find(byTestID("retry-refund")).AttrOr("action", "") != "/admin/campaigns/9/refunds/pay_1/retry" ||
		rows.Last().Find(byTestID("retry-refund")).Length() != 0 || doc.Find(byTestID("refunds-off")).Length() != 0 {
		t.Errorf("refunds table: %d rows; retry %q", rows.Length(), rows.First().Find(byTestID("retry-refund")).AttrOr("action", ""))
	}
	if got := text(rows.First().Find(byTestID("refund-amount"))); got != "1.00 CNY" {
		t.Errorf("refund amount %q", got)
	}
	var who []string
	doc.Find(byTestID("audit-who")).Each(func(_ int, s *goquery.Selection) { who = append(who, strings.Join(strings.Fields(s.Text()), " ")) })
	if strings.Join(who, "; ") != "operator alice; API user 479999999999 (token)" {
		t.Errorf("audit who: %q", who)
	}
	// Every time names its zone, even before the script runs.
	doc.Find("time").Each(func(_ int, s *goquery.Selection) {
		if !strings.HasSuffix(text(s), "UTC") {
			t.Errorf("time %q has no zone", text(s))
		}
	})
	if doc.Find(byTestID("chart-outcomes")+" "+byTestID("y-axis")).Text() == "" {
		t.Error("the chart has no value axis")
	}
	if title := doc.Find(byTestID("chart-column") + " title").Last().Text(); title != "10:00:00 UTC: accepted 8.0/s" {
		t.Errorf("last chart column reads %q", title)
	}
	if doc.Find(byTestID("resume")).Length() != 1 || doc.Find(byTestID("pause")).Length() != 0 {
		t.Error("a paused campaign offers pause, not resume")
	}
	if doc.Find(byTestID("edit")).Length() != 0 {
		t.Error("a started campaign offers edit")
	}
	if v, _ := doc.Find(byTestID("stock-input")).Attr("value"); v != "0" {
		t.Errorf("stock input keeps %q", v)
	}
	// The error stands next to its field, in the add-stock form.
	if doc.Find(byTestID("stock-form")+" "+byTestID("error-stock")).Length() != 1 {
		t.Error("the stock error is not in the stock form")
	}
	doc.Find(`form[method="post"]`).Each(func(_ int, f *goquery.Selection) {
		if a, _ := f.Attr("action"); !strings.HasPrefix(a, "/admin/") {
			t.Errorf("form posts to %q", a)
		}
	})
	order := doc.Find(byTestID("order-row") + `[data-order-id="38654705665"]`)
	if got := text(order.Find(byTestID("status"))); got != "failed" {
		t.Errorf("order status %q", got)
	}
	if doc.Find(`select[name="by"] option[value="user"][selected]`).Length() != 1 {
		t.Error("the search does not keep searching by user")
	}
	if d, _ := doc.Find(byTestID("chart-outcomes") + " path.s-accepted").Attr("d"); d != "M300.0 85.8 L600.0 28.8" {
		t.Errorf("chart path %q", d)
	}
	if got := doc.Find(byTestID("audit-entry")).Length(); got != 2 {
		t.Errorf("%d audit entries", got)
	}
	if href, _ := doc.Find(byTestID("older-orders")).Attr("href"); href != p.Orders.Older {
		t.Errorf("older link %q", href)
	}
}

func TestBalanceMismatchIsFlagged(t *testing.T) {
	doc := render(t, views.CampaignFragment(views.CampaignLive{
		Balance: views.Balance{State: views.BalanceMismatch, Initial: 10, Remaining: 3, Awaiting: 5, Diff: -2, Message: "2 units put on sale are neither left, queued, awaiting payment nor paid."},
	}))
	c := doc.Find(byTestID("consistency"))
	if st, _ := c.Attr("data-state"); st != "mismatch" {
		t.Errorf("state %q", st)
	}
	if cls, _ := c.Attr("class"); !strings.Contains(cls, "mismatch") {
		t.Errorf("class %q: not flagged", cls)
	}
	if !strings.Contains(text(c), "≠") || text(doc.Find(byTestID("consistency-message"))) == "" {
		t.Errorf("consistency panel %q", text(c))
	}
}

func TestCampaignFormShowsErrorsNextToFields(t *testing.T) {
	doc := render(t, views.CampaignForm(views.FormPage{
		Meta: views.Meta{Title: "New campaign", Admin: "alice"}, Action: "/admin/campaigns",
		Values: map[string]string{"title": "", "stock": "12"},
		Begin:  at,
		Errors: map[string]string{"title": "title is required"},
	}))
	field := doc.Find(byTestID("input-title")).Parent()
	if got := text(field.Find(byTestID("error-title"))); got != "title is required" {
		t.Errorf("error next to title = %q", got)
	}
	if cls, _ := field.Attr("class"); !strings.Contains(cls, "invalid") {
		t.Errorf("title field class %q", cls)
	}
	if doc.Find(`[data-testid^="error-"]:not(.hidden)`).Length() != 1 {
		t.Error("errors shown for fields without one")
	}
	if v, _ := doc.Find(byTestID("input-stock")).Attr("value"); v != "12" {
		t.Errorf("stock keeps %q", v)
	}
	begin := doc.Find(byTestID("input-beginTime"))
	if v, _ := begin.Attr("data-utc-value"); v != "2026-12-01T10:00:00Z" {
		t.Errorf("begin data-utc-value %q", v)
	}
	if doc.Find(`input[type="hidden"][name="beginTime"]`).Length() != 1 {
		t.Error("no hidden UTC begin field")
	}
	if a, _ := doc.Find(byTestID("campaign-form")).Attr("action"); a != "/admin/campaigns" {
		t.Errorf("form action %q", a)
	}
}

func TestLoginAndQueues(t *testing.T) {
	doc := render(t, views.Login(views.LoginPage{Meta: views.Meta{Title: "Sign in"}, User: "al", Next: "/admin/jobs", Error: "Wrong user name or password."}))
	if got := text(doc.Find(byTestID("login-error"))); got != "Wrong user name or password." {
		t.Errorf("login error %q", got)
	}
	if v, _ := doc.Find(`input[name="next"]`).Attr("value"); v != "/admin/jobs" {
		t.Errorf("next %q", v)
	}
	if doc.Find(byTestID("whoami")).Length() != 0 {
		t.Error("the login page shows an operator")
	}
	if typ, _ := doc.Find(byTestID("login-password")).Attr("type"); typ != "password" {
		t.Errorf("password input type %q", typ)
	}
	if doc.Find(byTestID("login-sso")).Length() != 0 {
		t.Error("the login page offers an identity provider that is not configured")
	}
	sso := render(t, views.Login(views.LoginPage{Meta: views.Meta{Title: "Sign in"}, Next: "/admin/jobs", SSO: "idp.example.com"}))
	if got := text(sso.Find(byTestID("login-sso"))); got != "Sign in with idp.example.com" {
		t.Errorf("provider button %q", got)
	}
	if m, _ := sso.Find(byTestID("login-sso-form")).Attr("method"); m != "post" {
		t.Errorf("the provider's sign-in starts with %q, want a POST (cross-origin protection)", m)
	}
	if v, _ := sso.Find(byTestID("login-sso-form")).Find(`input[name="next"]`).Attr("value"); v != "/admin/jobs" {
		t.Errorf("provider sign-in next %q", v)
	}

	doc = render(t, views.QueuesFragment(views.QueuesLive{At: at, Rows: []views.QueueRow{
		{Queue: views.Queue{Name: "orders", Pending: 1200, Active: 3, Scheduled: 1, Retry: 2, Archived: 1, Processed: 45000, Failed: 4, Latency: 1500 * time.Millisecond}},
	}}))
	row := doc.Find(byTestID("queue-row") + `[data-queue="orders"]`)
	for id, want := range map[string]string{"pending": "1,200", "active": "3", "retry": "2", "archived": "1", "processed": "45,000", "failed": "4", "latency": "1.5 s"} {
		if got := text(row.Find(byTestID(id))); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
}

// TestCampaignFragmentShards: a campaign of several stock shards shows
// each shard's remaining, queued and admissions a second; one of one shard
// shows no such panel.
func TestCampaignFragmentShards(t *testing.T) {
	doc := render(t, views.CampaignFragment(views.CampaignLive{Known: true, Remaining: 12, Shards: []views.ShardView{
		{Shard: 0, Remaining: 10, Queued: 3, Known: true, PerSecond: 1234.4, Rate: true},
		{Shard: 1, Remaining: 2, Known: true},
		{Shard: 2},
	}}))
	rows := doc.Find(byTestID("shard-row"))
	if rows.Length() != 3 {
		t.Fatalf("%d shard rows, want 3", rows.Length())
	}
	for i, want := range [][3]string{{"10", "3", "1,234"}, {"2", "0", "—"}, {"—", "0", "—"}} {
		row := rows.Eq(i)
		got := [3]string{text(row.Find(byTestID("shard-remaining"))), text(row.Find(byTestID("shard-queued"))), text(row.Find(byTestID("shard-rate")))}
		if got != want {
			t.Errorf("shard %d: %v, want %v", i, got, want)
		}
	}
	if n := render(t, views.CampaignFragment(views.CampaignLive{Known: true})).Find(byTestID("shards")).Length(); n != 0 {
		t.Errorf("a campaign of one shard shows %d shard panels", n)
	}
}
