package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Purchases is the purchase path and what keeps its promise: admission in
// Redis, persistence to Postgres, the orders buyers read and follow, and
// recovery when Redis loses a campaign's state (recover.go) or its
// replicas do not confirm an admission (durable.go).
type Purchases struct {
	orders     OrderStore
	campaigns  RecoveryStore
	admitter   Admitter
	outbox     Outbox
	rebuilder  Rebuilder
	queue      Enqueuer
	bus        StatusBus
	limiter    Limiter
	challenger *Challenger
	logger     *slog.Logger
	now        func() time.Time

	rebuilds recovery // campaigns being restored from Postgres
	recent   recent   // admissions answered ACCEPTED lately (recent.go)
}

// PurchaseDeps are what Purchases needs. Every field is required: a
// process without a per-user limit in memory passes NoLimit.
type PurchaseDeps struct {
	Orders     OrderStore
	Campaigns  RecoveryStore
	Admitter   Admitter
	Outbox     Outbox
	Rebuilder  Rebuilder
	Queue      Enqueuer
	Bus        StatusBus
	Limiter    Limiter
	Challenger *Challenger // checks answers to challenges
	Logger     *slog.Logger
	Now        func() time.Time
}

// NewPurchases returns the purchase path over its dependencies; it refuses
// to build without any of them.
func NewPurchases(d PurchaseDeps) (*Purchases, error) {
	if err := required("purchases", map[string]bool{
		"Orders": d.Orders == nil, "Campaigns": d.Campaigns == nil, "Admitter": d.Admitter == nil,
		"Outbox": d.Outbox == nil, "Rebuilder": d.Rebuilder == nil, "Queue": d.Queue == nil, "Bus": d.Bus == nil,
		"Limiter": d.Limiter == nil, "Challenger": d.Challenger == nil,
		"Logger": d.Logger == nil, "Now": d.Now == nil,
	}); err != nil {
		return nil, err
	}
	return &Purchases{orders: d.Orders, campaigns: d.Campaigns, admitter: d.Admitter, outbox: d.Outbox,
		rebuilder: d.Rebuilder, queue: d.Queue, bus: d.Bus, limiter: d.Limiter, challenger: d.Challenger,
		logger: d.Logger, now: d.Now, recent: recent{now: d.Now}}, nil
}

// Purchase tries to buy one unit of a campaign for the caller, without an
// answer to a challenge (PurchaseWith).
func (p *Purchases) Purchase(ctx context.Context, voucherID int64) (PurchaseResult, error) {
	return p.PurchaseWith(ctx, voucherID, nil, "")
}

// PurchaseWith tries to buy one unit of a campaign for the caller, with the
// answer to the campaign's challenge when it has one and the pass of its
// waiting room when it has one. Expected results (sold out, bought before,
// outside the window, a challenge or pass missing or wrong) are outcomes,
// not errors. The answer and the pass are checked here, in microseconds; a
// rejection costs at most one Redis round trip and never touches Postgres.
func (p *Purchases) PurchaseWith(ctx context.Context, voucherID int64, answer *ChallengeAnswer, pass string) (PurchaseResult, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return PurchaseResult{}, err
	}
	if voucherID <= 0 {
		return PurchaseResult{}, Errorf(ENOTFOUND, "voucher %d not found", voucherID)
	}
	if !p.limiter.Allow(voucherID, u.ID) {
		return PurchaseResult{Outcome: OutcomeRateLimited}, nil
	}
	// This frame is on the stack while the admission waits for Redis:
	// what comes before and after the call has frames of its own (see
	// admitterMetrics in internal/app).
	ticket := p.ticket(answer, pass, voucherID, u.ID)
	outcome, adm, err := p.admitter.Admit(ctx, voucherID, u.ID, ticket)
	if err != nil || outcome == OutcomeAccepted {
		return p.admitted(ctx, voucherID, u.ID, &ticket, outcome, adm, err)
	}
	return PurchaseResult{Outcome: outcome, RetryAfter: adm.RetryAfter}, nil
}

