package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"seckill/internal/seckill"
)

// The order's life after the purchase (seckill.OrderLife). Every
// transaction that changes an order locks its voucher_order row first, then
// (a payment, or the campaign's row), so they cannot deadlock on each
// other.

var _ seckill.OrderLife = (*Store)(nil)

// CloseOrder moves a CREATED order to CANCELLED or EXPIRED and puts its unit
// back into the campaign's stock, in one transaction; see
// seckill.OrderLife.
//
// The order row is changed before the campaign row is locked. A rebuild
// (RebuildCampaign) that holds the campaign's lock meanwhile still reads the
// order as holding its unit, and the unit comes back in the epoch it
// installs; one that locks after reads it back already. return_epoch keeps
// which of the two happened, for the Redis side.
func (s *Store) CloseOrder(ctx context.Context, id int64, to seckill.OrderStatus, userID int64) (seckill.CloseResult, error) {
	if to != seckill.OrderCancelled && to != seckill.OrderExpired {
		return seckill.CloseResult{}, fmt.Errorf("store: close order %d: bad status %q", id, to)
	}
	var res seckill.CloseResult
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var closed []struct {
			VoucherID int64 `bun:"voucher_id"`
			UserID    int64 `bun:"user_id"`
		}
		err := tx.NewRaw(`
			UPDATE voucher_order SET status = ?0, closed_at = now(), return_epoch = 0, event_seq = event_seq + 1
			WHERE id = ?1 AND status = 'CREATED' AND (?2 = 0 OR user_id = ?2)
				AND (?0 = 'CANCELLED' OR pay_by <= now())
			RETURNING voucher_id, user_id`, string(to), id, userID).Scan(ctx, &closed)
		if err != nil {
			return fmt.Errorf("close order: %w", err)
		}
		if len(closed) == 1 {
			// The unit goes back to the stock shard of the order, whose
			// epoch it comes back in.
			_, shard, _ := seckill.SplitShardOrderID(id)
			var epoch int64
			err := tx.NewRaw(`
				UPDATE seckill_campaign SET stock = stock + 1, updated_at = now()
				WHERE voucher_id = ? RETURNING coalesce(shard_epochs[?], epoch)`, closed[0].VoucherID, shard+1).Scan(ctx, &epoch)
			if err != nil {
				return fmt.Errorf("return unit: %w", err)
			}
			if _, err := tx.NewRaw(`UPDATE voucher_order SET return_epoch = ? WHERE id = ?`, epoch, id).Exec(ctx); err != nil {
				return fmt.Errorf("record return epoch: %w", err)
			}
			// Nothing may pay a closed order: its open payment is
			// cancelled (a success that still comes is owed back).
			if err := cancelPending(ctx, tx, id, ""); err != nil {
				return err
			}
			if err := s.emitEach(ctx, tx, seckill.EventForStatus(to), []int64{id}); err != nil {
				return err
			}
			res.Closed = true
			res.Return = seckill.UnitReturn{OrderID: id, VoucherID: closed[0].VoucherID, UserID: closed[0].UserID, Epoch: epoch}
		}
		o, err := findOrder(ctx, tx, id)
		if err != nil {
			return err
		}
		if userID > 0 && o.UserID != userID {
			return seckill.Errorf(seckill.ENOTFOUND, "order %d not found", id)
		}
		res.Order = o
		return nil
	})
	if err != nil {
		if seckill.ErrorCode(err) != seckill.EINTERNAL {
			return seckill.CloseResult{}, err
		}
		return seckill.CloseResult{}, fmt.Errorf("store: close order %d: %w", id, err)
	}
	return res, nil
}

