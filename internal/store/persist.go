package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"seckill/internal/seckill"
)

// Reasons recorded for admissions that can never be persisted; the domain
// owns them because the service acts on them.
const (
	ReasonUserHasOrder = seckill.FailureUserHasOrder
	ReasonNoStock      = seckill.FailureNoStock
	ReasonNoCampaign   = seckill.FailureNoCampaign
	ReasonLost         = seckill.FailureLost
	ReasonConflict     = seckill.FailureConflict
	// ReasonInvalid is reported, not recorded, for an admission whose ids
	// are not positive, whose order id does not carry its voucher id, whose
	// time Postgres cannot hold, or that Postgres refused alone for its
	// values (persistSorted).
	ReasonInvalid = seckill.FailureInvalid
)

var (
	// errFallback aborts a batch transaction that cannot persist every
	// admission (no stock in Postgres, no campaign): each admission is then
	// decided alone.
	errFallback = errors.New("store: batch needs one transaction per admission")
	// errDecided rolls back a transaction whose admission is decided but
	// whose writes must not stay.
	errDecided = errors.New("store: decided, roll back")
	// errTaken aborts a batch transaction whose INSERT of new orders met an
	// id or a buyer's order already held: the batch is then run again with
	// ON CONFLICT DO NOTHING.
	errTaken = errors.New("store: batch holds a taken order id or buyer")
)

// decision is what happened to one order id.
type decision struct {
	status seckill.OrderStatus
	reason string
	at     time.Time // created_at, or failed_at
	payBy  time.Time // when created
	fresh  bool      // the row was inserted by this call
}

func created(r idTime) decision {
	return decision{status: seckill.OrderCreated, at: r.At.UTC(), payBy: r.PayBy.UTC()}
}

func createdNow(r idTime) decision {
	return decision{status: seckill.OrderCreated, at: r.At.UTC(), payBy: r.PayBy.UTC(), fresh: true}
}

func failed(reason string, at time.Time) decision {
	return decision{status: seckill.OrderFailed, reason: reason, at: at.UTC()}
}

// idTime is a row that RETURNING or a lookup gives back.
type idTime struct {
	ID     int64     `bun:"id"`
	At     time.Time `bun:"at"`
	PayBy  time.Time `bun:"pay_by,scanonly"`
	UserID int64     `bun:"user_id,scanonly"`
	Amount int64     `bun:"amount,scanonly"` // insertOrders only, which scans by hand
}

// recordedFailure is a row of order_failure as PersistOrders reads it back.
type recordedFailure struct {
	ID     int64     `bun:"id"`
	UserID int64     `bun:"user_id"`
	Reason string    `bun:"reason"`
	At     time.Time `bun:"at"`
}

// PersistOrders writes admissions as orders, exactly once per order id, and
// takes their units from the campaigns' Postgres stock. It returns one
// outcome per admission, in input order, duplicates included.
//
// The fast path persists the whole batch in one transaction: one INSERT for
// every row, then one guarded UPDATE of the stock per voucher, counted from
// the rows the INSERT returned. A sale's batch is all new orders, and its
// INSERT has no ON CONFLICT; should an id or a buyer's order be held already
// (a re-delivery, a second order), it fails with unique_violation and the
// batch runs again with INSERT ... ON CONFLICT DO NOTHING, which skips such
// rows. A concurrent transaction inserting the same id makes either INSERT
// wait (and then fail or skip the row), so a unit is taken only by the
// transaction that really inserted it.
// When a campaign lacks stock or does not exist, the batch is rolled back
// and each admission is decided in a transaction of its own. An error means
// a transient failure (connection, timeout, deadlock): retry the batch. One
// of a COMMIT (seckill.ErrOutcomeUnknown) may follow a batch Postgres did
// write; the retry reports its orders CREATED.
//
// One invariant keeps voucher_order and order_failure apart: a transaction
// records a failure for an id only while it holds that id in voucher_order's
// primary key (inserted, not committed), or when another order of the same
// user and campaign is committed (or commits with the failure), so the id
// can never be inserted. Every writer reads order_failure
// after its INSERT has waited out such holders, so it sees their failure.
func (s *Store) PersistOrders(ctx context.Context, adms []seckill.Admission) ([]seckill.PersistOutcome, error) {
	if len(adms) == 0 {
		return nil, nil
	}
	decided := make(map[int64]decision, len(adms))
	batch := make([]seckill.Admission, 0, len(adms))
	seen := make(map[int64]bool, len(adms))
	for _, a := range adms {
		if seen[a.OrderID] {
			continue
		}
		seen[a.OrderID] = true
		if !validAdmission(a) {
			decided[a.OrderID] = failed(ReasonInvalid, time.Now())
			continue
		}
		batch = append(batch, a)
	}
	// Every statement handles rows in order id order, so concurrent batches
	// wait for each other's ids in one order and cannot deadlock on them.
	slices.SortFunc(batch, func(a, b seckill.Admission) int { return cmp.Compare(a.OrderID, b.OrderID) })

	if len(batch) > 0 {
		if err := s.prepare(ctx); err != nil {
			return nil, err
		}
		got, err := s.persistSorted(ctx, batch)
		if err != nil {
			return nil, err
		}
		maps.Copy(decided, got)
	}

	out := make([]seckill.PersistOutcome, len(adms))
	for i, a := range adms {
		d := decided[a.OrderID]
		out[i] = seckill.PersistOutcome{Admission: a, Status: d.status, Reason: d.reason, CreatedAt: d.at, PayBy: d.payBy, Inserted: d.fresh}
	}
	return out, nil
}