// ticket is what a purchase's answer and pass come to.
func (p *Purchases) ticket(answer *ChallengeAnswer, pass string, voucherID, userID int64) Ticket {
	var t Ticket
	if answer != nil {
		t = p.challenger.Check(*answer, voucherID, userID, p.now())
	}
	t.Pass = p.challenger.CheckPass(pass, voucherID, userID, p.now())
	return t
}

// admitted finishes a purchase that Admit accepted or could not decide.
func (p *Purchases) admitted(ctx context.Context, voucherID, userID int64, ticket *Ticket, outcome Outcome, adm Admission, err error) (PurchaseResult, error) {
	if needsRecovery(err) {
		// Redis lost the campaign or must rebuild it: restore it from
		// Postgres (bounded; one rebuild at a time) and ask once more.
		if rerr := p.recoverCampaign(ctx, voucherID); rerr != nil {
			return PurchaseResult{}, rerr
		}
		outcome, adm, err = p.admitter.Admit(ctx, voucherID, userID, *ticket)
		if errors.Is(err, ErrRebuildNeeded) {
			return PurchaseResult{}, Errorf(EUNAVAILABLE, "the sale is being restored; try again in a moment")
		}
	}
	if errors.Is(err, ErrNotReplicated) {
		return p.secureUnreplicated(ctx, adm)
	}
	if err != nil {
		return PurchaseResult{}, err
	}
	if outcome != OutcomeAccepted {
		return PurchaseResult{Outcome: outcome, RetryAfter: adm.RetryAfter}, nil
	}
	// The admission is pending in Redis already: if this enqueue fails (or
	// the process dies now) the reconciler enqueues it later, so the buyer
	// is told the truth either way.
	p.recent.add(adm)
	if err := p.queue.EnqueuePersist(context.WithoutCancel(ctx), adm); err != nil {
		p.logger.WarnContext(ctx, "enqueue admission; the reconciler will retry", "order_id", adm.OrderID, "err", err)
	}
	return PurchaseResult{Outcome: OutcomeAccepted, OrderID: adm.OrderID}, nil
}

// Order returns an order the caller may see: their own, or any for an admin.
// Someone else's order is reported as not found.
func (p *Purchases) Order(ctx context.Context, id int64) (*Order, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	o, err := p.order(ctx, id)
	if err != nil {
		return nil, err
	}
	if !u.Admin && o.UserID != u.ID {
		return nil, Errorf(ENOTFOUND, "order %d not found", id)
	}
	return o, nil
}

// order finds an order in Postgres or, while it is queued, in Redis. It
// reads Redis first: an admission is acknowledged there only after Postgres
// holds it, so an order is never missed between the two reads.
func (p *Purchases) order(ctx context.Context, id int64) (*Order, error) {
	if id <= 0 {
		return nil, Errorf(ENOTFOUND, "order %d not found", id)
	}
	adm, err := p.admitter.Pending(ctx, id)
	if err == nil {
		return &Order{ID: adm.OrderID, VoucherID: adm.VoucherID, UserID: adm.UserID,
			Status: OrderQueued, CreatedAt: adm.AdmittedAt}, nil
	} else if ErrorCode(err) != ENOTFOUND {
		return nil, err
	}
	o, err := p.orders.Order(ctx, id)
	if ErrorCode(err) != ENOTFOUND {
		return o, err
	}
	// Neither pending nor persisted. If Redis may have lost the campaign's
	// state, restore it first: that persists what survived (and what this
	// process remembers admitting), and moves the epoch past what did not.
	voucherID, _ := SplitOrderID(id)
	if need, nerr := p.rebuilder.NeedsRebuild(ctx, []int64{voucherID}); nerr == nil && len(need) > 0 {
		if p.recoverCampaign(ctx, voucherID) == nil {
			return p.orders.Order(ctx, id)
		}
	}
	// Lost with Redis's state and remembered by no process that could
	// record it: nothing says who bought it, so it is not found, for
	// anyone (recent.go).
	return nil, err
}

// MyOrders returns the caller's persisted orders, newest first.
func (p *Purchases) MyOrders(ctx context.Context) ([]*Order, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	return p.orders.OrdersByUser(ctx, u.ID, MaxPageSize)
}