// Unreturned returns up to limit closed orders whose unit admission has not
// taken back, oldest first.
func (s *Store) Unreturned(ctx context.Context, limit int) ([]seckill.UnitReturn, error) {
	var rows []struct {
		ID          int64 `bun:"id"`
		VoucherID   int64 `bun:"voucher_id"`
		UserID      int64 `bun:"user_id"`
		ReturnEpoch int64 `bun:"return_epoch"`
	}
	err := s.db.NewRaw(`
		SELECT id, voucher_id, user_id, return_epoch FROM voucher_order
		WHERE status IN ('CANCELLED', 'EXPIRED') AND NOT unit_returned
		ORDER BY closed_at LIMIT ?`, max(limit, 1)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select unreturned units: %w", err)
	}
	out := make([]seckill.UnitReturn, len(rows))
	for i, r := range rows {
		out[i] = seckill.UnitReturn{OrderID: r.ID, VoucherID: r.VoucherID, UserID: r.UserID, Epoch: r.ReturnEpoch}
	}
	return out, nil
}

// ExpireDue expires up to limit CREATED orders past pay_by on the
// database's clock, oldest first, in one transaction: the orders, then one
// guarded update per campaign that takes their units back, then their open
// payments; see seckill.OrderLife. Orders another transaction holds (a
// payment, a cancel, another ExpireDue) are skipped, not waited for, so
// concurrent callers take disjoint batches, and campaigns are locked in id
// order, so two batches cannot deadlock on them.
func (s *Store) ExpireDue(ctx context.Context, limit int) ([]seckill.Expired, error) {
	var out []seckill.Expired
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		out = out[:0]
		var closed []struct {
			ID        int64     `bun:"id"`
			VoucherID int64     `bun:"voucher_id"`
			UserID    int64     `bun:"user_id"`
			ClosedAt  time.Time `bun:"closed_at"`
		}
		err := tx.NewRaw(`
			UPDATE voucher_order AS o SET status = 'EXPIRED', closed_at = now(), return_epoch = 0, event_seq = o.event_seq + 1
			FROM (SELECT id FROM voucher_order WHERE status = 'CREATED' AND pay_by <= now()
				ORDER BY pay_by LIMIT ? FOR UPDATE SKIP LOCKED) AS due
			WHERE o.id = due.id
			RETURNING o.id, o.voucher_id, o.user_id, o.closed_at`, max(limit, 1)).Scan(ctx, &closed)
		if err != nil {
			return fmt.Errorf("expire orders: %w", err)
		}
		if len(closed) == 0 {
			return nil
		}
		units := map[int64]int64{}
		ids := make([]int64, len(closed))
		for i, c := range closed {
			units[c.VoucherID]++
			ids[i] = c.ID
		}
		campaigns := slices.Sorted(maps.Keys(units))
		counts := make([]int64, len(campaigns))
		for i, v := range campaigns {
			counts[i] = units[v]
		}
		// The units go back to each campaign's stock in one statement,
		// campaigns locked in id order; the epoch each order's stock shard
		// is in then is the one its unit came back in (see CloseOrder).
		var epochs []struct {
			VoucherID   int64   `bun:"voucher_id"`
			Epoch       int64   `bun:"epoch"`
			ShardEpochs []int64 `bun:"shard_epochs,array"`
		}
		err = tx.NewRaw(`
			WITH locked AS (
				SELECT voucher_id FROM seckill_campaign WHERE voucher_id = ANY(?0) ORDER BY voucher_id FOR UPDATE
			)
			UPDATE seckill_campaign AS c SET stock = c.stock + n.units, updated_at = now()
			FROM unnest(?0::bigint[], ?1::bigint[]) AS n(voucher_id, units), locked
			WHERE c.voucher_id = n.voucher_id AND locked.voucher_id = n.voucher_id
			RETURNING c.voucher_id, c.epoch, c.shard_epochs`, pgdialect.Array(campaigns), pgdialect.Array(counts)).Scan(ctx, &epochs)
		if err != nil {
			return fmt.Errorf("return units: %w", err)
		}
		epochsOf := make(map[int64]seckill.Epochs, len(epochs))
		for _, e := range epochs {
			epochsOf[e.VoucherID] = seckill.Epochs{Campaign: e.Epoch, Shards: e.ShardEpochs}
		}
		returnEpochs := make([]int64, len(closed))
		for i, c := range closed {
			returnEpochs[i] = epochsOf[c.VoucherID].OfOrder(c.ID)
		}
		_, err = tx.NewRaw(`
			UPDATE voucher_order AS o SET return_epoch = r.epoch
			FROM unnest(?::bigint[], ?::bigint[]) AS r(id, epoch) WHERE o.id = r.id`,
			pgdialect.Array(ids), pgdialect.Array(returnEpochs)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("record return epochs: %w", err)
		}
		// Nothing may pay an expired order: its open payment is
		// cancelled (a success that still comes is owed back).
		_, err = tx.NewRaw(`UPDATE payment SET status = 'CANCELLED', updated_at = now()
			WHERE order_id = ANY(?) AND status = 'PENDING'`, pgdialect.Array(ids)).Exec(ctx)
		if err != nil {
			return fmt.Errorf("cancel open payments: %w", err)
		}
		if err := s.emitEach(ctx, tx, seckill.EventOrderExpired, ids); err != nil {
			return err
		}
		for i, c := range closed {
			out = append(out, seckill.Expired{Return: seckill.UnitReturn{OrderID: c.ID, VoucherID: c.VoucherID,
				UserID: c.UserID, Epoch: returnEpochs[i]}, At: c.ClosedAt.UTC()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: expire due orders: %w", err)
	}
	return out, nil
}

// UnitsReturned records that admission took back the units of closed
// orders, in one statement.
func (s *Store) UnitsReturned(ctx context.Context, orderIDs []int64) error {
	if len(orderIDs) == 0 {
		return nil
	}
	_, err := s.db.NewRaw(`UPDATE voucher_order SET unit_returned = true
		WHERE id = ANY(?) AND status IN ('CANCELLED', 'EXPIRED')`, pgdialect.Array(orderIDs)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: mark %d units returned: %w", len(orderIDs), err)
	}
	return nil
}

// paymentRow is a row of payment.
type paymentRow struct {
	bun.BaseModel `bun:"table:payment,alias:p"`

	ID       string `bun:"id,pk"`
	OrderID  int64  `bun:"order_id,notnull"`
	Amount   int64  `bun:"amount,notnull"`
	Currency string `bun:"currency,notnull"`
	Status   string `bun:"status,nullzero,notnull,default:'PENDING'"`
	timestamps
}

func toDomainPayment(r *paymentRow, payBy time.Time) seckill.Payment {
	return seckill.Payment{ID: r.ID, OrderID: r.OrderID, Amount: r.Amount, Currency: r.Currency,
		Status: seckill.PaymentStatus(r.Status), PayBy: payBy.UTC(), CreatedAt: r.CreatedAt.UTC()}
}

// lockedOrder is an order row locked for a change.
type lockedOrder struct {
	ID       int64     `bun:"id"`
	UserID   int64     `bun:"user_id"`
	Status   string    `bun:"status"`
	Amount   int64     `bun:"amount"`
	PayBy    time.Time `bun:"pay_by"`
	ClosedAt time.Time `bun:"closed_at"`
	Due      bool      `bun:"due"` // pay_by has passed on the database's clock
}

func lockOrder(ctx context.Context, tx bun.Tx, id int64) (*lockedOrder, error) {
	var o lockedOrder
	err := tx.NewRaw(`SELECT id, user_id, status, amount, pay_by, closed_at, pay_by <= now() AS due
		FROM voucher_order WHERE id = ? FOR UPDATE`, id).Scan(ctx, &o)
	if err := oneRow(err, "lock", "order", id); err != nil {
		return nil, err
	}
	return &o, nil
}

// cancelPending cancels the PENDING payments of an order (but except):
// the order closed, or except paid it.
func cancelPending(ctx context.Context, tx bun.Tx, orderID int64, except string) error {
	_, err := tx.NewRaw(`UPDATE payment SET status = 'CANCELLED', updated_at = now()
		WHERE order_id = ? AND status = 'PENDING' AND id <> ?`, orderID, except).Exec(ctx)
	if err != nil {
		return fmt.Errorf("cancel open payments: %w", err)
	}
	return nil
}

// notPayable says why an order cannot be paid now, or nil when it can.
func notPayable(o *lockedOrder) error {
	const at = "2006-01-02 15:04:05Z07:00"
	switch seckill.OrderStatus(o.Status) {
	case seckill.OrderCreated:
		if o.Due {
			return seckill.Errorf(seckill.ECONFLICT, "order %d is CREATED but its time to pay ran out at %s: it expires unpaid", o.ID, o.PayBy.UTC().Format(at))
		}
		return nil
	case seckill.OrderPaid:
		return seckill.Errorf(seckill.ECONFLICT, "order %d is PAID already", o.ID)
	case seckill.OrderCancelled:
		return seckill.Errorf(seckill.ECONFLICT, "order %d is CANCELLED: there is nothing to pay", o.ID)
	case seckill.OrderExpired:
		return seckill.Errorf(seckill.ECONFLICT, "order %d EXPIRED unpaid at %s: there is nothing to pay", o.ID, o.PayBy.UTC().Format(at))
	}
	return seckill.Errorf(seckill.ECONFLICT, "order %d is %s: only an order awaiting payment can be paid", o.ID, o.Status)
}

// SetPaymentRef records the provider's reference to a payment; see
// seckill.OrderLife.
func (s *Store) SetPaymentRef(ctx context.Context, paymentID, ref string) error {
	_, err := s.db.NewRaw(`UPDATE payment SET provider_ref = ? WHERE id = ? AND provider_ref IS NULL`, ref, paymentID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: set the provider's reference of payment %s: %w", paymentID, err)
	}
	return nil
}

// CreatePayment returns the open payment of an order awaiting payment, or
// opens one; see seckill.OrderLife.
func (s *Store) CreatePayment(ctx context.Context, orderID, userID int64, currency, newID string) (*seckill.Payment, error) {
	var p seckill.Payment
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		o, err := lockOrder(ctx, tx, orderID)
		if err != nil {
			return err
		}
		if userID > 0 && o.UserID != userID {
			return seckill.Errorf(seckill.ENOTFOUND, "order %d not found", orderID)
		}
		if err := notPayable(o); err != nil {
			return err
		}
		var rows []paymentRow
		err = tx.NewSelect().Model(&rows).Where("p.order_id = ?", orderID).Where("p.status = 'PENDING'").Scan(ctx)
		if err != nil {
			return fmt.Errorf("select payment: %w", err)
		}
		if len(rows) > 0 {
			p = toDomainPayment(&rows[0], o.PayBy)
			return nil
		}
		row := paymentRow{ID: newID, OrderID: orderID, Amount: o.Amount, Currency: currency}
		if _, err := tx.NewInsert().Model(&row).Returning("created_at, status").Exec(ctx); err != nil {
			return fmt.Errorf("insert payment: %w", err)
		}
		p = toDomainPayment(&row, o.PayBy)
		return nil
	})
	if err != nil {
		if seckill.ErrorCode(err) != seckill.EINTERNAL {
			return nil, err
		}
		return nil, fmt.Errorf("store: create payment of order %d: %w", orderID, err)
	}
	return &p, nil
}

