package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
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

// CampaignEpochs returns the epoch of a campaign and of each of its stock
// shards. ENOTFOUND.
func (s *Store) CampaignEpochs(ctx context.Context, voucherID int64) (seckill.Epochs, error) {
	var row campaignRow
	err := s.db.NewSelect().Model(&row).Column("c.epoch", "c.shard_epochs").
		Where("c.voucher_id = ?", voucherID).Scan(ctx)
	if err := oneRow(err, "store: select epochs of", "voucher", voucherID); err != nil {
		return seckill.Epochs{}, err
	}
	return seckill.Epochs{Campaign: row.Epoch, Shards: row.ShardEpochs}, nil
}

// RebuildCampaign moves a campaign to its next order id epoch and returns
// its state in it: stock, window and the users holding an order. With
// shards (some stock shards of a campaign of several) only those shards
// move to the new epoch, the others keep theirs (shard_epochs).
//
// It locks the campaign's row first and reads after (READ COMMITTED: each
// statement sees what committed before it), which fences it against
// PersistOrders: a batch that took its units before the lock is counted in
// stock and buyers; one that comes after finds the epoch moved on, takes
// nothing, and fails its orders with FailureLost. ENOTFOUND; EUNAVAILABLE
// when the campaign has used its last epoch.
func (s *Store) RebuildCampaign(ctx context.Context, voucherID int64, shards []int) (seckill.WarmState, error) {
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
		some, err := shardEpochs(&row, shards)
		if err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model(&row).Column("epoch", "shard_epochs").Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("next epoch: %w", err)
		}
		var buyers []int64
		err = tx.NewSelect().Model((*orderRow)(nil)).Column("o.user_id").
			Where("o.voucher_id = ?", voucherID).Where("o.status IN (?)", bun.In(holdingStatuses)).
			OrderExpr("o.user_id").Scan(ctx, &buyers)
		if err != nil {
			return fmt.Errorf("select buyers: %w", err)
		}
		st = seckill.WarmState{Campaign: toDomainCampaign(&row), Buyers: buyers, Shards: some}
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

// shardEpochs moves row to its next epoch: every shard when shards is nil
// or names them all (shard_epochs NULL), else only the shards it names
// (each once, in [0, row.Shards)), which it returns sorted; the others keep
// the epoch they were in.
func shardEpochs(row *campaignRow, shards []int) ([]int, error) {
	n := max(row.Shards, 1)
	some := slices.Clone(shards)
	slices.Sort(some)
	some = slices.Compact(some)
	if len(some) > 0 && (some[0] < 0 || some[len(some)-1] >= n) {
		return nil, seckill.Invalidf("shards", "campaign %d has shards 0 to %d", row.VoucherID, n-1)
	}
	prev := seckill.Epochs{Campaign: row.Epoch, Shards: row.ShardEpochs}
	row.Epoch++
	if len(some) == 0 || len(some) == n {
		row.ShardEpochs = nil
		return nil, nil
	}
	row.ShardEpochs = make([]int64, n)
	for i := range row.ShardEpochs {
		row.ShardEpochs[i] = prev.Of(i)
	}
	for _, i := range some {
		row.ShardEpochs[i] = row.Epoch
	}
	return some, nil
}
