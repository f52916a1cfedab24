package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"seckill/internal/seckill"
)

// The outbox of order events (seckill.EventOutbox, seckill.EventAdmin).
// Each change an event reports writes its rows in its own transaction, one
// statement for a whole batch (the persistence batch, an expiry batch), and
// only while some endpoint is enabled (EventsOn): with none, the outbox
// costs no statement at all.

var (
	_ seckill.EventOutbox = (*Store)(nil)
	_ seckill.EventAdmin  = (*Store)(nil)
)

// SetEventsOn turns the outbox's writes on or off. Off, no change writes
// events; the caller keeps it on while an endpoint is enabled
// (RefreshEvents).
func (s *Store) SetEventsOn(on bool) { s.events.Store(on) }

// EventsOn reports whether changes write events.
func (s *Store) EventsOn() bool { return s.events.Load() }

// RefreshEvents turns the outbox's writes on when some endpoint is
// enabled, off otherwise, and reports which.
func (s *Store) RefreshEvents(ctx context.Context) (bool, error) {
	var on bool
	if err := s.db.NewRaw(`SELECT EXISTS (SELECT 1 FROM event_endpoint WHERE enabled)`).Scan(ctx, &on); err != nil {
		return s.EventsOn(), fmt.Errorf("store: look for event endpoints: %w", err)
	}
	s.SetEventsOn(on)
	return on, nil
}

