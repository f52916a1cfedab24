package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
)

// Payments in batches.
//
// When a sale's buyers pay, the provider's events arrive by the thousand a
// second, and each cost a transaction of up to nine statements
// (applyPaymentEvent). ApplyPaymentEvent group-commits them instead: the
// events that arrive while a batch is written go in the next one, and the
// batch applies them in one transaction of set-based statements, the same
// changes applyEvent makes for one. Only the plain cases go there, each the
// only event of its order and payment in the batch, of an event id not seen
// before and with its payment's amount and currency: a payment.succeeded of
// a payment not confirmed yet (PENDING, FAILED, CANCELLED) for an order
// awaiting payment (CREATED), which pays it; a payment.failed of a PENDING
// payment, which fails it. Anything else (a duplicate, a refund, an order
// closed or paid already, a mismatch of amount, currency or the provider's
// object (seckill.PaymentEvent.Mismatch), an unknown payment) is left to
// applyPaymentEvent, alone, after the batch: it answers and records it as
// before. So does every event of a batch that a constraint, a deadlock or a
// serialization failure rolled back. Any other failure (Postgres away or
// slow, the COMMIT's answer lost) is every caller's error; an event is
// applied once per id whichever path takes it, so its redelivery finds a
// batch that did commit applied.

// Bounds of ApplyPaymentEvent's group commit.
const (
	payBatch   = 500 // events a transaction applies at most
	payFlushes = 2   // transactions (pool connections) at once
	payBacklog = 20 * payBatch
	payTimeout = 10 * time.Second
)

// payOutcome is one event's answer from applyPlainEvents: its result when done,
// else the event is applyPaymentEvent's.
type payOutcome struct {
	res  seckill.PaymentResult
	done bool
}

// The statements of applyPlainEvents, prepared once per connection
// (Store.prepare), in the order it runs them.
const (
	payOwnersSQL       = `SELECT id, order_id FROM payment WHERE id = ANY($1::text[])`
	payLockOrdersSQL   = `SELECT id, status, pay_by FROM voucher_order WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`
	payLockPaymentsSQL = `SELECT id, order_id, amount, currency, status, provider_ref, created_at, updated_at FROM payment
		WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE`
	payAppliedSQL      = `SELECT id FROM payment_event WHERE id = ANY($1::text[])`
	payFailSQL         = `UPDATE payment SET status = 'FAILED', updated_at = now() WHERE id = ANY($1::text[])`
	payCancelOthersSQL = `UPDATE payment SET status = 'CANCELLED', updated_at = now()
		WHERE order_id = ANY($1::bigint[]) AND status = 'PENDING' AND NOT (id = ANY($2::text[]))`
	payOrdersSQL  = `UPDATE voucher_order SET status = 'PAID', paid_at = now(), event_seq = event_seq + 1 WHERE id = ANY($1::bigint[])`
	paySucceedSQL = `UPDATE payment SET status = 'SUCCEEDED', updated_at = now() WHERE id = ANY($1::text[])`
	payEventsSQL  = `INSERT INTO payment_event (id, payment_id, type, outcome)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])`
)

