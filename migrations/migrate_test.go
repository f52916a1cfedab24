package migrations_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/uptrace/bun"

	"seckill/internal/store"
	"seckill/internal/store/storetest"
	"seckill/migrations"
)

func openEmpty(t *testing.T) *bun.DB {
	t.Helper()
	db, err := store.Open(t.Context(), storetest.NewEmptyDSN(t), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func migrate(t *testing.T, db *bun.DB, cmd string) string {
	t.Helper()
	var out bytes.Buffer
	if err := migrations.Migrate(t.Context(), db, cmd, &out); err != nil {
		t.Fatalf("migrate %s: %v", cmd, err)
	}
	return out.String()
}

// tables lists the tables of the public schema, bun's included.
func tables(t *testing.T, db *bun.DB) []string {
	t.Helper()
	var names []string
	err := db.NewRaw(`SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' ORDER BY table_name`).Scan(t.Context(), &names)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

var (
	bunTables    = []string{"bun_migration_locks", "bun_migrations"}
	schemaTables = []string{"admin_session", "admin_user", "audit_log", "auth_subject", "bun_migration_locks", "bun_migrations", "campaign_quiz", "event_endpoint", "order_event", "order_failure", "payment", "payment_event", "seckill_campaign", "voucher", "voucher_order"}
)

// countMigrations counts the migrations in this folder.
func countMigrations(t *testing.T) int {
	t.Helper()
	ups, err := filepath.Glob("*.up.sql")
	if err != nil || len(ups) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	return len(ups)
}

func TestMigrateRoundTrip(t *testing.T) {
	db := openEmpty(t)
	n := countMigrations(t)

	if out := migrate(t, db, "status"); !strings.Contains(out, "pending  20261129120000_init") || !strings.HasSuffix(out, fmt.Sprintf("0 applied, %d pending\n", n)) {
		t.Errorf("status before up:\n%s", out)
	}
	if out := migrate(t, db, "up"); !strings.Contains(out, "migrated to group #1") {
		t.Errorf("up: %q", out)
	}
	if diff := cmp.Diff(schemaTables, tables(t, db)); diff != "" {
		t.Errorf("tables after up (-want +got):\n%s", diff)
	}
	if out := migrate(t, db, "status"); !strings.Contains(out, "applied  20261129120000_init (group 1,") || !strings.HasSuffix(out, fmt.Sprintf("%d applied, 0 pending\n", n)) {
		t.Errorf("status after up:\n%s", out)
	}
	if out := migrate(t, db, "up"); out != "no pending migrations\n" {
		t.Errorf("second up: %q", out)
	}

	if out := migrate(t, db, "down"); !strings.Contains(out, "rolled back group #1") {
		t.Errorf("down: %q", out)
	}
	if diff := cmp.Diff(bunTables, tables(t, db)); diff != "" {
		t.Errorf("tables after down (-want +got):\n%s", diff)
	}
	if out := migrate(t, db, "down"); out != "no migration to roll back\n" {
		t.Errorf("second down: %q", out)
	}

	migrate(t, db, "up")
	if diff := cmp.Diff(schemaTables, tables(t, db)); diff != "" {
		t.Errorf("tables after up again (-want +got):\n%s", diff)
	}
	// The schema works after the round trip.
	if _, err := db.ExecContext(t.Context(), `INSERT INTO voucher (shop_id, title, pay_value, actual_value, type)
		VALUES (1, 't', 1, 2, 'NORMAL')`); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateUnknownCommand(t *testing.T) {
	db := openEmpty(t)
	err := migrations.Migrate(t.Context(), db, "sideways", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `unknown command "sideways"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestMigrateSinglePool(t *testing.T) {
	db, err := store.Open(t.Context(), storetest.NewEmptyDSN(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = migrations.Migrate(t.Context(), db, "up", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "at least 2 connections") {
		t.Fatalf("err = %v", err)
	}
}

// Every replica migrates at start: they must queue, and exactly one of them
// applies the migrations.
func TestMigrateConcurrent(t *testing.T) {
	dsn := storetest.NewEmptyDSN(t)
	const n = 8
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			db, err := store.Open(t.Context(), dsn, 2) // as the CLI opens it
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			var out bytes.Buffer
			errs[i] = migrations.Migrate(t.Context(), db, "up", &out)
			outs[i] = out.String()
		})
	}
	wg.Wait()
	applied := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("migrator %d: %v", i, errs[i])
		}
		if strings.Contains(outs[i], "migrated to") {
			applied++
		}
	}
	if applied != 1 {
		t.Errorf("%d migrators applied the migrations, want 1: %q", applied, outs)
	}
}

// A migrator killed between Lock and Unlock leaves bun's lock row behind:
// up then fails with a hint, and unlock clears it.
func TestMigrateStaleLock(t *testing.T) {
	db := openEmpty(t)
	migrate(t, db, "status") // creates bun's tables
	if _, err := db.ExecContext(t.Context(), "INSERT INTO bun_migration_locks (table_name) VALUES ('bun_migrations')"); err != nil {
		t.Fatal(err)
	}
	err := migrations.Migrate(t.Context(), db, "up", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "run the unlock command") {
		t.Fatalf("up with a stale lock: err = %v", err)
	}
	migrate(t, db, "unlock")
	if out := migrate(t, db, "up"); !strings.Contains(out, "migrated to group #1") {
		t.Errorf("up after unlock: %q", out)
	}
}

func TestMigrateCanceled(t *testing.T) {
	db := openEmpty(t)
	// Hold the advisory lock as another migrator would.
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "SELECT pg_advisory_lock(?)", int64(0x7365636b696c6d67)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	err = migrations.Migrate(ctx, db, "up", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "wait for another migration") {
		t.Fatalf("err = %v", err)
	}
}

func TestChecksum(t *testing.T) {
	a, b := migrations.Checksum(), migrations.Checksum()
	if a != b || len(a) != 64 {
		t.Errorf("Checksum() = %q then %q", a, b)
	}
}