// persistSorted decides batch (unique, sorted by order id): in one
// transaction when it can (persistBatch), else one per admission
// (persistEach). A batch that a member's value failed (memberError: a
// data exception, a CHECK) is split in halves, each decided on its own,
// until the admission that fails alone is found: that one is decided
// FAILED (ReasonInvalid), reported, not recorded (order_failure would
// meet the same error), so that it neither holds back the others nor
// comes back forever. A part that failed was rolled back, and a part
// decided twice (persistEach commits per admission) finds its orders
// written: each order is decided once. Any other error is the batch's.
func (s *Store) persistSorted(ctx context.Context, batch []seckill.Admission) (map[int64]decision, error) {
	got, err := s.persistBatch(ctx, batch, true)
	if errors.Is(err, errTaken) {
		got, err = s.persistBatch(ctx, batch, false)
	}
	if errors.Is(err, errFallback) {
		got, err = s.persistEach(ctx, batch)
	}
	if err == nil || !memberError(err) {
		return got, err
	}
	if len(batch) == 1 {
		return map[int64]decision{batch[0].OrderID: failed(ReasonInvalid, time.Now())}, nil
	}
	mid := len(batch) / 2
	got, err = s.persistSorted(ctx, batch[:mid])
	if err != nil {
		return nil, err
	}
	rest, err := s.persistSorted(ctx, batch[mid:])
	if err != nil {
		return nil, err
	}
	maps.Copy(got, rest)
	return got, nil
}

// validAdmission reports whether a can be stored: the schema wants positive
// ids, an id must carry its voucher (its epoch decides where the unit is
// taken from), and the time must be one timestamptz holds.
func validAdmission(a seckill.Admission) bool {
	vid, seq := seckill.SplitOrderID(a.OrderID)
	return a.OrderID > 0 && a.UserID > 0 && a.VoucherID > 0 && vid == a.VoucherID && seq > 0 &&
		storableTime(a.AdmittedAt)
}

// storableTime reports whether t is a time Postgres's timestamptz holds
// and writes back as Go reads it: years 1 to 9999 (Postgres has no year 0,
// which Go's year 0, 1 BC, would be written as, and pay_by adds up to a
// day).
func storableTime(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y < 9999
}

