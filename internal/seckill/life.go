package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// After the purchase: an order is CREATED (awaiting payment) until PayBy,
// then PAID, or CANCELLED by its buyer or an operator, or EXPIRED. Each
// transition is one guarded change in Postgres (it happens once, whoever
// races for it). CANCELLED and EXPIRED give the unit back: to Postgres's
// stock in the same transaction, then to Redis (UnitReturner) with the
// buyer's slot, once per order; what Redis cannot take now the sweep gives
// back later.

// Life is the order's life after the purchase: payment, cancellation,
// expiry, and the units going back on sale; refunds are its Refunds'.
type Life struct {
	store    OrderLife
	returner UnitReturner
	orders   OrderReader
	bus      StatusBus
	refunds  *Refunds
	opener   PaymentOpener
	auditor  Auditor
	logger   *slog.Logger
	currency string
}

// OrderReader reads an order as its caller may see it (Purchases.Order):
// queued ones and lost ones included.
type OrderReader interface {
	Order(ctx context.Context, id int64) (*Order, error)
}

// LifeDeps are what Life needs; every field is required but Currency.
type LifeDeps struct {
	Store    OrderLife
	Returner UnitReturner
	Orders   OrderReader
	Bus      StatusBus
	Refunds  *Refunds
	Opener   PaymentOpener // NoPaymentOpener for the built-in provider
	Auditor  Auditor
	Logger   *slog.Logger
	// Currency is every payment's (SECKILL_PAYMENT_CURRENCY); empty means
	// DefaultCurrency.
	Currency string
}

// NewLife returns the order's life over its dependencies; it refuses to
// build without any of them.
func NewLife(d LifeDeps) (*Life, error) {
	if err := required("the order's life", map[string]bool{
		"Store": d.Store == nil, "Returner": d.Returner == nil, "Orders": d.Orders == nil, "Bus": d.Bus == nil,
		"Refunds": d.Refunds == nil, "Opener": d.Opener == nil, "Auditor": d.Auditor == nil, "Logger": d.Logger == nil,
	}); err != nil {
		return nil, err
	}
	cur := d.Currency
	if cur == "" {
		cur = DefaultCurrency
	}
	if !ValidCurrency(cur) {
		return nil, fmt.Errorf("seckill: currency %q is not an ISO 4217 code", cur)
	}
	return &Life{store: d.Store, returner: d.Returner, orders: d.Orders, bus: d.Bus, refunds: d.Refunds,
		opener: d.Opener, auditor: d.Auditor, logger: d.Logger, currency: cur}, nil
}

// Pay window bounds and defaults.
const (
	DefaultPayWindow = 15 * time.Minute
	MinPayWindow     = time.Second
	MaxPayWindow     = 24 * time.Hour
)

// UnitReturn is the unit of a cancelled or expired order, to be given back
// to admission (Redis) with its buyer's slot.
type UnitReturn struct {
	OrderID   int64
	VoucherID int64
	UserID    int64
	// Epoch is the epoch of the order's stock shard (the campaign's, for a
	// campaign of one) when Postgres took the unit back: a
	// Redis state installed in a later epoch was read from Postgres after
	// that and counts the unit already.
	Epoch int64
}

// Expired is an order ExpireDue expired: its unit to give back to
// admission, and when.
type Expired struct {
	Return UnitReturn
	At     time.Time
}

// CloseResult is what OrderLife.CloseOrder did.
type CloseResult struct {
	Order  *Order     // the order as it stands afterwards
	Closed bool       // this call closed it
	Return UnitReturn // the unit to give back to Redis, when Closed
}

