package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
)

// The actions on a campaign and its refunds, as an operator posts them.

func TestCampaignActions(t *testing.T) {
	d := newDash(t, generous)
	d.svc.add("running", testNow.Add(-time.Hour), testNow.Add(time.Hour))
	d.svc.add("scheduled", testNow.Add(time.Hour), testNow.Add(2*time.Hour))
	c := d.login(t)

	for _, a := range []string{"pause", "resume", "end"} {
		res := d.do("POST", "/admin/campaigns/1/"+a, nil, c, nil)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/campaigns/1?done="+a {
			t.Errorf("%s: %s to %q", a, res.Status, res.Header.Get("Location"))
		}
	}
	res := d.do("POST", "/admin/campaigns/1/stock", url.Values{"stock": {"25"}}, c, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("add stock: %s", res.Status)
	}
	for _, bad := range []string{"", "ten", "0"} {
		res := d.do("POST", "/admin/campaigns/1/stock", url.Values{"stock": {bad}}, c, nil)
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("add %q: %s", bad, res.Status)
		}
		if msg := doc(t, res).Find(`[data-testid="stock-form"] [data-testid="error-stock"]`).Text(); msg == "" {
			t.Errorf("add %q: no error next to the field", bad)
		}
	}
	if res := d.do("POST", "/admin/campaigns/99/pause", nil, c, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("pause of a missing campaign: %s", res.Status)
	}
	// Ids are canonical, as the API reads them: campaign 1 is not "01" or "+1".
	for _, id := range []string{"01", "+1", "1e0"} {
		if res := d.do("POST", "/admin/campaigns/"+id+"/pause", nil, c, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("pause of campaign %q: %s, want 404", id, res.Status)
		}
	}

	// Edit: only before the start.
	if res := d.do("GET", "/admin/campaigns/1/edit", nil, c, nil); res.StatusCode != http.StatusConflict {
		t.Errorf("edit form of a running campaign: %s", res.Status)
	}
	edit := url.Values{"title": {"Renamed"}, "beginTime": {testNow.Add(30 * time.Minute).Format(time.RFC3339)},
		"endTime": {testNow.Add(3 * time.Hour).Format(time.RFC3339)}}
	if res := d.do("POST", "/admin/campaigns/2/edit", edit, c, nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("edit: %s", res.Status)
	}
	edit.Set("title", "")
	res = d.do("POST", "/admin/campaigns/2/edit", edit, c, nil)
	if msg := doc(t, res).Find(`[data-testid="error-title"]`).Text(); res.StatusCode != http.StatusUnprocessableEntity || msg != "“Title” is required" {
		t.Errorf("edit without title: %s %q", res.Status, msg)
	}

	want := []string{"pause", "resume", "end", "stock", "edit Renamed 2026-12-01T10:30:00Z"}
	if diff := cmp.Diff(want, d.svc.called()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	// A refusal is shown on the campaign page with its status.
	d.svc.err = seckill.Errorf(seckill.ECONFLICT, "campaign 1 has ended")
	res = d.do("POST", "/admin/campaigns/1/pause", nil, c, nil)
	if msg := doc(t, res).Find(`[data-testid="action-error"]`).Text(); res.StatusCode != http.StatusConflict || msg != "campaign 1 has ended" {
		t.Errorf("refused pause: %s %q", res.Status, msg)
	}
	d.svc.err = seckill.Errorf(seckill.EUNAVAILABLE, "admission is unavailable, so nothing was changed; try again")
	if res := d.do("POST", "/admin/campaigns/1/end", nil, c, nil); res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("end with admission down: %s", res.Status)
	}
}

// TestRetryRefund: a failed refund of the campaign can be sent again,
// by a POST of a signed-in operator; nothing else can.
func TestRetryRefund(t *testing.T) {
	d := newDash(t, generous)
	d.svc.add("running", testNow.Add(-time.Hour), testNow.Add(time.Hour))
	d.svc.add("other", testNow.Add(-time.Hour), testNow.Add(time.Hour))
	failed := seckill.Refund{PaymentID: "pay_" + strings.Repeat("a", 32), OrderID: 4294967297, VoucherID: 1, UserID: 7,
		Amount: 150, Currency: "CNY", Status: seckill.PaymentRefundFailed, OwedAt: testNow, Error: "refused: card closed"}
	owed := seckill.Refund{PaymentID: "pay_" + strings.Repeat("b", 32), OrderID: 4294967298, VoucherID: 1, UserID: 8,
		Amount: 150, Currency: "CNY", Status: seckill.PaymentRefundNeeded, OwedAt: testNow}
	other := seckill.Refund{PaymentID: "pay_" + strings.Repeat("c", 32), OrderID: 8589934593, VoucherID: 2, UserID: 9,
		Amount: 150, Currency: "CNY", Status: seckill.PaymentRefundFailed, OwedAt: testNow}
	d.refunds.refunds = []seckill.Refund{failed, owed, other}
	c := d.login(t)

	page := doc(t, d.do("GET", "/admin/campaigns/1", nil, c, nil))
	if got := page.Find(`[data-testid="refund-row"]`).Length(); got != 2 {
		t.Fatalf("%d refund rows, want the campaign's 2", got)
	}
	if got := page.Find(`[data-testid="refunds-failed-amount"]`).Text(); got != "1.50 CNY" {
		t.Errorf("failed refunds add up to %q", got)
	}
	retry := "/admin/campaigns/1/refunds/" + failed.PaymentID + "/retry"
	if action := page.Find(`[data-testid="retry-refund"]`).AttrOr("action", ""); action != retry {
		t.Errorf("retry form posts to %q", action)
	}
	if res := d.do("GET", retry, nil, c, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET retry: %s", res.Status)
	}
	if res := d.do("POST", retry, nil, nil, nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("retry signed out: %s", res.Status)
	}
	res := d.do("POST", retry, nil, c, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/campaigns/1?done=refund#refunds" {
		t.Errorf("retry: %s to %q", res.Status, res.Header.Get("Location"))
	}
	// A refund that is not failed, or another campaign's, is refused.
	for _, bad := range []string{"/admin/campaigns/1/refunds/" + owed.PaymentID + "/retry",
		"/admin/campaigns/1/refunds/" + other.PaymentID + "/retry", "/admin/campaigns/1/refunds/pay_x/retry"} {
		res := d.do("POST", bad, nil, c, nil)
		if msg := doc(t, res).Find(`[data-testid="action-error"]`).Text(); res.StatusCode != http.StatusConflict || msg == "" {
			t.Errorf("%s: %s %q", bad, res.Status, msg)
		}
	}
	if diff := cmp.Diff([]string{failed.PaymentID}, d.refunds.retried); diff != "" {
		t.Errorf("retried (-want +got):\n%s", diff)
	}
}
