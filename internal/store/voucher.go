package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
)

// CreateVoucher inserts v and, when it has one, its campaign in one
// transaction, and sets v.ID, v.CreatedAt and the campaign's VoucherID and
// CreatedAt. A row the schema's CHECKs reject is EINVALID.
func (s *Store) CreateVoucher(ctx context.Context, v *seckill.Voucher) error {
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		return createVoucher(ctx, tx, v)
	})
}

func createVoucher(ctx context.Context, db bun.IDB, v *seckill.Voucher) error {
	row := toDBVoucher(v)
	if _, err := db.NewInsert().Model(row).Returning("id, created_at").Exec(ctx); err != nil {
		return voucherWriteError("insert voucher", err)
	}
	var crow *campaignRow
	if v.Campaign != nil {
		crow = toDBCampaign(row.ID, v.Campaign)
		if crow.Challenge == "" {
			crow.Challenge = string(seckill.ChallengeNone)
		}
		if _, err := db.NewInsert().Model(crow).Returning("created_at, pay_window_seconds, shards").Exec(ctx); err != nil {
			return voucherWriteError("insert campaign", err)
		}
		if err := writeQuiz(ctx, db, row.ID, v.Campaign.Quiz); err != nil {
			return err
		}
	}
	// Set the ids only once both rows are in, so a failed call leaves v as
	// it was.
	v.ID, v.CreatedAt = row.ID, row.CreatedAt.UTC()
	if crow != nil {
		v.Campaign.VoucherID, v.Campaign.CreatedAt = crow.VoucherID, crow.CreatedAt.UTC()
		v.Campaign.Challenge = seckill.ChallengeKind(crow.Challenge)
		v.Campaign.PayWindow = time.Duration(crow.PayWindow) * time.Second
		v.Campaign.Shards = crow.Shards
		v.Campaign.RoomDrawn = -1
	}
	return nil
}

// RecordRoomDraw records how many joined a campaign's waiting room before
// its open, unless a number is recorded already, and returns the one
// recorded: every process draws the same order. ENOTFOUND without such a
// campaign; EINVALID for a negative count.
func (s *Store) RecordRoomDraw(ctx context.Context, voucherID, before int64) (int64, error) {
	if before < 0 {
		return 0, seckill.Invalidf("before", "a count of joiners cannot be negative")
	}
	var n int64
	err := s.db.NewRaw(`UPDATE seckill_campaign SET room_drawn = COALESCE(room_drawn, ?) WHERE voucher_id = ? RETURNING room_drawn`,
		before, voucherID).Scan(ctx, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	} else if err != nil {
		return 0, fmt.Errorf("store: record room draw of %d: %w", voucherID, err)
	}
	return n, nil
}

// voucherWriteError turns a rejected voucher or campaign into a domain error.
func voucherWriteError(op string, err error) error {
	switch sqlState(err) {
	case codeCheckViolation:
		return seckill.Errorf(seckill.EINVALID, "voucher rejected by rule %s", constraintName(err))
	case codeUniqueViolation:
		return seckill.Errorf(seckill.ECONFLICT, "voucher already exists")
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// DeleteVoucher removes a voucher and its campaign. It returns ENOTFOUND when
// there is no such voucher and ECONFLICT when orders or failures refer to it.
func (s *Store) DeleteVoucher(ctx context.Context, id int64) error {
	return deleteVoucher(ctx, s.db, id)
}

func deleteVoucher(ctx context.Context, db bun.IDB, id int64) error {
	// order_failure's foreign key and voucher_order's triggers (migration
	// 20261201180000) decide, race free: an order inserted concurrently
	// holds the voucher's row (FOR KEY SHARE) until it commits, so the
	// delete waits for it and then fails, or it waits for the delete and
	// then fails itself (TestDeleteVoucherWhilePersisting).
	res, err := db.NewDelete().Model((*voucherRow)(nil)).Where("id = ?", id).Exec(ctx)
	if sqlState(err) == codeForeignKeyViolation {
		return seckill.Errorf(seckill.ECONFLICT, "voucher %d has orders", id)
	} else if err != nil {
		return fmt.Errorf("store: delete voucher %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: delete voucher %d: %w", id, err)
	} else if n == 0 {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", id)
	}
	return nil
}

// Voucher returns one voucher with its campaign (nil for a NORMAL voucher).
// ENOTFOUND.
func (s *Store) Voucher(ctx context.Context, id int64) (*seckill.Voucher, error) {
	return findVoucher(ctx, s.db, id)
}

func findVoucher(ctx context.Context, db bun.IDB, id int64) (*seckill.Voucher, error) {
	var row voucherRow
	err := db.NewSelect().Model(&row).Relation("Campaign").Where("v.id = ?", id).Scan(ctx)
	if err := oneRow(err, "store: select", "voucher", id); err != nil {
		return nil, err
	}
	return toDomainVoucher(&row), nil
}

// Vouchers returns up to filter.First vouchers (seckill.DefaultPageSize when
// 0) with ids greater than filter.After, in id order.
func (s *Store) Vouchers(ctx context.Context, filter seckill.VoucherFilter) ([]*seckill.Voucher, error) {
	return findVouchers(ctx, s.db, filter)
}

func findVouchers(ctx context.Context, db bun.IDB, filter seckill.VoucherFilter) ([]*seckill.Voucher, error) {
	limit := filter.First
	if limit <= 0 {
		limit = seckill.DefaultPageSize
	}
	var rows []voucherRow
	err := db.NewSelect().Model(&rows).Relation("Campaign").
		Where("v.id > ?", filter.After).
		OrderExpr("v.id").
		Limit(limit).
		Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: select vouchers: %w", err)
	}
	vs := make([]*seckill.Voucher, len(rows))
	for i := range rows {
		vs[i] = toDomainVoucher(&rows[i])
	}
	return vs, nil
}
