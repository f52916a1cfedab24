package verify

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
)

// Expiry reads what became of a campaign's orders nobody paid for: its
// tables are seckill's voucher_order (status, pay_by, closed_at).
type Expiry struct {
	PG        *Postgres
	VoucherID int64
}

// PayBy returns the earliest and latest pay_by of the campaign's orders.
func (e Expiry) PayBy(ctx context.Context) (first, last time.Time, err error) {
	var f, l sql.NullTime
	err = e.PG.DB.QueryRowContext(ctx, `SELECT min(pay_by), max(pay_by) FROM voucher_order WHERE voucher_id = ?`, e.VoucherID).Scan(&f, &l)
	if err != nil {
		return first, last, fmt.Errorf("read pay_by: %w", err)
	}
	return f.Time, l.Time, nil
}

// Awaiting counts the campaign's orders that wait for payment (CREATED).
func (e Expiry) Awaiting(ctx context.Context) (int64, error) {
	var n int64
	err := e.PG.DB.QueryRowContext(ctx, `SELECT count(*) FROM voucher_order WHERE voucher_id = ? AND status = 'CREATED'`,
		e.VoucherID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count awaiting orders: %w", err)
	}
	return n, nil
}

// Expired returns the campaign's EXPIRED orders: how many, when the first
// and the last were closed, and how many in the busiest second.
func (e Expiry) Expired(ctx context.Context) (n int64, first, last time.Time, peak int64, err error) {
	var f, l sql.NullTime
	err = e.PG.DB.QueryRowContext(ctx, `SELECT count(*), min(closed_at), max(closed_at) FROM voucher_order
		WHERE voucher_id = ? AND status = 'EXPIRED'`, e.VoucherID).Scan(&n, &f, &l)
	if err != nil {
		return 0, first, last, 0, fmt.Errorf("count expired orders: %w", err)
	}
	if n > 0 {
		err = e.PG.DB.QueryRowContext(ctx, `SELECT coalesce(max(c), 0) FROM (SELECT count(*) AS c FROM voucher_order
			WHERE voucher_id = ? AND status = 'EXPIRED' GROUP BY date_trunc('second', closed_at)) AS s`, e.VoucherID).Scan(&peak)
		if err != nil {
			return 0, first, last, 0, fmt.Errorf("expiries by second: %w", err)
		}
	}
	return n, f.Time, l.Time, peak, nil
}

// ExpiredBetween counts the campaign's orders EXPIRED (closed_at) from
// from to to.
func (e Expiry) ExpiredBetween(ctx context.Context, from, to time.Time) (int64, error) {
	var n int64
	err := e.PG.DB.QueryRowContext(ctx, `SELECT count(*) FROM voucher_order
		WHERE voucher_id = ? AND status = 'EXPIRED' AND closed_at >= ? AND closed_at < ?`, e.VoucherID, from, to).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count expired orders: %w", err)
	}
	return n, nil
}

// Lag measures how long after the bench heard ACCEPTED each of accepted
// reached Postgres: its row's created_at (the writing transaction's start)
// minus the answer's arrival. Orders without a row are left out.
func (v *Postgres) Lag(ctx context.Context, voucherID, userLo, userHi int64, accepted []load.Acceptance) (*report.Lag, error) {
	rows, err := v.DB.QueryContext(ctx, `SELECT id, created_at FROM voucher_order WHERE voucher_id = ? AND user_id BETWEEN ? AND ?`,
		voucherID, userLo, userHi)
	if err != nil {
		return nil, fmt.Errorf("read created_at: %w", err)
	}
	defer rows.Close()
	created := make(map[int64]time.Time, len(accepted))
	for rows.Next() {
		var id int64
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		created[id] = at
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	h := load.NewHistogram()
	for _, a := range accepted {
		if at, ok := created[a.OrderID]; ok {
			h.Record(at.Sub(a.At))
		}
	}
	if h.Count() == 0 {
		return nil, nil
	}
	return &report.Lag{Orders: int64(h.Count()), P50: report.Ms(h.Quantile(0.5)), P99: report.Ms(h.Quantile(0.99)),
		Max: report.Ms(h.Max())}, nil
}
