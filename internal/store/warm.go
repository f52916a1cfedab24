package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"seckill/internal/seckill"
)

// warmRow is a campaign with the highest order sequence seen for it.
type warmRow struct {
	campaignRow `bun:",extend"`

	MaxSeq int64 `bun:"max_seq,scanonly"`
}

// buyerRow is one user holding an order for a campaign.
type buyerRow struct {
	VoucherID int64 `bun:"voucher_id"`
	UserID    int64 `bun:"user_id"`
}

// WarmStates returns every campaign whose end is in the future, in voucher
// id order, with the users holding an order for it and the highest order
// sequence (failed orders included) that Postgres has seen for it. It reads
// one snapshot, so Stock and Buyers agree: a buyer counted without its unit
// would let Redis sell that unit twice.
func (s *Store) WarmStates(ctx context.Context) ([]seckill.WarmState, error) {
	var states []seckill.WarmState
	opts := &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	err := s.db.RunInTx(ctx, opts, func(ctx context.Context, tx bun.Tx) error {
		var err error
		states, err = warmStates(ctx, tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return states, nil
}

func warmStates(ctx context.Context, db bun.IDB) ([]seckill.WarmState, error) {
	const seqMask = 1<<32 - 1 // the low 32 bits of an order id, as seckill.SplitOrderID
	var rows []warmRow
	err := db.NewSelect().Model(&rows).
		ColumnExpr("c.*").
		ColumnExpr(`GREATEST(
			(SELECT max(o.id & ?0) FROM voucher_order AS o WHERE o.voucher_id = c.voucher_id),
			(SELECT max(f.id & ?0) FROM order_failure AS f WHERE f.voucher_id = c.voucher_id),
			0) AS max_seq`, int64(seqMask)).
		Where("c.end_time > now()").
		OrderExpr("c.voucher_id").
		Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: select live campaigns: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}

	ids := make([]int64, len(rows))
	for i := range rows {
		ids[i] = rows[i].VoucherID
	}
	var buyers []buyerRow
	err = db.NewSelect().Model((*orderRow)(nil)).
		Column("o.voucher_id", "o.user_id").
		Where("o.voucher_id = ANY(?)", pgdialect.Array(ids)).
		OrderExpr("o.voucher_id, o.user_id").
		Scan(ctx, &buyers)
	if err != nil {
		return nil, fmt.Errorf("store: select buyers: %w", err)
	}
	byVoucher := make(map[int64][]int64, len(rows))
	for _, b := range buyers {
		byVoucher[b.VoucherID] = append(byVoucher[b.VoucherID], b.UserID)
	}

	states := make([]seckill.WarmState, len(rows))
	for i := range rows {
		states[i] = seckill.WarmState{
			Campaign: toDomainCampaign(&rows[i].campaignRow),
			Buyers:   byVoucher[rows[i].VoucherID],
			MaxSeq:   rows[i].MaxSeq,
		}
	}
	return states, nil
}