// persistBatch decides every admission of batch (unique, sorted by order id)
// in one transaction, or returns errFallback having changed nothing. With
// fresh it inserts every row or none: an id or a buyer's order already held
// returns errTaken, having changed nothing, and the batch is then run again
// without fresh, which skips such rows and decides them.
func (s *Store) persistBatch(ctx context.Context, batch []seckill.Admission, fresh bool) (map[int64]decision, error) {
	var out map[int64]decision
	err := runInTx(ctx, s.db, nil, func(ctx context.Context, tx bun.Tx) error {
		out = make(map[int64]decision, len(batch))
		ids := make([]int64, len(batch))
		for i, a := range batch {
			ids[i] = a.OrderID
		}

		insert := &s.insert
		if fresh {
			insert = &s.insertNew
		}
		ins, err := insertOrders(ctx, tx, insert, batch)
		switch sqlState(err) {
		case codeForeignKeyViolation:
			return errFallback // a voucher does not exist
		case codeUniqueViolation:
			return errTaken
		}
		if err != nil {
			return fmt.Errorf("insert orders: %w", err)
		}
		inserted := make(map[int64]idTime, len(ins))
		for _, r := range ins {
			inserted[r.ID] = r
		}

		// An id recorded as failed stays failed. Should this INSERT have
		// written one (a re-delivered admission whose failure freed the
		// user's slot), its row may also have made another order of the
		// batch look like the user's second one: decide alone instead.
		fails, err := s.selectFailures(ctx, tx, ids)
		if err != nil {
			return err
		}
		for _, f := range fails {
			if f.UserID != batchUser(batch, f.ID) {
				continue // another buyer's conflict on this id, not this one's failure
			}
			if _, ok := inserted[f.ID]; ok {
				return errFallback
			}
			out[f.ID] = failed(f.Reason, f.At)
		}

		// A row the INSERT skipped is either this very order, written
		// before (a re-delivery), or the user's second order for the
		// voucher: the first is committed (ON CONFLICT waited for it) or
		// written by this batch, so this id can never be written and its
		// failure is final.
		var skipped []int64
		for _, id := range ids {
			if _, ok := inserted[id]; !ok && !hasKey(out, id) {
				skipped = append(skipped, id)
			}
		}
		if len(skipped) > 0 {
			existing, err := selectOrders(ctx, tx, skipped)
			if err != nil {
				return err
			}
			owner := make(map[int64]int64, len(existing))
			for _, r := range existing {
				owner[r.ID] = r.UserID
			}
			// An existing row is this admission only if it is the same
			// buyer's: an id held by someone else is a conflict, never
			// acknowledged as saved.
			var holders, conflicts []seckill.Admission
			for _, a := range batch {
				if _, ok := inserted[a.OrderID]; ok || hasKey(out, a.OrderID) {
					continue
				}
				switch u, ok := owner[a.OrderID]; {
				case !ok:
					holders = append(holders, a)
				case u != a.UserID:
					conflicts = append(conflicts, a)
				}
			}
			for _, r := range existing {
				if r.UserID == batchUser(batch, r.ID) {
					out[r.ID] = created(r)
				}
			}
			recorded, err := s.recordFailures(ctx, tx, holders, ReasonUserHasOrder)
			if err != nil {
				return err
			}
			maps.Copy(out, recorded)
			recorded, err = s.recordFailures(ctx, tx, conflicts, ReasonConflict)
			if err != nil {
				return err
			}
			maps.Copy(out, recorded)
		}

		// Take the units last: the campaign row is the hottest row of the
		// schema, so hold its lock for as short a time as possible, and
		// lock campaigns in voucher id order so that batches spanning
		// several vouchers cannot deadlock. A unit is taken only while the
		// admission's stock shard is in the admission's epoch: a shard
		// rebuilt since sells it again. One statement a campaign.
		take := make(map[int64]*stockTake)
		fresh := make([]createdOrder, 0, len(inserted))
		for _, a := range batch {
			if r, ok := inserted[a.OrderID]; ok {
				t := take[a.VoucherID]
				if t == nil {
					t = &stockTake{}
					take[a.VoucherID] = t
				}
				t.add(a.OrderID)
				out[a.OrderID] = createdNow(r)
				fresh = append(fresh, createdOrder{a, r})
			}
		}
		// Every order this batch wrote is CREATED once it commits: its
		// order.created events go with it, one statement for the batch.
		if err := s.emitCreated(ctx, tx, fresh); err != nil {
			return err
		}
		for _, v := range slices.Sorted(maps.Keys(take)) {
			ok, err := s.takeStock(ctx, tx, v, take[v])
			if err != nil {
				return err
			} else if !ok {
				return errFallback
			}
		}
		return nil
	})
	if errors.Is(err, errFallback) || errors.Is(err, errTaken) {
		return nil, err
	} else if err != nil {
		return nil, fmt.Errorf("store: persist %d orders: %w", len(batch), err)
	}
	return out, nil
}

