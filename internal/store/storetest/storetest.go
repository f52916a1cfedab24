// Package storetest gives tests a fresh, migrated Postgres database each.
//
// The server is SECKILL_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable): any database
// on it, through which the helpers create and drop databases. Each fresh
// database is cloned from a template migrated once, named after the
// migrations' checksum, so a changed migration gets a new template, or is
// an earlier test's of the same process, emptied (pool.go).
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/migrations"
)

// EnvDatabaseURL names the variable that points the helpers at a server.
const EnvDatabaseURL = "SECKILL_TEST_DATABASE_URL"

const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// templateLockKey serializes template creation across test binaries that
// run in parallel ("seckilltm" in ASCII, truncated).
const templateLockKey int64 = 0x7365636b696c746d

// maxConns is the pool size of a database from NewDB.
const maxConns = 16

var (
	adminOnce sync.Once
	adminDB   *bun.DB
	adminErr  error

	templateMu   sync.Mutex
	templateName string // set once the template exists

	dbSeq atomic.Int64
)

// NewDB returns a connection pool to a fresh migrated database, closed when
// the test ends, when the database is emptied for a later test or dropped
// (pool.go).
func NewDB(tb testing.TB) *bun.DB {
	tb.Helper()
	dsn := NewDSN(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := store.Open(ctx, dsn, maxConns)
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	// Cleanups run last in, first out: the pool closes before the drop.
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// NewDSN returns the URL of a fresh migrated database, for tests that open
// their own connections (end-to-end tests): empty, of a name no test had.
// When the test ends, its connections still open are ended, and the
// database is emptied for a later test of the process under another name,
// or dropped (pool.go).
func NewDSN(tb testing.TB) string {
	tb.Helper()
	tmpl, err := migratedTemplate()
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	return newDatabase(tb, tmpl)
}

// NewEmptyDSN creates a fresh database without any table, for tests of
// the migrations themselves, and returns its URL. It is dropped when the
// test ends.
func NewEmptyDSN(tb testing.TB) string {
	tb.Helper()
	return newDatabase(tb, "template0")
}

// CreateCampaign inserts a SECKILL voucher whose campaign has stock units
// and runs from an hour ago to an hour from now; opts may change the voucher
// (times, paused, values) before it is inserted.
func CreateCampaign(tb testing.TB, db *bun.DB, stock int64, opts ...func(*seckill.Voucher)) *seckill.Voucher {
	tb.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	v := &seckill.Voucher{
		ShopID:      1,
		Title:       "test voucher",
		PayValue:    100,
		ActualValue: 1000,
		Type:        seckill.VoucherSeckill,
		Campaign: &seckill.Campaign{
			InitialStock: stock,
			Stock:        stock,
			BeginTime:    now.Add(-time.Hour),
			EndTime:      now.Add(time.Hour),
		},
	}
	for _, opt := range opts {
		opt(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.New(db).CreateVoucher(ctx, v); err != nil {
		tb.Fatalf("storetest: create campaign: %v", err)
	}
	return v
}

func baseURL() (*url.URL, error) {
	raw := os.Getenv(EnvDatabaseURL)
	if raw == "" {
		raw = defaultDatabaseURL
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%s is not a postgres:// URL", EnvDatabaseURL)
	}
	return u, nil
}

// databaseURL returns the server's URL with the database set to name.
func databaseURL(name string) (string, error) {
	u, err := baseURL()
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// admin returns the process's pool to the server, used to create and drop
// databases. It connects to the database the URL names, or to "postgres"
// when that one does not exist.
func admin() (*bun.DB, error) {
	adminOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		u, err := baseURL()
		if err != nil {
			adminErr = err
			return
		}
		// CREATE and DROP DATABASE wait for a checkpoint: on a loaded
		// machine, with make test's suites dropping databases at once, one
		// can take longer than pgdriver's 10 s read timeout, and the test
		// that owns it would fail in its cleanup. The statements' contexts (60 s)
		// bound them instead.
		q := u.Query()
		q.Set("read_timeout", "90s")
		q.Set("write_timeout", "90s")
		u.RawQuery = q.Encode()
		adminDB, adminErr = store.Open(ctx, u.String(), 4)
		var pgErr pgdriver.Error
		if errors.As(adminErr, &pgErr) && pgErr.Field('C') == "3D000" { // invalid_catalog_name
			u.Path = "/postgres"
			adminDB, adminErr = store.Open(ctx, u.String(), 4)
		}
	})
	return adminDB, adminErr
}

func newDatabase(tb testing.TB, tmpl string) string {
	tb.Helper()
	db, err := admin()
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := fmt.Sprintf("seckill_test_%d_%d_%s", os.Getpid(), dbSeq.Add(1), hex.EncodeToString(suffix[:]))
	dsn, err := databaseURL(name)
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if tmpl == "template0" { // an empty database, for the migrations' tests
		if _, err := db.ExecContext(ctx, "CREATE DATABASE ? TEMPLATE ?", bun.Ident(name), bun.Ident(tmpl)); err != nil {
			tb.Fatalf("storetest: create database %s from %s: %v", name, tmpl, err)
		}
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS ? WITH (FORCE)", bun.Ident(name)); err != nil {
				tb.Errorf("storetest: drop database %s: %v", name, err)
			}
		})
		return dsn
	}
	// A migrated database: an earlier test's, emptied (pool.go), or a new
	// one.
	if err := startPool(ctx, db); err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	fresh := !takePooled(ctx, db, name)
	if fresh {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE ? TEMPLATE ?", bun.Ident(name), bun.Ident(tmpl)); err != nil {
			tb.Fatalf("storetest: create database %s from %s: %v", name, tmpl, err)
		}
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := recycle(ctx, db, name); err != nil {
			tb.Errorf("storetest: drop database %s: %v", name, err)
		}
	})
	if fresh {
		if err := noteTemplate(ctx, name); err != nil {
			tb.Fatalf("storetest: the schema of %s: %v", name, err)
		}
	}
	return dsn
}

