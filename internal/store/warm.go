package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
)

// CampaignsEndingAfter returns the ids of the campaigns whose end is after
// t (those not ended, and those ended since t), in id order.
func (s *Store) CampaignsEndingAfter(ctx context.Context, t time.Time) ([]int64, error) {
	var ids []int64
	err := s.db.NewSelect().Model((*campaignRow)(nil)).Column("c.voucher_id").
		Where("c.end_time > ?", t).OrderExpr("c.voucher_id").Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("store: select campaigns ending after %s: %w", t.Format(time.RFC3339), err)
	}
	return ids, nil
}

// CampaignsEndedBetween returns the ids of the campaigns whose end is in
// [from, to), in id order.
func (s *Store) CampaignsEndedBetween(ctx context.Context, from, to time.Time) ([]int64, error) {
	var ids []int64
	err := s.db.NewSelect().Model((*campaignRow)(nil)).Column("c.voucher_id").
		Where("c.end_time >= ? AND c.end_time < ?", from, to).OrderExpr("c.voucher_id").Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("store: select campaigns ended between %s and %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return ids, nil
}

// LiveCampaigns returns the ids of the campaigns whose end is in the future,
// in id order.
func (s *Store) LiveCampaigns(ctx context.Context) ([]int64, error) {
	var ids []int64
	err := s.db.NewSelect().Model((*campaignRow)(nil)).Column("c.voucher_id").
		Where("c.end_time > now()").OrderExpr("c.voucher_id").Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("store: select live campaigns: %w", err)
	}
	return ids, nil
}

// CampaignShards returns the number of Redis stock shards of those of ids
// whose campaign has more than one (the others are absent from the map).
func (s *Store) CampaignShards(ctx context.Context, ids []int64) (map[int64]int, error) {
	out := make(map[int64]int)
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		VoucherID int64 `bun:"voucher_id"`
		Shards    int   `bun:"shards"`
	}
	err := s.db.NewSelect().Model((*campaignRow)(nil)).Column("c.voucher_id", "c.shards").
		Where("c.voucher_id IN (?)", bun.In(ids)).Where("c.shards > 1").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select campaign shards: %w", err)
	}
	for _, r := range rows {
		out[r.VoucherID] = r.Shards
	}
	return out, nil
}

// CampaignEpoch returns a campaign's current order id epoch. ENOTFOUND.
func (s *Store) CampaignEpoch(ctx context.Context, voucherID int64) (int64, error) {
	var epoch int64
	err := s.db.NewSelect().Model((*campaignRow)(nil)).Column("c.epoch").
		Where("c.voucher_id = ?", voucherID).Scan(ctx, &epoch)
	if err := oneRow(err, "store: select epoch of", "voucher", voucherID); err != nil {
		return 0, err
	}
	return epoch, nil
}

// RebuildCampaign moves a campaign to its next order id epoch and returns
// its state in it: stock, window and the users holding an order.
//
// It locks the campaign's row first and reads after (READ COMMITTED: each
// statement sees what committed before it), which fences it against
// PersistOrders: a batch that took its units before the lock is counted in
// stock and buyers; one that comes after finds the epoch moved on, takes
// nothing, and fails its orders with FailureLost. ENOTFOUND; EUNAVAILABLE
// when the campaign has used its last epoch.
func (s *Store) RebuildCampaign(ctx context.Context, voucherID int64) (seckill.WarmState, error) {
	var st seckill.WarmState
	err := s.db.RunInTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(ctx context.Context, tx bun.Tx) error {
		var row campaignRow
		err := tx.NewSelect().Model(&row).Where("c.voucher_id = ?", voucherID).For("UPDATE").Scan(ctx)
		if err := oneRow(err, "lock", "voucher", voucherID); err != nil {
			return err
		}
		if row.Epoch >= seckill.MaxEpoch {
			return seckill.Errorf(seckill.EUNAVAILABLE, "campaign %d has used all its order id epochs", voucherID)
		}
		row.Epoch++
		if _, err := tx.NewUpdate().Model(&row).Column("epoch").Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("next epoch: %w", err)
		}
		var buyers []int64
		err = tx.NewSelect().Model((*orderRow)(nil)).Column("o.user_id").
			Where("o.voucher_id = ?", voucherID).Where("o.status IN (?)", bun.In(holdingStatuses)).
			OrderExpr("o.user_id").Scan(ctx, &buyers)
		if err != nil {
			return fmt.Errorf("select buyers: %w", err)
		}
		st = seckill.WarmState{Campaign: toDomainCampaign(&row), Buyers: buyers}
		return nil
	})
	if err != nil {
		if seckill.ErrorCode(err) != seckill.EINTERNAL {
			return seckill.WarmState{}, err
		}
		return seckill.WarmState{}, fmt.Errorf("store: rebuild campaign %d: %w", voucherID, err)
	}
	return st, nil
}