// utcJSON renders a timestamptz as RFC 3339 in UTC, or JSON null.
func utcJSON(col string) string {
	return `to_char(` + col + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`
}

// orderEventData is the order of an event, built from voucher_order AS o
// (and payment AS p, for refund events) in the statement that writes it.
var orderEventData = `json_strip_nulls(json_build_object('id', o.id::text, 'voucherId', o.voucher_id::text,
	'userId', o.user_id::text, 'status', o.status, 'amount', o.amount, 'createdAt', ` + utcJSON("o.created_at") + `,
	'payBy', ` + utcJSON("o.pay_by") + `, 'paidAt', ` + utcJSON("o.paid_at") + `, 'closedAt', ` + utcJSON("o.closed_at") + `,
	'payment', CASE WHEN p.id IS NULL THEN NULL ELSE json_build_object('id', p.id, 'amount', p.amount,
		'currency', p.currency, 'status', p.status, 'refundedAt', ` + utcJSON("p.refunded_at") + `,
		'refundError', nullif(p.refund_error, '')) END))`

// insertOrderEventsSQL writes an event of each order (its current
// event_seq, the change's own) to every enabled endpoint.
var insertOrderEventsSQL = `INSERT INTO order_event (endpoint_id, order_id, sequence, type, data)
SELECT e.id, o.id, o.event_seq, t.type, ` + orderEventData + `
FROM unnest(?::bigint[], ?::text[], ?::text[]) AS t(order_id, type, payment_id)
JOIN voucher_order AS o ON o.id = t.order_id
LEFT JOIN payment AS p ON p.id = t.payment_id
CROSS JOIN event_endpoint AS e
WHERE e.enabled`

// orderEvent is one event to write: an order's change (the order's
// event_seq already counts it), and the payment of a refund event.
type orderEvent struct {
	orderID   int64
	typ       seckill.EventType
	paymentID string
}

// emit writes evs to the outbox in one statement, when events are on.
func (s *Store) emit(ctx context.Context, db bun.IDB, evs []orderEvent) error {
	if len(evs) == 0 || !s.EventsOn() {
		return nil
	}
	ids := make([]int64, len(evs))
	types := make([]string, len(evs))
	pays := make([]string, len(evs))
	for i, e := range evs {
		ids[i], types[i], pays[i] = e.orderID, string(e.typ), e.paymentID
	}
	if _, err := db.NewRaw(insertOrderEventsSQL, pgdialect.Array(ids), pgdialect.Array(types), pgdialect.Array(pays)).Exec(ctx); err != nil {
		return fmt.Errorf("write %d events: %w", len(evs), err)
	}
	return nil
}

// emitEach writes one event of type typ for every order of ids.
func (s *Store) emitEach(ctx context.Context, db bun.IDB, typ seckill.EventType, ids []int64) error {
	if len(ids) == 0 || !s.EventsOn() {
		return nil
	}
	evs := make([]orderEvent, len(ids))
	for i, id := range ids {
		evs[i] = orderEvent{orderID: id, typ: typ}
	}
	return s.emit(ctx, db, evs)
}

// createdOrder is an order a persistence batch wrote: its admission and
// what the INSERT returned.
type createdOrder struct {
	adm seckill.Admission
	row idTime
}

// emitCreated writes the order.created events of a persistence batch's new
// orders in one statement, when events are on. Their JSON is made here from
// what the INSERT returned, the same as orderEventData makes it, so that
// Postgres neither reads the orders back nor formats their times: it is the
// one event of every unit sold.
func (s *Store) emitCreated(ctx context.Context, db bun.IDB, orders []createdOrder) error {
	if len(orders) == 0 || !s.EventsOn() {
		return nil
	}
	ids := make([]int64, len(orders))
	data := make([]string, len(orders))
	var b []byte
	for i, o := range orders {
		ids[i] = o.adm.OrderID
		b = createdJSON(b[:0], o)
		data[i] = string(b)
	}
	_, err := db.NewRaw(`INSERT INTO order_event (endpoint_id, order_id, sequence, type, data)
		SELECT e.id, t.order_id, 1, 'order.created', t.data::json
		FROM unnest(?::bigint[], ?::text[]) AS t(order_id, data) CROSS JOIN event_endpoint AS e
		WHERE e.enabled`, pgdialect.Array(ids), pgdialect.Array(data)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("write %d order.created events: %w", len(orders), err)
	}
	return nil
}

// eventTime is how an event's order writes a time (utcJSON's format).
const eventTime = "2006-01-02T15:04:05.000000Z"

// createdJSON appends the order of o's order.created event to b.
func createdJSON(b []byte, o createdOrder) []byte {
	b = append(b, `{"id":"`...)
	b = strconv.AppendInt(b, o.adm.OrderID, 10)
	b = append(b, `","voucherId":"`...)
	b = strconv.AppendInt(b, o.adm.VoucherID, 10)
	b = append(b, `","userId":"`...)
	b = strconv.AppendInt(b, o.adm.UserID, 10)
	b = append(b, `","status":"CREATED","amount":`...)
	b = strconv.AppendInt(b, o.row.Amount, 10)
	b = append(b, `,"createdAt":"`...)
	b = o.row.At.UTC().AppendFormat(b, eventTime)
	b = append(b, `","payBy":"`...)
	b = o.row.PayBy.UTC().AppendFormat(b, eventTime)
	return append(b, `"}`...)
}

// emitFailed writes order.failed (sequence 1: a failed order has no other
// event) for the failures of ids, when events are on.
func (s *Store) emitFailed(ctx context.Context, db bun.IDB, ids []int64) error {
	if len(ids) == 0 || !s.EventsOn() {
		return nil
	}
	_, err := db.NewRaw(`INSERT INTO order_event (endpoint_id, order_id, sequence, type, data)
		SELECT e.id, f.id, 1, 'order.failed', json_build_object('id', f.id::text, 'voucherId', f.voucher_id::text,
			'userId', f.user_id::text, 'status', 'FAILED', 'failureReason', f.reason, 'createdAt', `+utcJSON("f.failed_at")+`)
		FROM order_failure AS f CROSS JOIN event_endpoint AS e
		WHERE f.id = ANY(?) AND e.enabled`, pgdialect.Array(ids)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("write %d order.failed events: %w", len(ids), err)
	}
	return nil
}

// refundEvent counts a refund's change in its order's sequence and writes
// its event; the order is locked.
func (s *Store) refundEvent(ctx context.Context, tx bun.Tx, orderID int64, paymentID string, typ seckill.EventType) error {
	if _, err := tx.NewRaw(`UPDATE voucher_order SET event_seq = event_seq + 1 WHERE id = ?`, orderID).Exec(ctx); err != nil {
		return fmt.Errorf("count refund event: %w", err)
	}
	return s.emit(ctx, tx, []orderEvent{{orderID: orderID, typ: typ, paymentID: paymentID}})
}

// endpointRow is a row of event_endpoint.
type endpointRow struct {
	ID            int64     `bun:"id"`
	URL           string    `bun:"url"`
	Secret        string    `bun:"secret"`
	Source        string    `bun:"source"`
	Enabled       bool      `bun:"enabled"`
	Failures      int       `bun:"failures"`
	NextAttemptAt time.Time `bun:"next_attempt_at"`
	LastError     string    `bun:"last_error"`
	LastSuccessAt time.Time `bun:"last_success_at"`
	CreatedAt     time.Time `bun:"created_at"`
}

func (r *endpointRow) endpoint() seckill.Endpoint {
	return seckill.Endpoint{ID: r.ID, URL: r.URL, Secret: r.Secret, Source: r.Source, Enabled: r.Enabled,
		Failures: r.Failures, NextAttempt: utc(r.NextAttemptAt), LastError: r.LastError,
		LastSuccess: utc(r.LastSuccessAt), CreatedAt: utc(r.CreatedAt)}
}

// Endpoints returns every endpoint, oldest first.
func (s *Store) Endpoints(ctx context.Context) ([]seckill.Endpoint, error) {
	var rows []endpointRow
	err := s.db.NewRaw(`SELECT id, url, secret, source, enabled, failures, next_attempt_at, last_error,
		last_success_at, created_at FROM event_endpoint ORDER BY id`).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select event endpoints: %w", err)
	}
	out := make([]seckill.Endpoint, len(rows))
	for i := range rows {
		out[i] = rows[i].endpoint()
	}
	return out, nil
}

