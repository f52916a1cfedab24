package app

import (
	"time"

	"seckill/internal/seckill"
)

// fataler is what the helpers need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// The domain's parts as the app builds them, with some dependencies
// changed, for tests that put a double or a clock in one place.

// purchasesWith builds Purchases over the app's adapters, then mod.
func (e *testEnv) purchasesWith(tb fataler, mod func(d *seckill.PurchaseDeps)) *seckill.Purchases {
	tb.Helper()
	d := seckill.PurchaseDeps{Orders: e.app.Store, Campaigns: e.app.Store, Admitter: e.app.Admitter,
		Outbox: e.app.Admitter, Rebuilder: e.app.Admitter, Queue: e.app.Enqueuer, Bus: e.app.Bus,
		Limiter: seckill.NoLimit{}, Challenger: e.app.Challenger, Logger: e.app.Logger, Now: time.Now}
	if mod != nil {
		mod(&d)
	}
	p, err := seckill.NewPurchases(d)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// challengesWith builds Challenges over store with the app's challenger.
func (e *testEnv) challengesWith(tb fataler, store seckill.CatalogStore, ch *seckill.Challenger, now func() time.Time) *seckill.Challenges {
	tb.Helper()
	if ch == nil {
		ch = e.app.Challenger
	}
	c, err := seckill.NewChallenges(store, ch, now)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// catalogWith builds the Catalog over the app's adapters, then mod.
func (e *testEnv) catalogWith(tb fataler, mod func(d *seckill.CatalogDeps)) *seckill.Catalog {
	tb.Helper()
	d := seckill.CatalogDeps{Store: e.app.Store, Auditor: e.app.Store, Admission: e.app.Admitter, Admitter: e.app.Admitter,
		Challenges: e.app.Challenges, Logger: e.app.Logger, Now: time.Now, PayWindow: e.app.Config.PayWindow}
	if mod != nil {
		mod(&d)
	}
	c, err := seckill.NewCatalog(d)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// buyPersisted buys a unit for user and persists the order at once, as a
// worker would, for tests that run none.
func (e *testEnv) buyPersisted(voucherID, user int64) int64 {
	e.t.Helper()
	res, err := e.app.Purchases.Purchase(asUser(e.ctx, user, false), voucherID)
	if err != nil || res.Outcome != seckill.OutcomeAccepted {
		e.t.Fatalf("purchase by %d: %+v, %v", user, res, err)
	}
	if adm, err := e.app.Admitter.Pending(e.ctx, res.OrderID); err == nil {
		if err := e.app.Purchases.PersistAdmissions(e.ctx, []seckill.Admission{*adm}); err != nil {
			e.t.Fatal(err)
		}
	}
	eventually(e.t, 10*time.Second, "order CREATED", func() bool { return e.status(res.OrderID) == seckill.OrderCreated })
	return res.OrderID
}
