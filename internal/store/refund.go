package store

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
)

// Refunds of payments owed back (seckill.RefundStore). Each change locks the
// payment's order row first, then the payment, as the payment events do,
// so a refund's send and the provider's confirmation go one after the
// other.

var _ seckill.RefundStore = (*Store)(nil)

// refundRow is a payment owed back or refunded, with its order.
type refundRow struct {
	ID               string    `bun:"id"`
	OrderID          int64     `bun:"order_id"`
	VoucherID        int64     `bun:"voucher_id"`
	UserID           int64     `bun:"user_id"`
	Amount           int64     `bun:"amount"`
	Currency         string    `bun:"currency"`
	Status           string    `bun:"status"`
	OwedAt           time.Time `bun:"owed_at"`
	RefundGeneration int       `bun:"refund_generation"`
	RefundRound      int       `bun:"refund_round"`
	RefundSends      int       `bun:"refund_sends"`
	RefundSentAt     time.Time `bun:"refund_sent_at"`
	RefundedAt       time.Time `bun:"refunded_at"`
	RefundError      string    `bun:"refund_error"`
	RefundRefused    bool      `bun:"refund_refused"`
	ProviderRef      string    `bun:"provider_ref"`
}

const refundColumns = `p.id, p.order_id, o.voucher_id, o.user_id, p.amount, p.currency, p.status, p.owed_at,
	p.refund_generation, p.refund_round, p.refund_sends, p.refund_sent_at, p.refunded_at, p.refund_error, p.refund_refused,
	coalesce(p.provider_ref, '') AS provider_ref`

func (r *refundRow) send() seckill.RefundSend {
	return seckill.RefundSend{PaymentID: r.ID, OrderID: r.OrderID, VoucherID: r.VoucherID, Amount: r.Amount,
		Currency: r.Currency, Status: seckill.PaymentStatus(r.Status), ProviderRef: r.ProviderRef, Generation: r.RefundGeneration,
		Round: r.RefundRound, Sends: r.RefundSends}
}

func (r *refundRow) refund() seckill.Refund {
	return seckill.Refund{PaymentID: r.ID, OrderID: r.OrderID, VoucherID: r.VoucherID, UserID: r.UserID,
		Amount: r.Amount, Currency: r.Currency, Status: seckill.PaymentStatus(r.Status), OwedAt: utc(r.OwedAt),
		SentAt: utc(r.RefundSentAt), RefundedAt: utc(r.RefundedAt), Sends: r.RefundSends, Error: r.RefundError}
}

// lockRefund locks a payment's order, then the payment, and reads its
// refund. ENOTFOUND.
func lockRefund(ctx context.Context, tx bun.Tx, paymentID string) (*refundRow, error) {
	var orderID int64
	err := tx.NewRaw(`SELECT order_id FROM payment WHERE id = ?`, paymentID).Scan(ctx, &orderID)
	if err := oneRow(err, "select", "payment", paymentID); err != nil {
		return nil, err
	}
	if _, err := lockOrder(ctx, tx, orderID); err != nil {
		return nil, err
	}
	var r refundRow
	err = tx.NewRaw(`SELECT `+refundColumns+` FROM payment AS p JOIN voucher_order AS o ON o.id = p.order_id
		WHERE p.id = ? FOR UPDATE OF p`, paymentID).Scan(ctx, &r)
	if err := oneRow(err, "lock", "payment", paymentID); err != nil {
		return nil, err
	}
	return &r, nil
}