// DeclareEnvEndpoint makes the environment's endpoint
// (SECKILL_EVENTS_WEBHOOK_URL) the one Postgres holds: added, or its URL
// and secret changed, and enabled. An instance without the variable
// declares nothing: it does not stop the deliveries that the instances with
// it declared (a rolling deploy that drops or adds the variable loses no
// event); only an operator disables or deletes the endpoint (dashboard).
// Its backoff and outbox stay as they were.
func (s *Store) DeclareEnvEndpoint(ctx context.Context, rawURL, secret string) error {
	if err := s.endpointPolicy.CheckURL(rawURL); err != nil {
		return err
	}
	_, err := s.db.NewRaw(`INSERT INTO event_endpoint (url, secret, source) VALUES (?, ?, 'env')
		ON CONFLICT (source) WHERE source = 'env'
		DO UPDATE SET url = excluded.url, secret = excluded.secret, enabled = true`, rawURL, secret).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: declare the environment's event endpoint: %w", err)
	}
	s.SetEventsOn(true)
	return nil
}

// SetEndpointPolicy sets where the endpoints AddEndpoint and
// DeclareEnvEndpoint take may point (development's, anywhere, until set).
func (s *Store) SetEndpointPolicy(p seckill.EndpointPolicy) { s.endpointPolicy = p }

// validEndpoint checks an endpoint's URL and secret.
func (s *Store) validEndpoint(rawURL, secret string) error {
	if err := s.endpointPolicy.CheckURL(rawURL); err != nil {
		return err
	}
	if len(secret) < seckill.MinSecretLen {
		return seckill.Invalidf("secret", "the secret must have at least %d characters", seckill.MinSecretLen)
	}
	return nil
}

// AddEndpoint adds an enabled dashboard endpoint; see seckill.EventAdmin.
// The outbox's writes turn on at once in this process (RefreshEvents
// turns them on in the others).
func (s *Store) AddEndpoint(ctx context.Context, rawURL, secret string) (seckill.Endpoint, error) {
	if err := s.validEndpoint(rawURL, secret); err != nil {
		return seckill.Endpoint{}, err
	}
	var r endpointRow
	err := s.db.NewRaw(`INSERT INTO event_endpoint (url, secret, source) VALUES (?, ?, 'dashboard')
		RETURNING id, url, secret, source, enabled, failures, next_attempt_at, last_error, last_success_at, created_at`,
		rawURL, secret).Scan(ctx, &r)
	if err != nil {
		return seckill.Endpoint{}, fmt.Errorf("store: add event endpoint: %w", err)
	}
	s.SetEventsOn(true)
	return r.endpoint(), nil
}

