package store

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
)

// Order returns a persisted order: from voucher_order (CREATED, PAID,
// CANCELLED, EXPIRED), or FAILED
// with its reason from order_failure (CreatedAt is then the failure time).
// ENOTFOUND.
func (s *Store) Order(ctx context.Context, id int64) (*seckill.Order, error) {
	return findOrder(ctx, s.db, id)
}

func findOrder(ctx context.Context, db bun.IDB, id int64) (*seckill.Order, error) {
	var rows []orderView
	err := db.NewRaw(`
		SELECT `+orderColumns+` FROM voucher_order WHERE id = ?0
		UNION ALL
		SELECT `+failureColumns+` FROM order_failure WHERE id = ?0`, id).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select order %d: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "order %d not found", id)
	}
	// PersistOrders never leaves an id in both tables; were it to, the
	// created order is the truth.
	return toDomainOrder(&rows[0]), nil
}

// findOrders returns the orders of ids that exist, by id, as findOrder
// does, in one prepared statement (ordersByIDsSQL) in tx.
func (s *Store) findOrders(ctx context.Context, tx bun.Tx, ids []int64) (map[int64]*seckill.Order, error) {
	var rows []orderView
	if err := s.ordersByIDs.query(ctx, s.db, tx, &rows, int64Array(ids)); err != nil {
		return nil, fmt.Errorf("select %d orders: %w", len(ids), err)
	}
	return ordersByID(rows), nil
}

// ordersByIDsSQL reads the orders of $1 from both tables.
const ordersByIDsSQL = `SELECT ` + orderColumns + ` FROM voucher_order WHERE id = ANY($1::bigint[])
	UNION ALL
	SELECT ` + failureColumns + ` FROM order_failure WHERE id = ANY($1::bigint[])`

// ordersByID returns rows by id, the created order before a failure of
// the same id.
func ordersByID(rows []orderView) map[int64]*seckill.Order {
	out := make(map[int64]*seckill.Order, len(rows))
	for i := range rows {
		// As in findOrder: the created order is the truth.
		if o := out[rows[i].ID]; o == nil || o.Status == seckill.OrderFailed {
			out[rows[i].ID] = toDomainOrder(&rows[i])
		}
	}
	return out
}

// OrdersByUser returns up to limit (seckill.DefaultPageSize when 0) of a
// user's persisted orders, CREATED and FAILED, newest admission first.
func (s *Store) OrdersByUser(ctx context.Context, userID int64, limit int) ([]*seckill.Order, error) {
	return findOrdersByUser(ctx, s.db, userID, limit)
}

func findOrdersByUser(ctx context.Context, db bun.IDB, userID int64, limit int) ([]*seckill.Order, error) {
	if limit <= 0 {
		limit = seckill.DefaultPageSize
	}
	var rows []orderView
	err := db.NewRaw(`
		SELECT id, voucher_id, user_id, status, at, reason, amount, pay_by, paid_at, closed_at FROM (
			SELECT `+orderColumns+`, admitted_at FROM voucher_order WHERE user_id = ?0
			UNION ALL
			SELECT `+failureColumns+`, admitted_at FROM order_failure WHERE user_id = ?0
		) AS o
		ORDER BY admitted_at DESC, id DESC
		LIMIT ?1`, userID, limit).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select orders of user %d: %w", userID, err)
	}
	orders := make([]*seckill.Order, len(rows))
	for i := range rows {
		orders[i] = toDomainOrder(&rows[i])
	}
	return orders, nil
}
