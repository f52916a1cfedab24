package seckill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Order events to the platform (docs/events.md). Every status change of an
// order, and every refund of one of its payments that succeeds or fails, is
// written to an outbox in the Postgres transaction that makes the change,
// one row per enabled endpoint (none while no endpoint is enabled), so an
// event is never lost and never sent for a change that did not commit.
// Deliverer sends them, at least once, as signed webhooks: many at a time,
// claimed with SKIP LOCKED like the expiry sweep, never one task per event.
// Per order and endpoint, sequence n+1 is sent only once n was delivered.

// EventType names an event.
type EventType string

const (
	EventOrderCreated      EventType = "order.created"
	EventOrderPaid         EventType = "order.paid"
	EventOrderCancelled    EventType = "order.cancelled"
	EventOrderExpired      EventType = "order.expired"
	EventOrderFailed       EventType = "order.failed"
	EventOrderRefunded     EventType = "refund.succeeded"
	EventOrderRefundFailed EventType = "refund.failed"
)

// EventTypes are every event type, in the order of an order's life.
var EventTypes = []EventType{EventOrderCreated, EventOrderPaid, EventOrderCancelled, EventOrderExpired,
	EventOrderFailed, EventOrderRefunded, EventOrderRefundFailed}

// EventForStatus is the event of an order's move to status, "" for none.
func EventForStatus(s OrderStatus) EventType {
	switch s {
	case OrderCreated:
		return EventOrderCreated
	case OrderPaid:
		return EventOrderPaid
	case OrderCancelled:
		return EventOrderCancelled
	case OrderExpired:
		return EventOrderExpired
	case OrderFailed:
		return EventOrderFailed
	}
	return ""
}

// EventID is the id of an order's event with sequence seq: stable (a
// redelivery carries the same) and unique, the same at every endpoint.
func EventID(orderID int64, seq int) string {
	return "evt_" + strconv.FormatInt(orderID, 10) + "_" + strconv.Itoa(seq)
}

// Event is one event as an endpoint receives it: the body of the webhook.
// Order is the order as the change left it (and its payment, for refund
// events), as the store wrote it in the change's transaction.
type Event struct {
	ID         string          `json:"id"`
	Type       EventType       `json:"type"`
	Sequence   int             `json:"sequence"`
	OccurredAt time.Time       `json:"occurredAt"`
	Order      json.RawMessage `json:"order"`
}

// Delivery is one event at one endpoint, as the outbox holds it.
type Delivery struct {
	Event
	EndpointID  int64
	OrderID     int64
	Attempts    int
	NextAttempt time.Time
	LastAttempt time.Time // zero before the first
	LastStatus  int       // the last answer's HTTP status; 0: none (refused, timed out)
	LastAnswer  string    // why the last attempt failed, in our words (ShownAnswer), never the receiver's body
	DeliveredAt time.Time // zero until delivered
	Dead        bool      // used up its attempts; holds back the order's later events here
}

// DeliveryState is where a delivery stands.
type DeliveryState string

const (
	DeliveryPending   DeliveryState = "PENDING"
	DeliveryDelivered DeliveryState = "DELIVERED"
	DeliveryDead      DeliveryState = "DEAD"
)

// State is where d stands.
func (d Delivery) State() DeliveryState {
	switch {
	case d.Dead:
		return DeliveryDead
	case !d.DeliveredAt.IsZero():
		return DeliveryDelivered
	}
	return DeliveryPending
}

// MaxAnswerLen bounds what a delivery keeps of an endpoint's answer.
const MaxAnswerLen = 500

// The answers a sender records: a short reason of ours, never the
// receiver's body (a receiver, or what an endpoint URL reaches inside the
// network, would be read through the dashboard) nor the URL.
const (
	AnswerTimeout    = "timeout"
	AnswerRefused    = "connection refused"
	AnswerReset      = "connection reset"
	AnswerClosed     = "connection closed"
	AnswerNoHost     = "no such host"
	AnswerDNS        = "name lookup failed"
	AnswerTLS        = "TLS handshake failed"
	AnswerCancelled  = "cancelled"
	AnswerNoAnswer   = "no answer"
	AnswerBadURL     = "refused: bad URL"
	answerRefusedPre = "refused: "
)

// AnswerStatus is the answer recorded for an HTTP status.
func AnswerStatus(status int) string { return "status " + strconv.Itoa(status) }

