package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/batch"
	"seckill/internal/seckill"
)

// The order's life after the purchase (seckill.OrderLife). Every
// transaction that changes an order locks its voucher_order row first, then
// (a payment, or the campaign's row), so they cannot deadlock on each
// other.

var _ seckill.OrderLife = (*Store)(nil)

// CloseOrder moves a CREATED order to CANCELLED or EXPIRED and puts its unit
// back into the campaign's stock; see seckill.OrderLife.
//
// Concurrent calls are group-committed (internal/batch): the orders of the
// calls that arrive while a close is under way are closed together in the
// next transaction, with one guarded update of each campaign's stock for
// all of them, as ExpireDue does. A storm of cancellations then costs a
// transaction and a lock of the campaign row per batch, not per order, and
// holds at most closeFlushes of the pool's connections. A lone call on an
// idle store is committed at once.
func (s *Store) CloseOrder(ctx context.Context, id int64, to seckill.OrderStatus, userID int64) (seckill.CloseResult, error) {
	if to != seckill.OrderCancelled && to != seckill.OrderExpired {
		return seckill.CloseResult{}, fmt.Errorf("store: close order %d: bad status %q", id, to)
	}
	if id <= 0 {
		return seckill.CloseResult{}, seckill.Errorf(seckill.ENOTFOUND, "order %d not found", id)
	}
	out, err := s.closes.Do(ctx, closeRequest{id: id, to: to, userID: userID})
	if errors.Is(err, batch.ErrBusy) {
		return seckill.CloseResult{}, seckill.Errorf(seckill.EUNAVAILABLE, "too many orders are being closed at once: try again")
	} else if err != nil {
		return seckill.CloseResult{}, fmt.Errorf("store: close order %d: %w", id, err)
	}
	return out[0].res, out[0].err
}

// Bounds of CloseOrder's group commit.
const (
	closeBatch   = 500             // orders a transaction closes at most
	closeFlushes = 2               // transactions (pool connections) at once
	closeBacklog = 20 * closeBatch // calls waiting for a transaction
	closeTimeout = 10 * time.Second
)

// closeRequest is one CloseOrder call; closeOutcome is its answer.
type closeRequest struct {
	id     int64
	to     seckill.OrderStatus
	userID int64
}

type closeOutcome struct {
	res seckill.CloseResult
	err error // the call's own: ENOTFOUND
}

// The statements of the order's life in batches, prepared once per
// connection (Store.prepare): as text, Postgres would parse, analyze and
// plan each anew for every batch, a cost a storm of cancellations pays on
// every one.
const (
	// lockOrdersSQL locks the orders of $1 in id order and reads them.
	lockOrdersSQL = `SELECT id, voucher_id, user_id, status, pay_by <= now() AS due FROM voucher_order
		WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE`
	// lockDueSQL locks up to $1 CREATED orders past their pay_by, oldest
	// first, skipping those another transaction holds.
	lockDueSQL = `SELECT id, voucher_id FROM voucher_order WHERE status = 'CREATED' AND pay_by <= now()
		ORDER BY pay_by LIMIT $1 FOR UPDATE SKIP LOCKED`
	// closeOrdersSQL closes the orders of $1, each to its status in $2,
	// its unit back in the epoch of $3.
	closeOrdersSQL = `UPDATE voucher_order AS o SET status = c.status, closed_at = now(), return_epoch = c.epoch, event_seq = o.event_seq + 1
		FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS c(id, status, epoch)
		WHERE o.id = c.id
		RETURNING o.id, o.voucher_id, o.user_id, o.closed_at, o.return_epoch`
	// returnStockSQL puts $2 units back into the stock of each campaign of
	// $1, locked in id order, and returns their epochs.
	returnStockSQL = `WITH locked AS (
			SELECT voucher_id FROM seckill_campaign WHERE voucher_id = ANY($1::bigint[]) ORDER BY voucher_id FOR UPDATE
		)
		UPDATE seckill_campaign AS c SET stock = c.stock + n.units, updated_at = now()
		FROM unnest($1::bigint[], $2::bigint[]) AS n(voucher_id, units), locked
		WHERE c.voucher_id = n.voucher_id AND locked.voucher_id = n.voucher_id
		RETURNING c.voucher_id, c.epoch, c.shard_epochs`
	// cancelPaymentsSQL cancels the open payments of the orders of $1.
	cancelPaymentsSQL = `UPDATE payment SET status = 'CANCELLED', updated_at = now()
		WHERE order_id = ANY($1::bigint[]) AND status = 'PENDING'`
	// markUnitsSQL marks the units of the closed orders of $1 returned.
	markUnitsSQL = `UPDATE voucher_order SET unit_returned = true
		WHERE id = ANY($1::bigint[]) AND status IN ('CANCELLED', 'EXPIRED')`
)

