package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"seckill/internal/seckill"
)

// Payments in batches.
//
// When a sale's buyers pay, the provider's payment.succeeded events arrive
// by the thousand a second, and each cost a transaction of nine statements
// (applyPaymentEvent). ApplyPaymentEvent group-commits them instead: the
// events that arrive while a batch is written go in the next one, and the
// batch pays its orders in one transaction of set-based statements, the
// same changes applyEvent makes for one. Only the plain case goes there: a
// payment.succeeded of an event id not seen before, whose payment is not
// confirmed yet (PENDING, FAILED, CANCELLED) and has the event's amount,
// for an order awaiting payment (CREATED), the only event of its order and
// payment in the batch. Anything else (a duplicate, a refund, a failure, an
// order closed or paid already, a mismatch, an unknown payment) is left to
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

// payOutcome is one event's answer from payOrders: its result when done,
// else the event is applyPaymentEvent's.
type payOutcome struct {
	res  seckill.PaymentResult
	done bool
}

// payOrders applies the plain payment.succeeded events of evs in one
// transaction and marks them done in out; see above.
func (s *Store) payOrders(ctx context.Context, evs []seckill.PaymentEvent, out []payOutcome) error {
	ctx, cancel := context.WithTimeout(ctx, payTimeout)
	defer cancel()
	// Candidates: the first payment.succeeded of each event id and
	// payment. Their orders are found below; one per order too.
	var pays []string
	seenEvent := make(map[string]bool, len(evs))
	seenPay := make(map[string]bool, len(evs))
	for _, ev := range evs {
		if ev.Type != seckill.EventPaymentSucceeded || seenEvent[ev.ID] || seenPay[ev.PaymentID] {
			continue
		}
		seenEvent[ev.ID], seenPay[ev.PaymentID] = true, true
		pays = append(pays, ev.PaymentID)
	}
	if len(pays) == 0 {
		return nil
	}
	err := runInTx(ctx, s.db, nil, func(ctx context.Context, tx bun.Tx) error {
		clear(out)
		var owners []struct {
			ID      string `bun:"id"`
			OrderID int64  `bun:"order_id"`
		}
		if err := tx.NewRaw(`SELECT id, order_id FROM payment WHERE id = ANY(?)`, pgdialect.Array(pays)).Scan(ctx, &owners); err != nil {
			return fmt.Errorf("select payments: %w", err)
		}
		orderOf := make(map[string]int64, len(owners))
		orderIDs := make([]int64, 0, len(owners))
		for _, o := range owners {
			orderOf[o.ID] = o.OrderID
			orderIDs = append(orderIDs, o.OrderID)
		}
		// The orders first, then the payments, each in id order: the
		// order of every other transaction that changes them.
		var orders []struct {
			ID     int64     `bun:"id"`
			Status string    `bun:"status"`
			PayBy  time.Time `bun:"pay_by"`
		}
		err := tx.NewRaw(`SELECT id, status, pay_by FROM voucher_order WHERE id = ANY(?) ORDER BY id FOR UPDATE`,
			pgdialect.Array(orderIDs)).Scan(ctx, &orders)
		if err != nil {
			return fmt.Errorf("lock orders: %w", err)
		}
		var payments []paymentRow
		err = tx.NewRaw(`SELECT id, order_id, amount, currency, status, created_at, updated_at FROM payment
			WHERE id = ANY(?) ORDER BY id FOR UPDATE`, pgdialect.Array(pays)).Scan(ctx, &payments)
		if err != nil {
			return fmt.Errorf("lock payments: %w", err)
		}
		var applied []string
		if err := tx.NewRaw(`SELECT id FROM payment_event WHERE id = ANY(?)`, pgdialect.Array(keysOf(seenEvent))).Scan(ctx, &applied); err != nil {
			return fmt.Errorf("select events: %w", err)
		}
		payable := make(map[int64]time.Time, len(orders)) // CREATED orders, with their pay_by
		for _, o := range orders {
			if o.Status == string(seckill.OrderCreated) {
				payable[o.ID] = o.PayBy
			}
		}
		payment := make(map[string]*paymentRow, len(payments))
		for i := range payments {
			payment[payments[i].ID] = &payments[i]
		}
		done := make(map[string]bool, len(applied)) // event ids
		for _, id := range applied {
			done[id] = true
		}

		taken := make(map[int64]bool, len(orders)) // orders a plain event of this batch pays
		var pick []int                             // indexes into evs
		var payOrderIDs []int64
		var payIDs, eventIDs, types, outcomes []string
		for i, ev := range evs {
			p := payment[ev.PaymentID]
			if ev.Type != seckill.EventPaymentSucceeded || p == nil || done[ev.ID] || taken[p.OrderID] ||
				p.OrderID != orderOf[ev.PaymentID] || ev.Amount != p.Amount || ev.Currency != p.Currency {
				continue
			}
			if _, ok := payable[p.OrderID]; !ok {
				continue
			}
			switch seckill.PaymentStatus(p.Status) {
			case seckill.PaymentPending, seckill.PaymentFailed, seckill.PaymentCancelled:
			default:
				continue
			}
			done[ev.ID], taken[p.OrderID] = true, true
			pick = append(pick, i)
			payOrderIDs = append(payOrderIDs, p.OrderID)
			payIDs = append(payIDs, p.ID)
			eventIDs = append(eventIDs, ev.ID)
			types = append(types, ev.Type)
			outcomes = append(outcomes, string(seckill.AppliedPaid))
		}
		if len(pick) == 0 {
			return nil
		}
		// What applyEvent does for one: the order's other open payments
		// cancelled, the order PAID, the payment SUCCEEDED, order.paid
		// written, the event recorded.
		_, err = tx.NewRaw(`UPDATE payment SET status = 'CANCELLED', updated_at = now()
			WHERE order_id = ANY(?) AND status = 'PENDING' AND NOT (id = ANY(?))`,
			pgdialect.Array(payOrderIDs), pgdialect.Array(payIDs)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("cancel open payments: %w", err)
		}
		_, err = tx.NewRaw(`UPDATE voucher_order SET status = 'PAID', paid_at = now(), event_seq = event_seq + 1 WHERE id = ANY(?)`,
			pgdialect.Array(payOrderIDs)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("pay orders: %w", err)
		}
		_, err = tx.NewRaw(`UPDATE payment SET status = 'SUCCEEDED', updated_at = now() WHERE id = ANY(?)`, pgdialect.Array(payIDs)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("update payments: %w", err)
		}
		paid := make([]orderEvent, len(pick))
		for k := range pick {
			paid[k] = orderEvent{orderID: payOrderIDs[k], typ: seckill.EventOrderPaid, paymentID: payIDs[k]}
		}
		if err := s.emit(ctx, tx, paid); err != nil {
			return err
		}
		_, err = tx.NewRaw(`INSERT INTO payment_event (id, payment_id, type, outcome)
			SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[])`,
			pgdialect.Array(eventIDs), pgdialect.Array(payIDs), pgdialect.Array(types), pgdialect.Array(outcomes)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		after, err := findOrders(ctx, tx, payOrderIDs)
		if err != nil {
			return err
		}
		for k, i := range pick {
			p := payment[payIDs[k]]
			p.Status = string(seckill.PaymentSucceeded)
			out[i] = payOutcome{done: true, res: seckill.PaymentResult{Outcome: seckill.AppliedPaid,
				Payment: toDomainPayment(p, payable[p.OrderID]), Order: after[p.OrderID]}}
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
	// Postgres away, slow, or the COMMIT's answer lost: every caller gets
	// the error (the provider delivers again), rather than adding a
	// transaction per event to a database that could not take one.
	// applyPaymentEvent finds the events applied should this transaction
	// have committed after all.
	return err
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