// inTx runs f in a transaction; a domain error comes back as it is, any
// other wrapped with what.
func (s *Store) inTx(ctx context.Context, what string, f func(ctx context.Context, tx bun.Tx) error) error {
	err := s.db.RunInTx(ctx, nil, f)
	if err != nil && seckill.ErrorCode(err) == seckill.EINTERNAL {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return err
}

// BeginRefund takes a send of a payment's refund; see seckill.RefundStore.
func (s *Store) BeginRefund(ctx context.Context, paymentID string, maxSends int) (seckill.RefundSend, error) {
	var out seckill.RefundSend
	err := s.inTx(ctx, "begin refund of "+paymentID, func(ctx context.Context, tx bun.Tx) error {
		r, err := lockRefund(ctx, tx, paymentID)
		if err != nil {
			return err
		}
		out = r.send()
		st := seckill.PaymentStatus(r.Status)
		if st != seckill.PaymentRefundNeeded && st != seckill.PaymentRefunding {
			return nil
		}
		if r.RefundSends >= maxSends {
			_, err := tx.NewRaw(`UPDATE payment SET status = 'REFUND_FAILED', refund_refused = false, refund_error = ?,
				updated_at = now() WHERE id = ?`,
				refundReason("", fmt.Sprintf("the provider did not confirm the refund after %d sends", r.RefundSends)), paymentID).Exec(ctx)
			if err != nil {
				return fmt.Errorf("fail refund: %w", err)
			}
			if err := s.refundEvent(ctx, tx, r.OrderID, paymentID, seckill.EventOrderRefundFailed); err != nil {
				return err
			}
			out.Status = seckill.PaymentRefundFailed
			return nil
		}
		_, err = tx.NewRaw(`UPDATE payment SET status = 'REFUNDING', refund_sends = refund_sends + 1,
			refund_sent_at = now(), updated_at = now() WHERE id = ?`, paymentID).Exec(ctx)
		if err != nil {
			return fmt.Errorf("send refund: %w", err)
		}
		out.Status, out.Sends, out.Send = seckill.PaymentRefunding, r.RefundSends+1, true
		return nil
	})
	return out, err
}

// SettleRefund records the provider's verdict on a refund; see
// seckill.RefundStore.
func (s *Store) SettleRefund(ctx context.Context, paymentID string, gen int, ok, refused bool, reason string) (bool, error) {
	changed := false
	err := s.inTx(ctx, "settle refund of "+paymentID, func(ctx context.Context, tx bun.Tx) error {
		r, err := lockRefund(ctx, tx, paymentID)
		if err != nil {
			return err
		}
		st := seckill.PaymentStatus(r.Status)
		if r.RefundGeneration != gen || st != seckill.PaymentRefundNeeded && st != seckill.PaymentRefunding {
			return nil // settled since, or a send of an earlier generation
		}
		if ok {
			_, err = tx.NewRaw(`UPDATE payment SET status = 'REFUNDED', refunded_at = now(), updated_at = now() WHERE id = ?`, paymentID).Exec(ctx)
		} else {
			_, err = tx.NewRaw(`UPDATE payment SET status = 'REFUND_FAILED', refund_refused = ?, refund_error = ?,
				updated_at = now() WHERE id = ?`, refused, refundReason("", reason), paymentID).Exec(ctx)
		}
		if err != nil {
			return fmt.Errorf("update payment: %w", err)
		}
		typ := seckill.EventOrderRefundFailed
		if ok {
			typ = seckill.EventOrderRefunded
		}
		if err := s.refundEvent(ctx, tx, r.OrderID, paymentID, typ); err != nil {
			return err
		}
		changed = true
		return nil
	})
	return changed, err
}

// NoteRefundError records why the last send of a refund failed.
func (s *Store) NoteRefundError(ctx context.Context, paymentID string, gen int, reason string) error {
	_, err := s.db.NewRaw(`UPDATE payment SET refund_error = ?, updated_at = now()
		WHERE id = ? AND refund_generation = ? AND status IN ('REFUND_NEEDED', 'REFUNDING')`,
		refundReason("", reason), paymentID, gen).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: note refund error of %s: %w", paymentID, err)
	}
	return nil
}

// RetryRefund makes a failed refund owed again in a new round; see
// seckill.RefundStore.
func (s *Store) RetryRefund(ctx context.Context, paymentID string) (seckill.RefundSend, error) {
	var out seckill.RefundSend
	err := s.inTx(ctx, "retry refund of "+paymentID, func(ctx context.Context, tx bun.Tx) error {
		r, err := lockRefund(ctx, tx, paymentID)
		if err != nil {
			return err
		}
		if r.Status != string(seckill.PaymentRefundFailed) {
			return seckill.Errorf(seckill.ECONFLICT, "payment %s is %s: only a failed refund can be sent again", paymentID, r.Status)
		}
		gen := r.RefundGeneration
		if r.RefundRefused {
			gen++ // the provider would answer the old key with its refusal
		}
		_, err = tx.NewRaw(`UPDATE payment SET status = 'REFUND_NEEDED', refund_generation = ?, refund_round = refund_round + 1,
			refund_sends = 0, refund_refused = false, refund_error = '', updated_at = now() WHERE id = ?`, gen, paymentID).Exec(ctx)
		if err != nil {
			return fmt.Errorf("update payment: %w", err)
		}
		out = r.send()
		out.Status, out.Generation, out.Round, out.Sends = seckill.PaymentRefundNeeded, gen, r.RefundRound+1, 0
		return nil
	})
	return out, err
}

