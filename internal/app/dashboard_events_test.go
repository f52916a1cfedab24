package app_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/signature"
)

// TestDashboardEvents: an operator adds an endpoint (its secret shown once,
// and the receiver verifies its signatures with it), sees its deliveries
// failing with the receiver's status (never its answer's body), the dead ones, redelivers one and a
// range once the receiver takes them (delivered ones are deleted), and
// disables it.
func TestDashboardEvents(t *testing.T) {
	const receiverSecret = "internal-service-secret: AKIA-do-not-show"
	var (
		mu      sync.Mutex
		secret  string
		refuse  atomic.Bool
		got     = map[string]int{} // event id → calls taken
		badSigs atomic.Int64
	)
	refuse.Store(true)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		s := secret
		mu.Unlock()
		if err := signature.Verify([]byte(s), r.Header.Get(signature.Header), body, time.Now()); err != nil {
			badSigs.Add(1)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if refuse.Load() {
			// What an internal service would answer: never to be shown.
			http.Error(w, receiverSecret, http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		got[r.Header.Get("Seckill-Event-Id")]++
		mu.Unlock()
	}))
	t.Cleanup(rcv.Close)

	e, id, _ := newDashSale(t, "Events", 5)
	page := e.page(e.get("/admin/events"))
	if n := page.Find(`[data-testid="endpoint-row"]`).Length(); n != 0 {
		t.Fatalf("%d endpoints before any was added", n)
	}
	res := e.post("/admin/events/endpoints", url.Values{"url": {"ftp://nowhere"}})
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a bad URL: %s", res.Status)
	}
	// Credentials in the URL: refused (the signature authenticates), and
	// the password is not shown back.
	res = e.post("/admin/events/endpoints", url.Values{"url": {"http://platform:hunter2pass@" + strings.TrimPrefix(rcv.URL, "http://") + "/hooks"}})
	if body, _ := e.page(res).Html(); res.StatusCode != http.StatusUnprocessableEntity || strings.Contains(body, "hunter2pass") || !strings.Contains(body, "password") {
		t.Fatalf("a URL with a password: %s, shown back or not said why", res.Status)
	}
	res = e.post("/admin/events/endpoints", url.Values{"url": {rcv.URL + "/hooks"}})
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("add endpoint: %s", res.Status)
	}
	page = e.page(res)
	mu.Lock()
	secret = strings.TrimSpace(page.Find(`[data-testid="new-secret"]`).Text())
	mu.Unlock()
	if !strings.HasPrefix(secret, "whsec_") || len(secret) < 20 {
		t.Fatalf("secret shown %q", secret)
	}
	if strings.Contains(e.page(e.get("/admin/events")).Text(), secret) {
		t.Fatal("the secret is shown again")
	}
	link, _ := e.page(e.get("/admin/events")).Find(`[data-testid="endpoint-link"]`).Attr("href")

	for _, u := range []int64{401, 402} {
		if got := e.buy(id, u); got != "ACCEPTED" {
			t.Fatalf("buy as %d: %s", u, got)
		}
	}
	dashEventually(t, 20*time.Second, "the deliveries to fail with the receiver's status", func() bool {
		rows := e.page(e.get(link)).Find(`[data-testid="delivery-row"]`)
		return rows.Length() == 2 && strings.TrimSpace(rows.First().Find(`[data-testid="last-answer"]`).Text()) == "status 503"
	})
	// Not a byte of the receiver's answer on any page (a read-SSRF).
	for _, page := range []string{"/admin/events", link, link + "?state=PENDING"} {
		if body, _ := e.page(e.get(page)).Html(); strings.Contains(body, "service-secret") || strings.Contains(body, "AKIA") {
			t.Errorf("%s shows the receiver's answer", page)
		}
	}
	state := e.page(e.get("/admin/events")).Find(`[data-testid="endpoint-state"]`).Text()
	if !strings.Contains(state, "failing") {
		t.Errorf("endpoint state %q, want failing", state)
	}
	// Both used up their attempts (as after hours of failing).
	if _, err := e.app.DB.ExecContext(e.ctx, `UPDATE order_event SET dead = true`); err != nil {
		t.Fatal(err)
	}
	dead := e.page(e.get(link + "?state=DEAD")).Find(`[data-testid="delivery-row"]`)
	if dead.Length() != 2 {
		t.Fatalf("%d dead listed, want 2", dead.Length())
	}
	first, _ := dead.First().Attr("data-event")

	refuse.Store(false)
	order, _ := dead.First().Find(`input[name="order"]`).Attr("value")
	seq, _ := dead.First().Find(`input[name="sequence"]`).Attr("value")
	res = e.post(link+"/redeliver", url.Values{"order": {order}, "sequence": {seq}})
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "redelivered=1") {
		t.Fatalf("redeliver one: %s %s", res.Status, res.Header.Get("Location"))
	}
	dashEventually(t, 20*time.Second, "the redelivered event to arrive", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got[first] == 1
	})
	from := time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")
	to := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04")
	res = e.post(link+"/redeliver", url.Values{"from": {from}, "to": {to}})
	// The delivered one is gone (SECKILL_EVENTS_RETENTION is 0): the
	// range holds the other dead one.
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "redelivered=1") {
		t.Fatalf("redeliver the range: %s %s", res.Status, res.Header.Get("Location"))
	}
	dashEventually(t, 20*time.Second, "both events delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 2 && got[first] == 1
	})
	// The receiver counts a call before its answer reaches the deliverer,
	// which records it (deleting the row) in its round's transaction after.
	dashEventually(t, 10*time.Second, "no delivery listed once every event was delivered", func() bool {
		return e.page(e.get(link)).Find(`[data-testid="delivery-row"]`).Length() == 0
	})
	if n := badSigs.Load(); n != 0 {
		t.Errorf("%d calls with a signature that does not verify", n)
	}

	// Enabled, it cannot be deleted (no button, and a POST all the same
	// is refused); disabled, it can, and its page is gone.
	if e.page(e.get("/admin/events")).Find(`[data-testid="delete-endpoint"]`).Length() != 0 {
		t.Error("an enabled endpoint offers a delete")
	}
	res = e.post(link+"/delete", url.Values{})
	if body := e.page(res).Find(`[data-testid="action-error"]`).Text(); res.StatusCode != http.StatusConflict || !strings.Contains(body, "disable it first") {
		t.Errorf("deleting an enabled endpoint: %s %q, want 409 and why", res.Status, body)
	}
	toggle, _ := e.page(e.get("/admin/events")).Find(`[data-testid="toggle-endpoint"]`).Attr("action")
	if res := e.post(toggle, url.Values{}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable: %s", res.Status)
	}
	if state := e.page(e.get("/admin/events")).Find(`[data-testid="endpoint-state"]`).Text(); !strings.Contains(state, "disabled") {
		t.Errorf("endpoint state %q after disabling", state)
	}
	del, _ := e.page(e.get("/admin/events")).Find(`[data-testid="delete-endpoint"]`).Attr("action")
	if res := e.post(del, url.Values{}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: %s", res.Status)
	}
	if n := e.page(e.get("/admin/events")).Find(`[data-testid="endpoint-row"]`).Length(); n != 0 {
		t.Errorf("%d endpoints listed after the delete", n)
	}
	if res := e.get(link); res.StatusCode != http.StatusNotFound {
		t.Errorf("the deleted endpoint's page: %s, want 404", res.Status)
	}
	if res := e.post(del, url.Values{}); res.StatusCode != http.StatusNotFound {
		t.Errorf("deleting it again: %s, want 404", res.Status)
	}
}