// persistEach decides each admission in a transaction of its own, so that
// one that cannot be persisted does not hold back the others.
func (s *Store) persistEach(ctx context.Context, batch []seckill.Admission) (map[int64]decision, error) {
	out := make(map[int64]decision, len(batch))
	for _, a := range batch {
		d, err := s.persistOne(ctx, a)
		if err != nil {
			return nil, err
		}
		out[a.OrderID] = d
	}
	return out, nil
}

func (s *Store) persistOne(ctx context.Context, a seckill.Admission) (decision, error) {
	var d decision
	err := runInTx(ctx, s.db, nil, func(ctx context.Context, tx bun.Tx) error {
		ins, err := insertOrders(ctx, tx, &s.insert, []seckill.Admission{a})
		if sqlState(err) == codeForeignKeyViolation {
			// No such voucher. order_failure cannot record it either
			// (the same foreign key), so the outcome is only reported;
			// voucher ids are never reused, so it stays the same.
			d = failed(ReasonNoCampaign, time.Now())
			return errDecided
		} else if err != nil {
			return fmt.Errorf("insert order: %w", err)
		}

		fails, err := s.selectFailures(ctx, tx, []int64{a.OrderID})
		if err != nil {
			return err
		}
		fails = slices.DeleteFunc(fails, func(f recordedFailure) bool { return f.UserID != a.UserID })
		if len(fails) > 0 {
			d = failed(fails[0].Reason, fails[0].At)
			return errDecided // take back the row this INSERT may have written
		}

		if len(ins) == 0 {
			existing, err := selectOrders(ctx, tx, []int64{a.OrderID})
			if err != nil {
				return err
			}
			reason := ReasonUserHasOrder
			if len(existing) > 0 {
				if existing[0].UserID == a.UserID {
					d = created(existing[0])
					return nil
				}
				reason = ReasonConflict
			}
			recorded, err := s.recordFailures(ctx, tx, []seckill.Admission{a}, reason)
			d = recorded[a.OrderID]
			return err
		}

		var one stockTake
		one.add(a.OrderID)
		ok, err := s.takeStock(ctx, tx, a.VoucherID, &one)
		if err != nil {
			return err
		} else if ok {
			d = createdNow(ins[0])
			return s.emitCreated(ctx, tx, []createdOrder{{a, ins[0]}})
		}
		reason := ReasonNoStock
		var current []campaignRow
		err = tx.NewSelect().Model(&current).Column("epoch", "shard_epochs").Where("voucher_id = ?", a.VoucherID).Scan(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("select campaign %d: %w", a.VoucherID, err)
		case len(current) == 0:
			reason = ReasonNoCampaign
		case (seckill.Epochs{Campaign: current[0].Epoch, Shards: current[0].ShardEpochs}).OfOrder(a.OrderID) != seckill.OrderEpoch(a.OrderID):
			reason = ReasonLost
		}
		// Delete the order but keep its id held (the delete commits with
		// the failure), so no concurrent writer slips it in between.
		if err := deleteOrders(ctx, tx, []int64{a.OrderID}); err != nil {
			return err
		}
		recorded, err := s.recordFailures(ctx, tx, []seckill.Admission{a}, reason)
		d = recorded[a.OrderID]
		return err
	})
	if errors.Is(err, errDecided) {
		return d, nil
	} else if err != nil {
		return decision{}, fmt.Errorf("store: persist order %d: %w", a.OrderID, err)
	}
	return d, nil
}

