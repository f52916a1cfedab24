package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/uptrace/bun"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// outboxRow is what the tests read back of order_event.
type outboxRow struct {
	EndpointID int64           `bun:"endpoint_id"`
	OrderID    int64           `bun:"order_id"`
	Sequence   int             `bun:"sequence"`
	Type       string          `bun:"type"`
	Data       json.RawMessage `bun:"data"`
}

func outbox(t *testing.T, db *bun.DB) []outboxRow {
	t.Helper()
	var rows []outboxRow
	if err := db.NewRaw(`SELECT endpoint_id, order_id, sequence, type, data FROM order_event
		ORDER BY endpoint_id, order_id, sequence`).Scan(t.Context(), &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// eventsOf is each order's event types in sequence order, at endpoint ep.
func eventsOf(rows []outboxRow, ep int64) map[int64][]string {
	out := map[int64][]string{}
	for _, r := range rows {
		if r.EndpointID == ep {
			out[r.OrderID] = append(out[r.OrderID], fmt.Sprintf("%d:%s", r.Sequence, r.Type))
		}
	}
	return out
}

func addEndpoint(t *testing.T, s *store.Store, url string) seckill.Endpoint {
	t.Helper()
	e, err := s.AddEndpoint(t.Context(), url, "a-secret-of-sixteen-or-more")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestOutboxWritesEachChangesEvent walks orders through every change an
// event reports and reads the outbox: each change its event, with the next
// sequence of its order, to every enabled endpoint and none to a disabled
// one; nothing while no endpoint is enabled.
func TestOutboxWritesEachChangesEvent(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 10)

	// No endpoint: nothing is written, not even an empty statement's worth.
	off := adm(v.ID, 9, 90)
	off.AdmittedAt = time.Now()
	if _, err := s.PersistOrders(ctx, []seckill.Admission{off}); err != nil {
		t.Fatal(err)
	}
	if rows := outbox(t, db); len(rows) != 0 {
		t.Fatalf("events without an endpoint: %+v", rows)
	}

	a := addEndpoint(t, s, "http://a.example/events")
	b := addEndpoint(t, s, "http://b.example/events")
	c := addEndpoint(t, s, "http://c.example/events")
	if err := s.SetEndpointEnabled(ctx, c.ID, false); err != nil {
		t.Fatal(err)
	}

	var adms []seckill.Admission
	for i := range int64(5) {
		x := adm(v.ID, i+1, 10+i)
		x.AdmittedAt = time.Now()
		adms = append(adms, x)
	}
	second := adm(v.ID, 6, 10) // user 10 again: fails
	second.AdmittedAt = time.Now()
	if _, err := s.PersistOrders(ctx, append(adms, second)); err != nil {
		t.Fatal(err)
	}
	// Persisted again (a redelivered task): no second event.
	if _, err := s.PersistOrders(ctx, adms); err != nil {
		t.Fatal(err)
	}
	paid, cancelled, expired, refunded := adms[0].OrderID, adms[1].OrderID, adms[2].OrderID, adms[3].OrderID

	p, err := s.CreatePayment(ctx, paid, 0, "CNY", paymentID(1))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the provider sends it twice
		if _, err := s.ApplyPaymentEvent(ctx, seckill.PaymentEvent{ID: "pe_1", Type: seckill.EventPaymentSucceeded,
			PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := s.CloseOrder(ctx, cancelled, seckill.OrderCancelled, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `UPDATE voucher_order SET pay_by = now() - interval '1 second' WHERE id = ?`, expired); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ExpireDue(ctx, 100); err != nil || len(got) != 1 {
		t.Fatalf("ExpireDue = %v, %v", got, err)
	}
	// A late success for a cancelled order is owed back, then refunded,
	// refused on a retry... : refund.succeeded, and on another payment
	// refund.failed.
	owed := owe(t, s, v.ID, 7, 70)
	if send, err := s.BeginRefund(ctx, owed.ID, 5); err != nil || !send.Send {
		t.Fatalf("BeginRefund = %+v, %v", send, err)
	}
	if ok, err := s.SettleRefund(ctx, owed.ID, 1, true, false, ""); err != nil || !ok {
		t.Fatalf("SettleRefund = %v, %v", ok, err)
	}
	refusedP := owe(t, s, v.ID, 8, 80)
	if _, err := s.ApplyPaymentEvent(ctx, seckill.PaymentEvent{ID: "pe_r", Type: seckill.EventRefundFailed,
		PaymentID: refusedP.ID, Amount: refusedP.Amount, Currency: refusedP.Currency, Reason: "card closed"}); err != nil {
		t.Fatal(err)
	}
	_ = refunded

	rows := outbox(t, db)
	want := map[int64][]string{
		paid:                     {"1:order.created", "2:order.paid"},
		cancelled:                {"1:order.created", "2:order.cancelled"},
		expired:                  {"1:order.created", "2:order.expired"},
		adms[3].OrderID:          {"1:order.created"},
		adms[4].OrderID:          {"1:order.created"},
		second.OrderID:           {"1:order.failed"},
		seckill.OrderID(v.ID, 7): {"1:order.created", "2:order.cancelled", "3:refund.succeeded"},
		seckill.OrderID(v.ID, 8): {"1:order.created", "2:order.cancelled", "3:refund.failed"},
	}
	for _, ep := range []int64{a.ID, b.ID} {
		if diff := cmp.Diff(want, eventsOf(rows, ep)); diff != "" {
			t.Errorf("endpoint %d: events (-want +got):\n%s", ep, diff)
		}
	}
	if got := eventsOf(rows, c.ID); len(got) != 0 {
		t.Errorf("disabled endpoint got %v", got)
	}

	// The metrics count the enabled endpoints' events only: a disabled
	// one's wait is no lag.
	perEndpoint := int64(len(rows) / 2)
	if err := s.SetEndpointEnabled(ctx, b.ID, false); err != nil {
		t.Fatal(err)
	}
	if st, err := s.EventStats(ctx, 0); err != nil || st.Pending != perEndpoint || st.Oldest <= 0 {
		t.Errorf("stats of every enabled endpoint %+v, %v; want %d pending", st, err, perEndpoint)
	}
	if st, err := s.EventStats(ctx, b.ID); err != nil || st.Pending != perEndpoint {
		t.Errorf("stats of the disabled endpoint %+v, %v; want %d pending", st, err, perEndpoint)
	}

	// order.created's order, which the persistence batch makes itself, is
	// the one Postgres makes for every other event.
	for _, r := range rows {
		if r.Type != "order.created" || r.EndpointID != a.ID || r.OrderID == expired { // its pay_by was moved since
			continue
		}
		var fromSQL string
		if err := db.NewRaw(`SELECT json_strip_nulls(json_build_object('id', o.id::text, 'voucherId', o.voucher_id::text,
			'userId', o.user_id::text, 'status', 'CREATED', 'amount', o.amount,
			'createdAt', to_char(o.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
			'payBy', to_char(o.pay_by AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))
			FROM voucher_order AS o WHERE o.id = ?`, r.OrderID).Scan(ctx, &fromSQL); err != nil {
			t.Fatal(err)
		}
		var got, want map[string]any
		if err := json.Unmarshal(r.Data, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(fromSQL), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("order.created of %d (-postgres +batch):\n%s", r.OrderID, diff)
		}
	}

	// The order as the change left it.
	for _, r := range rows {
		if r.EndpointID != a.ID {
			continue
		}
		var o map[string]any
		if err := json.Unmarshal(r.Data, &o); err != nil {
			t.Fatal(err)
		}
		wantStatus := map[string]string{"order.created": "CREATED", "order.paid": "PAID", "order.cancelled": "CANCELLED",
			"order.expired": "EXPIRED", "order.failed": "FAILED", "refund.succeeded": "CANCELLED", "refund.failed": "CANCELLED"}[r.Type]
		if o["status"] != wantStatus || o["id"] != fmt.Sprint(r.OrderID) || o["voucherId"] != fmt.Sprint(v.ID) {
			t.Errorf("%s of %d: order %s", r.Type, r.OrderID, r.Data)
		}
		switch r.Type {
		case "refund.succeeded", "refund.failed", "order.paid":
			pay, _ := o["payment"].(map[string]any)
			wantPay := map[string]string{"refund.succeeded": "REFUNDED", "refund.failed": "REFUND_FAILED", "order.paid": "SUCCEEDED"}[r.Type]
			if pay == nil || pay["status"] != wantPay {
				t.Errorf("%s of %d: payment %v", r.Type, r.OrderID, o["payment"])
			}
		case "order.failed":
			if o["failureReason"] != store.ReasonUserHasOrder {
				t.Errorf("failed order %s", r.Data)
			}
		}
		if _, err := time.Parse(time.RFC3339, fmt.Sprint(o["createdAt"])); err != nil {
			t.Errorf("createdAt of %s: %v", r.Data, err)
		}
	}
}

// TestOutboxRolledBackChangeWritesNone fails a change's transaction at
// commit, after its event was written: the order stays as it was and no
// event remains; the same change that commits then writes exactly one.
func TestOutboxRolledBackChangeWritesNone(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 10)
	addEndpoint(t, s, "http://a.example/events")
	a := adm(v.ID, 1, 11)
	a.AdmittedAt = time.Now()
	if _, err := s.PersistOrders(ctx, []seckill.Admission{a}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE FUNCTION fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'commit refused'; END $$`,
		`CREATE CONSTRAINT TRIGGER fail_commit AFTER INSERT ON order_event DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION fail_commit()`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CloseOrder(ctx, a.OrderID, seckill.OrderCancelled, 0); err == nil {
		t.Fatal("CloseOrder committed past the failing trigger")
	}
	b := adm(v.ID, 2, 12)
	b.AdmittedAt = time.Now()
	if _, err := s.PersistOrders(ctx, []seckill.Admission{b}); err == nil {
		t.Fatal("PersistOrders committed past the failing trigger")
	}
	o, err := s.Order(ctx, a.OrderID)
	if err != nil || o.Status != seckill.OrderCreated {
		t.Fatalf("order after the rollback: %+v, %v", o, err)
	}
	if _, err := s.Order(ctx, b.OrderID); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Fatalf("rolled back order: %v", err)
	}
	if diff := cmp.Diff(map[int64][]string{a.OrderID: {"1:order.created"}}, eventsOf(outbox(t, db), 1)); diff != "" {
		t.Fatalf("events after the rollbacks (-want +got):\n%s", diff)
	}

	if _, err := db.ExecContext(ctx, `DROP TRIGGER fail_commit ON order_event`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CloseOrder(ctx, a.OrderID, seckill.OrderCancelled, 0); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64][]string{a.OrderID: {"1:order.created", "2:order.cancelled"}}, eventsOf(outbox(t, db), 1)); diff != "" {
		t.Fatalf("events after the commit (-want +got):\n%s", diff)
	}
}

// TestDeliverDueKeepsEachOrdersOrder claims with eight deliverers at once
// from an outbox of many orders with several events each: every event is
// handed out exactly once, and an order's event only after its previous
// one was recorded delivered; delivered events are kept for the pruning,
// or deleted at once.
func TestDeliverDueKeepsEachOrdersOrder(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) { testDeliverDueOrder(t, keep) })
	}
}

func testDeliverDueOrder(t *testing.T, keep bool) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 400)
	e := addEndpoint(t, s, "http://a.example/events")
	var adms []seckill.Admission
	for i := range int64(300) {
		x := adm(v.ID, i+1, 10+i)
		x.AdmittedAt = time.Now()
		adms = append(adms, x)
	}
	if _, err := s.PersistOrders(ctx, adms); err != nil {
		t.Fatal(err)
	}
	for _, x := range adms[:150] {
		if _, err := s.CloseOrder(ctx, x.OrderID, seckill.OrderCancelled, 0); err != nil {
			t.Fatal(err)
		}
	}

	var (
		mu        sync.Mutex
		delivered = map[int64]int{} // order → last sequence delivered
		count     int
		wg        sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for idle := 0; idle < 3; {
				n, err := s.DeliverDue(ctx, e, 40, keep, func(ctx context.Context, due []seckill.Delivery) ([]seckill.Attempt, seckill.EndpointHealth) {
					out := make([]seckill.Attempt, len(due))
					mu.Lock()
					defer mu.Unlock()
					for i, d := range due {
						if delivered[d.OrderID] != d.Sequence-1 {
							t.Errorf("order %d: sequence %d handed out after %d", d.OrderID, d.Sequence, delivered[d.OrderID])
						}
						delivered[d.OrderID] = d.Sequence
						count++
						out[i] = seckill.Attempt{OrderID: d.OrderID, Sequence: d.Sequence, Result: seckill.SendResult{Status: 200}}
					}
					return out, seckill.EndpointHealth{OK: true}
				})
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					idle++
					time.Sleep(10 * time.Millisecond)
				} else {
					idle = 0
				}
			}
		})
	}
	wg.Wait()
	if count != 450 {
		t.Errorf("delivered %d events, want 450", count)
	}
	kept := int64(0)
	if keep {
		kept = 450
	}
	st, err := s.EventStats(ctx, e.ID)
	if err != nil || st.Pending != 0 || st.Delivered != kept {
		t.Errorf("stats %+v, %v", st, err)
	}
	if n, err := s.PruneDelivered(ctx, time.Now().Add(time.Hour), 1000); err != nil || int64(n) != kept {
		t.Errorf("PruneDelivered = %d, %v", n, err)
	}
	if rows := outbox(t, db); len(rows) != 0 {
		t.Errorf("%d events left", len(rows))
	}
}

// TestDeliverDueDeadHoldsBackAndRedelivers: a dead event holds back its
// order's later ones until it is redelivered, and a range redelivers
// delivered events too.
func TestDeliverDueDeadHoldsBackAndRedelivers(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 10)
	e := addEndpoint(t, s, "http://a.example/events")
	a := adm(v.ID, 1, 11)
	a.AdmittedAt = time.Now()
	if _, err := s.PersistOrders(ctx, []seckill.Admission{a}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CloseOrder(ctx, a.OrderID, seckill.OrderCancelled, 0); err != nil {
		t.Fatal(err)
	}
	deliver := func(ok, dead bool) []string {
		t.Helper()
		var got []string
		if _, err := s.DeliverDue(ctx, e, 10, true, func(ctx context.Context, due []seckill.Delivery) ([]seckill.Attempt, seckill.EndpointHealth) {
			out := make([]seckill.Attempt, len(due))
			for i, d := range due {
				got = append(got, d.ID)
				st := 500
				if ok {
					st = 200
				}
				out[i] = seckill.Attempt{OrderID: d.OrderID, Sequence: d.Sequence, Result: seckill.SendResult{Status: st, Answer: "no"}, Dead: dead}
			}
			return out, seckill.EndpointHealth{OK: ok}
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := seckill.EventID(a.OrderID, 1)
	if got := deliver(false, true); !cmp.Equal(got, []string{first}) {
		t.Fatalf("first round %v", got)
	}
	if got := deliver(true, false); len(got) != 0 {
		t.Fatalf("a dead event let %v through", got)
	}
	dead, err := s.Deliveries(ctx, seckill.DeliveryFilter{EndpointID: e.ID, State: seckill.DeliveryDead})
	if err != nil || len(dead) != 1 || dead[0].ID != first || dead[0].LastStatus != 500 || dead[0].Attempts != 1 {
		t.Fatalf("dead: %+v, %v", dead, err)
	}
	if n, err := s.Redeliver(ctx, seckill.RedeliverFilter{EndpointID: e.ID, OrderID: a.OrderID, Sequence: 1}); err != nil || n != 1 {
		t.Fatalf("Redeliver = %d, %v", n, err)
	}
	if got := deliver(true, false); !cmp.Equal(got, []string{first}) {
		t.Fatalf("after redelivery %v", got)
	}
	if got := deliver(true, false); !cmp.Equal(got, []string{seckill.EventID(a.OrderID, 2)}) {
		t.Fatalf("then %v", got)
	}
	n, err := s.Redeliver(ctx, seckill.RedeliverFilter{EndpointID: e.ID, From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)})
	if err != nil || n != 2 {
		t.Fatalf("Redeliver range = %d, %v", n, err)
	}
	if got := deliver(true, false); !cmp.Equal(got, []string{first}) {
		t.Fatalf("range redelivery, first %v", got)
	}
}

// TestDeleteEndpoint: only a disabled endpoint can be deleted, and its
// deliveries go with it; the environment's endpoint too, by an operator.
func TestDeleteEndpoint(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 10)
	keep := addEndpoint(t, s, "http://keep.example/events")
	gone := addEndpoint(t, s, "http://gone.example/events")
	if err := s.DeclareEnvEndpoint(ctx, "http://env.example/events", "env-secret-env-secret"); err != nil {
		t.Fatal(err)
	}
	// Five deliveries each, deleted two a statement: three chunks.
	store.SetEndpointDeleteChunk(t, 2)
	var adms []seckill.Admission
	for i := range int64(5) {
		a := adm(v.ID, i+1, 11+i)
		a.AdmittedAt = time.Now()
		adms = append(adms, a)
	}
	if _, err := s.PersistOrders(ctx, adms); err != nil {
		t.Fatal(err)
	}
	perEndpoint := func() map[int64]int {
		out := map[int64]int{}
		for _, r := range outbox(t, db) {
			out[r.EndpointID]++
		}
		return out
	}
	if n := perEndpoint(); n[keep.ID] != 5 || n[gone.ID] != 5 {
		t.Fatalf("deliveries per endpoint %v, want five each", n)
	}

	if err := s.DeleteEndpoint(ctx, gone.ID); seckill.ErrorCode(err) != seckill.ECONFLICT {
		t.Errorf("deleting an enabled endpoint: %v, want CONFLICT", err)
	}
	if n := perEndpoint(); n[gone.ID] != 5 {
		t.Errorf("the enabled endpoint kept %d deliveries of 5", n[gone.ID])
	}
	eps, err := s.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var env int64
	for _, e := range eps {
		if e.Source == seckill.EndpointEnv {
			env = e.ID
		}
	}
	if err := s.DeleteEndpoint(ctx, env); seckill.ErrorCode(err) != seckill.ECONFLICT {
		t.Errorf("deleting the environment's enabled endpoint: %v, want CONFLICT", err)
	}
	if err := s.DeleteEndpoint(ctx, 99999); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("deleting no endpoint: %v, want NOT_FOUND", err)
	}
	if n, err := store.DeleteDeliveries(s, ctx, gone.ID); n != 0 || err != nil {
		t.Errorf("deleting an enabled endpoint's deliveries: %d statements, %v; want none", n, err)
	}
	if err := s.SetEndpointEnabled(ctx, gone.ID, false); err != nil {
		t.Fatal(err)
	}
	if n, err := store.DeleteDeliveries(s, ctx, gone.ID); n != 3 || err != nil {
		t.Errorf("deleting 5 deliveries 2 at a time: %d statements, %v; want 3", n, err)
	}
	if n := perEndpoint(); n[gone.ID] != 0 || n[keep.ID] != 5 {
		t.Errorf("deliveries per endpoint after deleting the disabled one's: %v", n)
	}
	if err := s.DeleteEndpoint(ctx, gone.ID); err != nil {
		t.Fatalf("deleting a disabled endpoint: %v", err)
	}
	if n := perEndpoint(); n[gone.ID] != 0 || n[keep.ID] != 5 {
		t.Errorf("deliveries per endpoint after the delete %v, want the deleted one's gone and the other's kept", n)
	}
	if err := s.DeleteEndpoint(ctx, gone.ID); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("deleting it again: %v, want NOT_FOUND", err)
	}
	eps, err = s.Endpoints(ctx)
	if err != nil || len(eps) != 2 {
		t.Errorf("endpoints after the delete: %+v, %v; want the kept one and the environment's", eps, err)
	}
}

// TestEnvEndpointDeclaredNotWithdrawn: an instance that starts without
// SECKILL_EVENTS_WEBHOOK_URL declares nothing, so the endpoint another
// declared stays enabled and every change keeps writing its events (the
// old start disabled it for every instance); only an operator disables or
// deletes it, and an instance with the variable declares it again.
func TestEnvEndpointDeclaredNotWithdrawn(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 10)
	if err := s.DeclareEnvEndpoint(ctx, "http://env.example/events", "env-secret-env-secret"); err != nil {
		t.Fatal(err)
	}
	// Another instance, without the variable, on the same database.
	other := store.New(db)
	if on, err := other.RefreshEvents(ctx); err != nil || !on {
		t.Fatalf("an instance without the variable: events on %v, %v; want on", on, err)
	}
	a := adm(v.ID, 1, 11)
	a.AdmittedAt = time.Now()
	if _, err := other.PersistOrders(ctx, []seckill.Admission{a}); err != nil {
		t.Fatal(err)
	}
	if rows := outbox(t, db); len(rows) != 1 || rows[0].OrderID != a.OrderID {
		t.Fatalf("outbox after an order made by the instance without the variable: %+v", rows)
	}
	eps, err := s.Endpoints(ctx)
	if err != nil || len(eps) != 1 || !eps[0].Enabled {
		t.Fatalf("endpoints %+v, %v", eps, err)
	}
	// The operator withdraws it; an instance with the variable declares
	// it again, enabled.
	if err := s.SetEndpointEnabled(ctx, eps[0].ID, false); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteEndpoint(ctx, eps[0].ID); err != nil {
		t.Fatal(err)
	}
	if on, err := other.RefreshEvents(ctx); err != nil || on {
		t.Fatalf("after the operator deleted it: events on %v, %v", on, err)
	}
	if err := other.DeclareEnvEndpoint(ctx, "http://env.example/v2", "env-secret-env-secret"); err != nil {
		t.Fatal(err)
	}
	if eps, err := s.Endpoints(ctx); err != nil || len(eps) != 1 || !eps[0].Enabled || eps[0].URL != "http://env.example/v2" {
		t.Fatalf("declared again: %+v, %v", eps, err)
	}
}

// TestAddEndpointPolicy: AddEndpoint refuses what the endpoint policy
// refuses (production: internal addresses, credentials), saying why.
func TestAddEndpointPolicy(t *testing.T) {
	_, s := newStore(t)
	s.SetEndpointPolicy(seckill.EndpointPolicy{Restrict: true})
	for _, u := range []string{"http://169.254.169.254/latest", "http://metadata.google.internal/", "http://[::ffff:127.0.0.1]/",
		"http://2130706433/", "http://10.0.0.1/", "https://u:p@hooks.example.com/"} {
		if _, err := s.AddEndpoint(t.Context(), u, "a-secret-of-sixteen-or-more"); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("AddEndpoint(%q) = %v, want INVALID_INPUT", u, err)
		}
		if err := s.DeclareEnvEndpoint(t.Context(), u, "a-secret-of-sixteen-or-more"); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("DeclareEnvEndpoint(%q) = %v, want INVALID_INPUT", u, err)
		}
	}
	if eps, err := s.Endpoints(t.Context()); err != nil || len(eps) != 0 {
		t.Fatalf("endpoints %+v, %v", eps, err)
	}
	if _, err := s.AddEndpoint(t.Context(), "https://hooks.example.com/seckill", "a-secret-of-sixteen-or-more"); err != nil {
		t.Fatal(err)
	}
}
