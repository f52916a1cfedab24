package migrations

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

// advisoryLockKey serializes migrators across processes. It is an arbitrary
// constant ("seckill:" in ASCII followed by "mig") that nothing else uses.
const advisoryLockKey int64 = 0x7365636b696c6d67

// lockPollInterval is how often a migrator waiting for another one retries.
// Polling pg_try_advisory_lock, rather than blocking in pg_advisory_lock,
// keeps a long wait clear of the driver's read timeout.
const lockPollInterval = 250 * time.Millisecond

// Migrate runs one migration command against db and writes a short report
// to out:
//
//   - "up" applies every pending migration as one group;
//   - "down" rolls back the last group;
//   - "status" lists each migration as applied or pending;
//   - "unlock" removes the lock row that a migrator killed halfway (between
//     Lock and Unlock) leaves behind; run it only when no migration runs.
//
// Several processes may migrate at once (every replica at start): each waits
// for a Postgres advisory lock, so they run one after the other and the later
// ones find nothing to do. Inside it, up and down also hold bun's migration
// lock, which guards against other tools that use bun's migration tables.
// The advisory lock pins one connection while another runs the migrations,
// so db's pool must allow at least two connections.
func Migrate(ctx context.Context, db *bun.DB, cmd string, out io.Writer) (err error) {
	switch cmd {
	case "up", "down", "status", "unlock":
	default:
		return fmt.Errorf("migrate: unknown command %q (want up, down, status or unlock)", cmd)
	}
	if db.Stats().MaxOpenConnections == 1 {
		return errors.New("migrate: the connection pool must allow at least 2 connections")
	}

	unlock, err := lockMigrations(ctx, db)
	if err != nil {
		return err
	}
	defer unlock()

	m := migrate.NewMigrator(db, Migrations, migrate.WithMarkAppliedOnSuccess(true))
	if err := m.Init(ctx); err != nil {
		return fmt.Errorf("migrate: create migration tables: %w", err)
	}

	switch cmd {
	case "status":
		return status(ctx, m, out)
	case "unlock":
		if err := m.Unlock(ctx); err != nil {
			return fmt.Errorf("migrate: unlock: %w", err)
		}
		_, err := fmt.Fprintln(out, "migration lock released")
		return err
	}

	if err := m.Lock(ctx); err != nil {
		return fmt.Errorf("migrate: %w; if no migration is running, a killed one left its lock: run the unlock command", err)
	}
	defer func() {
		// Release the lock even when ctx is done: a lock left behind stops
		// every later migration.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if uerr := m.Unlock(uctx); uerr != nil && err == nil {
			err = fmt.Errorf("migrate: unlock: %w", uerr)
		}
	}()

	if cmd == "up" {
		group, err := m.Migrate(ctx)
		if err != nil {
			return fmt.Errorf("migrate up: %w", err)
		}
		if group.IsZero() {
			_, err = fmt.Fprintln(out, "no pending migrations")
			return err
		}
		_, err = fmt.Fprintf(out, "migrated to %s\n", group)
		return err
	}

	group, err := m.Rollback(ctx)
	if err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	if group.IsZero() {
		_, err = fmt.Fprintln(out, "no migration to roll back")
		return err
	}
	_, err = fmt.Fprintf(out, "rolled back %s\n", group)
	return err
}

// lockMigrations waits for the migration advisory lock on a connection of
// its own and returns the function that releases it. The lock belongs to the
// session, so Postgres releases it too if this process dies.
func lockMigrations(ctx context.Context, db *bun.DB) (func(), error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: connect: %w", err)
	}
	for {
		var ok bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(?)", advisoryLockKey).Scan(&ok); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("migrate: take advisory lock: %w", err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			_ = conn.Close()
			return nil, fmt.Errorf("migrate: wait for another migration: %w", ctx.Err())
		case <-time.After(lockPollInterval):
		}
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(uctx, "SELECT pg_advisory_unlock(?)", advisoryLockKey); err != nil {
			// Closing a connection whose unlock failed would return a
			// session that still holds the lock to the pool; discard it.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}, nil
}

// status writes one line per migration, oldest first, and the migrations the
// database has applied that this binary does not know (a newer release ran).
func status(ctx context.Context, m *migrate.Migrator, out io.Writer) error {
	ms, err := m.MigrationsWithStatus(ctx)
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	missing, err := m.MissingMigrations(ctx)
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	var b strings.Builder
	pending := 0
	for _, mig := range ms {
		if mig.IsApplied() {
			fmt.Fprintf(&b, "applied  %s (group %d, %s)\n", mig, mig.GroupID, mig.MigratedAt.UTC().Format(time.RFC3339))
		} else {
			pending++
			fmt.Fprintf(&b, "pending  %s\n", mig)
		}
	}
	for _, mig := range missing {
		fmt.Fprintf(&b, "unknown  %s (group %d): applied by a newer release\n", mig.Name, mig.GroupID)
	}
	fmt.Fprintf(&b, "%d applied, %d pending\n", len(ms)-pending, pending)
	_, err = io.WriteString(out, b.String())
	return err
}