// ShownAnswer is what a page shows of a recorded answer: the answer when it
// is one of ours (a sender's reason above, "status N", "refused: …"),
// else only its status ("status N", or "no answer"): rows written before
// the answers were ours hold the receiver's body, which is never shown.
func ShownAnswer(status int, answer string) string {
	if ownAnswer(answer) {
		return answer
	}
	if status != 0 {
		return AnswerStatus(status)
	}
	if answer == "" {
		return ""
	}
	return AnswerNoAnswer
}

// ShownEndpointError is what a page shows of an endpoint's last error,
// "<event id>: <answer>": the id and ShownAnswer's part of the answer.
func ShownEndpointError(s string) string {
	id, rest, ok := strings.Cut(s, ": ")
	if !ok || !strings.HasPrefix(id, "evt_") {
		return ShownAnswer(0, s)
	}
	if ownAnswer(rest) {
		return id + ": " + rest
	}
	// Before: "<id>: <status> <body>".
	code, _, _ := strings.Cut(rest, " ")
	if n, err := strconv.Atoi(code); err == nil && n > 0 {
		return id + ": " + AnswerStatus(n)
	}
	return id + ": " + AnswerNoAnswer
}

func ownAnswer(s string) bool {
	switch s {
	case "", AnswerTimeout, AnswerRefused, AnswerReset, AnswerClosed, AnswerNoHost, AnswerDNS, AnswerTLS, AnswerCancelled, AnswerNoAnswer:
		return true
	}
	if n, ok := strings.CutPrefix(s, "status "); ok {
		_, err := strconv.Atoi(n)
		return err == nil && len(n) == 3
	}
	if rest, ok := strings.CutPrefix(s, answerRefusedPre); ok {
		addr, what, _ := strings.Cut(rest, " is ")
		if _, err := netip.ParseAddr(addr); err == nil {
			return InternalAddr(netip.MustParseAddr(addr)) == what
		}
		return s == AnswerBadURL
	}
	return false
}

// Endpoint is where events go.
type Endpoint struct {
	ID      int64
	URL     string
	Secret  string
	Source  string // "env" (SECKILL_EVENTS_WEBHOOK_URL) or "dashboard"
	Enabled bool
	// Failures counts the endpoint's rounds in a row in which nothing
	// succeeded; while it is above 0 the endpoint is probed with one
	// event a round, not before NextAttempt.
	Failures    int
	NextAttempt time.Time
	LastError   string
	LastSuccess time.Time
	CreatedAt   time.Time
}

// Endpoint sources.
const (
	EndpointEnv       = "env"
	EndpointDashboard = "dashboard"
)

// MinSecretLen is the shortest endpoint secret accepted.
const MinSecretLen = 16

// SendResult is what an endpoint answered one event.
type SendResult struct {
	Status int    // HTTP status; 0 when there was no answer
	Answer string // what happened, in our words: "status 500", "timeout", … (never the body)
}

// OK reports whether the endpoint took the event (any 2xx).
func (r SendResult) OK() bool { return r.Status >= 200 && r.Status < 300 }

// EventSender sends one signed event to an endpoint (HTTP).
type EventSender interface {
	// Send posts ev to e, signed with e's secret, and returns the answer;
	// it does not fail: no answer is a result with Status 0.
	Send(ctx context.Context, e Endpoint, ev Event) SendResult
}

// Attempt is one delivery's outcome, for the outbox to record.
type Attempt struct {
	OrderID  int64
	Sequence int
	Result   SendResult
	// Next is when to try again, when the attempt failed; Dead when it
	// was the last one.
	Next time.Time
	Dead bool
	// Skipped: not sent, the round's time ran out first; it is due again
	// at once and its attempts are not counted.
	Skipped bool
}

// EventOutbox is what delivery needs of the outbox (Postgres).
type EventOutbox interface {
	// Endpoints returns every endpoint, enabled or not, oldest first.
	Endpoints(ctx context.Context) ([]Endpoint, error)
	// DeliverDue claims up to limit due deliveries of endpoint e (live,
	// undelivered, next attempt passed, none of its order's earlier
	// events at e still undelivered, at most one per order), skipping
	// those another caller holds, and calls send with them, oldest first.
	// It records send's attempts (delivered, or failed with their next
	// attempt, or dead) and the endpoint's health in the same
	// transaction, so a crash in between sends them again (at least
	// once). Delivered ones are deleted, unless keep. It returns how many
	// it claimed.
	DeliverDue(ctx context.Context, e Endpoint, limit int, keep bool, send func(ctx context.Context, due []Delivery) ([]Attempt, EndpointHealth)) (int, error)
	// PruneDelivered deletes up to limit events delivered before before
	// and returns how many.
	PruneDelivered(ctx context.Context, before time.Time, limit int) (int, error)
}

