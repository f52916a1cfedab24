package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
)

// postWebhook posts body to the webhook with the given signature header
// ("" for none) and returns the status and the answer.
func (e *testEnv) postWebhook(method, sig string, body []byte) (int, string) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, e.url+"/webhooks/payments", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if sig != "" {
		req.Header.Set(payhook.Header, sig)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// TestWebhookRefusesBadInput sends every kind of bad call: each gets a
// clear 4xx and changes nothing.
func TestWebhookRefusesBadInput(t *testing.T) {
	e, v := newLifeEnv(t, 2, 0)
	id := e.buyCreated(v, 41)
	p := e.createPayment(id, 41)
	if p.Amount != 100 || p.Currency != "CNY" || p.Status != seckill.PaymentPending || p.PayBy.IsZero() {
		t.Fatalf("payment %+v", p)
	}
	secret := []byte(config.DevWebhookSecret)
	good := func(mod func(ev *seckill.PaymentEvent)) []byte {
		ev := paymentEvent(p, seckill.EventPaymentSucceeded)
		if mod != nil {
			mod(&ev)
		}
		b, _ := json.Marshal(ev)
		return b
	}
	body := good(nil)
	now := time.Now()
	const signed = "signed"
	big := append([]byte(`{"id":"x","pad":"`), bytes.Repeat([]byte("a"), payhook.MaxBody)...)
	big = append(big, `"}`...)
	tests := []struct {
		name   string
		method string
		sig    string
		body   []byte
		status int
		says   string
	}{
		{"GET", http.MethodGet, payhook.Sign(secret, now, body), body, 405, "POST only"},
		{"no signature", "POST", "", body, 400, "malformed"},
		{"malformed signature", "POST", "t=1,v1=zz", body, 400, "malformed"},
		{"no timestamp", "POST", "v1=" + strings.Repeat("ab", 32), body, 400, "malformed"},
		{"wrong secret", "POST", payhook.Sign([]byte("another-secret-of-some-length"), now, body), body, 401, "does not match"},
		{"tampered body", "POST", payhook.Sign(secret, now, body), good(func(ev *seckill.PaymentEvent) { ev.Amount = 1 }), 401, "does not match"},
		{"stale timestamp", "POST", payhook.Sign(secret, now.Add(-6*time.Minute), body), body, 401, "tolerance"},
		{"future timestamp", "POST", payhook.Sign(secret, now.Add(6*time.Minute), body), body, 401, "tolerance"},
		{"not JSON", "POST", payhook.Sign(secret, now, []byte("pay me")), []byte("pay me"), 400, "JSON"},
		{"two events", "POST", payhook.Sign(secret, now, append(body, body...)), append(body, body...), 400, "JSON"},
		{"unknown payment", "POST", signed, good(func(ev *seckill.PaymentEvent) { ev.PaymentID = "pay_" + strings.Repeat("0", 32) }), 404, "not found"},
		{"malformed payment id", "POST", signed, good(func(ev *seckill.PaymentEvent) { ev.PaymentID = "pay_1" }), 400, "payment_id"},
		{"wrong amount", "POST", signed, good(func(ev *seckill.PaymentEvent) { ev.Amount = 99 }), 400, "not 0.99 CNY"},
		{"wrong currency", "POST", signed, good(func(ev *seckill.PaymentEvent) { ev.Currency = "USD" }), 400, "not 1.00 USD"},
		{"unknown type", "POST", signed, good(func(ev *seckill.PaymentEvent) { ev.Type = "payment.refunded" }), 400, "type"},
		{"no event id", "POST", signed, good(func(ev *seckill.PaymentEvent) { ev.ID = "" }), 400, "id"},
		{"event id not ASCII", "POST", signed, good(func(ev *seckill.PaymentEvent) { ev.ID = "evt_\u00e9" }), 400, "printable ASCII"},
		{"event id with a space", "POST", signed, good(func(ev *seckill.PaymentEvent) { ev.ID = "evt 1" }), 400, "printable ASCII"},
		{"body not UTF-8", "POST", signed, []byte("{\"id\":\"evt_\xff\",\"type\":\"payment.succeeded\"}"), 400, "UTF-8"},
		{"event id a lone surrogate", "POST", signed, []byte(`{"id":"evt_\ud800","type":"payment.succeeded"}`), 400, "printable ASCII"},
		{"too large", "POST", payhook.Sign(secret, now, big), big, 413, "larger"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sig := tc.sig
			if sig == signed {
				sig = payhook.Sign(secret, now, tc.body) // well signed, bad content
			}
			status, answer := e.postWebhook(tc.method, sig, tc.body)
			if status != tc.status || !strings.Contains(answer, tc.says) {
				t.Errorf("%d %s; want %d saying %q", status, answer, tc.status, tc.says)
			}
		})
	}
	if n := e.count(`SELECT count(*) FROM payment_event`); n != 0 {
		t.Errorf("%d events recorded", n)
	}
	if st := e.status(id); st != seckill.OrderCreated {
		t.Errorf("order %s", st)
	}
	// The good call goes through, once.
	sig := payhook.Sign(secret, time.Now(), body)
	if status, answer := e.postWebhook("POST", sig, body); status != 200 || !strings.Contains(answer, `"applied"`) {
		t.Fatalf("good call: %d %s", status, answer)
	}
	if status, answer := e.postWebhook("POST", sig, body); status != 200 || !strings.Contains(answer, `"duplicate"`) {
		t.Fatalf("replayed call: %d %s", status, answer)
	}
	if st := e.status(id); st != seckill.OrderPaid {
		t.Errorf("order %s", st)
	}
}

