package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

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
			UPDATE voucher_order SET status = ?0, closed_at = now(), return_epoch = 0
			WHERE id = ?1 AND status = 'CREATED' AND (?2 = 0 OR user_id = ?2)
				AND (?0 = 'CANCELLED' OR pay_by <= now())
			RETURNING voucher_id, user_id`, string(to), id, userID).Scan(ctx, &closed)
		if err != nil {
			return fmt.Errorf("close order: %w", err)
		}
		if len(closed) == 1 {
			var epoch int64
			err := tx.NewRaw(`
				UPDATE seckill_campaign SET stock = stock + 1, updated_at = now()
				WHERE voucher_id = ? RETURNING epoch`, closed[0].VoucherID).Scan(ctx, &epoch)
			if err != nil {
				return fmt.Errorf("return unit: %w", err)
			}
			if _, err := tx.NewRaw(`UPDATE voucher_order SET return_epoch = ? WHERE id = ?`, epoch, id).Exec(ctx); err != nil {
				return fmt.Errorf("record return epoch: %w", err)
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

// UnitReturned records that admission took back the unit of a closed order.
func (s *Store) UnitReturned(ctx context.Context, orderID int64) error {
	_, err := s.db.NewRaw(`UPDATE voucher_order SET unit_returned = true
		WHERE id = ? AND status IN ('CANCELLED', 'EXPIRED')`, orderID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: mark unit of order %d returned: %w", orderID, err)
	}
	return nil
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

// DueOrders returns up to limit ids of CREATED orders past pay_by on the
// database's clock, oldest first.
func (s *Store) DueOrders(ctx context.Context, limit int) ([]int64, error) {
	var ids []int64
	err := s.db.NewRaw(`
		SELECT id FROM voucher_order WHERE status = 'CREATED' AND pay_by <= now()
		ORDER BY pay_by LIMIT ?`, max(limit, 1)).Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("store: select due orders: %w", err)
	}
	return ids, nil
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
	ID     int64     `bun:"id"`
	UserID int64     `bun:"user_id"`
	Status string    `bun:"status"`
	Amount int64     `bun:"amount"`
	PayBy  time.Time `bun:"pay_by"`
}

func lockOrder(ctx context.Context, tx bun.Tx, id int64) (*lockedOrder, error) {
	var o lockedOrder
	err := tx.NewRaw(`SELECT id, user_id, status, amount, pay_by FROM voucher_order WHERE id = ? FOR UPDATE`, id).Scan(ctx, &o)
	if err := oneRow(err, "lock", "order", id); err != nil {
		return nil, err
	}
	return &o, nil
}

// CreatePayment returns the open or succeeded payment of an order, or opens
// one for a CREATED order; see seckill.OrderLife.
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
		var rows []paymentRow
		err = tx.NewSelect().Model(&rows).Where("p.order_id = ?", orderID).Where("p.status <> 'FAILED'").Scan(ctx)
		if err != nil {
			return fmt.Errorf("select payment: %w", err)
		}
		if len(rows) > 0 {
			p = toDomainPayment(&rows[0], o.PayBy)
			return nil
		}
		if o.Status != string(seckill.OrderCreated) {
			return seckill.Errorf(seckill.ECONFLICT, "order %d is %s: only an order awaiting payment can be paid", orderID, o.Status)
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

// Outcomes of a payment event, as payment_event records them.
const (
	eventPaid         = "paid"
	eventRefundNeeded = "refund_needed"
	eventFailed       = "failed"
	eventIgnored      = "ignored" // the payment was settled already
)

// ApplyPaymentEvent applies a provider's event once per event id; see
// seckill.OrderLife. It locks the order, then the payment, so concurrent
// deliveries of one event (or of two events of one payment) go one after
// the other, and the later finds the earlier's event row.
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
			return seckill.Invalidf("amount", "payment %s is for %d %s, not %d %s", p.ID, p.Amount, p.Currency, ev.Amount, ev.Currency)
		}
		var seen []string
		if err := tx.NewRaw(`SELECT payment_id FROM payment_event WHERE id = ?`, ev.ID).Scan(ctx, &seen); err != nil {
			return fmt.Errorf("select event: %w", err)
		}
		if len(seen) > 0 {
			if seen[0] != p.ID {
				return seckill.Errorf(seckill.ECONFLICT, "event %s was applied to another payment", ev.ID)
			}
			res.Duplicate = true
		} else {
			outcome, err := applyPayment(ctx, tx, ev, o, &p)
			if err != nil {
				return err
			}
			res.Paid = outcome == eventPaid
			_, err = tx.NewRaw(`INSERT INTO payment_event (id, payment_id, type, outcome) VALUES (?, ?, ?, ?)`,
				ev.ID, p.ID, ev.Type, outcome).Exec(ctx)
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

// applyPayment changes the payment p (locked) and its order o (locked) as
// the event says, and returns the outcome to record.
func applyPayment(ctx context.Context, tx bun.Tx, ev seckill.PaymentEvent, o *lockedOrder, p *paymentRow) (string, error) {
	settled := p.Status == string(seckill.PaymentSucceeded) || p.Status == string(seckill.PaymentRefundNeeded)
	var outcome string
	switch {
	case settled:
		return eventIgnored, nil
	case ev.Type == seckill.EventPaymentFailed:
		if p.Status != string(seckill.PaymentPending) {
			return eventIgnored, nil
		}
		p.Status, outcome = string(seckill.PaymentFailed), eventFailed
	case o.Status == string(seckill.OrderCreated):
		// A newer payment of the order may be open: this one paid, so that
		// one can only fail now.
		_, err := tx.NewRaw(`UPDATE payment SET status = 'FAILED', updated_at = now()
			WHERE order_id = ? AND status = 'PENDING' AND id <> ?`, o.ID, p.ID).Exec(ctx)
		if err != nil {
			return "", fmt.Errorf("fail other payments: %w", err)
		}
		_, err = tx.NewRaw(`UPDATE voucher_order SET status = 'PAID', paid_at = now() WHERE id = ?`, o.ID).Exec(ctx)
		if err != nil {
			return "", fmt.Errorf("pay order: %w", err)
		}
		p.Status, outcome = string(seckill.PaymentSucceeded), eventPaid
	default:
		// The order expired, was cancelled or was paid by another
		// payment: the money goes back; the order stays as it is.
		p.Status, outcome = string(seckill.PaymentRefundNeeded), eventRefundNeeded
	}
	_, err := tx.NewRaw(`UPDATE payment SET status = ?, updated_at = now() WHERE id = ?`, p.Status, p.ID).Exec(ctx)
	if err != nil {
		return "", fmt.Errorf("update payment: %w", err)
	}
	return outcome, nil
}
