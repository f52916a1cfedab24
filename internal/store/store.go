// Package store is the system of record: it implements seckill.Store on
// Postgres through bun. Row structs and their converters live in model.go;
// every query function takes a bun.IDB so it runs in or out of a
// transaction.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"

	"seckill/internal/batch"
	"seckill/internal/seckill"
)

// pingTimeout bounds how long Open waits for Postgres to answer.
const pingTimeout = 5 * time.Second

// Open connects to Postgres at dsn (postgres://user:pass@host:5432/db?sslmode=disable;
// pgdriver also reads dial_timeout, read_timeout and write_timeout there)
// with a pool of maxConns connections, and pings it. The caller closes the
// returned DB.
func Open(ctx context.Context, dsn string, maxConns int) (*bun.DB, error) {
	if maxConns < 1 {
		return nil, fmt.Errorf("store: maxConns must be at least 1, got %d", maxConns)
	}
	connector, err := newConnector(dsn)
	if err != nil {
		return nil, err
	}
	sqldb := sql.OpenDB(connector)
	// Equal limits: a pool that closes idle connections only to dial them
	// again at the next burst wastes the burst.
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	db := bun.NewDB(sqldb, pgdialect.New())

	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		conf := connector.Config()
		return nil, fmt.Errorf("store: cannot reach postgres at %s (database %q, user %q): %w",
			conf.Addr, conf.Database, conf.User, err)
	}
	return db, nil
}

// newConnector parses dsn without ever echoing it: it may hold a password.
func newConnector(dsn string) (c *pgdriver.Connector, err error) {
	u, perr := url.Parse(dsn)
	if perr != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql" && u.Scheme != "unix") {
		return nil, errors.New("store: invalid database URL: want postgres://user:password@host:5432/dbname?sslmode=disable")
	}
	// pgdriver.WithDSN panics on options it cannot parse.
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("store: invalid database URL: %v", r)
		}
	}()
	return pgdriver.NewConnector(pgdriver.WithDSN(dsn)), nil
}

// Store implements the domain's Postgres ports on Postgres: one adapter,
// a file per port.
type Store struct {
	db *bun.DB
	// events: changes write their events to the outbox (events.go); off
	// while no endpoint is enabled, so that the outbox costs nothing then.
	events atomic.Bool
	// endpointPolicy: where event endpoints may point (events.go).
	endpointPolicy seckill.EndpointPolicy
	// The statements of the batches, prepared by the first batch (prepare).
	// Persistence's: insertOrdersSQL, insertNewOrdersSQL, selectFailuresSQL
	// and takeStockSQL.
	insert, insertNew, failures, take prepared
	// closeOrders', ExpireDue's, closeLocked's and markReturned's (life.go).
	lockOrders, lockDue, closeOrdersTo, ordersByIDs, returnStock, cancelPayments, markUnits prepared
	// applyPlainEvents' (paybatch.go).
	payOwners, payLockOrders, payLockPayments, payApplied, payFail, payCancelOthers, payOrders, paySucceed, payEvents prepared
	// statements lists them all, for prepare.
	statements []*prepared
	// closes, returned and payments group-commit CloseOrder,
	// UnitsReturned (life.go) and ApplyPaymentEvent (paybatch.go).
	closes   *batch.Committer[closeRequest, closeOutcome]
	returned *batch.Committer[int64, struct{}]
	payments *batch.Committer[seckill.PaymentEvent, payOutcome]
}

var (
	_ seckill.CatalogStore  = (*Store)(nil)
	_ seckill.Auditor       = (*Store)(nil)
	_ seckill.OrderStore    = (*Store)(nil)
	_ seckill.RecoveryStore = (*Store)(nil)
)