// TestWebhookSameEventTwentyTimes delivers one signed event 20 times at
// once over HTTP: one applies it, the others are duplicates; one event row.
func TestWebhookSameEventTwentyTimes(t *testing.T) {
	e, v := newLifeEnv(t, 2, 0)
	id := e.buyCreated(v, 51)
	ev := paymentEvent(e.createPayment(id, 51), seckill.EventPaymentSucceeded)
	body, _ := json.Marshal(ev)
	sig := payhook.Sign([]byte(config.DevWebhookSecret), time.Now(), body)
	e.deliverTwenty(id, ev.ID, func() (string, error) {
		status, answer := e.postWebhook("POST", sig, body)
		switch {
		case status == 200 && strings.Contains(answer, `"applied"`):
			return "applied", nil
		case status == 200 && strings.Contains(answer, `"duplicate"`):
			return "duplicate", nil
		}
		return "", fmt.Errorf("%d %s", status, answer)
	})
	if n := e.count(`SELECT count(*) FROM payment_event`); n != 1 {
		t.Errorf("%d event rows in all", n)
	}
}

// TestSimulatePayment pays an order the way `seckill payments simulate`
// does, and fails one with --fail.
func TestSimulatePayment(t *testing.T) {
	e, v := newLifeEnv(t, 2, 0)
	paid, failed := e.buyCreated(v, 61), e.buyCreated(v, 62)
	var out bytes.Buffer
	if err := SimulatePayment(e.ctx, e.app.Config, SimulateOptions{URL: e.url, OrderID: failed, Fail: true}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if err := SimulatePayment(e.ctx, e.app.Config, SimulateOptions{URL: e.url, OrderID: paid}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	if st := e.status(paid); st != seckill.OrderPaid {
		t.Errorf("paid order %s", st)
	}
	if st := e.status(failed); st != seckill.OrderCreated {
		t.Errorf("failed payment's order %s", st)
	}
	// A failed payment may be followed by a new one.
	if err := SimulatePayment(e.ctx, e.app.Config, SimulateOptions{URL: e.url, OrderID: failed}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if st := e.status(failed); st != seckill.OrderPaid {
		t.Errorf("order %s after a second payment", st)
	}
	if n := e.count(`SELECT count(*) FROM payment WHERE order_id = ?`, failed); n != 2 {
		t.Errorf("%d payments", n)
	}
	err := SimulatePayment(e.ctx, e.app.Config, SimulateOptions{URL: e.url, OrderID: paid + 1000}, &out)
	if err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Errorf("unknown order: %v", err)
	}
}