// closeOrders decides a batch of CloseOrder calls in one transaction. It
// locks the orders in id order first (so that batches, and a batch and a
// payment, cannot deadlock on them), decides each call on what it finds and
// on what the calls before it in the batch did (the first call that may
// close an order closes it; the others find it closed), closes those orders
// with their units back (closeLocked), and reads every order as it stands
// afterwards.
func (s *Store) closeOrders(ctx context.Context, reqs []closeRequest, out []closeOutcome) error {
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	ids := make([]int64, 0, len(reqs))
	for _, r := range reqs {
		if r.id > 0 {
			ids = append(ids, r.id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if err := s.prepare(ctx); err != nil {
		return err
	}
	return runInTx(ctx, s.db, nil, func(ctx context.Context, tx bun.Tx) error {
		clear(out)
		var locked []struct {
			ID        int64  `bun:"id"`
			VoucherID int64  `bun:"voucher_id"`
			UserID    int64  `bun:"user_id"`
			Status    string `bun:"status"`
			Due       bool   `bun:"due"` // pay_by has passed on the database's clock
		}
		if err := s.lockOrders.query(ctx, s.db, tx, &locked, int64Array(ids)); err != nil {
			return fmt.Errorf("lock orders: %w", err)
		}
		type held struct {
			voucherID, userID int64
			status            string
			due               bool
		}
		orders := make(map[int64]*held, len(locked))
		for _, o := range locked {
			orders[o.ID] = &held{voucherID: o.VoucherID, userID: o.UserID, status: o.Status, due: o.Due}
		}
		// The calls in the order they came: the first that may close an
		// order closes it; the others find it closed.
		closer := make(map[int64]int, len(reqs)) // order id -> the call that closes it
		var closings []closing
		for j, r := range reqs {
			o := orders[r.id]
			if o == nil || o.status != string(seckill.OrderCreated) || r.userID > 0 && r.userID != o.userID ||
				r.to == seckill.OrderExpired && !o.due {
				continue
			}
			o.status = string(r.to)
			closer[r.id] = j
			closings = append(closings, closing{id: r.id, voucherID: o.voucherID, to: r.to})
		}
		if len(closings) > 0 {
			closed, err := s.closeLocked(ctx, tx, closings)
			if err != nil {
				return err
			}
			evs := make([]orderEvent, len(closed))
			for k, c := range closed {
				to := seckill.OrderStatus(orders[c.ID].status)
				evs[k] = orderEvent{orderID: c.ID, typ: seckill.EventForStatus(to)}
				out[closer[c.ID]].res = seckill.CloseResult{Closed: true, Return: c.unitReturn()}
			}
			if err := s.emit(ctx, tx, evs); err != nil {
				return err
			}
		}
		after, err := s.findOrders(ctx, tx, ids)
		if err != nil {
			return err
		}
		for i, r := range reqs {
			o := after[r.id]
			if o == nil || r.userID > 0 && o.UserID != r.userID {
				out[i] = closeOutcome{err: seckill.Errorf(seckill.ENOTFOUND, "order %d not found", r.id)}
				continue
			}
			own := *o // each call's own, as when it was alone
			out[i].res.Order = &own
		}
		return nil
	})
}

// closing is a locked CREATED order to close.
type closing struct {
	id, voucherID int64
	to            seckill.OrderStatus
}

// closedOrder is an order a statement just closed.
type closedOrder struct {
	ID          int64     `bun:"id"`
	VoucherID   int64     `bun:"voucher_id"`
	UserID      int64     `bun:"user_id"`
	ClosedAt    time.Time `bun:"closed_at"`
	ReturnEpoch int64     `bun:"return_epoch"`
}

// unitReturn is what admission needs to take c's unit back.
func (c closedOrder) unitReturn() seckill.UnitReturn {
	return seckill.UnitReturn{OrderID: c.ID, VoucherID: c.VoucherID, UserID: c.UserID, Epoch: c.ReturnEpoch}
}

// closeLocked closes orders that tx holds locked, each CREATED: it puts
// their units back into their campaigns' stock, one statement for all,
// campaigns locked in id order; closes the orders, recording on each the
// epoch its stock shard is in then, which its unit came back in; and
// cancels their open payments (a success that still comes is owed back).
//
// The orders are locked before the campaign rows, as every transaction
// that changes both locks them. A rebuild (RebuildCampaign) that holds a
// campaign's lock first still reads these orders as holding their units,
// and the units come back in the epoch it installs, which the update of
// the stock returns; one that locks after reads them back already.
// return_epoch keeps which of the two happened, for the Redis side. One
// update of each order, where closing it first and recording its epoch
// after took two.
func (s *Store) closeLocked(ctx context.Context, tx bun.Tx, cs []closing) ([]closedOrder, error) {
	units := map[int64]int64{}
	for _, c := range cs {
		units[c.voucherID]++
	}
	campaigns := slices.Sorted(maps.Keys(units))
	counts := make([]int64, len(campaigns))
	for i, v := range campaigns {
		counts[i] = units[v]
	}
	var epochs []struct {
		VoucherID   int64   `bun:"voucher_id"`
		Epoch       int64   `bun:"epoch"`
		ShardEpochs []int64 `bun:"shard_epochs,array"`
	}
	if err := s.returnStock.query(ctx, s.db, tx, &epochs, int64Array(campaigns), int64Array(counts)); err != nil {
		return nil, fmt.Errorf("return units: %w", err)
	}
	epochsOf := make(map[int64]seckill.Epochs, len(epochs))
	for _, e := range epochs {
		epochsOf[e.VoucherID] = seckill.Epochs{Campaign: e.Epoch, Shards: e.ShardEpochs}
	}
	ids := make([]int64, len(cs))
	to := make([]string, len(cs))
	returnEpochs := make([]int64, len(cs))
	for i, c := range cs {
		ids[i], to[i], returnEpochs[i] = c.id, string(c.to), epochsOf[c.voucherID].OfOrder(c.id)
	}
	var closed []closedOrder
	if err := s.closeOrdersTo.query(ctx, s.db, tx, &closed, int64Array(ids), textArray(to), int64Array(returnEpochs)); err != nil {
		return nil, fmt.Errorf("close orders: %w", err)
	}
	if len(closed) != len(cs) {
		return nil, fmt.Errorf("close orders: %d of %d locked orders changed", len(closed), len(cs))
	}
	if err := s.cancelPayments.exec(ctx, tx, int64Array(ids)); err != nil {
		return nil, fmt.Errorf("cancel open payments: %w", err)
	}
	return closed, nil
}

// closeIsolated is closeLocked for closes of which some fail for their own
// order (memberError): it tries cs under a savepoint and, should they fail
// so, rolls back to it and tries each half the same way. It returns the
// orders it closed; a close that fails alone is left out, its order
// unchanged.
func (s *Store) closeIsolated(ctx context.Context, tx bun.Tx, cs []closing) ([]closedOrder, error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT close_part"); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	closed, err := s.closeLocked(ctx, tx, cs)
	if err != nil && !memberError(err) {
		return nil, err
	}
	if err != nil {
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT close_part"); err != nil {
			return nil, fmt.Errorf("rollback to savepoint: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT close_part"); err != nil {
		return nil, fmt.Errorf("release savepoint: %w", err)
	}
	if err == nil || len(cs) == 1 {
		return closed, nil
	}
	mid := len(cs) / 2
	closed, err = s.closeIsolated(ctx, tx, cs[:mid])
	if err != nil {
		return nil, err
	}
	rest, err := s.closeIsolated(ctx, tx, cs[mid:])
	if err != nil {
		return nil, err
	}
	return append(closed, rest...), nil
}

// Unreturned returns up to limit closed orders whose unit admission has not
// taken back, oldest first.
func (s *Store) Unreturned(ctx context.Context, limit int) ([]seckill.UnitReturn, error) {
	var rows []struct {
		ID          int64 `bun:"id"`
		VoucherID   int64 `bun:"voucher_id"`
		UserID      int64 `bun:"user_id"`
		ReturnEpoch int64 `bun:"return_epoch"`
	}
	err := s.db.NewRaw(`
		SELECT id, voucher_id, user_id, return_epoch FROM voucher_order
		WHERE status IN ('CANCELLED', 'EXPIRED') AND NOT unit_returned
		ORDER BY closed_at LIMIT ?`, max(limit, 1)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select unreturned units: %w", err)
	}
	out := make([]seckill.UnitReturn, len(rows))
	for i, r := range rows {
		out[i] = seckill.UnitReturn{OrderID: r.ID, VoucherID: r.VoucherID, UserID: r.UserID, Epoch: r.ReturnEpoch}
	}
	return out, nil
}

// ExpireDue expires up to limit CREATED orders past pay_by on the
// database's clock, oldest first, in one transaction: the orders, then one
// guarded update per campaign that takes their units back, then their open
// payments; see seckill.OrderLife. Orders another transaction holds (a
// payment, a cancel, another ExpireDue) are skipped, not waited for, so
// concurrent callers take disjoint batches, and campaigns are locked in id
// order, so two batches cannot deadlock on them.
//
// A batch that one order fails (memberError: a CHECK its campaign's stock
// meets, a data exception) is run again, its closes split in halves under
// savepoints until the orders that fail alone are found: those stay
// CREATED, due, for a later sweep (and an operator: their data is
// inconsistent), and every other order expires.
func (s *Store) ExpireDue(ctx context.Context, limit int) ([]seckill.Expired, error) {
	if err := s.prepare(ctx); err != nil {
		return nil, fmt.Errorf("store: expire due orders: %w", err)
	}
	out, err := s.expireDue(ctx, limit, false)
	if memberError(err) {
		out, err = s.expireDue(ctx, limit, true)
	}
	return out, err
}

// expireDue is ExpireDue's transaction; with isolate, its closes go
// through closeIsolated, which a successful batch does not need: savepoints
// cost a round trip each.
func (s *Store) expireDue(ctx context.Context, limit int, isolate bool) ([]seckill.Expired, error) {
	var out []seckill.Expired
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		out = out[:0]
		var due []struct {
			ID        int64 `bun:"id"`
			VoucherID int64 `bun:"voucher_id"`
		}
		if err := s.lockDue.query(ctx, s.db, tx, &due, max(limit, 1)); err != nil {
			return fmt.Errorf("lock due orders: %w", err)
		}
		if len(due) == 0 {
			return nil
		}
		cs := make([]closing, len(due))
		for i, d := range due {
			cs[i] = closing{id: d.ID, voucherID: d.VoucherID, to: seckill.OrderExpired}
		}
		closeAll := s.closeLocked
		if isolate {
			closeAll = s.closeIsolated
		}
		closed, err := closeAll(ctx, tx, cs)
		if err != nil {
			return err
		}
		ids := make([]int64, len(closed))
		for i, c := range closed {
			ids[i] = c.ID
		}
		if err := s.emitEach(ctx, tx, seckill.EventOrderExpired, ids); err != nil {
			return err
		}
		for _, c := range closed {
			out = append(out, seckill.Expired{Return: c.unitReturn(), At: c.ClosedAt.UTC()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: expire due orders: %w", err)
	}
	return out, nil
}

// UnitsReturned records that admission took back the units of closed
// orders, in one statement. Concurrent calls (each cancellation's, the
// sweep's, the expirers') are group-committed: one statement for those that
// arrive while one runs.
func (s *Store) UnitsReturned(ctx context.Context, orderIDs []int64) error {
	// An id that is not positive names no order: nothing to mark.
	orderIDs = slices.DeleteFunc(slices.Clone(orderIDs), func(id int64) bool { return id <= 0 })
	if len(orderIDs) == 0 {
		return nil
	}
	if _, err := s.returned.Do(ctx, orderIDs...); err != nil {
		return fmt.Errorf("store: mark %d units returned: %w", len(orderIDs), err)
	}
	return nil
}

// markReturned is UnitsReturned's commit.
func (s *Store) markReturned(ctx context.Context, ids []int64, _ []struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	if err := s.prepare(ctx); err != nil {
		return err
	}
	_, err := s.markUnits.stmt.Load().ExecContext(ctx, int64Array(ids))
	return err
}

// paymentRow is a row of payment.
type paymentRow struct {
	bun.BaseModel `bun:"table:payment,alias:p"`

	ID       string `bun:"id,pk"`
	OrderID  int64  `bun:"order_id,notnull"`
	Amount   int64  `bun:"amount,notnull"`
	Currency string `bun:"currency,notnull"`
	Status   string `bun:"status,nullzero,notnull,default:'PENDING'"`
	// ProviderRef is the provider's object opened for the payment (Stripe's
	// PaymentIntent), empty for none (NULL).
	ProviderRef string `bun:"provider_ref,nullzero"`
	timestamps
}

func toDomainPayment(r *paymentRow, payBy time.Time) seckill.Payment {
	return seckill.Payment{ID: r.ID, OrderID: r.OrderID, Amount: r.Amount, Currency: r.Currency,
		Status: seckill.PaymentStatus(r.Status), PayBy: payBy.UTC(), CreatedAt: r.CreatedAt.UTC()}
}

// lockedOrder is an order row locked for a change.
type lockedOrder struct {
	ID       int64     `bun:"id"`
	UserID   int64     `bun:"user_id"`
	Status   string    `bun:"status"`
	Amount   int64     `bun:"amount"`
	PayBy    time.Time `bun:"pay_by"`
	ClosedAt time.Time `bun:"closed_at"`
	Due      bool      `bun:"due"` // pay_by has passed on the database's clock
}

func lockOrder(ctx context.Context, tx bun.Tx, id int64) (*lockedOrder, error) {
	var o lockedOrder
	err := tx.NewRaw(`SELECT id, user_id, status, amount, pay_by, closed_at, pay_by <= now() AS due
		FROM voucher_order WHERE id = ? FOR UPDATE`, id).Scan(ctx, &o)
	if err := oneRow(err, "lock", "order", id); err != nil {
		return nil, err
	}
	return &o, nil
}

// cancelPending cancels the PENDING payments of an order (but except):
// the order closed, or except paid it.
func cancelPending(ctx context.Context, tx bun.Tx, orderID int64, except string) error {
	_, err := tx.NewRaw(`UPDATE payment SET status = 'CANCELLED', updated_at = now()
		WHERE order_id = ? AND status = 'PENDING' AND id <> ?`, orderID, except).Exec(ctx)
	if err != nil {
		return fmt.Errorf("cancel open payments: %w", err)
	}
	return nil
}

// notPayable says why an order cannot be paid now, or nil when it can.
func notPayable(o *lockedOrder) error {
	const at = "2006-01-02 15:04:05Z07:00"
	switch seckill.OrderStatus(o.Status) {
	case seckill.OrderCreated:
		if o.Due {
			return seckill.Errorf(seckill.ECONFLICT, "order %d is CREATED but its time to pay ran out at %s: it expires unpaid", o.ID, o.PayBy.UTC().Format(at))
		}
		return nil
	case seckill.OrderPaid:
		return seckill.Errorf(seckill.ECONFLICT, "order %d is PAID already", o.ID)
	case seckill.OrderCancelled:
		return seckill.Errorf(seckill.ECONFLICT, "order %d is CANCELLED: there is nothing to pay", o.ID)
	case seckill.OrderExpired:
		return seckill.Errorf(seckill.ECONFLICT, "order %d EXPIRED unpaid at %s: there is nothing to pay", o.ID, o.PayBy.UTC().Format(at))
	}
	return seckill.Errorf(seckill.ECONFLICT, "order %d is %s: only an order awaiting payment can be paid", o.ID, o.Status)
}

// SetPaymentRef records the provider's reference to a payment; see
// seckill.OrderLife.
func (s *Store) SetPaymentRef(ctx context.Context, paymentID, ref string) error {
	_, err := s.db.NewRaw(`UPDATE payment SET provider_ref = ? WHERE id = ? AND provider_ref IS NULL`, ref, paymentID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: set the provider's reference of payment %s: %w", paymentID, err)
	}
	return nil
}

// CreatePayment returns the open payment of an order awaiting payment, or
// opens one; see seckill.OrderLife.
func (s *Store) CreatePayment(ctx context.Context, orderID, userID int64, currency, newID string) (*seckill.Payment, error) {
	var p seckill.Payment
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		o, err := lockOrder(ctx, tx, orderID)
		if err != nil {
			return err
		}
		if userID > 0 && o.UserID != userID {
			return seckill.Errorf(seckill.ENOTFOUND, "order %d not found", orderID)
		}
		if err := notPayable(o); err != nil {
			return err
		}
		var rows []paymentRow
		err = tx.NewSelect().Model(&rows).Where("p.order_id = ?", orderID).Where("p.status = 'PENDING'").Scan(ctx)
		if err != nil {
			return fmt.Errorf("select payment: %w", err)
		}
		if len(rows) > 0 {
			p = toDomainPayment(&rows[0], o.PayBy)
			return nil
		}
		row := paymentRow{ID: newID, OrderID: orderID, Amount: o.Amount, Currency: currency}
		if _, err := tx.NewInsert().Model(&row).Returning("created_at, status").Exec(ctx); err != nil {
			return fmt.Errorf("insert payment: %w", err)
		}
		p = toDomainPayment(&row, o.PayBy)
		return nil
	})
	if err != nil {
		if seckill.ErrorCode(err) != seckill.EINTERNAL {
			return nil, err
		}
		return nil, fmt.Errorf("store: create payment of order %d: %w", orderID, err)
	}
	return &p, nil
}

// OrderPayments returns an order's payments, oldest first.
func (s *Store) OrderPayments(ctx context.Context, orderID int64) ([]seckill.Payment, error) {
	var rows []struct {
		paymentRow
		PayBy time.Time `bun:"pay_by"`
	}
	err := s.db.NewRaw(`SELECT p.id, p.order_id, p.amount, p.currency, p.status, p.created_at, p.updated_at, o.pay_by
		FROM payment AS p JOIN voucher_order AS o ON o.id = p.order_id
		WHERE p.order_id = ? ORDER BY p.created_at, p.id`, orderID).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select payments of order %d: %w", orderID, err)
	}
	out := make([]seckill.Payment, len(rows))
	for i := range rows {
		out[i] = toDomainPayment(&rows[i].paymentRow, rows[i].PayBy)
	}
	return out, nil
}

// ApplyPaymentEvent applies a provider's event once per event id; see
// seckill.OrderLife. Concurrent events are group-committed (paybatch.go):
// the payments that pay their orders go many to a transaction; any other
// event goes through applyPaymentEvent, alone.
func (s *Store) ApplyPaymentEvent(ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error) {
	// An event the statements cannot take (text Postgres cannot store, an
	// id over payment_event's CHECK) is answered alone, before the batch.
	if err := ev.Validate(); err != nil {
		return seckill.PaymentResult{}, err
	}
	out, err := s.payments.Do(ctx, ev)
	if errors.Is(err, batch.ErrBusy) {
		return seckill.PaymentResult{}, seckill.Errorf(seckill.EUNAVAILABLE, "too many payment events at once: try again")
	} else if dataException(err) {
		// The batch was split and this event failed alone.
		return seckill.PaymentResult{}, seckill.Errorf(seckill.EINVALID, "payment event %q cannot be stored (SQLSTATE %s)", ev.ID, sqlState(err))
	} else if err != nil {
		return seckill.PaymentResult{}, fmt.Errorf("store: apply payment event %q: %w", ev.ID, err)
	}
	if !out[0].done {
		return s.applyPaymentEvent(ctx, ev)
	}
	return out[0].res, nil
}

// applyPaymentEvent applies one event in a transaction of its own. It locks
// the order, then the payment, so concurrent deliveries of one event (or of
// two events of one order's payments) go one after the other, and the later
// finds the earlier's event row.
func (s *Store) applyPaymentEvent(ctx context.Context, ev seckill.PaymentEvent) (seckill.PaymentResult, error) {
	var res seckill.PaymentResult
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res = seckill.PaymentResult{}
		var orderID int64
		err := tx.NewRaw(`SELECT order_id FROM payment WHERE id = ?`, ev.PaymentID).Scan(ctx, &orderID)
		if err := oneRow(err, "select", "payment", ev.PaymentID); err != nil {
			return err
		}
		o, err := lockOrder(ctx, tx, orderID)
		if err != nil {
			return err
		}
		var p paymentRow
		if err := tx.NewSelect().Model(&p).Where("p.id = ?", ev.PaymentID).For("UPDATE").Scan(ctx); err != nil {
			return fmt.Errorf("lock payment: %w", err)
		}
		mismatch := ev.Mismatch(p.ProviderRef, p.Amount, p.Currency)
		if mismatch == "" && (ev.Amount != p.Amount || ev.Currency != p.Currency) {
			return seckill.Invalidf("amount", "payment %s is for %s, not %s", p.ID,
				seckill.FormatAmount(p.Amount, p.Currency), seckill.FormatAmount(ev.Amount, ev.Currency))
		}
		var seen []struct {
			PaymentID string `bun:"payment_id"`
			Outcome   string `bun:"outcome"`
		}
		if err := tx.NewRaw(`SELECT payment_id, outcome FROM payment_event WHERE id = ?`, ev.ID).Scan(ctx, &seen); err != nil {
			return fmt.Errorf("select event: %w", err)
		}
		if len(seen) > 0 {
			if seen[0].PaymentID != p.ID {
				return seckill.Errorf(seckill.ECONFLICT, "event %s was applied to another payment", ev.ID)
			}
			res.Duplicate, res.Outcome = true, seckill.EventOutcome(seen[0].Outcome)
		} else {
			// A mismatch changes nothing: its row is the record.
			outcome := seckill.AppliedMismatch
			if mismatch == "" {
				if outcome, err = s.applyEvent(ctx, tx, ev, o, &p); err != nil {
					return err
				}
			}
			res.Outcome, res.Mismatch = outcome, mismatch
			var named, why string // what a mismatch named, and why it is not the payment's
			if mismatch != "" {
				named, why = ev.ProviderRef, refundReason("", mismatch) // cut to the column's length
			}
			_, err = tx.NewRaw(`INSERT INTO payment_event (id, payment_id, type, outcome, provider_ref, mismatch)
				VALUES (?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''))`,
				ev.ID, p.ID, ev.Type, string(outcome), named, why).Exec(ctx)
			if sqlState(err) == codeUniqueViolation {
				return seckill.Errorf(seckill.ECONFLICT, "event %s was applied to another payment", ev.ID)
			} else if err != nil {
				return fmt.Errorf("insert event: %w", err)
			}
		}
		res.Payment = toDomainPayment(&p, o.PayBy)
		res.Order, err = findOrder(ctx, tx, orderID)
		return err
	})
	if err != nil {
		if seckill.ErrorCode(err) != seckill.EINTERNAL {
			return seckill.PaymentResult{}, err
		}
		return seckill.PaymentResult{}, fmt.Errorf("store: apply payment event %q: %w", ev.ID, err)
	}
	return res, nil
}

// applyEvent changes the payment p (locked) and its order o (locked) as the
// event says (see seckill.OrderLife.ApplyPaymentEvent), and returns what it
// did.
func (s *Store) applyEvent(ctx context.Context, tx bun.Tx, ev seckill.PaymentEvent, o *lockedOrder, p *paymentRow) (seckill.EventOutcome, error) {
	status := seckill.PaymentStatus(p.Status)
	switch ev.Type {
	case seckill.EventPaymentSucceeded:
		if status != seckill.PaymentPending && status != seckill.PaymentFailed && status != seckill.PaymentCancelled {
			return seckill.AppliedIgnored, nil // this payment's money was counted before
		}
		if o.Status != string(seckill.OrderCreated) {
			// Paid by another payment, cancelled or expired: the order
			// stays as it is and the money goes back.
			_, err := tx.NewRaw(`UPDATE payment SET status = 'REFUND_NEEDED', owed_at = now(), refund_generation = 1,
				updated_at = now() WHERE id = ?`, p.ID).Exec(ctx)
			if err != nil {
				return "", fmt.Errorf("owe payment back: %w", err)
			}
			p.Status = string(seckill.PaymentRefundNeeded)
			return seckill.AppliedOwed, nil
		}
		// This payment pays; any other still open can only be cancelled.
		if err := cancelPending(ctx, tx, o.ID, p.ID); err != nil {
			return "", err
		}
		if _, err := tx.NewRaw(`UPDATE voucher_order SET status = 'PAID', paid_at = now(), event_seq = event_seq + 1 WHERE id = ?`, o.ID).Exec(ctx); err != nil {
			return "", fmt.Errorf("pay order: %w", err)
		}
		if err := setPaymentStatus(ctx, tx, p, seckill.PaymentSucceeded); err != nil {
			return "", err
		}
		if err := s.emit(ctx, tx, []orderEvent{{orderID: o.ID, typ: seckill.EventOrderPaid, paymentID: p.ID}}); err != nil {
			return "", err
		}
		return seckill.AppliedPaid, nil
	case seckill.EventPaymentFailed:
		if status != seckill.PaymentPending {
			return seckill.AppliedIgnored, nil
		}
		if err := setPaymentStatus(ctx, tx, p, seckill.PaymentFailed); err != nil {
			return "", err
		}
		return seckill.AppliedFailed, nil
	case seckill.EventRefundSucceeded:
		if !status.Owed() {
			return seckill.AppliedIgnored, nil // nothing was owed: nothing changes
		}
		_, err := tx.NewRaw(`UPDATE payment SET status = 'REFUNDED', refunded_at = now(), updated_at = now() WHERE id = ?`, p.ID).Exec(ctx)
		if err != nil {
			return "", fmt.Errorf("record refund: %w", err)
		}
		if err := s.refundEvent(ctx, tx, o.ID, p.ID, seckill.EventOrderRefunded); err != nil {
			return "", err
		}
		p.Status = string(seckill.PaymentRefunded)
		return seckill.AppliedRefunded, nil
	case seckill.EventRefundFailed:
		if status != seckill.PaymentRefundNeeded && status != seckill.PaymentRefunding {
			return seckill.AppliedIgnored, nil
		}
		_, err := tx.NewRaw(`UPDATE payment SET status = 'REFUND_FAILED', refund_refused = true, refund_error = ?,
			updated_at = now() WHERE id = ?`, refundReason("refused: ", ev.Reason), p.ID).Exec(ctx)
		if err != nil {
			return "", fmt.Errorf("record refund failure: %w", err)
		}
		if err := s.refundEvent(ctx, tx, o.ID, p.ID, seckill.EventOrderRefundFailed); err != nil {
			return "", err
		}
		p.Status = string(seckill.PaymentRefundFailed)
		return seckill.AppliedRefundFailed, nil
	}
	return "", fmt.Errorf("unknown event type %q", ev.Type)
}

func setPaymentStatus(ctx context.Context, tx bun.Tx, p *paymentRow, to seckill.PaymentStatus) error {
	_, err := tx.NewRaw(`UPDATE payment SET status = ?, updated_at = now() WHERE id = ?`, string(to), p.ID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("update payment: %w", err)
	}
	p.Status = string(to)
	return nil
}

// refundReason is what refund_error records: prefix and the provider's
// words, cut to the column's 500 bytes.
func refundReason(prefix, reason string) string {
	if reason == "" {
		reason = "no reason given"
	}
	s := prefix + reason
	for len(s) > seckill.MaxReasonLen {
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "")
}
