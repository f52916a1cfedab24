package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/coder/websocket/wsjson"
)

// TestManyInstances runs a deployment of two API servers (no workers) and
// two workers on one Postgres and one Redis (the cluster, under `make
// test-cluster`), as separate Apps that share nothing but those:
//   - a subscription held on API 1 follows an order bought on API 2, from
//     QUEUED to CREATED, persisted by either worker;
//   - the seed's scenario (1000 users × 2 attempts, stock 200) spread over
//     both APIs: exactly 200 ACCEPTED, 200 rows, stock 0 in Redis and
//     Postgres, nobody twice;
//   - the dashboard of either API shows the same remaining, queued and sold.
func TestManyInstances(t *testing.T) {
	const admin, password = "ops", "many-instances-password"
	withAdmin := func(m map[string]string) {
		m["SECKILL_ADMIN_USER"], m["SECKILL_ADMIN_PASSWORD"] = admin, password
		m["SECKILL_USER_RATE"] = "0"
	}
	api1 := newTestEnv(t, "", withAdmin)
	api2 := api1.peer()
	workers := []*testEnv{api1.peer(), api1.peer()}
	apis := []*testEnv{api1, api2}
	if err := api1.app.EnsureConfiguredAdmin(api1.ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range apis {
		go func() { _ = e.app.RunDashboard(e.ctx) }()
	}

	// The subscription: bought on API 2 while no worker runs, followed on
	// API 1, persisted once the workers start.
	first := api1.createCampaign(5)
	token := api2.token(70, false)
	p, err := api2.buy(nil, token, first)
	if err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("buy on API 2: %+v %v", p, err)
	}
	events := api1.follow(t, token, *p.OrderID)
	if st := <-events; st != "QUEUED" {
		t.Fatalf("first event on API 1: %q, want QUEUED", st)
	}
	for _, w := range workers {
		w.worker()
	}
	workers[0].reconciler()
	select {
	case st := <-events:
		if st != "CREATED" {
			t.Fatalf("second event on API 1: %q, want CREATED", st)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("API 1 never heard that the order bought on API 2 was persisted")
	}

	// The seed's scenario over both APIs.
	const users, attempts, stock = 1000, 2, 200
	voucher := api2.createCampaign(stock)
	rush(t, apis, voucher, 20_000, users, attempts, stock)
	eventually(t, 60*time.Second, "200 orders in Postgres", func() bool { return api1.rows(voucher) >= stock })
	time.Sleep(200 * time.Millisecond) // anything beyond 200 would show now
	if n, pg, r := api1.rows(voucher), api1.pgStock(voucher), api2.remaining(voucher); n != stock || pg != 0 || r != 0 {
		t.Fatalf("rows %d, Postgres stock %d, Redis stock %d; want %d, 0, 0", n, pg, r, stock)
	}

	// Both dashboards agree, once every admission is persisted.
	want := dashboardRow{Remaining: "0", Queued: "0", Sold: "200"}
	for i, e := range apis {
		d := e.dashboard(t, admin, password)
		var got dashboardRow
		eventually(t, 15*time.Second, fmt.Sprintf("API %d's dashboard to show %+v", i+1, want), func() bool {
			got = d.row(voucher)
			return got == want
		})
	}
}

// follow subscribes to an order's status over graphql-transport-ws on e and
// sends each status it hears; the channel closes when the stream ends.
func (e *testEnv) follow(t *testing.T, token, orderID string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	t.Cleanup(cancel)
	c := e.dialWS(t, ctx, "graphql-transport-ws")
	if err := wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + token}}); err != nil {
		t.Fatal(err)
	}
	if m := readWS(t, ctx, c); m.Type != "connection_ack" {
		t.Fatalf("got %+v, want connection_ack", m)
	}
	err := wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query":     `subscription($id: ID!) { orderStatus(orderId: $id) { status } }`,
		"variables": map[string]any{"id": orderID},
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 8)
	go func() {
		defer close(out)
		for {
			var m wsMessage
			if err := wsjson.Read(ctx, c, &m); err != nil || m.Type != "next" {
				return
			}
			var ev struct {
				Data struct {
					OrderStatus struct{ Status string } `json:"orderStatus"`
				} `json:"data"`
			}
			if json.Unmarshal(m.Payload, &ev) != nil {
				return
			}
			out <- ev.Data.OrderStatus.Status
		}
	}()
	return out
}

type dashboardRow struct{ Remaining, Queued, Sold string }

// dashboardSession is an operator signed in to one instance's dashboard.
type dashboardSession struct {
	t      *testing.T
	e      *testEnv
	client *http.Client
}

func (e *testEnv) dashboard(t *testing.T, user, password string) *dashboardSession {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"user": {user}, "password": {password}}
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.url+"/admin/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.url)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", res.Status)
	}
	return &dashboardSession{t: t, e: e, client: client}
}

// row reads a campaign's live numbers from the campaigns fragment.
func (d *dashboardSession) row(voucherID int64) dashboardRow {
	d.t.Helper()
	req, _ := http.NewRequestWithContext(d.e.ctx, "GET", d.e.url+"/admin/live/campaigns", nil)
	res, err := d.client.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	tr := doc.Find(fmt.Sprintf(`[data-testid="campaign-row"][data-voucher-id="%d"]`, voucherID))
	cell := func(id string) string { return strings.TrimSpace(tr.Find(`[data-testid="` + id + `"]`).Text()) }
	return dashboardRow{Remaining: cell("remaining"), Queued: cell("queued"), Sold: cell("sold")}
}
