package seckill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Payments. A buyer's app opens a payment for an order awaiting payment
// (CreatePayment) and hands it to the payment provider; the provider's
// signed webhook then tells us what became of it (ApplyPaymentEvent). The
// rule that holds whatever the order of events: every success the provider
// confirms for one of our payments ends as exactly one of a PAID order or a
// payment owed back (refunded through the provider, refund.go). A payable
// (PENDING) payment exists only for a CREATED order before its payBy.

// PaymentStatus is where a payment stands.
type PaymentStatus string

const (
	// PaymentPending: handed to the provider, no answer yet. Payable.
	PaymentPending PaymentStatus = "PENDING"
	// PaymentSucceeded: the provider took the money and the order is PAID
	// by it.
	PaymentSucceeded PaymentStatus = "SUCCEEDED"
	// PaymentFailed: the provider reported a failure. A success that
	// arrives later still counts (it pays the order, or is owed back).
	PaymentFailed PaymentStatus = "FAILED"
	// PaymentCancelled: the order closed, or another payment paid it,
	// before the provider answered; it can no longer be paid. A success
	// that arrives later is owed back.
	PaymentCancelled PaymentStatus = "CANCELLED"
	// PaymentRefundNeeded: the provider took the money for an order that
	// was paid by another payment, cancelled or expired: it is owed back,
	// and its refund is about to be sent.
	PaymentRefundNeeded PaymentStatus = "REFUND_NEEDED"
	// PaymentRefunding: the refund was sent; the provider has not
	// confirmed it yet.
	PaymentRefunding PaymentStatus = "REFUNDING"
	// PaymentRefunded: the provider confirmed the refund.
	PaymentRefunded PaymentStatus = "REFUNDED"
	// PaymentRefundFailed: the provider refused the refund, or did not
	// confirm it after every send: an operator must act (it alerts, and
	// the dashboard can send it again).
	PaymentRefundFailed PaymentStatus = "REFUND_FAILED"
)

// Owed reports whether the payment's money is owed back to the buyer and
// not yet returned.
func (s PaymentStatus) Owed() bool {
	return s == PaymentRefundNeeded || s == PaymentRefunding || s == PaymentRefundFailed
}

// Payment is what a buyer's app hands to the payment provider.
type Payment struct {
	ID        string
	OrderID   int64
	Amount    int64 // in the currency's minor unit (money.go)
	Currency  string
	Status    PaymentStatus
	PayBy     time.Time
	CreatedAt time.Time
	// ClientSecret is what the buyer's app needs from the provider to pay
	// (Stripe's PaymentIntent client secret); CreatePayment answers it,
	// nothing stores it. Empty with the built-in provider.
	ClientSecret string
}

// Opened is what the provider answers for a payment it opened: the client
// secret for the buyer's app, and the provider's own reference to the
// payment (Stripe's PaymentIntent id), which a refund names; either may be
// empty.
type Opened struct {
	ClientSecret string
	Ref          string
}

// PaymentOpener hands a payment we opened to the payment provider, so that
// the buyer's app can pay it there; what became of it comes back through
// the provider's webhook.
type PaymentOpener interface {
	// OpenPayment opens p at the provider, or finds the one opened for it
	// before (it is idempotent per p.ID), and returns the client secret
	// the buyer's app pays with and the provider's reference to it.
	// EINVALID for an amount or currency the provider cannot take; any
	// other error: nothing is decided, the buyer may ask again.
	OpenPayment(ctx context.Context, p Payment) (Opened, error)
}

// NoPaymentOpener is the PaymentOpener of the built-in provider, which
// needs nothing but the payment's id.
type NoPaymentOpener struct{}

// OpenPayment implements PaymentOpener.
func (NoPaymentOpener) OpenPayment(context.Context, Payment) (Opened, error) { return Opened{}, nil }

// Payment event types, as the provider's webhook sends them.
const (
	EventPaymentSucceeded = "payment.succeeded"
	EventPaymentFailed    = "payment.failed"
	EventRefundSucceeded  = "refund.succeeded"
	EventRefundFailed     = "refund.failed"
)

