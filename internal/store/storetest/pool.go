package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"
)

// A test's database from the migrated template is used again by a later
// test of the same process, emptied, rather than dropped: CREATE DATABASE
// copies the template (through the WAL) and DROP DATABASE forces a
// checkpoint, which for the hundreds of databases make test uses would
// keep its Postgres busy, and make each test wait on a busy machine.
// When a test ends, its database is recycled: the sessions still
// in it are ended and it is renamed to a name of the pool, which no client
// of the ended test can reach (one that reconnects finds no database, as
// after a drop); then its schema is compared with the template's (a
// fingerprint of its schemas, relations, columns, indexes, constraints,
// triggers, functions and types, and of its migrations), and its tables
// but the migrations' are emptied and their identities restarted. The next
// test renames it to a name of its own. A database whose settings or
// schema a test changed, or that a session entered again before the
// rename, is dropped as before.
//
// The pool's databases are named after a token of the process, whose
// advisory lock the process holds on a connection of its own while it
// lives: the first test of a later process drops the pooled databases of
// processes that are gone. So a run leaves a few empty databases behind (at
// most maxPooled a process), which the next one drops.

// maxPooled is the most databases a process keeps for later tests.
const maxPooled = 4

// poolPrefix starts the name of every pooled database.
const poolPrefix = "seckill_pool_"

var (
	poolOnce  sync.Once
	poolErr   error
	poolToken string   // this process's, in its databases' names
	poolOwner bun.Conn // holds the token's advisory lock while the process lives

	poolMu    sync.Mutex
	pooled    []string // names of empty databases ready for a test
	poolSeq   int
	schemaSum string    // the template's fingerprint, from the first fresh database
	emptying  emptyPlan // how to empty a database of the template
)

// emptyPlan empties a database of the template: its tables but the
// migrations', and the sequences of their identities (quoted names).
type emptyPlan struct {
	tables, sequences []string
	// superuser: the tables can be emptied without their triggers and
	// foreign keys (session_replication_role), in any order.
	superuser bool
}

// poolLockKey is the advisory lock key of a token.
func poolLockKey(token string) (int64, bool) {
	b, err := hex.DecodeString(token)
	if err != nil || len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// startPool takes the process's token and lock, and drops the pooled
// databases of processes that are gone.
func startPool(ctx context.Context, db *bun.DB) error {
	poolOnce.Do(func() {
		var b [8]byte
		_, _ = rand.Read(b[:])
		token := hex.EncodeToString(b[:])
		key, _ := poolLockKey(token)
		conn, err := db.Conn(ctx)
		if err != nil {
			poolErr = err
			return
		}
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", key); err != nil {
			_ = conn.Close()
			poolErr = fmt.Errorf("take the pool's lock: %w", err)
			return
		}
		poolToken, poolOwner = token, conn
		poolErr = sweepPools(ctx, db)
	})
	return poolErr
}

// sweepPools drops the pooled databases whose process is gone (nobody
// holds their token's lock).
func sweepPools(ctx context.Context, db *bun.DB) error {
	var names []string
	if err := db.NewRaw("SELECT datname FROM pg_database WHERE starts_with(datname, ?)", poolPrefix).Scan(ctx, &names); err != nil {
		return fmt.Errorf("list pooled databases: %w", err)
	}
	for _, name := range names {
		token, _, _ := strings.Cut(strings.TrimPrefix(name, poolPrefix), "_")
		key, ok := poolLockKey(token)
		if !ok || token == poolToken {
			continue
		}
		var free bool // taken and let go at once: the owner is gone
		if err := db.QueryRowContext(ctx, "SELECT pg_try_advisory_xact_lock(?)", key).Scan(&free); err != nil {
			return err
		}
		if !free {
			continue
		}
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS ? WITH (FORCE)", bun.Ident(name)); err != nil {
			return fmt.Errorf("drop %s, left by a process that is gone: %w", name, err)
		}
	}
	return nil
}

// takePooled renames a pooled database to name and reports whether there
// was one.
func takePooled(ctx context.Context, db *bun.DB, name string) bool {
	for {
		poolMu.Lock()
		if len(pooled) == 0 {
			poolMu.Unlock()
			return false
		}
		from := pooled[len(pooled)-1]
		pooled = pooled[:len(pooled)-1]
		poolMu.Unlock()
		if _, err := db.ExecContext(ctx, "ALTER DATABASE ? RENAME TO ?", bun.Ident(from), bun.Ident(name)); err == nil {
			return true
		}
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS ? WITH (FORCE)", bun.Ident(from))
	}
}

// recycle puts the ended test's database name in the pool, emptied, or
// drops it when it cannot be used again. It is renamed before it is
// emptied: a client of the ended test that reconnects then finds no
// database, and cannot write into it once emptied.
func recycle(ctx context.Context, db *bun.DB, name string) error {
	poolMu.Lock()
	room := len(pooled) < maxPooled
	poolSeq++
	to := fmt.Sprintf("%s%s_%d", poolPrefix, poolToken, poolSeq)
	poolMu.Unlock()
	if room && takeAway(ctx, db, name, to) == nil {
		if err := empty(ctx, to); err == nil {
			poolMu.Lock()
			pooled = append(pooled, to)
			poolMu.Unlock()
			return nil
		}
		name = to
	}
	_, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS ? WITH (FORCE)", bun.Ident(name))
	return err
}

// errChanged means a test changed its database beyond its rows.
var errChanged = errors.New("storetest: the database differs from the template")

