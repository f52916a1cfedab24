package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// TestUnreplicatedAdmission runs purchases against a master whose one
// required replica stalls (SIGSTOP). An admission the replica does not
// confirm must not be answered ACCEPTED on Redis's word alone: it is
// persisted to Postgres before the answer, or, when Postgres cannot take it
// either, released (unit and buyer slot back) and answered UNAVAILABLE.
func TestUnreplicatedAdmission(t *testing.T) {
	master := testenv.StartRedisServer(t)
	replica := testenv.StartReplica(t, master)
	e := newTestEnv(t, "", func(m map[string]string) {
		m["SECKILL_REDIS_URL"] = master.URL()
		m["SECKILL_REDIS_MIN_REPLICAS"] = "1"
		m["SECKILL_REDIS_WAIT_TIMEOUT"] = "1s" // a replica that is up confirms within it, even on a loaded machine
		m["SECKILL_USER_RATE"] = "0"
	})
	ctx := e.ctx
	voucher := e.createCampaign(10)
	buy := func(user int64) (purchase, error) {
		return e.buy(nil, e.token(user, false), voucher)
	}

	// The replica confirms: an ordinary acceptance, left to the workers.
	if p, err := buy(1001); err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("buy with the replica up: %+v, %v", p, err)
	}

	replica.Pause()
	defer replica.Resume()

	// The replica is stalled: the order is in Postgres when its buyer hears
	// ACCEPTED (no worker runs yet), and no longer pending in Redis.
	p, err := buy(1002)
	if err != nil || p.Outcome != "ACCEPTED" || p.OrderID == nil {
		t.Fatalf("buy with the replica stalled: %+v, %v; want ACCEPTED", p, err)
	}
	id, _ := strconv.ParseInt(*p.OrderID, 10, 64)
	o, err := e.app.Store.Order(ctx, id)
	if err != nil || o.Status != seckill.OrderCreated || o.UserID != 1002 {
		t.Fatalf("order %d in Postgres right after ACCEPTED: %+v, %v; want CREATED for user 1002", id, o, err)
	}
	if _, err := e.app.Admitter.Pending(ctx, id); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("order %d is still pending in Redis (%v); want it acknowledged", id, err)
	}
	if r, s := e.remaining(voucher), e.pgStock(voucher); r != 8 || s != 9 {
		t.Errorf("Redis remaining %d, Postgres stock %d; want 8 and 9", r, s)
	}
	if n := testutil.ToFloat64(e.app.Metrics.Funnel.WithLabelValues(seckill.LayerAdmitted)); n != 2 {
		t.Errorf("funnel: %.0f admitted, want 2 (an admission its replica did not confirm counts too)", n)
	}

	// Postgres refuses what Redis admitted (here Redis forgot that user
	// 1002 holds an order; as after a lost write): the buyer hears the
	// refusal, not ACCEPTED for an order that reads FAILED, and the unit
	// goes back on sale.
	if err := e.app.Redis.SRem(ctx, fmt.Sprintf("seckill:{v%d}:buyers", voucher), 1002).Err(); err != nil {
		t.Fatal(err)
	}
	if p, err := buy(1002); err != nil || p.Outcome != "ALREADY_PURCHASED" || p.OrderID != nil {
		t.Fatalf("a second order of user 1002, refused by Postgres: %+v, %v; want ALREADY_PURCHASED", p, err)
	}
	if r, s := e.remaining(voucher), e.pgStock(voucher); r != 8 || s != 9 {
		t.Errorf("after the refusal: Redis remaining %d, Postgres stock %d; want 8 and 9", r, s)
	}

	// Postgres cannot take it either (its orders table is locked): the
	// admission is released and the buyer told UNAVAILABLE.
	tx, err := e.app.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "LOCK TABLE voucher_order IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err = buy(1003)
	took := time.Since(began)
	_ = tx.Rollback()
	if err == nil || !strings.Contains(err.Error(), "(UNAVAILABLE)") {
		t.Fatalf("buy with the replica stalled and Postgres locked: %v; want UNAVAILABLE", err)
	}
	t.Logf("UNAVAILABLE after %s", took)
	if r := e.remaining(voucher); r != 8 {
		t.Errorf("Redis remaining %d after the release, want 8 (the unit back)", r)
	}
	if isBuyer, err := e.app.Redis.SIsMember(ctx, fmt.Sprintf("seckill:{v%d}:buyers", voucher), 1003).Result(); err != nil || isBuyer {
		t.Errorf("user 1003 still holds a buyer slot in Redis (%v)", err)
	}
	pending, err := e.app.Admitter.PendingOf(ctx, voucher)
	if err != nil || len(pending) != 1 || pending[0].UserID != 1001 {
		t.Errorf("pending admissions %+v, %v; want only user 1001's", pending, err)
	}

	// Both back: the released buyer buys again, and the workers persist
	// the rest.
	replica.Resume()
	if p, err := buy(1003); err != nil || p.Outcome != "ACCEPTED" {
		t.Fatalf("buy again once the replica is back: %+v, %v", p, err)
	}
	e.worker()
	eventually(t, 10*time.Second, "3 rows and stock 7 in Postgres", func() bool {
		return e.rows(voucher) == 3 && e.pgStock(voucher) == 7
	})
	if r := e.remaining(voucher); r != 7 {
		t.Errorf("Redis remaining %d, want 7", r)
	}
}

