package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
)

// auditRow is a row of audit_log.
type auditRow struct {
	bun.BaseModel `bun:"table:audit_log,alias:l"`

	ID        int64         `bun:"id,pk,autoincrement"`
	VoucherID sql.NullInt64 `bun:"voucher_id"`
	Actor     string        `bun:"actor,notnull"`
	Action    string        `bun:"action,notnull"`
	Detail    string        `bun:"detail,notnull"`
	At        time.Time     `bun:"at,nullzero,notnull,default:current_timestamp"`
}

func toDBAudit(e seckill.AuditEntry) *auditRow {
	return &auditRow{
		VoucherID: sql.NullInt64{Int64: e.VoucherID, Valid: e.VoucherID != 0},
		Actor:     e.Actor,
		Action:    e.Action,
		Detail:    e.Detail,
	}
}

func toDomainAudit(r *auditRow) seckill.AuditEntry {
	return seckill.AuditEntry{
		ID: r.ID, VoucherID: r.VoucherID.Int64, Actor: r.Actor, Action: r.Action, Detail: r.Detail, At: r.At.UTC(),
	}
}

// AddAudit records an entry; its ID and At are the database's.
func (s *Store) AddAudit(ctx context.Context, e seckill.AuditEntry) error {
	return addAudit(ctx, s.db, e)
}

func addAudit(ctx context.Context, db bun.IDB, e seckill.AuditEntry) error {
	if _, err := db.NewInsert().Model(toDBAudit(e)).Exec(ctx); err != nil {
		return fmt.Errorf("store: insert audit entry: %w", err)
	}
	return nil
}

// AuditLog returns up to limit (seckill.DefaultPageSize when 0) entries of a
// voucher, newest first.
func (s *Store) AuditLog(ctx context.Context, voucherID int64, limit int) ([]seckill.AuditEntry, error) {
	if limit <= 0 {
		limit = seckill.DefaultPageSize
	}
	var rows []auditRow
	err := s.db.NewSelect().Model(&rows).Where("voucher_id = ?", voucherID).OrderExpr("id DESC").Limit(limit).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: select audit log of %d: %w", voucherID, err)
	}
	out := make([]seckill.AuditEntry, len(rows))
	for i := range rows {
		out[i] = toDomainAudit(&rows[i])
	}
	return out, nil
}

// ChangeCampaign implements seckill.CampaignStore: it locks the campaign
// row (PersistOrders' stock decrement waits for it, and it for them), reads
// the quiz, lets change edit the voucher, writes the texts, window, pause,
// stock, guard and (when change replaced them) the questions back and
// records the audit entry, in one transaction.
func (s *Store) ChangeCampaign(ctx context.Context, voucherID int64, change func(v *seckill.Voucher) (seckill.AuditEntry, error)) (*seckill.Voucher, error) {
	var out *seckill.Voucher
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var locked []int64
		err := tx.NewSelect().Model((*campaignRow)(nil)).Column("voucher_id").
			Where("voucher_id = ?", voucherID).For("UPDATE").Scan(ctx, &locked)
		if err != nil {
			return fmt.Errorf("store: lock campaign %d: %w", voucherID, err)
		}
		v, err := findVoucher(ctx, tx, voucherID)
		if err != nil {
			return err
		}
		var quiz []seckill.QuizQuestion
		if len(locked) == 0 {
			v.Campaign = nil // a NORMAL voucher: change reports it
		} else {
			if quiz, err = readQuiz(ctx, tx, voucherID); err != nil {
				return err
			}
			v.Campaign.Quiz = slices.Clone(quiz)
		}
		entry, err := change(v)
		if err != nil {
			return err
		}
		if v.Campaign == nil {
			return seckill.Errorf(seckill.ENOTFOUND, "voucher %d has no campaign", voucherID)
		}
		_, err = tx.NewUpdate().Model((*voucherRow)(nil)).
			Set("title = ?", v.Title).Set("sub_title = ?", v.SubTitle).Set("rules = ?", v.Rules).
			Set("updated_at = now()").
			Where("id = ?", voucherID).Exec(ctx)
		if err != nil {
			return voucherWriteError("update voucher", err)
		}
		c := v.Campaign
		_, err = tx.NewUpdate().Model((*campaignRow)(nil)).
			Set("initial_stock = ?", c.InitialStock).Set("stock = ?", c.Stock).
			Set("begin_time = ?", c.BeginTime).Set("end_time = ?", c.EndTime).
			Set("paused = ?", c.Paused).Set("updated_at = now()").
			Set("challenge = ?", string(c.Challenge)).Set("pow_bits = ?", c.PoWBits).Set("brake = ?", c.Brake).
			Where("voucher_id = ?", voucherID).Exec(ctx)
		if err != nil {
			return voucherWriteError("update campaign", err)
		}
		if err := replaceQuiz(ctx, tx, voucherID, quiz, c.Quiz); err != nil {
			return err
		}
		entry.VoucherID = voucherID
		if err := addAudit(ctx, tx, entry); err != nil {
			return err
		}
		out, err = findVoucher(ctx, tx, voucherID)
		return err
	})
	if err != nil {
		var de *seckill.Error
		if errors.As(err, &de) {
			return nil, de
		}
		return nil, err
	}
	return out, nil
}