// insertOrdersSQL writes admissions as CREATED orders in their order, each
// skipped on any conflict, and returns those written. It gives each its
// amount and pay_by from its voucher and campaign, read once per voucher in
// the same statement: the voucher_order_fill trigger then stays out of it
// (it fills them only for a writer that leaves them out), as a PL/pgSQL call
// per row would add a function call's cost to every order written.
// The arrays make one short statement whatever the batch's size, prepared
// once per connection (Store.prepare). A voucher that does not exist fails
// the statement with foreign_key_violation: the voucher_order_voucher_check
// trigger checks (and locks) each voucher once per statement, where a
// foreign key checked every row.
//
// insertNewOrdersSQL is the same without ON CONFLICT, for a batch that is
// all new orders (a sale's): it writes every row or fails with
// unique_violation. It spares Postgres the speculative insertion ON CONFLICT
// makes for every row (a probe of both unique indexes before the insert and
// a second WAL record after it).
const (
	insertOrdersSQL    = insertOrdersInto + "\nON CONFLICT DO NOTHING" + insertOrdersReturning
	insertNewOrdersSQL = insertOrdersInto + insertOrdersReturning

	insertOrdersInto = `WITH a AS (
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::timestamptz[])
		WITH ORDINALITY AS a (id, voucher_id, user_id, admitted_at, n)
), p AS (
	SELECT v.id, v.pay_value, c.pay_window_seconds
	FROM voucher AS v LEFT JOIN seckill_campaign AS c ON c.voucher_id = v.id
	WHERE v.id IN (SELECT voucher_id FROM a)
)
INSERT INTO voucher_order (id, voucher_id, user_id, admitted_at, amount, pay_by)
SELECT a.id, a.voucher_id, a.user_id, a.admitted_at, coalesce(p.pay_value, 0),
	a.admitted_at + make_interval(secs => coalesce(p.pay_window_seconds, 900))
FROM a LEFT JOIN p ON p.id = a.voucher_id
ORDER BY a.n`
	insertOrdersReturning = "\nRETURNING id, created_at, pay_by, amount"
)

// insertOrders runs insert (Store.insert or Store.insertNew) for adms in tx.
func insertOrders(ctx context.Context, tx bun.Tx, insert *prepared, adms []seckill.Admission) ([]idTime, error) {
	ids, vouchers, users, at := admissionArrays(adms)
	rows, err := insert.in(ctx, tx).QueryContext(ctx, ids, vouchers, users, at)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ins := make([]idTime, 0, len(adms))
	for rows.Next() {
		var r idTime
		if err := rows.Scan(&r.ID, &r.At, &r.PayBy, &r.Amount); err != nil {
			return nil, err
		}
		ins = append(ins, r)
	}
	return ins, rows.Err()
}

// admissionArrays writes the ids, vouchers, users and admission times of
// adms as Postgres array literals, the text the statement's parameters take.
// Times are UTC to the microsecond, what timestamptz keeps.
func admissionArrays(adms []seckill.Admission) (ids, vouchers, users, at string) {
	b := make([]byte, 0, len(adms)*(3*21+28)+8)
	arr := func(el func(b []byte, a seckill.Admission) []byte) string {
		start := len(b)
		b = appendArray(b, adms, el)
		return string(b[start:])
	}
	ids = arr(func(b []byte, a seckill.Admission) []byte { return strconv.AppendInt(b, a.OrderID, 10) })
	vouchers = arr(func(b []byte, a seckill.Admission) []byte { return strconv.AppendInt(b, a.VoucherID, 10) })
	users = arr(func(b []byte, a seckill.Admission) []byte { return strconv.AppendInt(b, a.UserID, 10) })
	at = arr(func(b []byte, a seckill.Admission) []byte {
		return a.AdmittedAt.UTC().AppendFormat(b, "2006-01-02T15:04:05.999999Z07:00")
	})
	return ids, vouchers, users, at
}

// recordFailures records adms (sorted by order id) as failed for reason and
// returns their decisions; one recorded before keeps its first reason. The
// failures it records write their order.failed events.
func (s *Store) recordFailures(ctx context.Context, tx bun.Tx, adms []seckill.Admission, reason string) (map[int64]decision, error) {
	out := make(map[int64]decision, len(adms))
	if len(adms) == 0 {
		return out, nil
	}
	rows := make([]failureRow, len(adms))
	ids := make([]int64, len(adms))
	for i, a := range adms {
		rows[i], ids[i] = toDBFailure(a, reason), a.OrderID
	}
	var ins []idTime
	err := tx.NewInsert().Model(&rows).
		On("CONFLICT (id) DO NOTHING").
		Returning("id, failed_at AS at").
		Scan(ctx, &ins)
	if err != nil {
		return nil, fmt.Errorf("insert order failures: %w", err)
	}
	recorded := make([]int64, len(ins))
	for i, r := range ins {
		out[r.ID] = failed(reason, r.At)
		recorded[i] = r.ID
	}
	if err := s.emitFailed(ctx, tx, recorded); err != nil {
		return nil, err
	}
	if len(ins) < len(adms) {
		fails, err := s.selectFailures(ctx, tx, ids)
		if err != nil {
			return nil, err
		}
		for _, f := range fails {
			if !hasKey(out, f.ID) {
				out[f.ID] = failed(f.Reason, f.At)
			}
		}
	}
	for _, id := range ids {
		if !hasKey(out, id) {
			return nil, fmt.Errorf("order failure %d neither inserted nor found", id)
		}
	}
	return out, nil
}