// OrderLife is what the order's life after the purchase needs from the
// system of record (Postgres).
type OrderLife interface {
	// CloseOrder moves a CREATED order to to (CANCELLED or EXPIRED), gives
	// its unit back to the campaign's stock and cancels its payments still
	// PENDING, in one transaction. userID > 0 limits it to that user's
	// order. EXPIRED happens only once pay_by has passed on the database's
	// clock. An order in another status is left as it is (Closed false).
	// ENOTFOUND for an order it does not hold (QUEUED and FAILED ones
	// included).
	CloseOrder(ctx context.Context, id int64, to OrderStatus, userID int64) (CloseResult, error)
	// ExpireDue expires up to limit CREATED orders past pay_by on the
	// database's clock, oldest first, in one transaction: the orders, one
	// update per campaign that takes their units back into its stock, and
	// their open payments cancelled. It skips orders another transaction
	// holds, so concurrent callers expire disjoint batches; none when
	// nothing is due.
	ExpireDue(ctx context.Context, limit int) ([]Expired, error)
	// UnitsReturned records that admission took back the units of closed
	// orders.
	UnitsReturned(ctx context.Context, orderIDs []int64) error
	// Unreturned returns up to limit closed orders whose unit admission
	// has not taken back, oldest first.
	Unreturned(ctx context.Context, limit int) ([]UnitReturn, error)
	// CreatePayment returns the open (PENDING) payment of a CREATED order
	// of userID (any user when 0) whose pay_by has not passed on the
	// database's clock, or opens one with id newID. ENOTFOUND for an order
	// it does not hold (or another user's); ECONFLICT, saying why, for an
	// order not awaiting payment or whose time to pay ran out.
	CreatePayment(ctx context.Context, orderID, userID int64, currency, newID string) (*Payment, error)
	// SetPaymentRef records the provider's reference to a payment, once:
	// a payment that has one keeps it.
	SetPaymentRef(ctx context.Context, paymentID, ref string) error
	// ApplyPaymentEvent applies a provider's event once per event id,
	// under the order's lock:
	//   - payment.succeeded of a payment not confirmed before (PENDING,
	//     FAILED, CANCELLED) pays its order if it is CREATED (the order's
	//     other PENDING payments are CANCELLED), else makes the payment
	//     REFUND_NEEDED (owed back); of one confirmed before, nothing;
	//   - payment.failed fails a PENDING payment, nothing else;
	//   - refund.succeeded makes a payment owed back REFUNDED;
	//     refund.failed makes one REFUND_NEEDED or REFUNDING REFUND_FAILED;
	//     either changes nothing for a payment not owed back;
	//   - an event that names a provider's object which is not the
	//     payment's (PaymentEvent.Mismatch) changes nothing: it is recorded
	//     under its event id, with why, as AppliedMismatch.
	// ENOTFOUND for an unknown payment, EINVALID when the amount or the
	// currency of an event that names no provider's object differ from the
	// payment's, ECONFLICT for an event id applied to another payment;
	// nothing is recorded then.
	ApplyPaymentEvent(ctx context.Context, ev PaymentEvent) (PaymentResult, error)
	// OrderPayments returns an order's payments, oldest first (none for an
	// order it does not hold).
	OrderPayments(ctx context.Context, orderID int64) ([]Payment, error)
}

// UnitReturner gives units back to admission (Redis).
type UnitReturner interface {
	// ReturnUnit puts a closed order's unit back on sale and frees its
	// buyer's slot, once per order whoever calls. It reports false when
	// admission cannot take it now (the campaign is being rebuilt or
	// behind Postgres): try again later. A unit returned before, or counted
	// by a rebuild, reports true. EUNAVAILABLE when Redis is out of reach.
	ReturnUnit(ctx context.Context, r UnitReturn) (bool, error)
	// ReturnUnits is ReturnUnit for many, one script call per campaign
	// (and one round trip for all): it returns the order ids whose units
	// admission holds now (returned now, before, or counted by a rebuild),
	// even with an error (some campaigns could not be reached); the others
	// it cannot take now. EUNAVAILABLE when Redis is out of reach.
	ReturnUnits(ctx context.Context, rs []UnitReturn) ([]int64, error)
}

// CancelOrder cancels the caller's own order while it awaits payment
// (CREATED), puts its unit back on sale and cancels its open payment.
// Someone else's order is ENOTFOUND; an order in any other status
// (QUEUED, PAID, CANCELLED, EXPIRED, FAILED) is ECONFLICT, saying why.
func (l *Life) CancelOrder(ctx context.Context, id int64) (*Order, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	return l.cancel(ctx, id, u.ID)
}