// SetEndpointEnabled enables or disables an endpoint, the environment's
// too; see seckill.EventAdmin.
func (s *Store) SetEndpointEnabled(ctx context.Context, id int64, enabled bool) error {
	res, err := s.db.NewRaw(`UPDATE event_endpoint SET enabled = ? WHERE id = ?`, enabled, id).Exec(ctx)
	if err != nil {
		return fmt.Errorf("store: set event endpoint %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return seckill.Errorf(seckill.ENOTFOUND, "endpoint %d not found", id)
	}
	if enabled {
		s.SetEventsOn(true)
	}
	return nil
}

// endpointDeleteChunk is how many deliveries one statement of
// DeleteEndpoint deletes: an endpoint that kept millions (retained, or
// owed to a receiver that went away) goes in many short transactions, not
// one long one that holds its row lock and keeps vacuum off the table.
var endpointDeleteChunk = 10000

// DeleteEndpoint deletes a disabled endpoint (a dashboard's or the
// environment's) and its deliveries; see seckill.EventAdmin. The deliveries go endpointDeleteChunk at a
// time, each chunk while the endpoint's row is locked and still disabled,
// then the endpoint; enabled again halfway, it stays with what is left of
// them (ECONFLICT). A delete cut short (its ctx ends, Postgres goes away)
// leaves the disabled endpoint with the rest: deleting it again finishes.
func (s *Store) DeleteEndpoint(ctx context.Context, id int64) error {
	if _, err := s.deleteDeliveries(ctx, id); err != nil {
		return err
	}
	var enabled []bool
	err := s.db.NewRaw(`WITH gone AS (
			DELETE FROM event_endpoint WHERE id = ? AND NOT enabled RETURNING id
		)
		SELECT enabled FROM event_endpoint WHERE id = ? AND NOT EXISTS (SELECT 1 FROM gone)
		UNION ALL SELECT false FROM gone`, id, id).Scan(ctx, &enabled)
	switch {
	case err != nil:
		return fmt.Errorf("store: delete event endpoint %d: %w", id, err)
	case len(enabled) == 0:
		return seckill.Errorf(seckill.ENOTFOUND, "endpoint %d not found", id)
	case enabled[0]:
		return seckill.Errorf(seckill.ECONFLICT, "endpoint %d is enabled: disable it first", id)
	}
	return nil
}

// deleteDeliveries deletes the deliveries of a disabled endpoint,
// endpointDeleteChunk a statement, and returns how many statements deleted
// some; none for an endpoint that is enabled.
func (s *Store) deleteDeliveries(ctx context.Context, id int64) (int, error) {
	for chunks := 0; ; chunks++ {
		var n int
		err := s.db.NewRaw(`WITH e AS (
				SELECT id FROM event_endpoint WHERE id = ? AND NOT enabled FOR UPDATE
			), gone AS (
				DELETE FROM order_event WHERE ctid IN (
					SELECT ctid FROM order_event WHERE endpoint_id = (SELECT id FROM e) LIMIT ?)
				RETURNING 1
			)
			SELECT count(*) FROM gone`, id, endpointDeleteChunk).Scan(ctx, &n)
		if err != nil {
			return chunks, fmt.Errorf("store: delete the deliveries of event endpoint %d: %w", id, err)
		}
		if n == 0 {
			return chunks, nil
		}
	}
}

// deliveryRow is a row of order_event.
type deliveryRow struct {
	EndpointID    int64           `bun:"endpoint_id"`
	OrderID       int64           `bun:"order_id"`
	Sequence      int             `bun:"sequence"`
	Type          string          `bun:"type"`
	Data          json.RawMessage `bun:"data"`
	OccurredAt    time.Time       `bun:"occurred_at"`
	Attempts      int             `bun:"attempts"`
	NextAttemptAt time.Time       `bun:"next_attempt_at"`
	LastAttemptAt time.Time       `bun:"last_attempt_at"`
	LastStatus    int             `bun:"last_status"`
	LastAnswer    string          `bun:"last_answer"`
	DeliveredAt   time.Time       `bun:"delivered_at"`
	Dead          bool            `bun:"dead"`
}

const deliveryColumns = `endpoint_id, order_id, sequence, type, data, occurred_at, attempts, next_attempt_at,
	last_attempt_at, last_status, last_answer, delivered_at, dead`

func (r *deliveryRow) delivery() seckill.Delivery {
	return seckill.Delivery{
		Event: seckill.Event{ID: seckill.EventID(r.OrderID, r.Sequence), Type: seckill.EventType(r.Type),
			Sequence: r.Sequence, OccurredAt: r.OccurredAt.UTC(), Order: r.Data},
		EndpointID: r.EndpointID, OrderID: r.OrderID, Attempts: r.Attempts, NextAttempt: utc(r.NextAttemptAt),
		LastAttempt: utc(r.LastAttemptAt), LastStatus: r.LastStatus, LastAnswer: r.LastAnswer,
		DeliveredAt: utc(r.DeliveredAt), Dead: r.Dead,
	}
}

// claimSQL takes an endpoint's due deliveries: live, undelivered, whose
// order has no earlier event still undelivered at this endpoint (a dead one
// holds the later back), so at most one per order and never out of order.
// They come in the due index's order alone (no tie-breaker that would sort
// a backlog of every due row for each batch); orders are independent.
// A row another deliverer holds is skipped, and while it is held its later
// events are not due (the earlier row is still there).
const claimSQL = `SELECT ` + deliveryColumns + ` FROM order_event AS e
WHERE e.endpoint_id = ?0 AND e.delivered_at IS NULL AND NOT e.dead AND e.next_attempt_at <= now()
	AND NOT EXISTS (SELECT 1 FROM order_event AS b WHERE b.endpoint_id = e.endpoint_id AND b.order_id = e.order_id
		AND b.sequence < e.sequence AND b.delivered_at IS NULL)
ORDER BY e.next_attempt_at
LIMIT ?1 FOR UPDATE OF e SKIP LOCKED`

// DeliverDue claims, sends and records a batch of an endpoint's due
// deliveries in one transaction; see seckill.EventOutbox. The rows stay
// locked while send runs: the lock is the batch's lease, and a deliverer
// that dies lets it go with its connection. Delivered rows are deleted,
// unless keep.
func (s *Store) DeliverDue(ctx context.Context, e seckill.Endpoint, limit int, keep bool,
	send func(ctx context.Context, due []seckill.Delivery) ([]seckill.Attempt, seckill.EndpointHealth)) (int, error) {
	n := 0
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var rows []deliveryRow
		if err := tx.NewRaw(claimSQL, e.ID, max(limit, 1)).Scan(ctx, &rows); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		n = len(rows)
		if n == 0 {
			return nil
		}
		due := make([]seckill.Delivery, n)
		for i := range rows {
			due[i] = rows[i].delivery()
		}
		attempts, health := send(ctx, due)
		if err := recordAttempts(ctx, tx, e.ID, attempts, keep); err != nil {
			return err
		}
		return recordHealth(ctx, tx, e, health)
	})
	if err != nil {
		return n, fmt.Errorf("store: deliver events of endpoint %d: %w", e.ID, err)
	}
	return n, nil
}