// WatchOrder streams an order's status: first the current one, then each
// change, and closes the channel after a terminal status or when ctx ends.
func (p *Purchases) WatchOrder(ctx context.Context, id int64) (<-chan StatusEvent, error) {
	if _, err := requireUser(ctx); err != nil {
		return nil, err
	}
	// Subscribe before reading the current state so that no change falls
	// between the read and the stream.
	events, cancel, err := p.bus.Subscribe(ctx, id)
	if err != nil {
		return nil, err
	}
	o, err := p.Order(ctx, id)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan StatusEvent, 1)
	go func() {
		defer close(out)
		defer cancel()
		cur := StatusEvent{OrderID: o.ID, Status: o.Status, At: o.CreatedAt, Reason: o.FailureReason}
		if !cur.Status.Terminal() {
			cur.At = p.now()
		}
		select {
		case out <- cur:
		case <-ctx.Done():
			return
		}
		for !cur.Status.Terminal() {
			select {
			case ev, ok := <-events:
				if !ok {
					return
				}
				if ev.Status == cur.Status {
					continue
				}
				cur = ev
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// PersistAdmissions writes admissions to Postgres, then tells Redis and the
// subscribers. It is idempotent: the workers deliver at least once. An error
// means the batch must be retried.
func (p *Purchases) PersistAdmissions(ctx context.Context, adms []Admission) error {
	if len(adms) == 0 {
		return nil
	}
	outcomes, err := p.orders.PersistOrders(ctx, adms)
	if err != nil {
		return fmt.Errorf("persist orders: %w", err)
	}
	return p.settle(ctx, outcomes)
}

// settle tells Redis and the subscribers what Postgres decided for
// admissions: it acknowledges the created ones and releases the failed
// ones. An error leaves some admission pending in Redis, to be persisted
// again (idempotently) later.
func (p *Purchases) settle(ctx context.Context, outcomes []PersistOutcome) error {
	created := make([]Admission, 0, len(outcomes))
	events := make([]StatusEvent, 0, len(outcomes))
	var errs []error
	for _, o := range outcomes {
		switch o.Status {
		case OrderCreated:
			created = append(created, o.Admission)
			events = append(events, StatusEvent{OrderID: o.Admission.OrderID, Status: OrderCreated, At: o.CreatedAt})
		case OrderFailed:
			// Postgres recorded the failure; give the unit back so someone
			// can buy it, and the buyer slot too unless the user holds
			// another order (then this was a second order, not a loss).
			// A lost admission (its campaign was rebuilt without it) is
			// pending in no Redis state that still counts: releasing it is a
			// no-op or touches a state about to be replaced.
			keepBuyer := o.Reason == FailureUserHasOrder
			if _, err := p.outbox.Release(ctx, o.Admission, keepBuyer); err != nil {
				errs = append(errs, fmt.Errorf("release order %d: %w", o.Admission.OrderID, err))
				continue
			}
			p.logger.WarnContext(ctx, "order failed", "order_id", o.Admission.OrderID, "voucher_id", o.Admission.VoucherID, "reason", o.Reason)
			events = append(events, StatusEvent{OrderID: o.Admission.OrderID, Status: OrderFailed, At: p.now(), Reason: o.Reason})
		}
	}
	if err := p.outbox.Ack(ctx, created); err != nil {
		errs = append(errs, fmt.Errorf("ack admissions: %w", err))
	}
	p.publish(ctx, events...)
	return errors.Join(errs...)
}

func (p *Purchases) publish(ctx context.Context, evs ...StatusEvent) {
	publish(ctx, p.bus, p.logger, evs...)
}

// publish sends status changes on bus, logging a failure: subscribers read
// the current state when they start, and the status is in Postgres, so a
// lost event delays nobody for long.
func publish(ctx context.Context, bus StatusBus, logger *slog.Logger, evs ...StatusEvent) {
	if err := bus.Publish(ctx, evs...); err != nil {
		logger.WarnContext(ctx, "publish order status", "count", len(evs), "err", err)
	}
}

// Retiring ended campaigns from Redis (RetireCampaigns). A campaign is
// trimmed RetireAfter after its end: past PendingHorizon (no admission of
// it is searched for since) and past the longest pay window (no unit of it
// comes back since). The sweep looks at the campaigns that ended within
// RetireLookback before that, so a reconciler that was down for less than
// that catches up.
const (
	RetireAfter    = PendingHorizon + MaxPayWindow
	RetireLookback = 7 * 24 * time.Hour
)

// RetireCampaigns trims from Redis the campaigns that ended RetireAfter ago
// (within RetireLookback before that) to what answering ENDED needs: their
// buyers and returned orders leave Redis, which otherwise keeps every
// campaign ever sold. A campaign with an admission still pending is left
// until it is persisted. It returns how many it trimmed.
func (p *Purchases) RetireCampaigns(ctx context.Context) (int, error) {
	to := p.now().Add(-RetireAfter)
	ids, err := p.campaigns.CampaignsEndedBetween(ctx, to.Add(-RetireLookback), to)
	if err != nil {
		return 0, fmt.Errorf("campaigns to retire: %w", err)
	}
	n, err := p.rebuilder.Retire(ctx, ids, RetireAfter)
	if err != nil {
		return 0, fmt.Errorf("retire campaigns: %w", err)
	}
	return n, nil
}

// PendingHorizon is how long after its end a campaign is still searched for
// admissions pending too long: every campaign that Postgres holds as not
// ended, or ended since, is; no Redis index decides which.
const PendingHorizon = 24 * time.Hour

// PersistStuck is how long past the reconciler's age an admission may stay
// pending before the reconciler persists it itself instead of enqueuing it
// again. A requeue is one task per order whose id is derived from the
// order, so a task that exists makes the requeue a no-op; and a task can
// exist without ever running: its hash survived a failover of the queue's
// Redis while its entry in the pending list did not (seen in
// TestClusterMasterKilled), and asynq never looks at a hash no list names.
// Persisting is idempotent, so racing a task that does run costs a second
// look at the same rows.
const PersistStuck = 30 * time.Second

// Reconcile enqueues admissions that have been pending longer than age: their
// enqueue failed, or the process died between admission and enqueue; those
// pending for PersistStuck longer still it persists itself, in one batch. It
// looks at the campaigns Postgres knows, campaign by campaign, so losing
// one campaign's Redis state costs no other campaign its requeue. Then it
// records what this process admitted in epochs its campaign has left
// since (recent.go). It returns how many it handed over or persisted.
func (p *Purchases) Reconcile(ctx context.Context, age time.Duration, limit int) (int, error) {
	ids, err := p.campaigns.CampaignsEndingAfter(ctx, p.now().Add(-PendingHorizon))
	if err != nil {
		return 0, fmt.Errorf("campaigns to reconcile: %w", err)
	}
	stale, err := p.outbox.Stale(ctx, ids, age, limit)
	if err != nil {
		return 0, fmt.Errorf("stale admissions: %w", err)
	}
	// AdmittedAt is Redis's clock, now is this process's: a skew of
	// seconds moves the line by as much, against half a minute.
	stuckBefore := p.now().Add(-age - PersistStuck)
	var stuck []Admission
	n := 0
	for _, adm := range stale {
		if adm.AdmittedAt.Before(stuckBefore) {
			stuck = append(stuck, adm)
			continue
		}
		if err := p.queue.RequeuePersist(ctx, adm); err != nil {
			return n, fmt.Errorf("re-enqueue order %d: %w", adm.OrderID, err)
		}
		n++
	}
	if n > 0 {
		p.logger.InfoContext(ctx, "re-enqueued stale admissions", "count", n)
	}
	if len(stuck) > 0 {
		if err := p.PersistAdmissions(ctx, stuck); err != nil {
			return n, fmt.Errorf("persist %d admissions pending for over %s: %w", len(stuck), age+PersistStuck, err)
		}
		n += len(stuck)
		p.logger.WarnContext(ctx, "persisted admissions that stayed pending though enqueued", "count", len(stuck), "first_order_id", stuck[0].OrderID)
	}
	lost, err := p.persistLost(ctx)
	if lost > 0 {
		p.logger.WarnContext(ctx, "recorded admissions Redis lost before Postgres had them", "count", lost)
	}
	return n + lost, err
}
