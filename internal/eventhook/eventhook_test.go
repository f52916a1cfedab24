package eventhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/internal/eventhook"
	"seckill/internal/seckill"
)

// The receiver of docs/events.md, verbatim between the markers
// (TestDocsReceiverIsThisOne holds the document to it).

// docs:begin
// verifyEvent checks a call's Seckill-Signature header against its raw body
// with the endpoint's secret, and returns the event. now is the receiver's
// clock; a signature more than five minutes old or ahead is refused.
func verifyEvent(secret []byte, header string, body []byte, now time.Time) (*Event, error) {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return nil, errors.New("malformed signature header")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return nil, errors.New("stale signature")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		ok = ok || err == nil && hmac.Equal(got, want)
	}
	if !ok {
		return nil, errors.New("bad signature")
	}
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, err
	}
	return &ev, nil
}

// Event is the body of every call.
type Event struct {
	ID         string          `json:"id"`         // evt_<order>_<sequence>: deduplicate on it
	Type       string          `json:"type"`       // order.created, order.paid, ...
	Sequence   int             `json:"sequence"`   // 1, 2, ... per order
	OccurredAt time.Time       `json:"occurredAt"` // the time of the change
	Order      json.RawMessage `json:"order"`      // the order as the change left it
}

// handle takes one event once: a delivery seen before (same id) is
// answered 200 and ignored, and an order's event older than the last one
// applied (a redelivery) changes nothing. Answer 2xx only once it is stored.
func handle(db *sql.DB, ev *Event) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.Exec(`INSERT INTO seckill_event (id) VALUES ($1) ON CONFLICT DO NOTHING`, ev.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil // a duplicate
	}
	var order struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(ev.Order, &order); err != nil {
		return err
	}
	// Keep the order at its latest sequence only.
	_, err = tx.Exec(`INSERT INTO platform_order (id, status, sequence) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET status = excluded.status, sequence = excluded.sequence
		WHERE platform_order.sequence < excluded.sequence`, order.ID, order.Status, ev.Sequence)
	if err != nil {
		return err
	}
	return tx.Commit()
}

// docs:end

// TestSenderSignsWhatTheDocsReceiverVerifies: the docs' receiver verifies
// the Sender's calls with the endpoint's secret, reads the event, and
// refuses another secret, a changed body and an old signature.
func TestSenderSignsWhatTheDocsReceiverVerifies(t *testing.T) {
	secret := []byte("the-endpoint's-own-secret")
	var got *Event
	var hdr http.Header
	var raw []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ = io.ReadAll(r.Body)
		hdr = r.Header.Clone()
		ev, err := verifyEvent(secret, r.Header.Get("Seckill-Signature"), raw, time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got = ev
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	ev := seckill.Event{ID: seckill.EventID(4294967297, 2), Type: seckill.EventOrderPaid, Sequence: 2,
		OccurredAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Order: json.RawMessage(`{"id":"4294967297","status":"PAID"}`)}
	s := eventhook.NewSender(time.Second, seckill.EndpointPolicy{})
	res := s.Send(t.Context(), seckill.Endpoint{URL: srv.URL, Secret: string(secret)}, ev)
	if res.Status != http.StatusNoContent || !res.OK() {
		t.Fatalf("send: %+v", res)
	}
	if got == nil || got.ID != "evt_4294967297_2" || got.Type != "order.paid" || got.Sequence != 2 ||
		!got.OccurredAt.Equal(ev.OccurredAt) || string(got.Order) != string(ev.Order) {
		t.Fatalf("received %+v", got)
	}
	if hdr.Get(eventhook.HeaderEventID) != ev.ID || hdr.Get(eventhook.HeaderEventType) != "order.paid" || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", hdr)
	}
	sig := hdr.Get("Seckill-Signature")
	for name, err := range map[string]error{
		"another secret": func() error { _, err := verifyEvent([]byte("another"), sig, raw, time.Now()); return err }(),
		"changed body":   func() error { _, err := verifyEvent(secret, sig, append(raw, ' '), time.Now()); return err }(),
		"an hour later":  func() error { _, err := verifyEvent(secret, sig, raw, time.Now().Add(time.Hour)); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: verified", name)
		}
	}

	// No answer: a result, not an error, that says why.
	srv.Close()
	if res := s.Send(t.Context(), seckill.Endpoint{URL: srv.URL, Secret: string(secret)}, ev); res.Status != 0 || (res.Answer != seckill.AnswerRefused && res.Answer != seckill.AnswerClosed) {
		t.Errorf("send to a closed server: %+v", res)
	}
}

// TestDocsReceiverIsThisOne keeps docs/events.md's receiver the one these
// tests run.
func TestDocsReceiverIsThisOne(t *testing.T) {
	self, err := os.ReadFile("eventhook_test.go")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(self), "// docs:begin\n")
	code, _, _ := strings.Cut(rest, "// docs:end\n")
	if !strings.Contains(string(docs), strings.TrimSpace(code)) {
		t.Error("docs/events.md does not hold the receiver of eventhook_test.go (between docs:begin and docs:end) verbatim")
	}
}

var (
	_ = handle
	_ = sql.ErrNoRows
	_ = errors.New
	_ = hex.DecodeString
	_ = hmac.New
	_ = sha256.New
	_ = strconv.Itoa
)
