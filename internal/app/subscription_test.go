package app

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func (e *testEnv) dialWS(t *testing.T, ctx context.Context, subprotocol string) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(e.url, "http") + "/graphql"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func readWS(t *testing.T, ctx context.Context, c *websocket.Conn) wsMessage {
	t.Helper()
	for {
		var m wsMessage
		if err := wsjson.Read(ctx, c, &m); err != nil {
			t.Fatalf("read: %v", err)
		}
		if m.Type == "ping" {
			_ = wsjson.Write(ctx, c, wsMessage{Type: "pong"})
			continue
		}
		if m.Type == "ka" {
			continue
		}
		return m
	}
}

// TestOrderStatusSubscription follows an order over graphql-transport-ws
// from connection_init to complete, through the real stack: the first event
// is QUEUED, then the worker persists the order and the stream ends with
// CREATED.
func TestOrderStatusSubscription(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(5)
	token := e.token(61, false)
	p, err := e.buy(nil, token, voucher)
	if err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("buy: %+v %v", p, err)
	}

	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	c := e.dialWS(t, ctx, "graphql-transport-ws")
	if err := wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + token}}); err != nil {
		t.Fatal(err)
	}
	if m := readWS(t, ctx, c); m.Type != "connection_ack" {
		t.Fatalf("got %+v, want connection_ack", m)
	}
	err = wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query":     `subscription($id: ID!) { orderStatus(orderId: $id) { orderId status at reason } }`,
		"variables": map[string]any{"id": *p.OrderID},
	}})
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		Data struct {
			OrderStatus struct {
				OrderID string `json:"orderId"`
				Status  string `json:"status"`
				At      string `json:"at"`
			} `json:"orderStatus"`
		} `json:"data"`
	}
	next := func() event {
		m := readWS(t, ctx, c)
		if m.Type != "next" || m.ID != "1" {
			t.Fatalf("got %+v, want next", m)
		}
		var ev event
		if err := json.Unmarshal(m.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Data.OrderStatus.OrderID != *p.OrderID {
			t.Fatalf("event for order %s, want %s", ev.Data.OrderStatus.OrderID, *p.OrderID)
		}
		return ev
	}
	if ev := next(); ev.Data.OrderStatus.Status != "QUEUED" {
		t.Fatalf("first event %+v, want QUEUED", ev)
	}
	e.worker() // now the order gets persisted
	if ev := next(); ev.Data.OrderStatus.Status != "CREATED" {
		t.Fatalf("second event %+v, want CREATED", ev)
	}
	// CREATED awaits payment: the stream goes on until it is paid.
	e.payOrder(*p.OrderID, 61)
	if ev := next(); ev.Data.OrderStatus.Status != "PAID" {
		t.Fatalf("third event %+v, want PAID", ev)
	}
	if m := readWS(t, ctx, c); m.Type != "complete" || m.ID != "1" {
		t.Fatalf("got %+v, want complete", m)
	}

	// Another user may not follow this order: it is not found for them.
	other := e.dialWS(t, ctx, "graphql-transport-ws")
	_ = wsjson.Write(ctx, other, map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + e.token(62, false)}})
	if m := readWS(t, ctx, other); m.Type != "connection_ack" {
		t.Fatalf("got %+v", m)
	}
	_ = wsjson.Write(ctx, other, map[string]any{"id": "9", "type": "subscribe", "payload": map[string]any{
		"query": `subscription { orderStatus(orderId: "` + *p.OrderID + `") { status } }`}})
	m := readWS(t, ctx, other)
	if m.Type != "error" && !(m.Type == "next" && strings.Contains(string(m.Payload), "NOT_FOUND")) {
		t.Fatalf("another user's subscription got %s %s, want NOT_FOUND", m.Type, m.Payload)
	}
}

