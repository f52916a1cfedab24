package seckill

import (
	"context"
	"errors"
	"time"
)

// fallbackPersistTimeout bounds the synchronous write to Postgres of an
// admission that Redis's replicas did not confirm: the buyer waits for it.
const fallbackPersistTimeout = 2 * time.Second

// secureUnreplicated decides an admission that Redis made but that its
// replicas did not confirm in time (ErrNotReplicated): a failover now could
// forget it, and its unit and buyer slot with it, so it must not be
// answered ACCEPTED on Redis's word. It is made durable in Postgres at once,
// as a worker would, and then answered ACCEPTED; should Postgres refuse it
// (the user holds an order already, no stock left, the sale's state was
// lost since), the buyer hears that instead (refusedByPostgres), not
// ACCEPTED for an order that reads FAILED. If Postgres cannot
// take it, the admission is released in Redis (unit and buyer slot back)
// and the buyer is told UNAVAILABLE: nothing was bought. So the admission
// ends persisted or released, not both and not neither, except in two
// cases, both documented in docs/design.md, where the buyer hears UNAVAILABLE
// and the admission stays pending, for the reconciler to persist: a COMMIT
// whose answer was lost (the store says ErrOutcomeUnknown) that the retry
// could not settle, so the order may stand in Postgres and its unit must
// not go back on sale; and a release that cannot reach Redis. A retry of
// the buyer then answers ALREADY_PURCHASED.
func (p *Purchases) secureUnreplicated(ctx context.Context, adm Admission) (PurchaseResult, error) {
	ctx = context.WithoutCancel(ctx) // the decision must finish, whoever hangs up
	persist := func(timeout time.Duration) ([]PersistOutcome, error) {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return p.orders.PersistOrders(pctx, []Admission{adm})
	}
	outcomes, err := persist(fallbackPersistTimeout)
	mayStand := errors.Is(err, ErrOutcomeUnknown)
	if err != nil {
		// A failure may come after Postgres committed (the deadline passed
		// during the commit) or while the reconciler persisted the same
		// admission: ask once more, which answers for an order Postgres
		// holds already, before releasing a unit whose order may stand.
		outcomes, err = persist(fallbackPersistTimeout / 2)
		mayStand = mayStand || errors.Is(err, ErrOutcomeUnknown)
	}
	if err == nil {
		if err := p.settle(ctx, outcomes); err != nil {
			// Postgres holds the decision; Redis learns it from the
			// reconciler, which persists the pending admission again.
			p.logger.WarnContext(ctx, "settle a synchronously persisted admission", "order_id", adm.OrderID, "err", err)
		}
		if len(outcomes) == 1 && outcomes[0].Status == OrderFailed {
			// Postgres refused it before anyone was told: the buyer hears
			// why, not ACCEPTED for an order that reads FAILED.
			return refusedByPostgres(outcomes[0].Reason)
		}
		return PurchaseResult{Outcome: OutcomeAccepted, OrderID: adm.OrderID}, nil
	}
	if mayStand {
		// A COMMIT went unanswered and the retry could not say whether it
		// took: Postgres may hold the order. Releasing its unit would put
		// it on sale twice in Redis (Postgres's stock guard would fail the
		// second buyer's order after an ACCEPTED). The admission stays
		// pending instead, handed to the workers (or, should that fail,
		// to the reconciler), whose write finds the order or makes it once
		// Postgres answers; the buyer's retry reads ALREADY_PURCHASED.
		p.logger.WarnContext(ctx, "unreplicated admission left pending: Postgres may have committed it; the workers will persist it",
			"order_id", adm.OrderID, "err", err)
		if qerr := p.queue.EnqueuePersist(ctx, adm); qerr != nil {
			p.logger.WarnContext(ctx, "enqueue admission; the reconciler will retry", "order_id", adm.OrderID, "err", qerr)
		}
		return PurchaseResult{}, ErrNotReplicated
	}
	released, rerr := p.outbox.Release(ctx, adm, false)
	switch {
	case rerr != nil:
		p.logger.ErrorContext(ctx, "unreplicated admission neither persisted nor released; the reconciler will persist it",
			"order_id", adm.OrderID, "persist_err", err, "release_err", rerr)
	case released:
		// Counted (seckill_admissions_unreplicated_total); a stalled
		// replica and a Postgres outage are logged where they are seen.
		p.logger.DebugContext(ctx, "unreplicated admission released: Postgres could not take it",
			"order_id", adm.OrderID, "err", err)
	}
	return PurchaseResult{}, ErrNotReplicated
}

// refusedByPostgres is the answer to an admission that Postgres failed
// while its buyer waited (the synchronous write above): the user holds an
// order already, or no stock is left, as the store decided; for any other
// reason (Redis lost the sale's state since, an id conflict) the buyer may
// try again, and a retry is admitted anew.
func refusedByPostgres(reason string) (PurchaseResult, error) {
	switch reason {
	case FailureUserHasOrder:
		return PurchaseResult{Outcome: OutcomeAlreadyPurchased}, nil
	case FailureNoStock:
		return PurchaseResult{Outcome: OutcomeSoldOut}, nil
	}
	return PurchaseResult{}, Errorf(EUNAVAILABLE, "the order could not be made durable; try again in a moment")
}