// DueRefunds returns refunds whose next send may not be scheduled; see
// seckill.RefundStore.
func (s *Store) DueRefunds(ctx context.Context, owedBefore, sentBefore time.Time, limit int) ([]seckill.RefundSend, error) {
	var rows []refundRow
	err := s.db.NewRaw(`SELECT `+refundColumns+` FROM payment AS p JOIN voucher_order AS o ON o.id = p.order_id
		WHERE p.status IN ('REFUND_NEEDED', 'REFUNDING', 'REFUND_FAILED')
			AND (p.status = 'REFUND_NEEDED' AND p.updated_at < ?0 OR p.status = 'REFUNDING' AND p.refund_sent_at < ?1)
		ORDER BY p.owed_at LIMIT ?2`, owedBefore, sentBefore, max(limit, 1)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select due refunds: %w", err)
	}
	out := make([]seckill.RefundSend, len(rows))
	for i := range rows {
		out[i] = rows[i].send()
	}
	return out, nil
}

// Refunds lists payments owed back or refunded, oldest owed first.
func (s *Store) Refunds(ctx context.Context, f seckill.RefundFilter) ([]seckill.Refund, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = seckill.DefaultPageSize
	}
	var rows []refundRow
	err := s.db.NewRaw(`SELECT `+refundColumns+` FROM payment AS p JOIN voucher_order AS o ON o.id = p.order_id
		WHERE p.owed_at IS NOT NULL AND (?0 = 0 OR o.voucher_id = ?0) AND (?1 = '' OR p.status = ?1)
		ORDER BY p.owed_at, p.id LIMIT ?2`, f.VoucherID, string(f.Status), min(limit, 1000)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select refunds: %w", err)
	}
	out := make([]seckill.Refund, len(rows))
	for i := range rows {
		out[i] = rows[i].refund()
	}
	return out, nil
}

// RefundStats counts refunds by status and those stuck; see
// seckill.RefundStore.
func (s *Store) RefundStats(ctx context.Context, voucherID int64, stuckBefore time.Time) (seckill.RefundStats, error) {
	var rows []struct {
		Status   string `bun:"status"`
		Currency string `bun:"currency"`
		Count    int64  `bun:"count"`
		Amount   int64  `bun:"amount"`
		Stuck    int64  `bun:"stuck"`
	}
	err := s.db.NewRaw(`SELECT p.status, p.currency, count(*) AS count, sum(p.amount) AS amount,
			count(*) FILTER (WHERE p.status IN ('REFUND_NEEDED', 'REFUNDING') AND p.owed_at < ?1) AS stuck
		FROM payment AS p JOIN voucher_order AS o ON o.id = p.order_id
		WHERE p.owed_at IS NOT NULL AND (?0 = 0 OR o.voucher_id = ?0)
		GROUP BY p.status, p.currency`, voucherID, stuckBefore).Scan(ctx, &rows)
	if err != nil {
		return seckill.RefundStats{}, fmt.Errorf("store: count refunds: %w", err)
	}
	st := seckill.RefundStats{ByStatus: map[seckill.PaymentStatus]seckill.RefundTally{}}
	for _, r := range rows {
		t := st.ByStatus[seckill.PaymentStatus(r.Status)]
		if t.Amounts == nil {
			t.Amounts = map[string]int64{}
		}
		t.Count += r.Count
		t.Amounts[r.Currency] += r.Amount
		st.ByStatus[seckill.PaymentStatus(r.Status)] = t
		st.Stuck += r.Stuck
	}
	return st, nil
}