// TestOrderStatusSubscriptionLegacyProtocol speaks the legacy graphql-ws
// subprotocol: an order already paid answers PAID and completes.
func TestOrderStatusSubscriptionLegacyProtocol(t *testing.T) {
	e := newTestEnv(t, "")
	e.worker()
	voucher := e.createCampaign(5)
	token := e.token(71, false)
	p, err := e.buy(nil, token, voucher)
	if err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("buy: %+v %v", p, err)
	}
	id, _ := strconv.ParseInt(*p.OrderID, 10, 64)
	eventually(t, 20*time.Second, "order persisted", func() bool { return e.rows(voucher) == 1 })
	e.payOrder(*p.OrderID, 71)

	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	c := e.dialWS(t, ctx, "graphql-ws")
	_ = wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + token}})
	if m := readWS(t, ctx, c); m.Type != "connection_ack" {
		t.Fatalf("got %+v, want connection_ack", m)
	}
	_ = wsjson.Write(ctx, c, map[string]any{"id": "a", "type": "start", "payload": map[string]any{
		"query": `subscription { orderStatus(orderId: "` + strconv.FormatInt(id, 10) + `") { status } }`}})
	m := readWS(t, ctx, c)
	if m.Type != "data" || !strings.Contains(string(m.Payload), `"PAID"`) {
		t.Fatalf("got %s %s, want data with PAID", m.Type, m.Payload)
	}
	if m := readWS(t, ctx, c); m.Type != "complete" {
		t.Fatalf("got %+v, want complete", m)
	}
}

// TestRejectedWebSocketInit: no token closes with 4401, a bad one with 4403,
// so clients stop instead of reconnecting in a loop.
func TestRejectedWebSocketInit(t *testing.T) {
	e := newTestEnv(t, "")
	for _, tt := range []struct {
		name    string
		payload map[string]string
		want    websocket.StatusCode
	}{
		{"no token", map[string]string{}, 4401},
		{"bad token", map[string]string{"Authorization": "Bearer not-a-token"}, 4403},
		{"wrong secret", map[string]string{"Authorization": "Bearer " + forgedToken(t)}, 4403},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
			defer cancel()
			c := e.dialWS(t, ctx, "graphql-transport-ws")
			_ = wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": tt.payload})
			var m wsMessage
			err := wsjson.Read(ctx, c, &m)
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != tt.want {
				t.Fatalf("read after init: %v (message %+v), want close %d", err, m, tt.want)
			}
		})
	}
}

// TestSubscriptionDisconnectLeaksNothing opens many subscriptions to a queued
// order, drops the clients without a goodbye, and checks that the server's
// goroutines (subscriber, fan-out, WebSocket) all go away.
func TestSubscriptionDisconnectLeaksNothing(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(5)
	token := e.token(81, false)
	p, err := e.buy(nil, token, voucher)
	if err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("buy: %+v %v", p, err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	// One subscription first so that lazily started machinery (the pub/sub
	// connection) is part of the baseline.
	open := func() *websocket.Conn {
		c := e.dialWS(t, ctx, "graphql-transport-ws")
		_ = wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]string{"Authorization": "Bearer " + token}})
		if m := readWS(t, ctx, c); m.Type != "connection_ack" {
			t.Fatalf("got %+v", m)
		}
		_ = wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
			"query": `subscription { orderStatus(orderId: "` + *p.OrderID + `") { status } }`}})
		if m := readWS(t, ctx, c); m.Type != "next" {
			t.Fatalf("got %+v", m)
		}
		return c
	}
	open().CloseNow()
	time.Sleep(200 * time.Millisecond)
	base := runtime.NumGoroutine()

	conns := make([]*websocket.Conn, 50)
	for i := range conns {
		conns[i] = open()
	}
	if n := runtime.NumGoroutine(); n < base+50 {
		t.Fatalf("%d goroutines with 50 live subscriptions, baseline %d: the check would prove nothing", n, base)
	}
	for _, c := range conns {
		c.CloseNow() // no close frame: the client just went away
	}
	eventually(t, 10*time.Second, "subscription goroutines to exit", func() bool {
		return runtime.NumGoroutine() <= base+3
	})
}