// EndpointHealth is what a round of deliveries says of its endpoint.
type EndpointHealth struct {
	OK          bool      // something succeeded, or nothing was sent
	Failures    int       // the endpoint's failed rounds in a row afterwards
	NextAttempt time.Time // not before then, when !OK
	LastError   string
}

// DeliveryConfig tunes delivery.
type DeliveryConfig struct {
	Batch       int           // most deliveries an endpoint takes a round
	Concurrency int           // requests in flight per endpoint
	MaxAttempts int           // attempts before a delivery is dead
	MaxBackoff  time.Duration // the longest wait between two attempts of one event
	// MaxProbeBackoff is the longest wait between two probes of an
	// endpoint that answers nothing well: how soon a receiver that comes
	// back gets its events.
	MaxProbeBackoff time.Duration
	// KeepDelivered keeps delivered events (for redelivery) until Prune
	// deletes them; otherwise they are deleted once delivered.
	KeepDelivered bool
	// RoundTimeout bounds a round's sends, and so how long its
	// transaction holds a connection and its rows' locks when an endpoint
	// is slow: what is not sent by then waits for the next round.
	RoundTimeout time.Duration
}

// DeliveryOutcome names what happened to one attempt, for metrics.
type DeliveryOutcome string

const (
	OutcomeDelivered DeliveryOutcome = "delivered"
	OutcomeFailed    DeliveryOutcome = "failed" // it will be tried again
	OutcomeDead      DeliveryOutcome = "dead"   // its last attempt failed
)

// Deliverer sends the outbox's events to their endpoints.
type Deliverer struct {
	outbox  EventOutbox
	sender  EventSender
	logger  *slog.Logger
	cfg     DeliveryConfig
	now     func() time.Time
	observe func(DeliveryOutcome, int)
}

// NewDeliverer returns a Deliverer; observe (optional) counts outcomes.
func NewDeliverer(outbox EventOutbox, sender EventSender, logger *slog.Logger, cfg DeliveryConfig, observe func(DeliveryOutcome, int)) (*Deliverer, error) {
	if err := required("event delivery", map[string]bool{"Outbox": outbox == nil, "Sender": sender == nil, "Logger": logger == nil}); err != nil {
		return nil, err
	}
	if cfg.Batch < 1 || cfg.Concurrency < 1 || cfg.MaxAttempts < 1 || cfg.MaxBackoff <= 0 || cfg.MaxProbeBackoff <= 0 || cfg.RoundTimeout <= 0 {
		return nil, fmt.Errorf("seckill: event delivery: every setting must be positive: %+v", cfg)
	}
	if observe == nil {
		observe = func(DeliveryOutcome, int) {}
	}
	return &Deliverer{outbox: outbox, sender: sender, logger: logger, cfg: cfg, now: time.Now, observe: observe}, nil
}