// stalledReplicaSale starts a master whose one required replica is
// stalled (SIGSTOP until the test ends; WAIT times out after 200 ms), an
// app on it, a campaign of 10 units, and a purchase path whose order store
// is wrap's wrapping of the app's.
func stalledReplicaSale(t *testing.T, wrap func(seckill.OrderStore) seckill.OrderStore) (*testEnv, int64, *seckill.Purchases) {
	t.Helper()
	master := testenv.StartRedisServer(t)
	replica := testenv.StartReplica(t, master)
	e := newTestEnv(t, "", func(m map[string]string) {
		m["SECKILL_REDIS_URL"] = master.URL()
		m["SECKILL_REDIS_MIN_REPLICAS"] = "1"
		m["SECKILL_REDIS_WAIT_TIMEOUT"] = "200ms"
		m["SECKILL_USER_RATE"] = "0"
	})
	voucher := e.createCampaign(10)
	p := e.purchasesWith(t, func(d *seckill.PurchaseDeps) { d.Orders = wrap(e.app.Store) })
	replica.Pause()
	t.Cleanup(replica.Resume)
	return e, voucher, p
}

// lostReply is an OrderStore whose first PersistOrders commits and then
// reports an error, as a reply lost after Postgres committed.
type lostReply struct {
	seckill.OrderStore
	calls atomic.Int32
}

func (l *lostReply) PersistOrders(ctx context.Context, adms []seckill.Admission) ([]seckill.PersistOutcome, error) {
	out, err := l.OrderStore.PersistOrders(ctx, adms)
	if l.calls.Add(1) == 1 && err == nil {
		return nil, errors.New("reply lost after the commit")
	}
	return out, err
}

