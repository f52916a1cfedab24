package store

import (
	"context"
	"fmt"
	"time"

	"seckill/internal/seckill"
)

// Campaigns returns seckill vouchers with their campaigns, newest first:
// up to filter.Limit (seckill.DefaultPageSize when 0, at most 1000) with ids
// below filter.Before, ending after filter.EndedAfter when it is set.
func (s *Store) Campaigns(ctx context.Context, filter seckill.CampaignFilter) ([]*seckill.Voucher, error) {
	limit := filter.Limit
	if limit <= 0 {
		limit = seckill.DefaultPageSize
	}
	limit = min(limit, 1000)
	var rows []voucherRow
	q := s.db.NewSelect().Model(&rows).Relation("Campaign").
		Where("v.type = ?", string(seckill.VoucherSeckill)).
		Where(`"campaign"."voucher_id" IS NOT NULL`)
	if filter.Before > 0 {
		q = q.Where("v.id < ?", filter.Before)
	}
	if !filter.EndedAfter.IsZero() {
		q = q.Where(`"campaign"."end_time" > ?`, filter.EndedAfter)
	}
	if err := q.OrderExpr("v.id DESC").Limit(limit).Scan(ctx); err != nil {
		return nil, fmt.Errorf("store: select campaigns: %w", err)
	}
	vs := make([]*seckill.Voucher, len(rows))
	for i := range rows {
		vs[i] = toDomainVoucher(&rows[i])
	}
	return vs, nil
}

// CampaignTotals reads a campaign's stock and counts its orders and
// failures in one statement, so the numbers agree with each other.
// ENOTFOUND.
func (s *Store) CampaignTotals(ctx context.Context, voucherID int64) (seckill.CampaignTotals, error) {
	var t struct {
		InitialStock int64     `bun:"initial_stock"`
		Stock        int64     `bun:"stock"`
		Failures     int64     `bun:"failures"`
		Awaiting     int64     `bun:"awaiting"`
		Paid         int64     `bun:"paid"`
		Cancelled    int64     `bun:"cancelled"`
		Expired      int64     `bun:"expired"`
		Revenue      int64     `bun:"revenue"`
		OldestPayBy  time.Time `bun:"oldest_pay_by"`
	}
	err := s.db.NewRaw(`
		SELECT c.initial_stock, c.stock, o.*,
			(SELECT count(*) FROM order_failure AS f WHERE f.voucher_id = c.voucher_id) AS failures
		FROM seckill_campaign AS c, LATERAL (
			SELECT count(*) FILTER (WHERE status = 'CREATED') AS awaiting,
				count(*) FILTER (WHERE status = 'PAID') AS paid,
				count(*) FILTER (WHERE status = 'CANCELLED') AS cancelled,
				count(*) FILTER (WHERE status = 'EXPIRED') AS expired,
				coalesce(sum(amount) FILTER (WHERE status = 'PAID'), 0) AS revenue,
				min(pay_by) FILTER (WHERE status = 'CREATED') AS oldest_pay_by
			FROM voucher_order WHERE voucher_id = c.voucher_id) AS o
		WHERE c.voucher_id = ?`, voucherID).Scan(ctx, &t)
	if err := oneRow(err, "store: totals of", "campaign", voucherID); err != nil {
		return seckill.CampaignTotals{}, err
	}
	return seckill.CampaignTotals{
		InitialStock: t.InitialStock, Stock: t.Stock, Orders: t.Awaiting + t.Paid, Failures: t.Failures,
		Awaiting: t.Awaiting, Paid: t.Paid, Cancelled: t.Cancelled, Expired: t.Expired,
		Revenue: t.Revenue, OldestPayBy: utc(t.OldestPayBy),
	}, nil
}

// CampaignOrders returns a campaign's persisted orders, CREATED and FAILED,
// newest (highest id) first: up to filter.Limit (seckill.DefaultPageSize
// when 0, at most seckill.MaxPageSize) with ids below filter.Before, only
// filter.OrderID or only filter.UserID's when set. Order ids carry their
// voucher, so a page is a range scan of each table's primary key.
func (s *Store) CampaignOrders(ctx context.Context, f seckill.OrderFilter) ([]*seckill.Order, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = seckill.DefaultPageSize
	}
	limit = min(limit, seckill.MaxPageSize)
	lo, hi := seckill.OrderID(f.VoucherID, 0), seckill.OrderID(f.VoucherID+1, 0)
	if f.Before > 0 {
		hi = min(hi, f.Before)
	}
	if f.OrderID > 0 {
		if f.OrderID < lo || f.OrderID >= hi {
			return []*seckill.Order{}, nil
		}
		lo, hi = f.OrderID, f.OrderID+1
	}
	var rows []orderView
	err := s.db.NewRaw(`
		SELECT * FROM (
			SELECT `+orderColumns+`
			FROM voucher_order WHERE id >= ?0 AND id < ?1 AND voucher_id = ?2 AND (?3 = 0 OR user_id = ?3)
				AND (?5 = '' OR status = ?5)
			UNION ALL
			SELECT `+failureColumns+`
			FROM order_failure WHERE id >= ?0 AND id < ?1 AND voucher_id = ?2 AND (?3 = 0 OR user_id = ?3)
				AND ?5 IN ('', 'FAILED')
		) AS o
		ORDER BY id DESC
		LIMIT ?4`, lo, hi, f.VoucherID, f.UserID, limit, string(f.Status)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select orders of campaign %d: %w", f.VoucherID, err)
	}
	orders := make([]*seckill.Order, len(rows))
	for i := range rows {
		orders[i] = toDomainOrder(&rows[i])
	}
	return orders, nil
}