// OrderPayments returns an order's payments, oldest first.
func (s *Store) OrderPayments(ctx context.Context, orderID int64) ([]seckill.Payment, error) {
	var rows []struct {
		paymentRow
		PayBy time.Time `bun:"pay_by"`
	}
	err := s.db.NewRaw(`SELECT p.id, p.order_id, p.amount, p.currency, p.status, p.created_at, p.updated_at, o.pay_by
		FROM payment AS p JOIN voucher_order AS o ON o.id = p.order_id
		WHERE p.order_id = ? ORDER BY p.created_at, p.id`, orderID).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select payments of order %d: %w", orderID, err)
	}
	out := make([]seckill.Payment, len(rows))
	for i := range rows {
		out[i] = toDomainPayment(&rows[i].paymentRow, rows[i].PayBy)
	}
	return out, nil
}

// ApplyPaymentEvent applies a provider's event once per event id; see
// seckill.OrderLife. It locks the order, then the payment, so concurrent
// deliveries of one event (or of two events of one order's payments) go
// one after the other, and the later finds the earlier's event row.
func (s *Store) ApplyPaymentEvent(ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error) {
	var res seckill.PaymentResult
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res = seckill.PaymentResult{}
		var orderID int64
		err := tx.NewRaw(`SELECT order_id FROM payment WHERE id = ?`, ev.PaymentID).Scan(ctx, &orderID)
		if err := oneRow(err, "select", "payment", ev.PaymentID); err != nil {
			return err
		}
		o, err := lockOrder(ctx, tx, orderID)
		if err != nil {
			return err
		}
		var p paymentRow
		if err := tx.NewSelect().Model(&p).Where("p.id = ?", ev.PaymentID).For("UPDATE").Scan(ctx); err != nil {
			return fmt.Errorf("lock payment: %w", err)
		}
		if ev.Amount != p.Amount || ev.Currency != p.Currency {
			return seckill.Invalidf("amount", "payment %s is for %s, not %s", p.ID,
				seckill.FormatAmount(p.Amount, p.Currency), seckill.FormatAmount(ev.Amount, ev.Currency))
		}
		var seen []struct {
			PaymentID string `bun:"payment_id"`
			Outcome   string `bun:"outcome"`
		}
		if err := tx.NewRaw(`SELECT payment_id, outcome FROM payment_event WHERE id = ?`, ev.ID).Scan(ctx, &seen); err != nil {
			return fmt.Errorf("select event: %w", err)
		}
		if len(seen) > 0 {
			if seen[0].PaymentID != p.ID {
				return seckill.Errorf(seckill.ECONFLICT, "event %s was applied to another payment", ev.ID)
			}
			res.Duplicate, res.Outcome = true, seckill.EventOutcome(seen[0].Outcome)
		} else {
			outcome, err := s.applyEvent(ctx, tx, ev, o, &p)
			if err != nil {
				return err
			}
			res.Outcome = outcome
			_, err = tx.NewRaw(`INSERT INTO payment_event (id, payment_id, type, outcome) VALUES (?, ?, ?, ?)`,
				ev.ID, p.ID, ev.Type, string(outcome)).Exec(ctx)
			if sqlState(err) == codeUniqueViolation {
				return seckill.Errorf(seckill.ECONFLICT, "event %s was applied to another payment", ev.ID)
			} else if err != nil {
				return fmt.Errorf("insert event: %w", err)
			}
		}
		res.Payment = toDomainPayment(&p, o.PayBy)
		res.Order, err = findOrder(ctx, tx, orderID)
		return err
	})
	if err != nil {
		if seckill.ErrorCode(err) != seckill.EINTERNAL {
			return seckill.PaymentResult{}, err
		}
		return seckill.PaymentResult{}, fmt.Errorf("store: apply payment event %q: %w", ev.ID, err)
	}
	return res, nil
}