// applyPlainEvents applies the plain successes and failures of evs in one
// transaction and marks them done in out; see above.
func (s *Store) applyPlainEvents(ctx context.Context, evs []seckill.PaymentEvent, out []payOutcome) error {
	ctx, cancel := context.WithTimeout(ctx, payTimeout)
	defer cancel()
	// Candidates: the first success or failure of each event id and
	// payment. Their orders are found below; one per order too.
	var pays []string
	seenEvent := make(map[string]bool, len(evs))
	seenPay := make(map[string]bool, len(evs))
	for _, ev := range evs {
		plain := ev.Type == seckill.EventPaymentSucceeded || ev.Type == seckill.EventPaymentFailed
		if !plain || seenEvent[ev.ID] || seenPay[ev.PaymentID] {
			continue
		}
		seenEvent[ev.ID], seenPay[ev.PaymentID] = true, true
		pays = append(pays, ev.PaymentID)
	}
	if len(pays) == 0 {
		return nil
	}
	if err := s.prepare(ctx); err != nil {
		return err
	}
	err := runInTx(ctx, s.db, nil, func(ctx context.Context, tx bun.Tx) error {
		clear(out)
		var owners []struct {
			ID      string `bun:"id"`
			OrderID int64  `bun:"order_id"`
		}
		if err := s.payOwners.query(ctx, s.db, tx, &owners, textArray(pays)); err != nil {
			return fmt.Errorf("select payments: %w", err)
		}
		orderIDs := make([]int64, 0, len(owners))
		for _, o := range owners {
			orderIDs = append(orderIDs, o.OrderID)
		}
		// The orders first, then the payments, each in id order: the
		// order of every other transaction that changes them.
		var orders []struct {
			ID     int64     `bun:"id"`
			Status string    `bun:"status"`
			PayBy  time.Time `bun:"pay_by"`
		}
		if err := s.payLockOrders.query(ctx, s.db, tx, &orders, int64Array(orderIDs)); err != nil {
			return fmt.Errorf("lock orders: %w", err)
		}
		var payments []paymentRow
		if err := s.payLockPayments.query(ctx, s.db, tx, &payments, textArray(pays)); err != nil {
			return fmt.Errorf("lock payments: %w", err)
		}
		var applied []string
		if err := s.payApplied.query(ctx, s.db, tx, &applied, textArray(slices.Collect(maps.Keys(seenEvent)))); err != nil {
			return fmt.Errorf("select events: %w", err)
		}
		payBy := make(map[int64]time.Time, len(orders))
		created := make(map[int64]bool, len(orders)) // orders awaiting payment
		for _, o := range orders {
			payBy[o.ID] = o.PayBy
			created[o.ID] = o.Status == string(seckill.OrderCreated)
		}
		payment := make(map[string]*paymentRow, len(payments))
		for i := range payments {
			payment[payments[i].ID] = &payments[i]
		}
		done := make(map[string]bool, len(applied)) // event ids
		for _, id := range applied {
			done[id] = true
		}

		// One plain event per order: the events of one order's payments
		// depend on each other's order (a success cancels the others'
		// open payments, which a failure then no longer fails).
		taken := make(map[int64]bool, len(orders))
		var pick []int // indexes into evs
		var payOrderIDs, orderIDsAfter []int64
		var payIDs, failIDs, eventIDs, eventPays, types, outcomes []string
		for i, ev := range evs {
			p := payment[ev.PaymentID]
			if p == nil || done[ev.ID] || taken[p.OrderID] || ev.Amount != p.Amount || ev.Currency != p.Currency ||
				ev.Mismatch(p.ProviderRef, p.Amount, p.Currency) != "" {
				continue
			}
			var outcome seckill.EventOutcome
			switch st := seckill.PaymentStatus(p.Status); {
			case ev.Type == seckill.EventPaymentSucceeded && created[p.OrderID] &&
				(st == seckill.PaymentPending || st == seckill.PaymentFailed || st == seckill.PaymentCancelled):
				outcome = seckill.AppliedPaid
				payOrderIDs, payIDs = append(payOrderIDs, p.OrderID), append(payIDs, p.ID)
			case ev.Type == seckill.EventPaymentFailed && st == seckill.PaymentPending:
				outcome = seckill.AppliedFailed
				failIDs = append(failIDs, p.ID)
			default:
				continue
			}
			done[ev.ID], taken[p.OrderID] = true, true
			pick = append(pick, i)
			orderIDsAfter = append(orderIDsAfter, p.OrderID)
			eventIDs, eventPays = append(eventIDs, ev.ID), append(eventPays, p.ID)
			types, outcomes = append(types, ev.Type), append(outcomes, string(outcome))
		}
		if len(pick) == 0 {
			return nil
		}
		if len(failIDs) > 0 {
			if err := s.payFail.exec(ctx, tx, textArray(failIDs)); err != nil {
				return fmt.Errorf("fail payments: %w", err)
			}
		}
		if len(payIDs) > 0 {
			if err := s.payAll(ctx, tx, payOrderIDs, payIDs); err != nil {
				return err
			}
		}
		if err := s.payEvents.exec(ctx, tx, textArray(eventIDs), textArray(eventPays), textArray(types), textArray(outcomes)); err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		after, err := s.findOrders(ctx, tx, orderIDsAfter)
		if err != nil {
			return err
		}
		for k, i := range pick {
			p := payment[eventPays[k]]
			outcome := seckill.EventOutcome(outcomes[k])
			p.Status = string(seckill.PaymentSucceeded)
			if outcome == seckill.AppliedFailed {
				p.Status = string(seckill.PaymentFailed)
			}
			out[i] = payOutcome{done: true, res: seckill.PaymentResult{Outcome: outcome,
				Payment: toDomainPayment(p, payBy[p.OrderID]), Order: after[p.OrderID]}}
		}
		return nil
	})
	if c := sqlState(err); strings.HasPrefix(c, "23") || strings.HasPrefix(c, "40") {
		// A constraint the batch met (one of the schema's guards of a
		// payment's or an order's states), a deadlock, a serialization
		// failure: nothing was written, and each event goes through
		// applyPaymentEvent instead, alone.
		clear(out)
		return nil
	}
	// A data exception, which only one event's values can cause
	// (dataException): the Committer splits the batch until that event is alone, and only
	// its caller gets the error.
	// Postgres away, slow, or the COMMIT's answer lost: every caller gets
	// the error (the provider delivers again), rather than adding a
	// transaction per event to a database that could not take one.
	// applyPaymentEvent finds the events applied should this transaction
	// have committed after all.
	return err
}

// payAll pays orders, each with the payment of payIDs at its index, as
// applyEvent does for one: the orders' other open payments cancelled, the
// orders PAID, the payments SUCCEEDED, order.paid written.
func (s *Store) payAll(ctx context.Context, tx bun.Tx, orderIDs []int64, payIDs []string) error {
	if err := s.payCancelOthers.exec(ctx, tx, int64Array(orderIDs), textArray(payIDs)); err != nil {
		return fmt.Errorf("cancel open payments: %w", err)
	}
	if err := s.payOrders.exec(ctx, tx, int64Array(orderIDs)); err != nil {
		return fmt.Errorf("pay orders: %w", err)
	}
	if err := s.paySucceed.exec(ctx, tx, textArray(payIDs)); err != nil {
		return fmt.Errorf("update payments: %w", err)
	}
	paid := make([]orderEvent, len(orderIDs))
	for k := range orderIDs {
		paid[k] = orderEvent{orderID: orderIDs[k], typ: seckill.EventOrderPaid, paymentID: payIDs[k]}
	}
	return s.emit(ctx, tx, paid)
}
