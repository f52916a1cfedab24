package app_test

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/internal/seckill"
)

// TestDashboardAfterPurchase: the campaign page counts orders awaiting
// payment, paid, cancelled; an operator cancels an unpaid order (audited,
// its unit back on sale), filters orders by status and exports orders and
// the audit log as CSV.
func TestDashboardAfterPurchase(t *testing.T) {
	e, id, path := newDashSale(t, "After the purchase", 3)
	for _, u := range []int64{201, 202, 203} {
		if got := e.buy(id, u); got != string(seckill.OutcomeAccepted) {
			t.Fatalf("buy as %d: %s", u, got)
		}
	}
	dashEventually(t, 10*time.Second, "the three orders to be persisted", func() bool {
		tot, err := e.app.Store.CampaignTotals(e.ctx, id)
		return err == nil && tot.Awaiting == 3
	})
	orderOf := func(user int64) *seckill.Order {
		os, err := e.app.Store.OrdersByUser(e.ctx, user, 1)
		if err != nil || len(os) != 1 {
			t.Fatalf("orders of %d: %v %v", user, os, err)
		}
		return os[0]
	}
	// User 201 pays.
	buyer := seckill.NewContextWithUser(e.ctx, &seckill.User{ID: 201})
	p, err := e.app.Life.CreatePayment(buyer, orderOf(201).ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.Life.ApplyPaymentEvent(e.ctx, seckill.PaymentEvent{ID: "evt_dash_1", Type: seckill.EventPaymentSucceeded,
		PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}); err != nil {
		t.Fatal(err)
	}

	stats := func() map[string]string {
		page := e.page(e.get(path))
		out := map[string]string{"consistency": page.Find(`[data-testid="consistency"]`).AttrOr("data-state", "")}
		for _, tid := range []string{"stat-remaining", "stat-awaiting", "stat-paid", "stat-revenue", "stat-cancelled", "funnel-created", "funnel-paid"} {
			out[tid] = strings.TrimSpace(page.Find(`[data-testid="` + tid + `"]`).Text())
		}
		return out
	}
	want := map[string]string{"consistency": "ok", "stat-remaining": "0", "stat-awaiting": "2", "stat-paid": "1",
		"stat-revenue": "1.00 CNY", "stat-cancelled": "0", "funnel-created": "3", "funnel-paid": "1"}
	if got := stats(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("campaign page %v, want %v", got, want)
	}

	// The operator cancels 202's unpaid order; a paid one cannot be.
	cancel := orderOf(202).ID
	page := e.page(e.get(path))
	form := page.Find(`[data-testid="order-row"][data-order-id="` + strconv.FormatInt(cancel, 10) + `"] [data-testid="cancel-order"]`)
	action, ok := form.Attr("action")
	if !ok {
		t.Fatal("no cancel button for an order awaiting payment")
	}
	if page.Find(`[data-testid="order-row"][data-order-id="`+strconv.FormatInt(orderOf(201).ID, 10)+`"] [data-testid="cancel-order"]`).Length() != 0 {
		t.Error("a cancel button for a paid order")
	}
	res := e.post(action, nil)
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "done=cancel") {
		t.Fatalf("cancel: %s to %q", res.Status, res.Header.Get("Location"))
	}
	if res := e.post(path+"/orders/"+strconv.FormatInt(orderOf(201).ID, 10)+"/cancel", nil); res.StatusCode != http.StatusConflict {
		t.Errorf("cancel a paid order: %s", res.Status)
	}
	if res := e.post("/admin/campaigns/"+strconv.FormatInt(id+1000, 10)+"/orders/"+strconv.FormatInt(cancel, 10)+"/cancel", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("cancel through another campaign: %s", res.Status)
	}
	want["stat-remaining"], want["stat-awaiting"], want["stat-cancelled"] = "1", "1", "1"
	dashEventually(t, 5*time.Second, "the cancelled unit back on sale", func() bool { return fmt.Sprint(stats()) == fmt.Sprint(want) })
	if got := e.buy(id, 202); got != string(seckill.OutcomeAccepted) {
		t.Errorf("the cancelled buyer buys again: %s", got)
	}
	dashEventually(t, 10*time.Second, "the new order to be persisted", func() bool {
		tot, err := e.app.Store.CampaignTotals(e.ctx, id)
		return err == nil && tot.Awaiting == 2
	})

	// Filter by status.
	rows := e.page(e.get(path + "?status=CANCELLED")).Find(`[data-testid="order-row"]`)
	if rows.Length() != 1 || rows.AttrOr("data-order-id", "") != strconv.FormatInt(cancel, 10) {
		t.Errorf("CANCELLED orders: %d rows", rows.Length())
	}

	// CSV exports.
	readCSV := func(p string) [][]string {
		res := e.get(p)
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("%s: %s %s", p, res.Status, res.Header.Get("Content-Type"))
		}
		b, _ := io.ReadAll(res.Body)
		recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return recs
	}
	recs := readCSV(path + "/orders.csv")
	// A header, then 201's paid order, 202's cancelled one and its new
	// one, and 203's.
	if len(recs) != 5 || recs[0][0] != "order_id" || recs[0][2] != "status" || recs[0][4] != "currency" || recs[1][4] != "CNY" {
		t.Errorf("orders.csv: %v", recs)
	}
	if recs := readCSV(path + "/orders.csv?status=PAID"); len(recs) != 2 || recs[1][2] != "PAID" || recs[1][3] != "100" {
		t.Errorf("orders.csv?status=PAID: %v", recs)
	}
	audit := readCSV(path + "/audit.csv")
	found := false
	for _, r := range audit[1:] {
		found = found || r[1] == dashAdmin && r[2] == seckill.AuditCancelOrder && strings.Contains(r[3], strconv.FormatInt(cancel, 10))
	}
	if !found {
		t.Errorf("audit.csv has no cancel: %v", audit)
	}
}