// AdminCancelOrder cancels any order awaiting payment, for an operator, and
// records it in the audit log. Admins only.
func (l *Life) AdminCancelOrder(ctx context.Context, id int64) (*Order, error) {
	u, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	o, err := l.cancel(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	record(ctx, l.auditor, l.logger, u, o.VoucherID, AuditCancelOrder, fmt.Sprintf("order %d of user %d", o.ID, o.UserID))
	return o, nil
}

// AuditCancelOrder records an operator's cancellation of an order.
const AuditCancelOrder = "cancel_order"

func (l *Life) cancel(ctx context.Context, id, userID int64) (*Order, error) {
	if id <= 0 {
		return nil, Errorf(ENOTFOUND, "order %d not found", id)
	}
	res, err := l.store.CloseOrder(ctx, id, OrderCancelled, userID)
	if ErrorCode(err) == ENOTFOUND {
		retry, nerr := l.notPersisted(ctx, id, "cancelled", err)
		if !retry {
			return nil, nerr
		}
		res, err = l.store.CloseOrder(ctx, id, OrderCancelled, userID)
	}
	if err != nil {
		return nil, err
	}
	if !res.Closed {
		return nil, Errorf(ECONFLICT, "order %d is %s: only an order awaiting payment (CREATED) can be cancelled", id, res.Order.Status)
	}
	l.closed(ctx, res)
	return res.Order, nil
}

// ExpireOrder expires an order that is still unpaid at its pay_by and puts
// its unit back on sale. It reports whether the order is closed now
// (expired by this call or before, or paid or cancelled); false while its
// pay_by has not passed yet.
func (l *Life) ExpireOrder(ctx context.Context, id int64) (bool, error) {
	res, err := l.store.CloseOrder(ctx, id, OrderExpired, 0)
	if ErrorCode(err) == ENOTFOUND {
		return true, nil // nothing to expire, ever
	} else if err != nil {
		return false, err
	}
	if res.Closed {
		l.closed(ctx, res)
	}
	return res.Order.Status != OrderCreated, nil
}

// closed tells the subscribers and gives the unit back to Redis. A unit
// Redis cannot take now stays marked in Postgres for the sweep.
func (l *Life) closed(ctx context.Context, res CloseResult) {
	ctx = context.WithoutCancel(ctx)
	publish(ctx, l.bus, l.logger, StatusEvent{OrderID: res.Order.ID, Status: res.Order.Status, At: res.Order.ClosedAt})
	if err := l.giveBack(ctx, res.Return); err != nil {
		l.logger.WarnContext(ctx, "return unit; the sweep retries", "order_id", res.Order.ID, "err", err)
	}
}

var errNotNow = errors.New("admission cannot take the unit back now")

func (l *Life) giveBack(ctx context.Context, r UnitReturn) error {
	ok, err := l.returner.ReturnUnit(ctx, r)
	if err != nil {
		return err
	}
	if !ok {
		return errNotNow
	}
	return l.store.UnitsReturned(ctx, []int64{r.OrderID})
}

// DefaultExpiryBatch is how many orders one ExpireDue transaction closes.
const DefaultExpiryBatch = 1000

// ExpireDue expires up to limit orders past their pay_by in one batch: one
// transaction closes them and takes their units back into each campaign's
// stock with one update per campaign (never a row lock per order), one
// message tells their subscribers, and admission takes the units back with
// one script call per campaign. What Redis cannot take now stays marked in
// Postgres for the sweep. It returns how many it expired; the workers call
// it until it returns less than limit (nothing more is due), and every
// instance may: concurrent batches take disjoint orders.
func (l *Life) ExpireDue(ctx context.Context, limit int) (int, error) {
	done, err := l.store.ExpireDue(ctx, limit)
	if err != nil || len(done) == 0 {
		return 0, err
	}
	ctx = context.WithoutCancel(ctx) // Postgres has them: tell everyone, whoever hangs up
	events := make([]StatusEvent, len(done))
	returns := make([]UnitReturn, len(done))
	for i, e := range done {
		events[i] = StatusEvent{OrderID: e.Return.OrderID, Status: OrderExpired, At: e.At}
		returns[i] = e.Return
	}
	publish(ctx, l.bus, l.logger, events...)
	if _, err := l.giveBackAll(ctx, returns); err != nil {
		l.logger.WarnContext(ctx, "return expired units; the sweep retries", "count", len(returns), "err", err)
	}
	return len(done), nil
}

// giveBackAll gives units back to admission and records, in Postgres,
// those it took.
func (l *Life) giveBackAll(ctx context.Context, rs []UnitReturn) (int, error) {
	taken, err := l.returner.ReturnUnits(ctx, rs)
	if rerr := l.store.UnitsReturned(ctx, taken); rerr != nil {
		return 0, rerr
	}
	return len(taken), err
}

// SweepOrders is the safety net behind the workers' expiry: it expires up
// to limit orders past their pay_by, in batches, and gives back up to limit
// units that Redis could not take before. It returns how many orders it
// expired and units it returned.
func (l *Life) SweepOrders(ctx context.Context, limit int) (expired, returned int, err error) {
	for expired < limit {
		n, err := l.ExpireDue(ctx, min(DefaultExpiryBatch, limit-expired))
		expired += n
		if err != nil {
			return expired, 0, fmt.Errorf("expire due orders: %w", err)
		}
		if n < min(DefaultExpiryBatch, limit-expired+n) {
			break
		}
	}
	units, err := l.store.Unreturned(ctx, limit)
	if err != nil {
		return expired, 0, fmt.Errorf("unreturned units: %w", err)
	}
	if len(units) == 0 {
		return expired, 0, nil
	}
	returned, err = l.giveBackAll(ctx, units)
	if err != nil {
		return expired, returned, fmt.Errorf("return %d units: %w", len(units), err)
	}
	return expired, returned, nil
}
