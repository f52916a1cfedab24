package graph

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"seckill/internal/seckill"
)

// wsMessage is a message of either WebSocket subprotocol.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

type wsClient struct {
	tb   testing.TB
	ctx  context.Context
	conn *websocket.Conn
}

// dialWS opens a WebSocket to the test server with one subprotocol.
func (e *testEnv) dialWS(tb testing.TB, subprotocol string, header http.Header) (*wsClient, *http.Response, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	tb.Cleanup(cancel)
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.srv.URL, "http"), &websocket.DialOptions{
		Subprotocols: []string{subprotocol},
		HTTPHeader:   header,
	})
	if err != nil {
		return nil, resp, err
	}
	tb.Cleanup(func() { conn.CloseNow() })
	if got := conn.Subprotocol(); got != subprotocol {
		tb.Fatalf("negotiated %q, want %q", got, subprotocol)
	}
	return &wsClient{tb: tb, ctx: ctx, conn: conn}, resp, nil
}

func (c *wsClient) send(m wsMessage) {
	c.tb.Helper()
	if err := wsjson.Write(c.ctx, c.conn, m); err != nil {
		c.tb.Fatalf("write %s: %v", m.Type, err)
	}
}

// next reads the next message, skipping keep-alives ("ka").
func (c *wsClient) next() wsMessage {
	c.tb.Helper()
	for {
		var m wsMessage
		if err := wsjson.Read(c.ctx, c.conn, &m); err != nil {
			c.tb.Fatalf("read: %v", err)
		}
		if m.Type != "ka" {
			return m
		}
	}
}

func (c *wsClient) expect(typ string) wsMessage {
	c.tb.Helper()
	m := c.next()
	if m.Type != typ {
		c.tb.Fatalf("got %s %s, want %s", m.Type, m.Payload, typ)
	}
	return m
}

// closeStatus reads until the server closes the socket and returns the
// close code.
func (c *wsClient) closeStatus() websocket.StatusCode {
	c.tb.Helper()
	for {
		var m wsMessage
		err := wsjson.Read(c.ctx, c.conn, &m)
		if err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

func initPayload(token string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + token})
	return b
}

func subscribePayload(query string, vars map[string]any) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return b
}

const orderStatusSubscription = `subscription($id: ID!) { orderStatus(orderId: $id) { orderId status at reason } }`

type statusEvent struct {
	OrderID string  `json:"orderId"`
	Status  string  `json:"status"`
	At      string  `json:"at"`
	Reason  *string `json:"reason"`
}

func decodeEvent(tb testing.TB, m wsMessage) statusEvent {
	tb.Helper()
	var p struct {
		Data   struct{ OrderStatus statusEvent }
		Errors []gqlError
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		tb.Fatal(err)
	}
	if len(p.Errors) != 0 {
		tb.Fatalf("errors: %s", m.Payload)
	}
	return p.Data.OrderStatus
}

// buyOne makes user buy one unit of a fresh campaign over HTTP and returns
// the order id.
func (e *testEnv) buyOne(tb testing.TB, userID int64) string {
	tb.Helper()
	voucherID := e.addVoucher(tb, validVoucherInput())
	_, resp, raw := e.post(tb, e.token(tb, userID, false), `mutation($id: ID!) { seckill(voucherId: $id) { outcome orderId } }`, map[string]any{"id": voucherID})
	var data struct {
		Seckill struct{ Outcome, OrderID string }
	}
	if err := json.Unmarshal(resp.Data, &data); err != nil || data.Seckill.Outcome != "ACCEPTED" {
		tb.Fatalf("seckill: %s", raw)
	}
	return data.Seckill.OrderID
}

// persistWhenWatched persists the queued admissions once orderID has a
// subscriber, so the subscription sees QUEUED and then CREATED.
func (e *testEnv) persistWhenWatched(tb testing.TB, orderID string) {
	tb.Helper()
	id, _ := parseID("orderId", orderID)
	go func() {
		deadline := time.Now().Add(5 * time.Second)
		for e.bus.subscribers(id) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := e.svc.PersistAdmissions(context.Background(), e.queue.take()); err != nil {
			tb.Error(err)
		}
	}()
}