// applyEvent changes the payment p (locked) and its order o (locked) as the
// event says (see seckill.OrderLife.ApplyPaymentEvent), and returns what it
// did.
func (s *Store) applyEvent(ctx context.Context, tx bun.Tx, ev seckill.PaymentEvent, o *lockedOrder, p *paymentRow) (seckill.EventOutcome, error) {
	status := seckill.PaymentStatus(p.Status)
	switch ev.Type {
	case seckill.EventPaymentSucceeded:
		if status != seckill.PaymentPending && status != seckill.PaymentFailed && status != seckill.PaymentCancelled {
			return seckill.AppliedIgnored, nil // this payment's money was counted before
		}
		if o.Status != string(seckill.OrderCreated) {
			// Paid by another payment, cancelled or expired: the order
			// stays as it is and the money goes back.
			_, err := tx.NewRaw(`UPDATE payment SET status = 'REFUND_NEEDED', owed_at = now(), refund_generation = 1,
				updated_at = now() WHERE id = ?`, p.ID).Exec(ctx)
			if err != nil {
				return "", fmt.Errorf("owe payment back: %w", err)
			}
			p.Status = string(seckill.PaymentRefundNeeded)
			return seckill.AppliedOwed, nil
		}
		// This payment pays; any other still open can only be cancelled.
		if err := cancelPending(ctx, tx, o.ID, p.ID); err != nil {
			return "", err
		}
		if _, err := tx.NewRaw(`UPDATE voucher_order SET status = 'PAID', paid_at = now(), event_seq = event_seq + 1 WHERE id = ?`, o.ID).Exec(ctx); err != nil {
			return "", fmt.Errorf("pay order: %w", err)
		}
		if err := setPaymentStatus(ctx, tx, p, seckill.PaymentSucceeded); err != nil {
			return "", err
		}
		if err := s.emit(ctx, tx, []orderEvent{{orderID: o.ID, typ: seckill.EventOrderPaid, paymentID: p.ID}}); err != nil {
			return "", err
		}
		return seckill.AppliedPaid, nil
	case seckill.EventPaymentFailed:
		if status != seckill.PaymentPending {
			return seckill.AppliedIgnored, nil
		}
		if err := setPaymentStatus(ctx, tx, p, seckill.PaymentFailed); err != nil {
			return "", err
		}
		return seckill.AppliedFailed, nil
	case seckill.EventRefundSucceeded:
		if !status.Owed() {
			return seckill.AppliedIgnored, nil // nothing was owed: nothing changes
		}
		_, err := tx.NewRaw(`UPDATE payment SET status = 'REFUNDED', refunded_at = now(), updated_at = now() WHERE id = ?`, p.ID).Exec(ctx)
		if err != nil {
			return "", fmt.Errorf("record refund: %w", err)
		}
		if err := s.refundEvent(ctx, tx, o.ID, p.ID, seckill.EventOrderRefunded); err != nil {
			return "", err
		}
		p.Status = string(seckill.PaymentRefunded)
		return seckill.AppliedRefunded, nil
	case seckill.EventRefundFailed:
		if status != seckill.PaymentRefundNeeded && status != seckill.PaymentRefunding {
			return seckill.AppliedIgnored, nil
		}
		_, err := tx.NewRaw(`UPDATE payment SET status = 'REFUND_FAILED', refund_refused = true, refund_error = ?,
			updated_at = now() WHERE id = ?`, refundReason("refused: ", ev.Reason), p.ID).Exec(ctx)
		if err != nil {
			return "", fmt.Errorf("record refund failure: %w", err)
		}
		if err := s.refundEvent(ctx, tx, o.ID, p.ID, seckill.EventOrderRefundFailed); err != nil {
			return "", err
		}
		p.Status = string(seckill.PaymentRefundFailed)
		return seckill.AppliedRefundFailed, nil
	}
	return "", fmt.Errorf("unknown event type %q", ev.Type)
}

func setPaymentStatus(ctx context.Context, tx bun.Tx, p *paymentRow, to seckill.PaymentStatus) error {
	_, err := tx.NewRaw(`UPDATE payment SET status = ?, updated_at = now() WHERE id = ?`, string(to), p.ID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("update payment: %w", err)
	}
	p.Status = string(to)
	return nil
}

// refundReason is what refund_error records: prefix and the provider's
// words, cut to the column's 500 bytes.
func refundReason(prefix, reason string) string {
	if reason == "" {
		reason = "no reason given"
	}
	s := prefix + reason
	for len(s) > seckill.MaxReasonLen {
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "")
}
