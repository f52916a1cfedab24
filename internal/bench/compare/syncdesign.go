package compare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"

	"seckill/internal/seckill"
	"seckill/internal/store"
)

// SyncDatabase is the database `--compare sync` recreates on the server's
// Postgres for the seed's synchronous design.
const SyncDatabase = "seckill_bench_sync"

// SyncVoucherID is the one campaign of the sync design's database.
const SyncVoucherID = 1

// syncSchema is the seed's two tables, under the names verify.Postgres reads.
// The seed kept one order per user with a per-user lock in the JVM; a
// UNIQUE constraint does that here, for every instance, at no extra round
// trip.
var syncSchema = []string{
	`DROP TABLE IF EXISTS voucher_order`,
	`DROP TABLE IF EXISTS seckill_campaign`,
	`CREATE TABLE seckill_campaign (
		voucher_id    bigint      PRIMARY KEY,
		initial_stock bigint      NOT NULL,
		stock         bigint      NOT NULL,
		begin_time    timestamptz NOT NULL,
		end_time      timestamptz NOT NULL
	)`,
	`CREATE TABLE voucher_order (
		id         bigserial   PRIMARY KEY,
		user_id    bigint      NOT NULL,
		voucher_id bigint      NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(),
		UNIQUE (voucher_id, user_id)
	)`,
}

// RecreateDatabase drops and creates database name on the server that
// serverDSN points at, and returns its URL. It works through the server's
// maintenance database (postgres), so serverDSN's own database need not
// exist yet: on a fresh machine it does not.
func RecreateDatabase(ctx context.Context, serverDSN, name string) (string, error) {
	u, err := url.Parse(serverDSN)
	if err != nil {
		return "", errors.New("SECKILL_DATABASE_URL is not a URL")
	}
	maint := *u
	maint.Path, maint.RawPath = "/postgres", ""
	admin, err := store.Open(ctx, maint.String(), 1)
	if err != nil {
		return "", err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS ? WITH (FORCE)", bun.Ident(name)); err != nil {
		return "", fmt.Errorf("drop database %s: %w", name, err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE ?", bun.Ident(name)); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}

// Sync is the seed's synchronous purchase: everything in one Postgres
// transaction per request.
type Sync struct {
	DB *bun.DB
}

// OpenSync connects to dsn with a pool of maxConns and installs a
// campaign of stock units on sale until end.
func OpenSync(ctx context.Context, dsn string, maxConns int, stock int64, end time.Time) (*Sync, error) {
	db, err := store.Open(ctx, dsn, maxConns)
	if err != nil {
		return nil, err
	}
	for _, q := range syncSchema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("sync design schema: %w", err)
		}
	}
	_, err = db.ExecContext(ctx, `INSERT INTO seckill_campaign VALUES (?, ?, ?, ?, ?)`,
		SyncVoucherID, stock, stock, time.Now().Add(-time.Minute), end)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sync design campaign: %w", err)
	}
	return &Sync{DB: db}, nil
}

// Close disconnects.
func (s *Sync) Close() { _ = s.DB.Close() }

// errSyncDecided ends a transaction whose outcome is known and that wrote
// nothing worth keeping.
var errSyncDecided = errors.New("decided")

// Purchase is the seed's algorithm: read the campaign and check the window
// and the stock; check the user has no order; take a unit with a guarded
// UPDATE; insert the order. Placeholders are Postgres's own ($1): the
// statements go to the driver as they are.
func (s *Sync) Purchase(ctx context.Context, voucherID, userID int64) (seckill.Outcome, int64, error) {
	var (
		outcome seckill.Outcome
		orderID int64
	)
	tx, err := s.DB.DB.BeginTx(ctx, nil)
	if err != nil {
		return "", 0, err
	}
	err = func() error {
		var (
			stock      int64
			begin, end time.Time
		)
		err := tx.QueryRowContext(ctx, `SELECT stock, begin_time, end_time FROM seckill_campaign WHERE voucher_id = $1`, voucherID).
			Scan(&stock, &begin, &end)
		if errors.Is(err, sql.ErrNoRows) {
			return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
		} else if err != nil {
			return err
		}
		now := time.Now()
		switch {
		case now.Before(begin):
			outcome = seckill.OutcomeNotStarted
			return errSyncDecided
		case !now.Before(end):
			outcome = seckill.OutcomeEnded
			return errSyncDecided
		case stock < 1:
			outcome = seckill.OutcomeSoldOut
			return errSyncDecided
		}
		var held int64
		err = tx.QueryRowContext(ctx, `SELECT count(*) FROM voucher_order WHERE voucher_id = $1 AND user_id = $2`, voucherID, userID).Scan(&held)
		if err != nil {
			return err
		}
		if held > 0 {
			outcome = seckill.OutcomeAlreadyPurchased
			return errSyncDecided
		}
		res, err := tx.ExecContext(ctx, `UPDATE seckill_campaign SET stock = stock - 1 WHERE voucher_id = $1 AND stock > 0`, voucherID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			outcome = seckill.OutcomeSoldOut
			return errSyncDecided
		}
		err = tx.QueryRowContext(ctx, `INSERT INTO voucher_order (user_id, voucher_id) VALUES ($1, $2) RETURNING id`, userID, voucherID).Scan(&orderID)
		var pgErr pgdriver.Error
		if errors.As(err, &pgErr) && pgErr.Field('C') == "23505" {
			// The same user's concurrent purchase won: this one takes
			// nothing (the rollback returns the unit).
			outcome = seckill.OutcomeAlreadyPurchased
			return errSyncDecided
		} else if err != nil {
			return err
		}
		outcome = seckill.OutcomeAccepted
		return nil
	}()
	if err != nil {
		_ = tx.Rollback()
		if errors.Is(err, errSyncDecided) {
			return outcome, 0, nil
		}
		return "", 0, err
	}
	if err := tx.Commit(); err != nil {
		return "", 0, err
	}
	return outcome, orderID, nil
}