func TestWebSocketTransportWS(t *testing.T) {
	e := newTestEnv(t, Options{})
	orderID := e.buyOne(t, 42)

	c, _, err := e.dialWS(t, "graphql-transport-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(wsMessage{Type: "connection_init", Payload: initPayload(e.token(t, 42, false))})
	c.expect("connection_ack")

	// Subscribing first and persisting afterwards: the stream starts with
	// the current status and follows with the change.
	c.send(wsMessage{ID: "1", Type: "subscribe", Payload: subscribePayload(orderStatusSubscription, map[string]any{"id": orderID})})
	first := decodeEvent(t, c.expect("next"))
	if first.OrderID != orderID || first.Status != "QUEUED" || first.Reason != nil {
		t.Errorf("first event = %+v", first)
	}
	e.persistWhenWatched(t, orderID)
	second := decodeEvent(t, c.expect("next"))
	if second.Status != "CREATED" {
		t.Errorf("second event = %+v", second)
	}
	if _, err := time.Parse(time.RFC3339Nano, second.At); err != nil {
		t.Errorf("at = %q: %v", second.At, err)
	}
	// CREATED awaits payment: the stream goes on until a final status, so
	// the client ends it here.
	c.send(wsMessage{ID: "1", Type: "complete"})
	c.expect("complete")

	// A mutation over the same socket runs as the socket's user.
	voucherID := e.addVoucher(t, validVoucherInput())
	c.send(wsMessage{ID: "2", Type: "subscribe", Payload: subscribePayload(`mutation($id: ID!) { seckill(voucherId: $id) { outcome } }`, map[string]any{"id": voucherID})})
	if m := c.expect("next"); !strings.Contains(string(m.Payload), `"outcome":"ACCEPTED"`) {
		t.Errorf("mutation over WebSocket: %s", m.Payload)
	}
	c.expect("complete")

	// Errors of a subscription carry codes too.
	c.send(wsMessage{ID: "3", Type: "subscribe", Payload: subscribePayload(orderStatusSubscription, map[string]any{"id": "12345"})})
	m := c.next()
	if m.Type == "next" || m.Type == "error" {
		if !strings.Contains(string(m.Payload), `"code":"NOT_FOUND"`) {
			t.Errorf("unknown order: %s %s", m.Type, m.Payload)
		}
	} else {
		t.Errorf("unknown order: %s %s", m.Type, m.Payload)
	}

	// A client that completes a subscription early ends it on the server.
	orderID2 := e.buyOne(t, 42)
	c.send(wsMessage{ID: "4", Type: "subscribe", Payload: subscribePayload(orderStatusSubscription, map[string]any{"id": orderID2})})
	for {
		if m := c.next(); m.ID == "4" && m.Type == "next" {
			break
		}
	}
	c.send(wsMessage{ID: "4", Type: "complete"})
	id2, _ := parseID("orderId", orderID2)
	deadline := time.Now().Add(5 * time.Second)
	for e.bus.subscribers(id2) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the subscription still listens after complete")
		}
		time.Sleep(time.Millisecond)
	}
	c.conn.Close(websocket.StatusNormalClosure, "")
}

