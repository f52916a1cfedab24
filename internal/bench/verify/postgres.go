// Package verify checks what a bench run left behind against what it was
// told: the orders in Postgres (oversell, lost, duplicate), the wait until
// every accepted order is persisted, and the server's state sampled while
// it is under load.
package verify

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
)

// Postgres reads a run's orders straight from Postgres. It knows the
// tables it reads: voucher_order (id, user_id, voucher_id, created_at),
// seckill_campaign (voucher_id, stock) and, when Failures is set,
// order_failure (voucher_id, user_id). The sync design's schema has the
// first two under the same names.
type Postgres struct {
	DB       *bun.DB
	Failures bool // the database has order_failure (seckill's does, the sync design's not)
}

// Counts is what Postgres holds of one run: the orders of the users in
// [userLo, userHi] for one voucher.
type Counts struct {
	Rows, DistinctUsers, DistinctIDs, Failed int64
	LastCreated                              time.Time // zero without rows
	Stock                                    int64     // units left in seckill_campaign
}

func (v *Postgres) Counts(ctx context.Context, voucherID, userLo, userHi int64) (Counts, error) {
	var c Counts
	var last sql.NullTime
	err := v.DB.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT user_id), count(DISTINCT id), max(created_at)
		FROM voucher_order WHERE voucher_id = ? AND user_id BETWEEN ? AND ?`, voucherID, userLo, userHi).
		Scan(&c.Rows, &c.DistinctUsers, &c.DistinctIDs, &last)
	if err != nil {
		return c, fmt.Errorf("count orders: %w", err)
	}
	c.LastCreated = last.Time
	if v.Failures {
		err := v.DB.QueryRowContext(ctx, `SELECT count(*) FROM order_failure WHERE voucher_id = ? AND user_id BETWEEN ? AND ?`,
			voucherID, userLo, userHi).Scan(&c.Failed)
		if err != nil {
			return c, fmt.Errorf("count failed orders: %w", err)
		}
	}
	err = v.DB.QueryRowContext(ctx, `SELECT stock FROM seckill_campaign WHERE voucher_id = ?`, voucherID).Scan(&c.Stock)
	if err != nil {
		return c, fmt.Errorf("read campaign %d: %w", voucherID, err)
	}
	return c, nil
}

// orderIDs returns the ids of the run's orders.
func (v *Postgres) orderIDs(ctx context.Context, voucherID, userLo, userHi int64) ([]int64, error) {
	return v.runIDs(ctx, "voucher_order", voucherID, userLo, userHi)
}

// failedIDs returns the ids of the run's admissions recorded as FAILED.
func (v *Postgres) failedIDs(ctx context.Context, voucherID, userLo, userHi int64) ([]int64, error) {
	if !v.Failures {
		return nil, nil
	}
	return v.runIDs(ctx, "order_failure", voucherID, userLo, userHi)
}

// runIDs returns the ids in table (one of ours, never input) of the run's
// buyers of voucherID.
func (v *Postgres) runIDs(ctx context.Context, table string, voucherID, userLo, userHi int64) ([]int64, error) {
	rows, err := v.DB.QueryContext(ctx, `SELECT id FROM `+table+` WHERE voucher_id = ? AND user_id BETWEEN ? AND ?`,
		voucherID, userLo, userHi)
	if err != nil {
		return nil, fmt.Errorf("read ids from %s: %w", table, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Verify fills p from Postgres: counts, duplicates, and the
// accepted order ids compared with the rows (and the recorded failures).
func (v *Postgres) Verify(ctx context.Context, p *report.Persistence, voucherID, userLo, userHi int64, accepted []load.Acceptance) (Counts, error) {
	c, err := v.Counts(ctx, voucherID, userLo, userHi)
	if err != nil {
		return c, err
	}
	p.Rows, p.FailedOrders = c.Rows, c.Failed
	p.DuplicateUsers, p.DuplicateIDs = c.Rows-c.DistinctUsers, c.Rows-c.DistinctIDs
	p.PostgresStock = report.Ptr(c.Stock)
	ids, err := v.orderIDs(ctx, voucherID, userLo, userHi)
	if err != nil {
		return c, err
	}
	failed, err := v.failedIDs(ctx, voucherID, userLo, userHi)
	if err != nil {
		return c, err
	}
	p.Lost, p.Unexpected = DiffOrders(accepted, ids, failed)
	return c, nil
}

// DiffOrders compares the order ids the bench was told with the rows:
// lost are accepted ids neither in rows nor recorded as failed; unexpected
// are rows that no answer accepted.
func DiffOrders(accepted []load.Acceptance, rows, failed []int64) (lost, unexpected int64) {
	have := make(map[int64]bool, len(rows)+len(failed))
	for _, id := range rows {
		have[id] = true
	}
	for _, id := range failed {
		have[id] = true
	}
	told := make(map[int64]bool, len(accepted))
	for _, a := range accepted {
		told[a.OrderID] = true
		if !have[a.OrderID] {
			lost++
		}
	}
	for _, id := range rows {
		if !told[id] {
			unexpected++
		}
	}
	return lost, unexpected
}