// recordAttempts records a batch's attempts in one statement, and, unless
// keep, deletes the delivered ones in one more: an UPDATE of an indexed
// column writes a new row version and its index entries, which a DELETE
// does not.
func recordAttempts(ctx context.Context, tx bun.Tx, endpointID int64, as []seckill.Attempt, keep bool) error {
	as = slices.DeleteFunc(slices.Clone(as), func(a seckill.Attempt) bool { return a.Skipped }) // not sent: as they were
	if !keep {
		var done []int64
		var seqs []int64
		var rest []seckill.Attempt
		for _, a := range as {
			if a.Result.OK() {
				done, seqs = append(done, a.OrderID), append(seqs, int64(a.Sequence))
			} else {
				rest = append(rest, a)
			}
		}
		if len(done) > 0 {
			_, err := tx.NewRaw(`DELETE FROM order_event AS e USING unnest(?0::bigint[], ?1::int[]) AS d(order_id, sequence)
				WHERE e.endpoint_id = ?2 AND e.order_id = d.order_id AND e.sequence = d.sequence`,
				pgdialect.Array(done), pgdialect.Array(seqs), endpointID).Exec(ctx)
			if err != nil {
				return fmt.Errorf("delete %d delivered events: %w", len(done), err)
			}
		}
		as = rest
	}
	if len(as) == 0 {
		return nil
	}
	orders := make([]int64, len(as))
	seqs := make([]int64, len(as))
	oks := make([]bool, len(as))
	statuses := make([]int64, len(as))
	answers := make([]string, len(as))
	next := make([]time.Time, len(as))
	dead := make([]bool, len(as))
	for i, a := range as {
		orders[i], seqs[i], oks[i], statuses[i] = a.OrderID, int64(a.Sequence), a.Result.OK(), int64(a.Result.Status)
		answers[i], dead[i] = a.Result.Answer, a.Dead && !a.Result.OK()
		next[i] = a.Next
		if next[i].IsZero() {
			next[i] = time.Now()
		}
	}
	_, err := tx.NewRaw(`UPDATE order_event AS e SET attempts = e.attempts + 1, last_attempt_at = now(),
			last_status = a.status, last_answer = left(a.answer, 500),
			delivered_at = CASE WHEN a.ok THEN now() END,
			next_attempt_at = CASE WHEN a.ok THEN e.next_attempt_at ELSE a.next END,
			dead = a.dead
		FROM unnest(?0::bigint[], ?1::int[], ?2::boolean[], ?3::int[], ?4::text[], ?5::timestamptz[], ?6::boolean[])
			AS a(order_id, sequence, ok, status, answer, next, dead)
		WHERE e.endpoint_id = ?7 AND e.order_id = a.order_id AND e.sequence = a.sequence`,
		pgdialect.Array(orders), pgdialect.Array(seqs), pgdialect.Array(oks), pgdialect.Array(statuses),
		pgdialect.Array(answers), pgdialect.Array(next), pgdialect.Array(dead), endpointID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("record %d attempts: %w", len(as), err)
	}
	return nil
}