// takeAway checks that database name kept the template's settings, ends
// the sessions in it and renames it to. The rename fails when a session
// entered it again meanwhile.
func takeAway(ctx context.Context, db *bun.DB, name, to string) error {
	var ok bool
	err := db.QueryRowContext(ctx, `SELECT d.datallowconn AND d.datconnlimit = -1
			AND NOT EXISTS (SELECT 1 FROM pg_db_role_setting s WHERE s.setdatabase = d.oid)
		FROM pg_database AS d WHERE d.datname = ?`, name).Scan(&ok)
	if err != nil {
		return err
	}
	if !ok {
		return errChanged
	}
	if _, err := db.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", name); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "ALTER DATABASE ? RENAME TO ?", bun.Ident(name), bun.Ident(to))
	return err
}

// empty checks that database name has the template's schema, and empties
// its tables.
func empty(ctx context.Context, name string) error {
	conn, err := openDatabase(name)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var sum string
	if err := tx.QueryRowContext(ctx, schemaFingerprint).Scan(&sum); err != nil {
		return err
	}
	poolMu.Lock()
	want := schemaSum
	poolMu.Unlock()
	if sum != want {
		return errChanged
	}
	poolMu.Lock()
	plan := emptying
	poolMu.Unlock()
	stmts := []string{"TRUNCATE " + strings.Join(plan.tables, ", ") + " RESTART IDENTITY CASCADE"}
	if plan.superuser {
		// Without their triggers (voucher_order's hand-made foreign key,
		// among others), the tables can be emptied in any order. A table
		// that grew large is truncated, with the tables that reference it;
		// the others are deleted from, which costs a small table far less
		// than a TRUNCATE, a new file for the table and each of its
		// indexes (110 ms for all of them).
		if _, err := tx.ExecContext(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
			return err
		}
		var large string
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(string_agg(c.oid::regclass::text, ', '), '') FROM pg_class AS c
			WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND c.relname <> 'bun_migrations'
			AND pg_relation_size(c.oid) > 1048576`).Scan(&large); err != nil {
			return err
		}
		stmts = stmts[:0]
		if large != "" {
			stmts = append(stmts, "TRUNCATE "+large+" CASCADE")
		}
		for _, t := range plan.tables {
			stmts = append(stmts, "DELETE FROM "+t)
		}
		for _, seq := range plan.sequences {
			stmts = append(stmts, "ALTER SEQUENCE "+seq+" RESTART")
		}
	}
	if _, err := tx.ExecContext(ctx, "DO $empty$ BEGIN "+strings.Join(stmts, "; ")+"; END $empty$"); err != nil {
		return err
	}
	return tx.Commit()
}

// noteTemplate reads the fingerprint of the template's schema and the
// plan to empty it from database name, freshly cloned from it (the
// template itself is not entered: a session in it makes CREATE DATABASE
// fail for other processes).
func noteTemplate(ctx context.Context, name string) error {
	poolMu.Lock()
	known := schemaSum != ""
	poolMu.Unlock()
	if known {
		return nil
	}
	conn, err := openDatabase(name)
	if err != nil {
		return err
	}
	defer conn.Close()
	var sum string
	if err := conn.QueryRowContext(ctx, schemaFingerprint).Scan(&sum); err != nil {
		return err
	}
	var plan emptyPlan
	tables, err := column(ctx, conn, `SELECT c.oid::regclass::text FROM pg_class AS c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND c.relname <> 'bun_migrations'
		ORDER BY 1`)
	if err != nil {
		return err
	}
	plan.tables = tables
	if err := conn.QueryRowContext(ctx, "SELECT current_setting('is_superuser') = 'on'").Scan(&plan.superuser); err != nil {
		return err
	}
	plan.sequences, err = column(ctx, conn, `SELECT s.oid::regclass::text FROM pg_class AS s
		JOIN pg_depend AS d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid AND d.deptype IN ('a', 'i')
		JOIN pg_class AS t ON t.oid = d.refobjid
		WHERE s.relkind = 'S' AND s.relnamespace = 'public'::regnamespace AND t.relname <> 'bun_migrations'
		ORDER BY 1`)
	if err != nil {
		return err
	}
	poolMu.Lock()
	schemaSum, emptying = sum, plan
	poolMu.Unlock()
	return nil
}

// openDatabase returns a handle on database name of the server, which
// connects when used.
func openDatabase(name string) (*sql.DB, error) {
	dsn, err := databaseURL(name)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn))), nil
}

// column returns the first column of the rows of query.
func column(ctx context.Context, conn *sql.DB, query string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// schemaFingerprint sums up what a test must not change for its database
// to be used again: every schema (but the sessions' temporary ones), and in public every relation, column
// (type, default, nullability), index, constraint, trigger, function (with
// its body) and type, and the migrations applied.
const schemaFingerprint = `SELECT md5(string_agg(x, E'\n' ORDER BY x)) FROM (
	SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname !~ '^pg_(toast_)?temp_'
	UNION ALL
	SELECT 'rel ' || c.relname || ' ' || c.relkind::text FROM pg_class AS c WHERE c.relnamespace = 'public'::regnamespace
	UNION ALL
	SELECT 'col ' || a.attrelid::regclass || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' ||
		a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
	FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
	LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
	UNION ALL
	SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indrelid
	WHERE c.relnamespace = 'public'::regnamespace
	UNION ALL
	SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
	FROM pg_constraint WHERE connamespace = 'public'::regnamespace
	UNION ALL
	SELECT 'trigger ' || pg_get_triggerdef(t.oid) FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
	WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
	UNION ALL
	SELECT 'function ' || p.oid::regprocedure || ' ' || md5(p.prosrc) FROM pg_proc AS p WHERE p.pronamespace = 'public'::regnamespace
	UNION ALL
	SELECT 'type ' || typname FROM pg_type WHERE typnamespace = 'public'::regnamespace
	UNION ALL
	SELECT 'migrations ' || count(*) || ' ' || coalesce(max(id), 0) FROM bun_migrations
) AS f(x)`
