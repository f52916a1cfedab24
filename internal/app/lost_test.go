package app

import (
	"testing"
	"time"

	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// An order id of an epoch its campaign has left, which nothing records,
// reads NOT_FOUND for whoever asks: it used to read as a FAILED order of
// the caller's own, for any caller who guessed one (#19).
func TestLostIDIsNotFoundForAStranger(t *testing.T) {
	e := newTestEnv(t, "")
	voucher := e.createCampaign(5)
	epochs, err := e.app.Store.CampaignEpochs(e.ctx, voucher)
	if err != nil {
		t.Fatal(err)
	}
	epoch := epochs.Campaign
	if err := testenv.FlushRedis(e.ctx, e.app.Redis); err != nil {
		t.Fatal(err)
	}
	if err := e.app.Purchases.RebuildCampaign(e.ctx, voucher); err != nil { // the campaign moves on
		t.Fatal(err)
	}
	guess := seckill.OrderID(voucher, epoch<<22|17) // an id of the earlier epoch nobody was given
	for _, u := range []*seckill.User{{ID: 777}, {ID: 1, Admin: true}} {
		if o, err := e.app.Purchases.Order(seckill.NewContextWithUser(e.ctx, u), guess); seckill.ErrorCode(err) != seckill.ENOTFOUND {
			t.Errorf("order %d as %+v: %+v, %v; want NOT_FOUND", guess, u, o, err)
		}
	}
}

// An admission Redis lost after this process answered ACCEPTED, whose
// campaign another process rebuilt without it, is recorded by this
// process's reconciler as FAILED for its buyer, and for nobody else.
func TestLostAdmissionRecordedForItsBuyer(t *testing.T) {
	e := newTestEnv(t, "") // no workers: the admission stays pending
	voucher := e.createCampaign(5)
	res, err := e.app.Purchases.Purchase(asUser(e.ctx, 41, false), voucher)
	if err != nil || res.Outcome != seckill.OutcomeAccepted {
		t.Fatalf("purchase: %+v, %v", res, err)
	}
	// Redis restarts empty, and another process rebuilds the campaign
	// (it moves the epoch on in Postgres) before this one looks.
	if err := testenv.FlushRedis(e.ctx, e.app.Redis); err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.Store.RebuildCampaign(e.ctx, voucher, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.Purchases.Reconcile(e.ctx, time.Hour, 100); err != nil {
		t.Fatal(err)
	}
	o, err := e.app.Purchases.Order(asUser(e.ctx, 41, false), res.OrderID)
	if err != nil || o.Status != seckill.OrderFailed || o.FailureReason != seckill.FailureLost || o.UserID != 41 {
		t.Fatalf("the buyer reads %+v, %v; want FAILED (lost)", o, err)
	}
	if _, err := e.app.Purchases.Order(asUser(e.ctx, 42, false), res.OrderID); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("a stranger reads %v, want NOT_FOUND", err)
	}
}

// A campaign this process rebuilds after Redis lost its state keeps the
// admissions this process answered ACCEPTED: they were promised, and
// Postgres takes them before the campaign moves on.
func TestRebuildKeepsWhatThisProcessAdmitted(t *testing.T) {
	e := newTestEnv(t, "") // no workers
	voucher := e.createCampaign(5)
	var orders []int64
	for u := range int64(3) {
		res, err := e.app.Purchases.Purchase(asUser(e.ctx, 60+u, false), voucher)
		if err != nil || res.Outcome != seckill.OutcomeAccepted {
			t.Fatalf("purchase: %+v, %v", res, err)
		}
		orders = append(orders, res.OrderID)
	}
	if err := testenv.FlushRedis(e.ctx, e.app.Redis); err != nil {
		t.Fatal(err)
	}
	if err := e.app.Purchases.RebuildCampaign(e.ctx, voucher); err != nil {
		t.Fatal(err)
	}
	for i, id := range orders {
		if o, err := e.app.Purchases.Order(asUser(e.ctx, 60+int64(i), false), id); err != nil || o.Status != seckill.OrderCreated {
			t.Errorf("order %d after the rebuild: %+v, %v; want CREATED", id, o, err)
		}
	}
	if r := e.remaining(voucher); r != 2 {
		t.Errorf("remaining %d after the rebuild, want 2", r)
	}
}