// recordHealth records a round's verdict on its endpoint. An endpoint that
// answers again after failed rounds gets the events it failed meanwhile
// due at once: they wait no longer than its outage.
func recordHealth(ctx context.Context, tx bun.Tx, e seckill.Endpoint, h seckill.EndpointHealth) error {
	var err error
	switch {
	case h.OK && e.Failures == 0 && time.Since(e.LastSuccess) < time.Second:
		// Healthy and noted as such a moment ago: the endpoint's row is
		// not written again for every batch.
	case h.OK:
		_, err = tx.NewRaw(`UPDATE event_endpoint SET failures = 0, next_attempt_at = now(), last_success_at = now()
			WHERE id = ?`, e.ID).Exec(ctx)
		if err == nil && e.Failures > 0 {
			_, err = tx.NewRaw(`UPDATE order_event SET next_attempt_at = now()
				WHERE endpoint_id = ? AND delivered_at IS NULL AND NOT dead AND next_attempt_at > now()`, e.ID).Exec(ctx)
		}
	default:
		_, err = tx.NewRaw(`UPDATE event_endpoint SET failures = ?, next_attempt_at = ?, last_error = left(?, 500)
			WHERE id = ?`, h.Failures, h.NextAttempt, h.LastError, e.ID).Exec(ctx)
	}
	if err != nil {
		return fmt.Errorf("record endpoint health: %w", err)
	}
	return nil
}

