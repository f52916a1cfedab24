package seckill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Service orchestrates purchases and order persistence. Its fields are its
// dependencies; set them all before use.
type Service struct {
	Store    Store
	Admitter Admitter
	Queue    Enqueuer
	Bus      StatusBus
	Limiter  Limiter // nil: no per-user limit in memory
	// Challenges issues and checks the challenges of campaigns that ask
	// for one; nil refuses every answer.
	Challenges *Challenger
	Logger     *slog.Logger
	Now        func() time.Time // nil: time.Now

	// Campaigns and CampaignAdmitter serve campaign management (admin.go);
	// nil leaves it unavailable and creations unaudited.
	Campaigns        CampaignStore
	CampaignAdmitter CampaignAdmitter

	// Life, Returner and Expiry serve what follows a purchase (life.go):
	// payment, cancellation and expiry. Expiry nil: only the sweep
	// expires orders. PayWindow is the default pay window (0:
	// DefaultPayWindow); Currency the payments' (empty: DefaultCurrency).
	Life      OrderLife
	Returner  UnitReturner
	Expiry    ExpiryScheduler
	PayWindow time.Duration
	Currency  string
	// Refunds sends payments owed back to the provider (refund.go).
	Refunds *Refunds

	recovery recovery // campaigns being restored from Postgres
	settings settings // campaigns' challenge settings, for issuing
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func requireUser(ctx context.Context) (*User, error) {
	u := UserFromContext(ctx)
	if u == nil {
		return nil, Errorf(EUNAUTHENTICATED, "missing token")
	}
	return u, nil
}

func requireAdmin(ctx context.Context) (*User, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	if !u.Admin {
		return nil, Errorf(EFORBIDDEN, "admin role required")
	}
	return u, nil
}

// AddSeckillVoucher creates a voucher with its campaign in Postgres and warms
// it into Redis before returning, so it can be bought at once. Admins only.
func (s *Service) AddSeckillVoucher(ctx context.Context, in NewSeckillVoucher) (*Voucher, error) {
	u, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(s.now()); err != nil {
		return nil, err
	}
	in = in.Normalized()
	v := &Voucher{
		ShopID: in.ShopID, Title: in.Title, SubTitle: in.SubTitle, Rules: in.Rules,
		PayValue: in.PayValue, ActualValue: in.ActualValue, Type: VoucherSeckill,
		Campaign: &Campaign{
			InitialStock: in.Stock, Stock: in.Stock,
			BeginTime: in.BeginTime.UTC(), EndTime: in.EndTime.UTC(),
			Challenge: in.Challenge, PoWBits: in.Difficulty(), Quiz: in.Quiz, Brake: in.Brake,
			PayWindow: cmp.Or(in.PayWindow, s.PayWindow, DefaultPayWindow),
		},
	}
	if err := s.Store.CreateVoucher(ctx, v); err != nil {
		return nil, fmt.Errorf("create voucher: %w", err)
	}
	if _, err := s.Admitter.Warm(ctx, WarmState{Campaign: *v.Campaign}); err != nil {
		// A campaign that Redis does not know cannot be sold; undo it so the
		// admin can simply try again.
		if derr := s.Store.DeleteVoucher(context.WithoutCancel(ctx), v.ID); derr != nil {
			s.Logger.ErrorContext(ctx, "undo voucher after failed warm", "voucher_id", v.ID, "err", derr)
		}
		return nil, fmt.Errorf("warm campaign %d: %w", v.ID, err)
	}
	v.Campaign.Remaining, v.Campaign.RemainingKnown = v.Campaign.Stock, true
	s.audit(ctx, u, v.ID, AuditCreate, createdDetail(v))
	return v, nil
}

// Voucher returns one voucher with its live stock. Anyone may read it.
func (s *Service) Voucher(ctx context.Context, id int64) (*Voucher, error) {
	if id <= 0 {
		return nil, Errorf(ENOTFOUND, "voucher %d not found", id)
	}
	v, err := s.Store.Voucher(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.fillRemaining(ctx, []*Voucher{v}); err != nil {
		return nil, err
	}
	return v, nil
}

// Vouchers pages through vouchers in id order, with their live stock.
func (s *Service) Vouchers(ctx context.Context, f VoucherFilter) ([]*Voucher, error) {
	switch {
	case f.First == 0:
		f.First = DefaultPageSize
	case f.First < 0 || f.First > MaxPageSize:
		return nil, Invalidf("first", "first must be between 1 and %d", MaxPageSize)
	}
	if f.After < 0 {
		return nil, Invalidf("after", "after must be a voucher id")
	}
	vs, err := s.Store.Vouchers(ctx, f)
	if err != nil {
		return nil, err
	}
	if err := s.fillRemaining(ctx, vs); err != nil {
		return nil, err
	}
	return vs, nil
}

func (s *Service) fillRemaining(ctx context.Context, vs []*Voucher) error {
	ids := make([]int64, 0, len(vs))
	for _, v := range vs {
		if v.Campaign != nil {
			ids = append(ids, v.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rem, err := s.Admitter.Remaining(ctx, ids)
	if err != nil {
		return fmt.Errorf("remaining stock: %w", err)
	}
	for _, v := range vs {
		if v.Campaign == nil {
			continue
		}
		v.Campaign.Remaining, v.Campaign.RemainingKnown = rem[v.ID]
	}
	return nil
}

// Purchase tries to buy one unit of a campaign for the caller, without an
// answer to a challenge (PurchaseWith).
func (s *Service) Purchase(ctx context.Context, voucherID int64) (PurchaseResult, error) {
	return s.PurchaseWith(ctx, voucherID, nil)
}

// PurchaseWith tries to buy one unit of a campaign for the caller, with the
// answer to the campaign's challenge when it has one. Expected results
// (sold out, bought before, outside the window, a challenge missing or
// wrong) are outcomes, not errors. The answer is checked here, in
// microseconds; a rejection costs at most one Redis round trip and never
// touches Postgres.
func (s *Service) PurchaseWith(ctx context.Context, voucherID int64, answer *ChallengeAnswer) (PurchaseResult, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return PurchaseResult{}, err
	}
	if voucherID <= 0 {
		return PurchaseResult{}, Errorf(ENOTFOUND, "voucher %d not found", voucherID)
	}
	if s.Limiter != nil && !s.Limiter.Allow(voucherID, u.ID) {
		return PurchaseResult{Outcome: OutcomeRateLimited}, nil
	}
	var ticket Ticket
	if answer != nil {
		if s.Challenges != nil {
			ticket = s.Challenges.Check(*answer, voucherID, u.ID, s.now())
		} else {
			ticket = Ticket{Refusal: OutcomeChallengeWrong}
		}
	}
	outcome, adm, err := s.Admitter.Admit(ctx, voucherID, u.ID, ticket)
	if needsRecovery(err) {
		// Redis lost the campaign or must rebuild it: restore it from
		// Postgres (bounded; one rebuild at a time) and ask once more.
		if rerr := s.recoverCampaign(ctx, voucherID); rerr != nil {
			return PurchaseResult{}, rerr
		}
		outcome, adm, err = s.Admitter.Admit(ctx, voucherID, u.ID, ticket)
		if errors.Is(err, ErrRebuildNeeded) {
			return PurchaseResult{}, Errorf(EUNAVAILABLE, "the sale is being restored; try again in a moment")
		}
	}
	if errors.Is(err, ErrNotReplicated) {
		return s.secureUnreplicated(ctx, adm)
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
	if err := s.Queue.EnqueuePersist(context.WithoutCancel(ctx), adm); err != nil {
		s.Logger.WarnContext(ctx, "enqueue admission; the reconciler will retry", "order_id", adm.OrderID, "err", err)
	}
	return PurchaseResult{Outcome: OutcomeAccepted, OrderID: adm.OrderID}, nil
}

// Order returns an order the caller may see: their own, or any for an admin.
// Someone else's order is reported as not found.
func (s *Service) Order(ctx context.Context, id int64) (*Order, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	o, err := s.order(ctx, id)
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
func (s *Service) order(ctx context.Context, id int64) (*Order, error) {
	if id <= 0 {
		return nil, Errorf(ENOTFOUND, "order %d not found", id)
	}
	adm, err := s.Admitter.Pending(ctx, id)
	if err == nil {
		return &Order{ID: adm.OrderID, VoucherID: adm.VoucherID, UserID: adm.UserID,
			Status: OrderQueued, CreatedAt: adm.AdmittedAt}, nil
	} else if ErrorCode(err) != ENOTFOUND {
		return nil, err
	}
	o, err := s.Store.Order(ctx, id)
	if ErrorCode(err) != ENOTFOUND {
		return o, err
	}
	// Neither pending nor persisted. If Redis may have lost the campaign's
	// state, restore it first: that persists what survived, and moves the
	// epoch past what did not.
	voucherID, _ := SplitOrderID(id)
	if need, nerr := s.Admitter.NeedsRebuild(ctx, []int64{voucherID}); nerr == nil && len(need) > 0 {
		if s.recoverCampaign(ctx, voucherID) == nil {
			if o, err = s.Store.Order(ctx, id); ErrorCode(err) != ENOTFOUND {
				return o, err
			}
		}
	}
	// An id of an epoch the campaign has left was accepted and then lost
	// with Redis's state: say so, rather than pretend it never existed.
	epoch, eerr := s.Store.CampaignEpoch(ctx, voucherID)
	if eerr != nil || OrderEpoch(id) >= epoch {
		return nil, err
	}
	return &Order{ID: id, VoucherID: voucherID, UserID: UserFromContext(ctx).ID,
		Status: OrderFailed, CreatedAt: s.now().UTC(), FailureReason: FailureLost}, nil
}

// MyOrders returns the caller's persisted orders, newest first.
func (s *Service) MyOrders(ctx context.Context) ([]*Order, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	return s.Store.OrdersByUser(ctx, u.ID, MaxPageSize)
}

// WatchOrder streams an order's status: first the current one, then each
// change, and closes the channel after a terminal status or when ctx ends.
func (s *Service) WatchOrder(ctx context.Context, id int64) (<-chan StatusEvent, error) {
	if _, err := requireUser(ctx); err != nil {
		return nil, err
	}
	// Subscribe before reading the current state so that no change falls
	// between the read and the stream.
	events, cancel, err := s.Bus.Subscribe(ctx, id)
	if err != nil {
		return nil, err
	}
	o, err := s.Order(ctx, id)
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
			cur.At = s.now()
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
func (s *Service) PersistAdmissions(ctx context.Context, adms []Admission) error {
	if len(adms) == 0 {
		return nil
	}
	outcomes, err := s.Store.PersistOrders(ctx, adms)
	if err != nil {
		return fmt.Errorf("persist orders: %w", err)
	}
	return s.settle(ctx, outcomes)
}

// settle tells Redis and the subscribers what Postgres decided for
// admissions: it acknowledges the created ones and releases the failed
// ones. An error leaves some admission pending in Redis, to be persisted
// again (idempotently) later.
func (s *Service) settle(ctx context.Context, outcomes []PersistOutcome) error {
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
			if _, err := s.Admitter.Release(ctx, o.Admission, keepBuyer); err != nil {
				errs = append(errs, fmt.Errorf("release order %d: %w", o.Admission.OrderID, err))
				continue
			}
			s.Logger.WarnContext(ctx, "order failed", "order_id", o.Admission.OrderID, "voucher_id", o.Admission.VoucherID, "reason", o.Reason)
			events = append(events, StatusEvent{OrderID: o.Admission.OrderID, Status: OrderFailed, At: s.now(), Reason: o.Reason})
		}
	}
	if err := s.Admitter.Ack(ctx, created); err != nil {
		errs = append(errs, fmt.Errorf("ack admissions: %w", err))
	}
	s.publish(ctx, events...)
	s.scheduleExpiry(ctx, outcomes)
	return errors.Join(errs...)
}

func (s *Service) publish(ctx context.Context, evs ...StatusEvent) {
	if err := s.Bus.Publish(ctx, evs...); err != nil {
		// Subscribers read the current state when they start, and the
		// status is in Postgres: a lost event delays nobody for long.
		s.Logger.WarnContext(ctx, "publish order status", "count", len(evs), "err", err)
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
func (s *Service) RetireCampaigns(ctx context.Context) (int, error) {
	to := s.now().Add(-RetireAfter)
	ids, err := s.Store.CampaignsEndedBetween(ctx, to.Add(-RetireLookback), to)
	if err != nil {
		return 0, fmt.Errorf("campaigns to retire: %w", err)
	}
	n, err := s.Admitter.Retire(ctx, ids, RetireAfter)
	if err != nil {
		return 0, fmt.Errorf("retire campaigns: %w", err)
	}
	return n, nil
}

// PendingHorizon is how long after its end a campaign is still searched for
// admissions pending too long: every campaign that Postgres holds as not
// ended, or ended since, is; no Redis index decides which.
const PendingHorizon = 24 * time.Hour

// Reconcile enqueues admissions that have been pending longer than age: their
// enqueue failed, or the process died between admission and enqueue. It
// looks at the campaigns Postgres knows, campaign by campaign, so losing
// one campaign's Redis state costs no other campaign its requeue. It
// returns how many it enqueued.
func (s *Service) Reconcile(ctx context.Context, age time.Duration, limit int) (int, error) {
	ids, err := s.Store.CampaignsEndingAfter(ctx, s.now().Add(-PendingHorizon))
	if err != nil {
		return 0, fmt.Errorf("campaigns to reconcile: %w", err)
	}
	stale, err := s.Admitter.Stale(ctx, ids, age, limit)
	if err != nil {
		return 0, fmt.Errorf("stale admissions: %w", err)
	}
	n := 0
	for _, adm := range stale {
		if err := s.Queue.RequeuePersist(ctx, adm); err != nil {
			return n, fmt.Errorf("re-enqueue order %d: %w", adm.OrderID, err)
		}
		n++
	}
	if n > 0 {
		s.Logger.InfoContext(ctx, "re-enqueued stale admissions", "count", n)
	}
	return n, nil
}