// selectFailuresSQL reads the failures recorded for a batch's ids: one
// statement for every batch, prepared once per connection (Store.prepare).
// Sent as text, its ids were an array literal of the batch's size for
// Postgres to parse, analyze and plan anew every time.
const selectFailuresSQL = `SELECT id, user_id, reason, failed_at FROM order_failure WHERE id = ANY($1::bigint[])`

// selectFailures returns the failures recorded for ids, in tx.
func (s *Store) selectFailures(ctx context.Context, tx bun.Tx, ids []int64) ([]recordedFailure, error) {
	rows, err := s.failures.in(ctx, tx).QueryContext(ctx, int64Array(ids))
	if err != nil {
		return nil, fmt.Errorf("select order failures: %w", err)
	}
	defer rows.Close()
	var fails []recordedFailure
	for rows.Next() {
		var f recordedFailure
		if err := rows.Scan(&f.ID, &f.UserID, &f.Reason, &f.At); err != nil {
			return nil, fmt.Errorf("select order failures: %w", err)
		}
		fails = append(fails, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select order failures: %w", err)
	}
	return fails, nil
}

// int64Array writes ids as a Postgres array literal, the text a bigint[]
// parameter takes.
// textArray writes xs as a Postgres array literal, each element quoted.
func textArray(xs []string) string {
	return string(appendArray(make([]byte, 0, len(xs)*12+2), xs, func(b []byte, x string) []byte {
		b = append(b, '"')
		for i := 0; i < len(x); i++ {
			if x[i] == '"' || x[i] == '\\' {
				b = append(b, '\\')
			}
			b = append(b, x[i])
		}
		return append(b, '"')
	}))
}

func int64Array(ids []int64) string {
	return string(appendArray(make([]byte, 0, len(ids)*20+2), ids, func(b []byte, id int64) []byte {
		return strconv.AppendInt(b, id, 10)
	}))
}

// appendArray appends xs to b as a Postgres array literal, each element
// written by el.
func appendArray[T any](b []byte, xs []T, el func(b []byte, x T) []byte) []byte {
	b = append(b, '{')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = el(b, x)
	}
	return append(b, '}')
}

func selectOrders(ctx context.Context, db bun.IDB, ids []int64) ([]idTime, error) {
	var rows []idTime
	err := db.NewSelect().Model((*orderRow)(nil)).
		ColumnExpr("o.id, o.created_at AS at, o.pay_by, o.user_id").
		Where("o.id = ANY(?)", pgdialect.Array(ids)).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("select orders: %w", err)
	}
	return rows, nil
}

func deleteOrders(ctx context.Context, db bun.IDB, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := db.NewDelete().Model((*orderRow)(nil)).Where("id = ANY(?)", pgdialect.Array(ids)).Exec(ctx); err != nil {
		return fmt.Errorf("delete orders: %w", err)
	}
	return nil
}

// stockTake is what a batch takes from one campaign's stock: units, and
// the epoch each stock shard they were admitted in must still be in.
type stockTake struct {
	units  int64
	epochs []shardEpoch // sorted by shard, each shard once
}

type shardEpoch struct {
	shard int
	epoch int64
}

// add counts one order's unit.
func (t *stockTake) add(orderID int64) {
	t.units++
	_, shard, _ := seckill.SplitShardOrderID(orderID)
	e := shardEpoch{shard, seckill.OrderEpoch(orderID)}
	i, found := slices.BinarySearchFunc(t.epochs, e, func(x, y shardEpoch) int {
		return cmp.Or(cmp.Compare(x.shard, y.shard), cmp.Compare(x.epoch, y.epoch))
	})
	if !found {
		t.epochs = slices.Insert(t.epochs, i, e)
	}
}

// batchUser returns the user of the admission with order id id in batch.
func batchUser(batch []seckill.Admission, id int64) int64 {
	i, ok := slices.BinarySearchFunc(batch, id, func(a seckill.Admission, id int64) int { return cmp.Compare(a.OrderID, id) })
	if !ok {
		return 0
	}
	return batch[i].UserID
}