// PaymentEvent is one event of the payment provider.
type PaymentEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	PaymentID string `json:"payment_id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	// Reason is the provider's word on a failure (payment.failed,
	// refund.failed), shown to operators; optional.
	Reason string `json:"reason,omitempty"`
	// ProviderRef is the provider's own object the event is about
	// (Stripe's PaymentIntent), set by a provider that opens its payments
	// (PaymentOpener): the event then applies only to the payment that
	// object was opened for (Mismatch). Empty for the built-in provider,
	// whose webhook cannot set it.
	ProviderRef string `json:"-"`
}

// Limits of a provider event's fields.
const (
	MaxEventIDLen = 128
	MaxReasonLen  = 500
)

// Validate checks an event's fields. EINVALID naming the field.
func (ev PaymentEvent) Validate() error {
	if !validEventID(ev.ID) {
		return Invalidf("id", "id must be 1 to %d printable ASCII characters", MaxEventIDLen)
	}
	switch ev.Type {
	case EventPaymentSucceeded, EventPaymentFailed, EventRefundSucceeded, EventRefundFailed:
	default:
		return Invalidf("type", "type must be %s, %s, %s or %s",
			EventPaymentSucceeded, EventPaymentFailed, EventRefundSucceeded, EventRefundFailed)
	}
	if !ValidPaymentID(ev.PaymentID) {
		return Invalidf("payment_id", "payment_id is malformed")
	}
	if ev.Amount < 0 {
		return Invalidf("amount", "amount must be 0 or more")
	}
	if !ValidCurrency(ev.Currency) {
		return Invalidf("currency", "currency must be three capital letters")
	}
	if len(ev.Reason) > MaxReasonLen {
		return Invalidf("reason", "reason must be at most %d bytes", MaxReasonLen)
	}
	if len(ev.ProviderRef) > MaxProviderRefLen || !printableASCII(ev.ProviderRef) {
		return Invalidf("provider_ref", "the provider's reference must be at most %d printable ASCII characters", MaxProviderRefLen)
	}
	return checkText("reason", ev.Reason, false)
}

// MaxProviderRefLen bounds a provider's reference to a payment (the
// payment.provider_ref column's).
const MaxProviderRefLen = 255

// Mismatch says why an event that names the provider's object
// (ProviderRef) is not about the payment it names, whose recorded
// reference is ref and whose amount and currency are given; "" when it is.
// An event that names no object (the built-in provider's) is "" for a
// payment without a reference (its amount and currency are checked as
// before: EINVALID), and a mismatch for a payment opened at a provider that
// does name them: only that provider's events settle it, whichever other
// webhook is reachable.
//
// A success or a failure is the payment's only for the object opened for
// it (PaymentOpener's reference, recorded before the buyer's app could pay
// it): an object opened by anyone else with our payment's id in its
// metadata never pays our order, nor is a refund sent to it. A refund's
// event must name the recorded object too, when there is one (a payment
// opened before references were recorded has none; its refund found the
// object by its metadata). A mismatching event is recorded and alerted,
// and changes nothing.
func (ev PaymentEvent) Mismatch(ref string, amount int64, currency string) string {
	if ev.ProviderRef == "" {
		if ref != "" {
			return fmt.Sprintf("%s names no provider's object, but payment %s was opened at the provider as %s",
				ev.Type, ev.PaymentID, ref)
		}
		return ""
	}
	refund := ev.Type == EventRefundSucceeded || ev.Type == EventRefundFailed
	switch {
	case ref == "" && !refund:
		return fmt.Sprintf("%s names %s, but no reference to the provider was recorded for payment %s",
			ev.Type, ev.ProviderRef, ev.PaymentID)
	case ref != "" && ev.ProviderRef != ref:
		return fmt.Sprintf("%s names %s, not %s, the one opened for payment %s", ev.Type, ev.ProviderRef, ref, ev.PaymentID)
	case ev.Amount != amount || ev.Currency != currency:
		return fmt.Sprintf("%s of %s is for %s, not %s, payment %s's amount", ev.Type, ev.ProviderRef,
			FormatAmount(ev.Amount, ev.Currency), FormatAmount(amount, currency), ev.PaymentID)
	}
	return ""
}

// validEventID reports whether id is 1 to MaxEventIDLen printable ASCII
// characters. Providers' event ids are ASCII; anything else (a decoder's
// U+FFFD standing for bytes that were not UTF-8 included) could make two
// different ids one.
func validEventID(id string) bool {
	return id != "" && len(id) <= MaxEventIDLen && printableASCII(id)
}

// printableASCII reports whether s has only printable ASCII characters,
// space excluded.
func printableASCII(s string) bool {
	for _, c := range []byte(s) {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// ValidPaymentID reports whether id has the form of our payment ids:
// "pay_" and 32 lower-case hex digits.
func ValidPaymentID(id string) bool {
	if len(id) != 36 || id[:4] != "pay_" {
		return false
	}
	for _, c := range []byte(id[4:]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// EventOutcome is what applying a provider's event did, as payment_event
// records it.
type EventOutcome string

const (
	AppliedPaid         EventOutcome = "paid"          // the payment paid its order
	AppliedFailed       EventOutcome = "failed"        // a pending payment failed
	AppliedOwed         EventOutcome = "refund_needed" // a success for an order that cannot take it: owed back
	AppliedRefunded     EventOutcome = "refunded"      // the provider confirmed a refund
	AppliedRefundFailed EventOutcome = "refund_failed" // the provider refused a refund
	// AppliedIgnored: the event changes nothing where the payment stands (a
	// second success of a payment settled already, a failure after a
	// success, a refund's confirmation for a payment not owed back).
	AppliedIgnored EventOutcome = "ignored"
	// AppliedMismatch: the event names a provider's object other than the
	// one opened for the payment, or another amount or currency
	// (PaymentEvent.Mismatch): recorded with why, alerted, and nothing
	// changed; no money moves for it.
	AppliedMismatch EventOutcome = "mismatch"
)

// PaymentResult is what applying a payment event did.
type PaymentResult struct {
	Duplicate bool         // the event was applied before; nothing changed now
	Outcome   EventOutcome // what the event did when it was applied
	Payment   Payment      // the payment as it stands afterwards
	Order     *Order       // its order as it stands afterwards
	// Mismatch says why the event was not the payment's, when the Outcome
	// is AppliedMismatch.
	Mismatch string
}

// Paid reports whether this call's event moved the order to PAID.
func (r PaymentResult) Paid() bool { return !r.Duplicate && r.Outcome == AppliedPaid }

// CreatePayment answers what the buyer's app hands to the payment provider
// for the caller's order awaiting payment: a payment id, the amount, the
// currency and the time to pay by, opened at the provider (PaymentOpener)
// with its client secret. Asking again returns the same payment
// while it is open. Someone else's order is ENOTFOUND; an order that is
// not CREATED, or whose payBy has passed, ECONFLICT saying why.
func (l *Life) CreatePayment(ctx context.Context, orderID int64) (*Payment, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	if orderID <= 0 {
		return nil, Errorf(ENOTFOUND, "order %d not found", orderID)
	}
	userID := u.ID
	if u.Admin {
		userID = 0
	}
	id, err := NewPaymentID()
	if err != nil {
		return nil, err
	}
	p, err := l.store.CreatePayment(ctx, orderID, userID, l.currency, id)
	if ErrorCode(err) == ENOTFOUND {
		if retry, nerr := l.notPersisted(ctx, orderID, "paid", err); !retry {
			return nil, nerr
		}
		p, err = l.store.CreatePayment(ctx, orderID, userID, l.currency, id)
	}
	if err != nil {
		return nil, err
	}
	// Asked again for the same open payment, the provider answers what it
	// opened the first time: the opener is idempotent per payment id.
	opened, err := l.opener.OpenPayment(ctx, *p)
	if err != nil {
		return nil, err
	}
	// The reference is kept for the refund, which names it to the
	// provider; a refund without one asks the provider to find it.
	if opened.Ref != "" {
		if err := l.store.SetPaymentRef(ctx, p.ID, opened.Ref); err != nil {
			return nil, err
		}
	}
	p.ClientSecret = opened.ClientSecret
	return p, nil
}

// notPersisted explains an order that the order's life did not find
// (notFound) to a caller who may see it: ECONFLICT for an order that is
// QUEUED (not persisted yet) or FAILED, notFound for anything else. retry
// is set when a worker persisted it meanwhile (it commits before it takes
// the admission out of Redis): the caller tries once more.
func (l *Life) notPersisted(ctx context.Context, orderID int64, verb string, notFound error) (retry bool, err error) {
	o, err := l.orders.Order(ctx, orderID)
	switch {
	case err != nil:
		return false, notFound
	case o.Status == OrderQueued:
		return false, Errorf(ECONFLICT, "order %d is QUEUED: it can be %s once it is CREATED, in a moment", orderID, verb)
	case o.Status == OrderFailed:
		return false, Errorf(ECONFLICT, "order %d FAILED (%s): there is nothing to be %s", orderID, o.FailureReason, verb)
	}
	return true, nil
}

// OrderPayments returns the payments of an order the caller may see (their
// own, or any for an admin), oldest first, with their refunds' status.
// ENOTFOUND for an order they may not see.
func (l *Life) OrderPayments(ctx context.Context, orderID int64) ([]Payment, error) {
	if _, err := l.orders.Order(ctx, orderID); err != nil {
		return nil, err
	}
	return l.store.OrderPayments(ctx, orderID)
}

// ApplyPaymentEvent applies an event of the payment provider, whose
// signature the edge has checked. It is idempotent per event id. EINVALID,
// ENOTFOUND, ECONFLICT: see OrderLife.ApplyPaymentEvent; nothing changed
// then.
func (l *Life) ApplyPaymentEvent(ctx context.Context, ev PaymentEvent) (PaymentResult, error) {
	if err := ev.Validate(); err != nil {
		return PaymentResult{}, err
	}
	res, err := l.store.ApplyPaymentEvent(ctx, ev)
	if err != nil {
		return res, err
	}
	if res.Duplicate {
		return res, nil
	}
	switch res.Outcome {
	case AppliedPaid:
		publish(ctx, l.bus, l.logger, StatusEvent{OrderID: res.Order.ID, Status: OrderPaid, At: res.Order.PaidAt})
	case AppliedOwed:
		l.logger.WarnContext(ctx, "payment succeeded for an order that cannot take it; refunding it",
			"payment_id", res.Payment.ID, "order_id", res.Payment.OrderID, "order_status", res.Order.Status,
			"amount", FormatAmount(res.Payment.Amount, res.Payment.Currency))
		l.refunds.Owed(ctx, res.Payment.ID)
	case AppliedMismatch:
		// Nothing moved, and the provider is answered 2xx (it would
		// deliver the event again for days): someone must look at the
		// provider's object, which took money nobody asked for, or names
		// one of our payments it is not.
		l.logger.ErrorContext(ctx, "a payment event does not match its payment: recorded, not applied; an operator must act",
			"event_id", ev.ID, "event_type", ev.Type, "payment_id", res.Payment.ID, "order_id", res.Payment.OrderID,
			"provider_ref", ev.ProviderRef, "mismatch", res.Mismatch)
	case AppliedRefundFailed:
		l.logger.ErrorContext(ctx, "the provider refused a refund; an operator must act",
			"payment_id", res.Payment.ID, "order_id", res.Payment.OrderID, "reason", ev.Reason,
			"amount", FormatAmount(res.Payment.Amount, res.Payment.Currency))
	}
	return res, nil
}

// NewPaymentID returns a fresh random payment id.
func NewPaymentID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("payment id: %w", err)
	}
	return "pay_" + hex.EncodeToString(b[:]), nil
}