// TestDashboardPayWindow creates campaigns with a pay window of their own,
// and refuses one out of bounds next to its field.
func TestDashboardPayWindow(t *testing.T) {
	e := newDashEnv(t)
	e.login()
	now := time.Now()
	form := url.Values{
		"title": {"Pay fast"}, "shopId": {"1"}, "stock": {"5"}, "payValue": {"100"}, "actualValue": {"500"},
		"beginTime": {now.UTC().Format(time.RFC3339)}, "endTime": {now.Add(time.Hour).UTC().Format(time.RFC3339)},
	}
	for _, bad := range []string{"0", "86401", "soon"} {
		form.Set("payWindow", bad)
		res := e.post("/admin/campaigns", form)
		msg := e.page(res).Find(`[data-testid="error-payWindow"]`).Text()
		if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(msg, "Pay window") {
			t.Errorf("payWindow %q: %s %q", bad, res.Status, msg)
		}
	}
	form.Set("payWindow", "60")
	res := e.post("/admin/campaigns", form)
	var id int64
	if _, err := fmt.Sscanf(res.Header.Get("Location"), "/admin/campaigns/%d?done=create", &id); err != nil {
		t.Fatalf("create: %s to %q", res.Status, res.Header.Get("Location"))
	}
	v, err := e.app.Store.Voucher(e.ctx, id)
	if err != nil || v.Campaign.PayWindow != time.Minute {
		t.Fatalf("pay window %v, %v", v.Campaign.PayWindow, err)
	}
	if def := e.createCampaign("Default window", 5, now, now.Add(time.Hour)); def > 0 {
		v, err := e.app.Store.Voucher(e.ctx, def)
		if err != nil || v.Campaign.PayWindow != e.app.Config.PayWindow {
			t.Fatalf("default pay window %v, %v", v.Campaign.PayWindow, err)
		}
	}
}