// migratedTemplate returns the name of the template database holding the
// current migrations, creating it if no process has yet.
func migratedTemplate() (string, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	if templateName != "" {
		return templateName, nil
	}
	name := "seckill_tmpl_" + migrations.Checksum()[:16]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := createTemplate(ctx, name); err != nil {
		return "", fmt.Errorf("template database %s: %w", name, err)
	}
	templateName = name
	return name, nil
}

func createTemplate(ctx context.Context, name string) error {
	db, err := admin()
	if err != nil {
		return err
	}
	// Other test binaries may build the same template right now: take a
	// session lock on a connection of our own. Postgres releases it if
	// this process dies.
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		var ok bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(?)", templateLockKey).Scan(&ok); err != nil {
			return fmt.Errorf("take advisory lock: %w", err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(?)", templateLockKey)

	var exists bool
	if err := conn.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = ?)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}

	// Build under another name and rename when complete, so that a process
	// killed halfway never leaves a half-migrated template behind.
	build := name + "_build"
	if _, err := conn.ExecContext(ctx, "DROP DATABASE IF EXISTS ? WITH (FORCE)", bun.Ident(build)); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "CREATE DATABASE ? TEMPLATE template0", bun.Ident(build)); err != nil {
		return err
	}
	dsn, err := databaseURL(build)
	if err != nil {
		return err
	}
	bdb, err := store.Open(ctx, dsn, 4)
	if err != nil {
		return err
	}
	err = migrations.Migrate(ctx, bdb, "up", io.Discard)
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Postgres waits a few seconds for the closed sessions to go away.
	if _, err := conn.ExecContext(ctx, "ALTER DATABASE ? RENAME TO ?", bun.Ident(build), bun.Ident(name)); err != nil {
		return err
	}
	return nil
}
