package seckill

import (
	"context"
	"time"
)

// fallbackPersistTimeout bounds the synchronous write to Postgres of an
// admission that Redis's replicas did not confirm: the buyer waits for it.
const fallbackPersistTimeout = 2 * time.Second

// secureUnreplicated decides an admission that Redis made but that its
// replicas did not confirm in time (ErrNotReplicated): a failover now could
// forget it, and its unit and buyer slot with it, so it must not be
// answered ACCEPTED on Redis's word. It is made durable in Postgres at once,
// as a worker would, and then answered ACCEPTED (its order reads CREATED,
// or FAILED with a reason as for any accepted order). If Postgres cannot
// take it, the admission is released in Redis (unit and buyer slot back)
// and the buyer is told UNAVAILABLE: nothing was bought. So the admission
// ends persisted or released, not both and not neither, except in two
// windows that cannot be told apart from here, both documented in the
// README: a Postgres commit whose reply was lost before the release (the
// row stands; Postgres's stock guard still refuses any oversell), and a
// release that cannot reach Redis (the admission stays pending and the
// reconciler persists it, so a retry answers ALREADY_PURCHASED).
func (s *Service) secureUnreplicated(ctx context.Context, adm Admission) (PurchaseResult, error) {
	ctx = context.WithoutCancel(ctx) // the decision must finish, whoever hangs up
	pctx, cancel := context.WithTimeout(ctx, fallbackPersistTimeout)
	outcomes, err := s.Store.PersistOrders(pctx, []Admission{adm})
	cancel()
	if err == nil {
		if err := s.settle(ctx, outcomes); err != nil {
			// Postgres holds the decision; Redis learns it from the
			// reconciler, which persists the pending admission again.
			s.Logger.WarnContext(ctx, "settle a synchronously persisted admission", "order_id", adm.OrderID, "err", err)
		}
		return PurchaseResult{Outcome: OutcomeAccepted, OrderID: adm.OrderID}, nil
	}
	released, rerr := s.Admitter.Release(ctx, adm, false)
	switch {
	case rerr != nil:
		s.Logger.ErrorContext(ctx, "unreplicated admission neither persisted nor released; the reconciler will persist it",
			"order_id", adm.OrderID, "persist_err", err, "release_err", rerr)
	case released:
		// Counted (seckill_admissions_unreplicated_total); a stalled
		// replica and a Postgres outage are logged where they are seen.
		s.Logger.DebugContext(ctx, "unreplicated admission released: Postgres could not take it",
			"order_id", adm.OrderID, "err", err)
	}
	return PurchaseResult{}, ErrNotReplicated
}
