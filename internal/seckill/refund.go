package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Refunds. A payment owed back (REFUND_NEEDED: the provider took money for
// an order that was paid by another payment, cancelled or expired) goes back
// through the provider's refund API:
//
//	REFUND_NEEDED → REFUNDING → REFUNDED
//	                          ↘ REFUND_FAILED (refused, or never confirmed)
//
// Each send is a task of its own (RefundQueue). A send asks the provider
// to refund under an idempotency key derived from the payment (RefundKey),
// so sending again, after a timeout or a lost confirmation, never pays the
// buyer back twice. The provider confirms with a refund.succeeded or
// refund.failed webhook event (or at once in its answer). A refund not
// confirmed ConfirmWait after a send is sent again, up to MaxSends times;
// then, or when the provider refuses it, it is REFUND_FAILED, which alerts,
// and an operator may send it again from the dashboard (audited).

// PaymentProvider is the payment provider's API, what seckill asks of it;
// what the provider tells seckill comes through its webhook.
type PaymentProvider interface {
	// Refund asks the provider to give a payment's money back. It is
	// idempotent per r.Key: the same refund sent again pays nothing twice.
	// The answer says where the refund stands; RefundPending is confirmed
	// later by a webhook event. An error means nothing was decided: send it
	// again later. ErrRefundsOff when no provider is configured.
	Refund(ctx context.Context, r RefundRequest) (RefundAnswer, error)
}

// ErrRefundsOff is what a PaymentProvider answers when there is none to
// send refunds to: payments owed back stay REFUND_NEEDED, which alerts
// after RefundStuckAfter.
var ErrRefundsOff = errors.New("refunds are not sent: no payment provider is configured")

// NoPaymentProvider is the PaymentProvider of a deployment that has none.
type NoPaymentProvider struct{}

// Refund implements PaymentProvider.
func (NoPaymentProvider) Refund(context.Context, RefundRequest) (RefundAnswer, error) {
	return RefundAnswer{}, ErrRefundsOff
}

// RefundRequest is one send of a refund.
type RefundRequest struct {
	PaymentID string
	OrderID   int64
	Amount    int64 // the whole payment, in minor units
	Currency  string
	Key       string // the idempotency key: RefundKey
	// ProviderRef is the provider's reference to the payment (Opened.Ref),
	// empty when it answered none.
	ProviderRef string
}

// RefundState is where the provider says a refund stands.
type RefundState string

const (
	RefundPending   RefundState = "pending"   // accepted; a webhook event confirms it
	RefundSucceeded RefundState = "succeeded" // done
	RefundRefused   RefundState = "failed"    // the provider will not refund it
)

// RefundAnswer is the provider's answer to a send.
type RefundAnswer struct {
	State      RefundState
	ProviderID string // the provider's id of the refund, when it gives one
	Reason     string // why it was refused
}

// RefundKey is the idempotency key of a payment's refund in a generation.
// The generation moves on only when an operator sends again a refund the
// provider refused (the provider would answer the old key with the same
// refusal); a refund that was only unconfirmed is sent again under its key.
func RefundKey(paymentID string, generation int) string {
	return "refund_" + paymentID[len("pay_"):] + "_" + strconv.Itoa(generation)
}

// RefundSend is where one payment's refund stands, as a send needs it.
type RefundSend struct {
	PaymentID   string
	OrderID     int64
	VoucherID   int64
	Amount      int64
	Currency    string
	Status      PaymentStatus
	ProviderRef string // Opened.Ref of the payment, if any
	Generation  int    // of the idempotency key (RefundKey)
	Round       int    // operator's retries so far
	Sends       int    // sends in this round, this one included
	// Send is set by BeginRefund when the caller is to send the refund now.
	Send bool
}

// Refund is a payment owed back, as the dashboard lists it.
type Refund struct {
	PaymentID  string
	OrderID    int64
	VoucherID  int64
	UserID     int64
	Amount     int64
	Currency   string
	Status     PaymentStatus // REFUND_NEEDED, REFUNDING, REFUNDED or REFUND_FAILED
	OwedAt     time.Time
	SentAt     time.Time // the last send; zero before the first
	RefundedAt time.Time
	Sends      int
	Error      string // the provider's last refusal or failure
}

// RefundFilter pages through refunds, oldest owed first.
type RefundFilter struct {
	VoucherID int64 // only this campaign's, when set
	Status    PaymentStatus
	Limit     int
}

// RefundTally counts refunds of one status and adds their amounts (per
// currency).
type RefundTally struct {
	Count   int64
	Amounts map[string]int64
}

// RefundStats is what the metrics and the dashboard show of refunds.
type RefundStats struct {
	ByStatus map[PaymentStatus]RefundTally
	// Stuck counts refunds owed (not sent, or sent and not confirmed)
	// for longer than RefundStuckAfter.
	Stuck int64
}

// RefundStuckAfter is how long a refund may stay unconfirmed before it
// counts as stuck (metric seckill_refunds_stuck, alert SeckillRefundsStuck).
const RefundStuckAfter = time.Hour

// RefundStore is what refunds need from the system of record.
type RefundStore interface {
	// BeginRefund takes a send of a payment's refund: REFUND_NEEDED becomes
	// REFUNDING, a REFUNDING one is sent again, and the round's sends
	// count one more. A refund whose round has had maxSends sends becomes
	// REFUND_FAILED instead. Send is false (and nothing changes) for a
	// payment not owed back or whose refund is done or failed. ENOTFOUND.
	BeginRefund(ctx context.Context, paymentID string, maxSends int) (RefundSend, error)
	// SettleRefund records the provider's verdict on the refund of
	// generation gen, unless it was settled since: REFUNDED when ok, else
	// REFUND_FAILED with reason (refused: the provider said no, so a
	// retry needs a new key). It reports whether it changed anything.
	SettleRefund(ctx context.Context, paymentID string, gen int, ok, refused bool, reason string) (bool, error)
	// NoteRefundError records why the last send of generation gen failed.
	NoteRefundError(ctx context.Context, paymentID string, gen int, reason string) error
	// RetryRefund makes a REFUND_FAILED payment REFUND_NEEDED again in a
	// new round (and a new generation when the provider refused it).
	// ENOTFOUND; ECONFLICT for a payment in another status.
	RetryRefund(ctx context.Context, paymentID string) (RefundSend, error)
	// DueRefunds returns up to limit refunds whose next send is due but
	// may not be scheduled: REFUND_NEEDED owed before owedBefore, REFUNDING
	// last sent before sentBefore; oldest first.
	DueRefunds(ctx context.Context, owedBefore, sentBefore time.Time, limit int) ([]RefundSend, error)
	// Refunds lists payments owed back or refunded, oldest owed first.
	Refunds(ctx context.Context, f RefundFilter) ([]Refund, error)
	// RefundStats counts refunds by status (of one campaign when
	// voucherID > 0), and those owed since before stuckBefore.
	RefundStats(ctx context.Context, voucherID int64, stuckBefore time.Time) (RefundStats, error)
}

// RefundQueue runs refund sends (Asynq).
type RefundQueue interface {
	// ScheduleRefund runs a send of s's refund after delay (0: now). It
	// schedules one task per payment, round and send count, however
	// often it is called.
	ScheduleRefund(ctx context.Context, s RefundSend, delay time.Duration) error
}

// RefundConfig are the settings of refunds.
type RefundConfig struct {
	// ConfirmWait is how long a send waits for the provider's
	// confirmation before the refund is sent again.
	ConfirmWait time.Duration
	// MaxSends is how many sends a refund gets in a round before it is
	// REFUND_FAILED.
	MaxSends int
}

// Default refund settings (SECKILL_REFUND_CONFIRM_WAIT,
// SECKILL_REFUND_MAX_SENDS): sent again every 10 minutes, failed after the
// sixth send, an hour after the first.
const (
	DefaultRefundConfirmWait = 10 * time.Minute
	DefaultRefundMaxSends    = 6
)

// Refunds sends payments owed back to the provider and tracks them until
// it confirms.
type Refunds struct {
	store    RefundStore
	provider PaymentProvider
	queue    RefundQueue
	auditor  Auditor
	logger   *slog.Logger
	cfg      RefundConfig
	off      bool // no provider: nothing is sent
	now      func() time.Time
}

// NewRefunds returns Refunds over its store, the provider, the queue that
// runs sends, and the audit log that records operators' retries. Every
// dependency is required; a deployment without a provider passes
// NoPaymentProvider.
func NewRefunds(store RefundStore, provider PaymentProvider, queue RefundQueue,
	auditor Auditor, logger *slog.Logger, cfg RefundConfig) (*Refunds, error) {
	if err := required("refunds", map[string]bool{"store": store == nil, "provider": provider == nil, "queue": queue == nil,
		"auditor": auditor == nil, "logger": logger == nil}); err != nil {
		return nil, err
	}
	if cfg.ConfirmWait <= 0 || cfg.MaxSends < 1 {
		return nil, fmt.Errorf("seckill: refunds: bad settings %+v", cfg)
	}
	_, off := provider.(NoPaymentProvider)
	return &Refunds{store: store, provider: provider, queue: queue, auditor: auditor, logger: logger, cfg: cfg, off: off, now: time.Now}, nil
}

// Sending reports whether refunds are sent to a provider.
func (r *Refunds) Sending() bool { return !r.off }

// Owed starts the refund of a payment that just became owed back. A
// failure to schedule it is logged: SweepRefunds schedules it later.
func (r *Refunds) Owed(ctx context.Context, paymentID string) {
	if r.off {
		r.logger.WarnContext(ctx, "a payment is owed back but no provider is configured to refund it", "payment_id", paymentID)
		return
	}
	s := RefundSend{PaymentID: paymentID, Generation: 1}
	if err := r.queue.ScheduleRefund(context.WithoutCancel(ctx), s, 0); err != nil {
		r.logger.WarnContext(ctx, "schedule refund; the sweep schedules it later", "payment_id", paymentID, "err", err)
	}
}

// Send sends a payment's refund to the provider, if it is still owed and
// unconfirmed, and, when the provider accepted it without confirming it
// yet, schedules the next send ConfirmWait later (it finds the refund
// confirmed by then, or sends it again under the same key). An error is
// transient: the caller tries again later, unless final is set (its last
// try), in which case the refund is failed and nil returned.
func (r *Refunds) Send(ctx context.Context, paymentID string, final bool) error {
	if r.off {
		return nil
	}
	st, err := r.store.BeginRefund(ctx, paymentID, r.cfg.MaxSends)
	if ErrorCode(err) == ENOTFOUND {
		return nil
	} else if err != nil {
		return fmt.Errorf("begin refund of %s: %w", paymentID, err)
	}
	if !st.Send {
		if st.Status == PaymentRefundFailed {
			r.logger.ErrorContext(ctx, "refund not confirmed after every send; an operator must act",
				"payment_id", paymentID, "sends", st.Sends, "amount", FormatAmount(st.Amount, st.Currency))
		}
		return nil
	}
	ans, err := r.provider.Refund(ctx, RefundRequest{PaymentID: st.PaymentID, OrderID: st.OrderID,
		Amount: st.Amount, Currency: st.Currency, Key: RefundKey(st.PaymentID, st.Generation), ProviderRef: st.ProviderRef})
	if err != nil {
		reason := truncate("send: "+err.Error(), MaxReasonLen)
		if nerr := r.store.NoteRefundError(ctx, paymentID, st.Generation, reason); nerr != nil {
			r.logger.WarnContext(ctx, "record refund error", "payment_id", paymentID, "err", nerr)
		}
		if !final {
			return fmt.Errorf("send refund of %s: %w", paymentID, err)
		}
		// The provider could not be reached on the last try: it decided
		// nothing we know of, so the refund is not confirmed.
		if _, serr := r.store.SettleRefund(ctx, paymentID, st.Generation, false, false, reason); serr != nil {
			return fmt.Errorf("fail refund of %s: %w", paymentID, serr)
		}
		r.logger.ErrorContext(ctx, "refund could not be sent; an operator must act", "payment_id", paymentID, "err", err)
		return nil
	}
	switch ans.State {
	case RefundSucceeded:
		_, err = r.store.SettleRefund(ctx, paymentID, st.Generation, true, false, "")
	case RefundRefused:
		_, err = r.store.SettleRefund(ctx, paymentID, st.Generation, false, true, truncate("refused: "+ans.Reason, MaxReasonLen))
		r.logger.ErrorContext(ctx, "the provider refused a refund; an operator must act", "payment_id", paymentID, "reason", ans.Reason)
	default:
		if err := r.queue.ScheduleRefund(context.WithoutCancel(ctx), st, r.cfg.ConfirmWait); err != nil {
			r.logger.WarnContext(ctx, "schedule the refund's next send; the sweep schedules it later", "payment_id", paymentID, "err", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("settle refund of %s: %w", paymentID, err)
	}
	return nil
}

// Retry sends again a refund that failed (REFUND_FAILED), for an operator,
// and records it in the audit log. ENOTFOUND; ECONFLICT for a payment in
// another status; EUNAVAILABLE when no provider is configured. Admins only.
func (r *Refunds) Retry(ctx context.Context, paymentID string) (*RefundSend, error) {
	u, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if !ValidPaymentID(paymentID) {
		return nil, Errorf(ENOTFOUND, "payment %q not found", paymentID)
	}
	if r.off {
		return nil, Errorf(EUNAVAILABLE, "refunds are not sent: no payment provider is configured")
	}
	st, err := r.store.RetryRefund(ctx, paymentID)
	if err != nil {
		return nil, err
	}
	record(ctx, r.auditor, r.logger, u, st.VoucherID, AuditRetryRefund,
		fmt.Sprintf("refund of payment %s (order %d, %s) sent again", paymentID, st.OrderID, FormatAmount(st.Amount, st.Currency)))
	if err := r.queue.ScheduleRefund(context.WithoutCancel(ctx), st, 0); err != nil {
		r.logger.WarnContext(ctx, "schedule refund; the sweep schedules it later", "payment_id", paymentID, "err", err)
	}
	return &st, nil
}

// AuditRetryRefund records an operator's retry of a failed refund.
const AuditRetryRefund = "retry_refund"

// refundGrace is how long a refund may wait for its task before the sweep
// schedules it again.
const refundGrace = 30 * time.Second

// Sweep schedules the sends whose task was lost (the process died before
// scheduling it, or Redis lost it): refunds owed and never sent, and sends
// that have waited for their confirmation longer than ConfirmWait. It
// returns how many it scheduled.
func (r *Refunds) Sweep(ctx context.Context, limit int) (int, error) {
	if r.off {
		return 0, nil
	}
	now := r.now()
	due, err := r.store.DueRefunds(ctx, now.Add(-refundGrace), now.Add(-r.cfg.ConfirmWait-refundGrace), limit)
	if err != nil {
		return 0, fmt.Errorf("due refunds: %w", err)
	}
	for i, st := range due {
		if err := r.queue.ScheduleRefund(ctx, st, 0); err != nil {
			return i, fmt.Errorf("schedule refund of %s: %w", st.PaymentID, err)
		}
	}
	return len(due), nil
}

// List returns payments owed back or refunded, for an operator. Admins
// only.
func (r *Refunds) List(ctx context.Context, f RefundFilter) ([]Refund, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	return r.store.Refunds(ctx, f)
}

// Stats counts refunds by status (of one campaign when voucherID > 0) and
// those stuck.
func (r *Refunds) Stats(ctx context.Context, voucherID int64) (RefundStats, error) {
	return r.store.RefundStats(ctx, voucherID, r.now().Add(-RefundStuckAfter))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n-- // not inside a UTF-8 sequence
	}
	return s[:n]
}