// New returns a Store that uses db, typically from Open.
func New(db *bun.DB) *Store {
	s := &Store{db: db}
	for _, st := range []struct {
		p   *prepared
		sql string
	}{
		{&s.insert, insertOrdersSQL}, {&s.insertNew, insertNewOrdersSQL}, {&s.failures, selectFailuresSQL}, {&s.take, takeStockSQL},
		{&s.lockOrders, lockOrdersSQL}, {&s.lockDue, lockDueSQL}, {&s.closeOrdersTo, closeOrdersSQL}, {&s.ordersByIDs, ordersByIDsSQL},
		{&s.returnStock, returnStockSQL}, {&s.cancelPayments, cancelPaymentsSQL}, {&s.markUnits, markUnitsSQL},
		{&s.payOwners, payOwnersSQL}, {&s.payLockOrders, payLockOrdersSQL}, {&s.payLockPayments, payLockPaymentsSQL},
		{&s.payApplied, payAppliedSQL}, {&s.payFail, payFailSQL}, {&s.payCancelOthers, payCancelOthersSQL},
		{&s.payOrders, payOrdersSQL}, {&s.paySucceed, paySucceedSQL}, {&s.payEvents, payEventsSQL},
	} {
		st.p.sql = st.sql
		s.statements = append(s.statements, st.p)
	}
	// Each batch is one transaction, all or nothing, so a batch that one
	// member's row or value failed (memberError) is split to answer the
	// others (package batch).
	s.closes = batch.New(s.closeOrders, batch.Options{MaxBatch: closeBatch, Flushes: closeFlushes, Backlog: closeBacklog, Isolate: memberError})
	// A mark is one row's flag: batches of many, one connection.
	s.returned = batch.New(s.markReturned, batch.Options{MaxBatch: 10 * closeBatch, Flushes: 1, Backlog: closeBacklog, Isolate: memberError})
	// A payment batch meeting a constraint sends each event alone
	// (applyPlainEvents): only its data exceptions are split.
	s.payments = batch.New(s.applyPlainEvents, batch.Options{MaxBatch: payBatch, Flushes: payFlushes, Backlog: payBacklog, Isolate: dataException})
	return s
}

// runInTx runs fn in a transaction, as bun's RunInTx does, but an error of
// the COMMIT itself, once fn succeeded, also matches
// seckill.ErrOutcomeUnknown: Postgres may have committed the transaction
// and its answer was lost (the connection cut, the deadline passed during
// the COMMIT). An error of fn rolls back: that transaction made nothing.
func runInTx(ctx context.Context, db *bun.DB, opts *sql.TxOptions, fn func(context.Context, bun.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	committing := false
	defer func() {
		if !committing {
			_ = tx.Rollback()
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	committing = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: %w", seckill.ErrOutcomeUnknown, err)
	}
	return nil
}

// SQLSTATE codes the store tells apart.
const (
	codeForeignKeyViolation = "23503"
	codeUniqueViolation     = "23505"
	codeCheckViolation      = "23514"
)

// memberError reports whether err is a Postgres error that what one member
// of a batch carries causes, never the database's state: a data exception
// (SQLSTATE class 22: bytes that are not UTF-8, a NUL byte, a number or a
// time out of range) or a CHECK violation (23514). A batch statement that
// fails with one fails for a member, and is split to find it
// (batch.Options.Isolate); any other error is the batch's.
func memberError(err error) bool {
	return dataException(err) || sqlState(err) == codeCheckViolation
}

// dataException reports whether err is a Postgres data exception (SQLSTATE
// class 22), which only a value a statement was given can cause.
func dataException(err error) bool {
	return strings.HasPrefix(sqlState(err), "22")
}

// storableText returns EINVALID naming field when Postgres's text cannot
// hold s (not UTF-8, or a NUL byte) or it has fewer than least or more than
// most characters (a column's CHECK).
func storableText(field, s string, least, most int) error {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return seckill.Invalidf(field, "%s must be UTF-8 text without NUL bytes", field)
	}
	if n := utf8.RuneCountInString(s); n < least || n > most {
		return seckill.Invalidf(field, "%s must be %d to %d characters", field, least, most)
	}
	return nil
}

// oneRow maps the error of a query that reads one row, of what (as
// "voucher") with id: no row is ENOTFOUND, any other error is wrapped as
// "doing what id: err".
func oneRow(err error, doing, what string, id any) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return seckill.Errorf(seckill.ENOTFOUND, "%s %v not found", what, id)
	default:
		return fmt.Errorf("%s %s %v: %w", doing, what, id, err)
	}
}

// sqlState returns the SQLSTATE of a Postgres error in err's chain, or "".
func sqlState(err error) string {
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) {
		return pgErr.Field('C')
	}
	return ""
}

// constraintName returns the constraint a Postgres error names, or "".
func constraintName(err error) string {
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) {
		return pgErr.Field('n')
	}
	return ""
}