func TestWebSocketGraphQLWS(t *testing.T) {
	e := newTestEnv(t, Options{})
	orderID := e.buyOne(t, 7)

	c, _, err := e.dialWS(t, "graphql-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The lowercase key is accepted as well.
	c.send(wsMessage{Type: "connection_init", Payload: json.RawMessage(`{"authorization":"Bearer ` + e.token(t, 7, false) + `"}`)})
	c.expect("connection_ack")
	c.send(wsMessage{ID: "1", Type: "start", Payload: subscribePayload(orderStatusSubscription, map[string]any{"id": orderID})})
	if ev := decodeEvent(t, c.expect("data")); ev.Status != "QUEUED" {
		t.Errorf("first event = %+v", ev)
	}
	e.persistWhenWatched(t, orderID)
	if ev := decodeEvent(t, c.expect("data")); ev.Status != "CREATED" {
		t.Errorf("second event = %+v", ev)
	}
	// CREATED awaits payment, so the stream goes on; the client stops it.
	c.send(wsMessage{ID: "1", Type: "stop"})
	c.conn.Close(websocket.StatusNormalClosure, "")
}

func TestWebSocketInitRejected(t *testing.T) {
	e := newTestEnv(t, Options{})
	tests := []struct {
		name    string
		payload json.RawMessage
		code    websocket.StatusCode
	}{
		{"no payload", nil, CloseUnauthorized},
		{"no token", json.RawMessage(`{"foo":"bar"}`), CloseUnauthorized},
		{"empty token", json.RawMessage(`{"Authorization":"Bearer "}`), CloseUnauthorized},
		{"empty bearer", json.RawMessage(`{"Authorization":"Bearer"}`), CloseUnauthorized},
		{"bad token", initPayload("not-a-token"), CloseForbidden},
		{"not bearer", json.RawMessage(`{"Authorization":"Basic dXNlcjpw"}`), CloseForbidden},
	}
	for _, sub := range []string{"graphql-transport-ws", "graphql-ws"} {
		for _, tc := range tests {
			t.Run(sub+"/"+tc.name, func(t *testing.T) {
				c, _, err := e.dialWS(t, sub, nil)
				if err != nil {
					t.Fatal(err)
				}
				c.send(wsMessage{Type: "connection_init", Payload: tc.payload})
				if got := c.closeStatus(); got != tc.code {
					t.Errorf("close code = %d, want %d", got, tc.code)
				}
			})
		}
	}
}

// TestWebSocketSubscribeBeforeInit: graphql-transport-ws says a subscribe
// before connection_init closes the socket with 4401, so that clients do
// not retry.
func TestWebSocketSubscribeBeforeInit(t *testing.T) {
	e := newTestEnv(t, Options{})
	c, _, err := e.dialWS(t, "graphql-transport-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(wsMessage{ID: "1", Type: "subscribe", Payload: subscribePayload(`{ vouchers { id } }`, nil)})
	if got := c.closeStatus(); got != CloseUnauthorized {
		t.Errorf("close code = %d, want %d", got, CloseUnauthorized)
	}
	// After connection_init, everything works as before.
	c, _, err = e.dialWS(t, "graphql-transport-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(wsMessage{Type: "connection_init", Payload: initPayload(e.token(t, 1, false))})
	c.expect("connection_ack")
	c.send(wsMessage{ID: "1", Type: "subscribe", Payload: subscribePayload(`{ vouchers { id } }`, nil)})
	c.expect("next")
}

// TestWebSocketUpgradeHeader checks that a client able to set headers may
// authenticate the upgrade request instead of connection_init, and that a
// bad header is refused before the upgrade.
func TestWebSocketUpgradeHeader(t *testing.T) {
	e := newTestEnv(t, Options{})
	c, _, err := e.dialWS(t, "graphql-transport-ws", http.Header{"Authorization": {"Bearer " + e.token(t, 5, false)}})
	if err != nil {
		t.Fatal(err)
	}
	c.send(wsMessage{Type: "connection_init"})
	c.expect("connection_ack")
	c.send(wsMessage{ID: "1", Type: "subscribe", Payload: subscribePayload(`{ myOrders { id } }`, nil)})
	if m := c.expect("next"); strings.Contains(string(m.Payload), "errors") {
		t.Errorf("myOrders: %s", m.Payload)
	}

	_, resp, err := e.dialWS(t, "graphql-transport-ws", http.Header{"Authorization": {"Bearer nope"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a bad upgrade header: err %v, resp %+v", err, resp)
	}
}

func TestWebSocketOrigin(t *testing.T) {
	e := newTestEnv(t, Options{})
	_, resp, err := e.dialWS(t, "graphql-transport-ws", http.Header{"Origin": {"https://evil.example"}})
	if err == nil {
		t.Fatal("a foreign origin was accepted")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign origin: resp %+v", resp)
	}

	allowed := newTestEnv(t, Options{AllowedOrigins: []string{"app.example"}})
	c, _, err := allowed.dialWS(t, "graphql-transport-ws", http.Header{"Origin": {"https://app.example"}})
	if err != nil {
		t.Fatalf("an allowed origin: %v", err)
	}
	c.send(wsMessage{Type: "connection_init", Payload: initPayload(allowed.token(t, 1, false))})
	c.expect("connection_ack")
}

// TestWebSocketPing checks that graphql-transport-ws clients are pinged
// (PingPongInterval) and graphql-ws clients get keep-alives
// (KeepAlivePingInterval).
func TestWebSocketPing(t *testing.T) {
	e := newTestEnv(t, Options{PingInterval: 100 * time.Millisecond, KeepAliveInterval: 20 * time.Millisecond})
	c, _, err := e.dialWS(t, "graphql-transport-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(wsMessage{Type: "connection_init", Payload: initPayload(e.token(t, 1, false))})
	c.expect("connection_ack")
	c.expect("ping")
	c.send(wsMessage{Type: "pong"})

	legacy, _, err := e.dialWS(t, "graphql-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	legacy.send(wsMessage{Type: "connection_init", Payload: initPayload(e.token(t, 1, false))})
	legacy.expect("connection_ack")
	for range 2 {
		var m wsMessage
		if err := wsjson.Read(legacy.ctx, legacy.conn, &m); err != nil || m.Type != "ka" {
			t.Fatalf("want ka, got %+v, %v", m, err)
		}
	}
}

// TestSubscriptionOtherUsersOrder checks the Service's own rule behind the
// socket's: a user without the order sees NOT_FOUND.
func TestSubscriptionOtherUsersOrder(t *testing.T) {
	e := newTestEnv(t, Options{})
	orderID := e.buyOne(t, 42)
	c, _, err := e.dialWS(t, "graphql-transport-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.send(wsMessage{Type: "connection_init", Payload: initPayload(e.token(t, 43, false))})
	c.expect("connection_ack")
	c.send(wsMessage{ID: "1", Type: "subscribe", Payload: subscribePayload(orderStatusSubscription, map[string]any{"id": orderID})})
	m := c.next()
	if !strings.Contains(string(m.Payload), `"code":"`+seckill.ENOTFOUND+`"`) {
		t.Errorf("another user's order: %s %s", m.Type, m.Payload)
	}
}

// TestWebSocketInitUnavailable: a token that cannot be checked for now
// closes the socket with 1013 (Try Again Later), not 4403: the client's
// token is not bad, and it should connect again.
func TestWebSocketInitUnavailable(t *testing.T) {
	e := &testEnv{srv: httptest.NewServer(NewHandler(Domain{}, unavailableTokens{}, Options{}))}
	t.Cleanup(e.srv.Close)
	for _, sub := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(sub, func(t *testing.T) {
			c, _, err := e.dialWS(t, sub, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.send(wsMessage{Type: "connection_init", Payload: initPayload("x.y.z")})
			if got := c.closeStatus(); got != CloseTryAgain {
				t.Errorf("close code = %d, want %d", got, CloseTryAgain)
			}
		})
	}
}