// TestUnreplicatedWriteReplyLost: the synchronous write of an admission its
// replica did not confirm commits, but its reply is lost. The write is
// asked once more, which finds the order: the buyer hears ACCEPTED, and
// the unit is not released for someone else (Postgres holds its order).
// Before, the unit and the buyer's slot went back to Redis and the buyer
// heard UNAVAILABLE.
func TestUnreplicatedWriteReplyLost(t *testing.T) {
	orders := &lostReply{}
	e, voucher, p := stalledReplicaSale(t, func(s seckill.OrderStore) seckill.OrderStore { orders.OrderStore = s; return orders })
	res, err := p.PurchaseWith(asUser(e.ctx, 2001, false), voucher, nil, "")
	if err != nil || res.Outcome != seckill.OutcomeAccepted {
		t.Fatalf("purchase whose write's reply was lost: %+v, %v; want ACCEPTED", res, err)
	}
	if n := orders.calls.Load(); n != 2 {
		t.Errorf("%d writes, want 2 (the second answering for the committed one)", n)
	}
	if r, s := e.remaining(voucher), e.pgStock(voucher); r != 9 || s != 9 {
		t.Errorf("Redis remaining %d, Postgres stock %d; want 9 and 9 (the unit not released)", r, s)
	}
	if o, err := e.app.Store.Order(e.ctx, res.OrderID); err != nil || o.UserID != 2001 {
		t.Errorf("order %d: %+v, %v", res.OrderID, o, err)
	}
}

// commitLostThenAway is an OrderStore whose first PersistOrders commits
// and loses its answer (the store says ErrOutcomeUnknown), after which
// Postgres is out of reach.
type commitLostThenAway struct {
	seckill.OrderStore
	calls atomic.Int32
}

func (c *commitLostThenAway) PersistOrders(ctx context.Context, adms []seckill.Admission) ([]seckill.PersistOutcome, error) {
	if c.calls.Add(1) > 1 {
		return nil, errors.New(`persist: database "seckill" is not currently accepting connections`)
	}
	if _, err := c.OrderStore.PersistOrders(ctx, adms); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("persist: %w: read tcp: connection reset by peer", seckill.ErrOutcomeUnknown)
}

// TestUnreplicatedCommitLostPostgresAway: the synchronous write of an
// admission its replica did not confirm commits and its answer is lost,
// and the retry cannot reach Postgres. Postgres holds the order, so its
// unit must not go back on sale: the buyer hears UNAVAILABLE, the
// admission stays pending, and once Postgres is back the workers persist
// it (finding the order) and Redis and Postgres agree; the buyer's retry
// reads ALREADY_PURCHASED. Before, the unit and the buyer's slot were
// released: Redis held one unit more than Postgres, which a later buyer
// would have been told ACCEPTED for and Postgres would have failed.
func TestUnreplicatedCommitLostPostgresAway(t *testing.T) {
	e, voucher, p := stalledReplicaSale(t, func(s seckill.OrderStore) seckill.OrderStore { return &commitLostThenAway{OrderStore: s} })
	_, err := p.PurchaseWith(asUser(e.ctx, 3001, false), voucher, nil, "")
	if seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Fatalf("purchase whose commit's answer was lost, Postgres away: %v; want UNAVAILABLE", err)
	}
	if r, s := e.remaining(voucher), e.pgStock(voucher); r != 9 || s != 9 {
		t.Errorf("Redis remaining %d, Postgres stock %d; want 9 and 9 (the unit kept: Postgres holds its order)", r, s)
	}
	pending, err := e.app.Admitter.PendingOf(e.ctx, voucher)
	if err != nil || len(pending) != 1 || pending[0].UserID != 3001 {
		t.Fatalf("pending admissions %+v, %v; want user 3001's", pending, err)
	}
	e.worker() // on the real store: Postgres is back
	eventually(t, 10*time.Second, "the admission persisted and no longer pending", func() bool {
		left, err := e.app.Admitter.PendingOf(e.ctx, voucher)
		return err == nil && len(left) == 0
	})
	if n, r, s := e.rows(voucher), e.remaining(voucher), e.pgStock(voucher); n != 1 || r != 9 || s != 9 {
		t.Errorf("%d rows, Redis remaining %d, Postgres stock %d; want 1, 9 and 9", n, r, s)
	}
	if res, err := p.PurchaseWith(asUser(e.ctx, 3001, false), voucher, nil, ""); err != nil || res.Outcome != seckill.OutcomeAlreadyPurchased {
		t.Errorf("the buyer's retry: %+v, %v; want ALREADY_PURCHASED", res, err)
	}
}