// takeStockSQL is takeStock's statement, one whatever the number of stock
// shards, prepared once per connection (Store.prepare): $1 the campaign, $2
// the units, and each shard ($3, from 0) with the epoch ($4) it must still
// be in (never none: a batch takes units of at least one).
//
// The epochs are checked by a scalar sub-select, a condition on the
// campaign's row itself: when a RebuildCampaign commits first, this UPDATE
// then checks it again against the row the rebuild wrote (READ COMMITTED's
// recheck), and takes nothing. As NOT EXISTS, Postgres made the same check
// an anti-join, which that recheck did not run again: an order of the
// closed epoch took a unit (TestRebuildFencesPersist).
const takeStockSQL = `UPDATE seckill_campaign AS c SET stock = c.stock - $2, updated_at = now()
WHERE c.voucher_id = $1 AND c.stock >= $2 AND (
	SELECT bool_and(coalesce(c.shard_epochs[e.shard + 1], c.epoch) = e.epoch)
	FROM unnest($3::int[], $4::bigint[]) AS e (shard, epoch))`

// takeStock takes t's units from a campaign's stock, in one statement, if
// each stock shard they were admitted in is still in their epoch; it
// reports false, and changes nothing, when the campaign does not exist, has
// moved a shard to another epoch (RebuildCampaign) or has fewer units
// left. A shard's epoch is shard_epochs' entry, or the campaign's when
// there is none (a campaign of one shard: shard 0).
func (s *Store) takeStock(ctx context.Context, tx bun.Tx, voucherID int64, t *stockTake) (bool, error) {
	shards, epochs := make([]int64, len(t.epochs)), make([]int64, len(t.epochs))
	for i, e := range t.epochs {
		shards[i], epochs[i] = int64(e.shard), e.epoch
	}
	res, err := s.take.in(ctx, tx).ExecContext(ctx, voucherID, t.units, int64Array(shards), int64Array(epochs))
	if err != nil {
		return false, fmt.Errorf("take %d units of campaign %d: %w", t.units, voucherID, err)
	}
	affected, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("take %d units of campaign %d: %w", t.units, voucherID, err)
	}
	return affected == 1, nil
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// prepared is a statement of a batch (persistence, the order's life) that
// Postgres parses once per connection and may plan once (a generic plan),
// where a query sent as text is parsed, analyzed and planned anew for every
// batch: re-planning each batch costs Postgres a large share of the batch's
// own work.
type prepared struct {
	sql  string
	mu   sync.Mutex // held while preparing
	stmt atomic.Pointer[sql.Stmt]
}

// prepare prepares the statements of the persistence path and of the
// order's life in batches that are not yet. It runs outside any
// transaction: preparing takes a connection of the pool, and a transaction
// waiting for one that only it could free would never end. database/sql
// then prepares each on every other connection the first time a
// transaction there uses it (prepared.in).
func (s *Store) prepare(ctx context.Context) error {
	for _, p := range s.statements {
		if p.stmt.Load() != nil {
			continue
		}
		if err := p.prepare(ctx, s.db); err != nil {
			return err
		}
	}
	return nil
}

func (p *prepared) prepare(ctx context.Context, db *bun.DB) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stmt.Load() != nil {
		return nil
	}
	stmt, err := db.DB.PrepareContext(ctx, p.sql)
	if err != nil {
		return fmt.Errorf("store: prepare: %w", err)
	}
	p.stmt.Store(stmt)
	return nil
}

// in returns p for use in tx, once Store.prepare has prepared it.
func (p *prepared) in(ctx context.Context, tx bun.Tx) *sql.Stmt {
	return tx.StmtContext(ctx, p.stmt.Load())
}

// query runs p in tx with args and scans its rows into dest as bun scans a
// query's (db is tx's database).
func (p *prepared) query(ctx context.Context, db *bun.DB, tx bun.Tx, dest any, args ...any) error {
	rows, err := p.in(ctx, tx).QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return db.ScanRows(ctx, rows, dest)
}

// exec runs p in tx with args.
func (p *prepared) exec(ctx context.Context, tx bun.Tx, args ...any) error {
	_, err := p.in(ctx, tx).ExecContext(ctx, args...)
	return err
}