// Backoff is the wait after the attempts-th failed attempt of one event:
// 1 s, doubling, at most max.
func Backoff(attempts int, max time.Duration) time.Duration {
	d := time.Second
	for i := 1; i < attempts && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// DeliverOnce runs one round for every enabled endpoint, each on its own
// goroutine (a slow endpoint does not hold the others back): each sends
// its next batch of due events. It returns how many deliveries it claimed,
// and whether some endpoint's batch was full (more may be due at once).
// Run is the loop a process runs; DeliverOnce is one step of every lane.
func (d *Deliverer) DeliverOnce(ctx context.Context) (claimed int, full bool, err error) {
	eps, err := d.outbox.Endpoints(ctx)
	if err != nil {
		return 0, false, err
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, e := range eps {
		if !d.due(e) {
			continue
		}
		wg.Go(func() {
			n, f, _, err := d.round(ctx, e)
			mu.Lock()
			defer mu.Unlock()
			claimed, full = claimed+n, full || f
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return claimed, full, errors.Join(errs...)
}

// due reports whether e takes a round now: enabled, and not backing off.
func (d *Deliverer) due(e Endpoint) bool {
	return e.Enabled && (e.Failures == 0 || !d.now().Before(e.NextAttempt))
}

// round sends e's next batch of due events (one, a probe, while e fails)
// and returns how many it claimed, whether the batch was full, and the
// health the round recorded (sent false when nothing was due).
func (d *Deliverer) round(ctx context.Context, e Endpoint) (n int, full bool, h roundHealth, err error) {
	limit := d.cfg.Batch
	if e.Failures > 0 {
		limit = 1 // a probe: the endpoint answered nothing well last time
	}
	n, err = d.outbox.DeliverDue(ctx, e, limit, d.cfg.KeepDelivered, func(ctx context.Context, due []Delivery) ([]Attempt, EndpointHealth) {
		as, eh := d.send(ctx, e, due)
		h = roundHealth{EndpointHealth: eh, sent: true}
		return as, eh
	})
	return n, n == limit && limit == d.cfg.Batch, h, err
}

// roundHealth is what a round recorded of its endpoint's health.
type roundHealth struct {
	EndpointHealth
	sent bool
}

// Run delivers the events of every enabled endpoint until ctx ends. Every
// interval, while active says some endpoint is enabled, it reads the
// endpoints; each enabled one gets a lane of its own, a goroutine that runs
// its rounds one after another (at once while its last batch was full,
// else every interval; while it fails, not before its next probe), so an
// endpoint that hangs or answers slowly delays only its own deliveries.
// A lane ends once its endpoint is no longer enabled. report hears every
// round's error (nil for a round that reached Postgres), from any lane.
// Goroutines: one per enabled endpoint, and Concurrency sends in each.
func (d *Deliverer) Run(ctx context.Context, interval time.Duration, active func() bool, report func(error)) {
	lanes := map[int64]*lane{}
	var wg sync.WaitGroup
	defer func() {
		for _, l := range lanes {
			close(l.stop)
		}
		wg.Wait()
	}()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(interval)
		var eps []Endpoint
		if active() {
			readAt := d.now()
			var err error
			if eps, err = d.outbox.Endpoints(ctx); err != nil {
				if ctx.Err() == nil {
					report(err)
				}
				continue
			}
			for _, e := range eps {
				if !e.Enabled {
					continue
				}
				if l := lanes[e.ID]; l != nil {
					l.update(e, readAt)
					continue
				}
				l := &lane{e: e, readAt: readAt, stop: make(chan struct{})}
				lanes[e.ID] = l
				wg.Go(func() { d.runLane(ctx, l, interval, report) })
			}
		}
		for id, l := range lanes {
			if !slices.ContainsFunc(eps, func(e Endpoint) bool { return e.ID == id && e.Enabled }) {
				close(l.stop) // it finishes the round it is in
				delete(lanes, id)
			}
		}
	}
}

// lane is one endpoint's deliveries in this process: its own goroutine.
// e is the endpoint as last read (readAt) or as the lane's own last round
// left it, whichever is newer.
type lane struct {
	mu     sync.Mutex
	e      Endpoint
	readAt time.Time
	stop   chan struct{}
}

// update takes e as read at readAt, unless the lane's own round recorded
// its health after that read began (the read may not have seen it).
func (l *lane) update(e Endpoint, readAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if readAt.After(l.readAt) {
		l.e, l.readAt = e, readAt
	}
}

func (l *lane) endpoint() Endpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.e
}

// recorded notes the health a round of the lane committed, at now.
func (l *lane) recorded(h roundHealth, now time.Time) {
	if !h.sent {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h.OK {
		if l.e.Failures > 0 || now.Sub(l.e.LastSuccess) >= time.Second {
			l.e.LastSuccess = now // as recordHealth writes it
		}
		l.e.Failures = 0
	} else {
		l.e.Failures, l.e.NextAttempt, l.e.LastError = h.Failures, h.NextAttempt, h.LastError
	}
	l.readAt = now
}

// runLane runs l's rounds until ctx ends or l stops.
func (d *Deliverer) runLane(ctx context.Context, l *lane, interval time.Duration, report func(error)) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.stop:
			return
		case <-t.C:
		}
		next := interval
		if e := l.endpoint(); d.due(e) {
			_, full, h, err := d.round(ctx, e)
			if err == nil || ctx.Err() == nil {
				report(err)
			}
			if err == nil {
				l.recorded(h, d.now())
				if full {
					next = 0 // more are due
				}
			}
		}
		t.Reset(next)
	}
}

// Prune deletes events delivered longer than retention ago, limit at a
// time until none is left, and returns how many.
func (d *Deliverer) Prune(ctx context.Context, retention time.Duration, limit int) (int, error) {
	total := 0
	before := d.now().Add(-retention)
	for {
		n, err := d.outbox.PruneDelivered(ctx, before, limit)
		total += n
		if err != nil || n < limit {
			return total, err
		}
	}
}

// send sends due to e, Concurrency at a time, within RoundTimeout, and
// says what became of each.
func (d *Deliverer) send(ctx context.Context, e Endpoint, due []Delivery) ([]Attempt, EndpointHealth) {
	out := make([]Attempt, len(due))
	sem := make(chan struct{}, d.cfg.Concurrency)
	round, cancel := context.WithTimeout(ctx, d.cfg.RoundTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range due {
		select {
		case sem <- struct{}{}:
		case <-round.Done():
		}
		if round.Err() != nil {
			out[i] = Attempt{OrderID: due[i].OrderID, Sequence: due[i].Sequence, Skipped: true}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			r := d.sender.Send(round, e, due[i].Event)
			if len(r.Answer) > MaxAnswerLen {
				r.Answer = r.Answer[:MaxAnswerLen]
			}
			out[i] = Attempt{OrderID: due[i].OrderID, Sequence: due[i].Sequence, Result: r}
		})
	}
	wg.Wait()
	now := d.now()
	h := EndpointHealth{OK: len(due) == 0}
	var delivered, failed, dead int
	for i := range out {
		if out[i].Skipped {
			continue
		}
		if out[i].Result.OK() {
			h.OK = true
			delivered++
			continue
		}
		attempts := due[i].Attempts + 1
		if attempts >= d.cfg.MaxAttempts {
			out[i].Dead = true
			dead++
			d.logger.WarnContext(ctx, "event delivery dead", "endpoint_id", e.ID, "event_id", due[i].ID,
				"attempts", attempts, "status", out[i].Result.Status, "answer", out[i].Result.Answer)
		} else {
			failed++
		}
		out[i].Next = now.Add(Backoff(attempts, d.cfg.MaxBackoff))
		h.LastError = due[i].ID + ": " + ShownAnswer(out[i].Result.Status, out[i].Result.Answer)
	}
	if !h.OK {
		h.Failures = e.Failures + 1
		h.NextAttempt = now.Add(Backoff(h.Failures, d.cfg.MaxProbeBackoff))
		if e.Failures == 0 {
			d.logger.WarnContext(ctx, "event endpoint failing", "endpoint_id", e.ID, "url", RedactURL(e.URL), "err", h.LastError)
		}
	} else if e.Failures > 0 {
		d.logger.InfoContext(ctx, "event endpoint answers again", "endpoint_id", e.ID, "url", RedactURL(e.URL), "failed_rounds", e.Failures)
	}
	d.observe(OutcomeDelivered, delivered)
	d.observe(OutcomeFailed, failed)
	d.observe(OutcomeDead, dead)
	return out, h
}

// EventAdmin is what the dashboard needs of the outbox.
type EventAdmin interface {
	// AddEndpoint adds an enabled dashboard endpoint. EINVALID for a URL
	// the EndpointPolicy refuses (not http(s), credentials in it, an
	// internal address in production) or a secret shorter than
	// MinSecretLen.
	AddEndpoint(ctx context.Context, url, secret string) (Endpoint, error)
	// SetEndpointEnabled enables or disables an endpoint, the
	// environment's too (instances with SECKILL_EVENTS_WEBHOOK_URL enable
	// it again when they start); ENOTFOUND for none such.
	SetEndpointEnabled(ctx context.Context, id int64, enabled bool) error
	// DeleteEndpoint deletes a disabled endpoint with its deliveries
	// (ECONFLICT while it is enabled, ENOTFOUND for none such).
	DeleteEndpoint(ctx context.Context, id int64) error
	// Endpoints returns every endpoint, oldest first.
	Endpoints(ctx context.Context) ([]Endpoint, error)
	// Deliveries lists an endpoint's deliveries, newest first.
	Deliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error)
	// Redeliver makes the matching deliveries of an endpoint due again
	// now, with their attempts reset (delivered and dead ones included),
	// and returns how many.
	Redeliver(ctx context.Context, f RedeliverFilter) (int, error)
	// EventStats counts an endpoint's deliveries by state and the age of
	// the oldest undelivered live one (every enabled endpoint's when 0).
	EventStats(ctx context.Context, endpointID int64) (EventStats, error)
}

// DeliveryFilter selects deliveries to list.
type DeliveryFilter struct {
	EndpointID int64
	State      DeliveryState // "" for any
	OrderID    int64         // 0 for any
	Limit      int
}

// RedeliverFilter selects deliveries to send again: one event (OrderID and
// Sequence), every event of an order (OrderID), or those that occurred in
// [From, To); Dead alone limits it to dead ones.
type RedeliverFilter struct {
	EndpointID int64
	OrderID    int64
	Sequence   int
	From, To   time.Time
	DeadOnly   bool
}

// EventStats counts deliveries.
type EventStats struct {
	Pending, Delivered, Dead int64
	Oldest                   time.Duration // of the oldest pending live delivery; 0 when none
}