// PruneDelivered deletes up to limit events delivered before before, and
// returns how many.
func (s *Store) PruneDelivered(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := s.db.NewRaw(`DELETE FROM order_event WHERE ctid = ANY (ARRAY(
		SELECT ctid FROM order_event WHERE delivered_at < ? LIMIT ?))`, before, max(limit, 1)).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: prune delivered events: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Deliveries lists an endpoint's deliveries, newest first; see
// seckill.EventAdmin.
func (s *Store) Deliveries(ctx context.Context, f seckill.DeliveryFilter) ([]seckill.Delivery, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = seckill.DefaultPageSize
	}
	var rows []deliveryRow
	err := s.db.NewRaw(`SELECT `+deliveryColumns+` FROM order_event
		WHERE endpoint_id = ?0 AND (?1 = 0 OR order_id = ?1)
			AND (?2 = '' OR ?2 = 'DEAD' AND dead OR ?2 = 'DELIVERED' AND delivered_at IS NOT NULL
				OR ?2 = 'PENDING' AND delivered_at IS NULL AND NOT dead)
		ORDER BY occurred_at DESC, order_id DESC, sequence DESC LIMIT ?3`,
		f.EndpointID, f.OrderID, string(f.State), min(limit, 1000)).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("store: select deliveries: %w", err)
	}
	out := make([]seckill.Delivery, len(rows))
	for i := range rows {
		out[i] = rows[i].delivery()
	}
	return out, nil
}

// Redeliver makes deliveries due again; see seckill.EventAdmin.
func (s *Store) Redeliver(ctx context.Context, f seckill.RedeliverFilter) (int, error) {
	if f.OrderID == 0 && (f.From.IsZero() || f.To.IsZero() || !f.From.Before(f.To)) {
		return 0, seckill.Invalidf("from", "give an order, or a range of time whose start is before its end")
	}
	res, err := s.db.NewRaw(`UPDATE order_event SET delivered_at = NULL, dead = false, attempts = 0, next_attempt_at = now()
		WHERE endpoint_id = ?0
			AND (?1 = 0 OR order_id = ?1) AND (?2 = 0 OR sequence = ?2)
			AND (?1 <> 0 OR occurred_at >= ?3 AND occurred_at < ?4)
			AND (NOT ?5 OR dead)`,
		f.EndpointID, f.OrderID, f.Sequence, f.From, f.To, f.DeadOnly).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: redeliver events: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// EventStats counts deliveries by state; see seckill.EventAdmin. Every
// endpoint's (0) are the enabled endpoints': a disabled one keeps its
// undelivered events, which must not read as a lag.
func (s *Store) EventStats(ctx context.Context, endpointID int64) (seckill.EventStats, error) {
	var r struct {
		Pending   int64   `bun:"pending"`
		Delivered int64   `bun:"delivered"`
		Dead      int64   `bun:"dead"`
		Oldest    float64 `bun:"oldest"`
	}
	err := s.db.NewRaw(`SELECT
			count(*) FILTER (WHERE delivered_at IS NULL AND NOT dead) AS pending,
			count(*) FILTER (WHERE delivered_at IS NOT NULL) AS delivered,
			count(*) FILTER (WHERE dead) AS dead,
			coalesce(extract(epoch FROM now() - min(occurred_at) FILTER (WHERE delivered_at IS NULL AND NOT dead)), 0) AS oldest
		FROM order_event
		WHERE endpoint_id = ?0 OR ?0 = 0 AND endpoint_id IN (SELECT id FROM event_endpoint WHERE enabled)`, endpointID).Scan(ctx, &r)
	if err != nil {
		return seckill.EventStats{}, fmt.Errorf("store: count deliveries: %w", err)
	}
	return seckill.EventStats{Pending: r.Pending, Delivered: r.Delivered, Dead: r.Dead,
		Oldest: time.Duration(r.Oldest * float64(time.Second))}, nil
}
