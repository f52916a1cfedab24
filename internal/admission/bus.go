package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/batch"
	"seckill/internal/seckill"
)

// subscriberBuffer is how many events wait for a slow subscriber before
// further ones are dropped. An order changes status once or twice.
const subscriberBuffer = 8

// errBusClosed is returned by Subscribe after Close.
var errBusClosed = errors.New("admission: status bus closed")

// Bus implements seckill.StatusBus on Redis pub/sub. Every event goes to one
// channel, <p>seckill:{global}:order_status (":db<N>" after it on a
// database N other than 0: channelOf), as JSON (sharded pub/sub on a
// cluster). A process holds ONE PubSub
// connection, opened by the first Subscribe, and one goroutine that reads it
// and fans each event out to the local subscribers of its order id. A slow
// subscriber never blocks the others: when its buffer is full, the event is
// dropped for it (and logged). Delivery is at most once.
type Bus struct {
	rdb     redis.UniversalClient
	channel string
	logger  *slog.Logger

	openMu   sync.Mutex // serializes opening and closing the subscription
	listener *listener

	mu     sync.Mutex // guards subs and closed; held while sending
	subs   map[int64]map[*subscriber]struct{}
	closed bool

	sends *batch.Committer[seckill.StatusEvent, struct{}] // Publish's group commit
}

type subscriber struct {
	orderID int64
	ch      chan seckill.StatusEvent
	stop    func() bool // stops the context.AfterFunc; set under Bus.mu
}

var _ seckill.StatusBus = (*Bus)(nil)

// NewBus returns a Bus on rdb whose channel name starts with prefix. A nil
// logger discards warnings. Call Close when done.
func NewBus(rdb redis.UniversalClient, prefix string, logger *slog.Logger) *Bus {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	b := &Bus{
		rdb:     rdb,
		channel: channelOf(rdb, keys{prefix: prefix}.orderStatus()),
		logger:  logger,
		subs:    make(map[int64]map[*subscriber]struct{}),
	}
	b.sends = batch.New(b.send, batch.Options{MaxBatch: busBatch, Flushes: busFlushes, Backlog: busBacklog})
	return b
}

// Bounds of Publish's group commit.
const (
	busBatch   = 1000 // events a message carries at most (a larger call goes alone)
	busFlushes = 2    // PUBLISHes under way at once
	busBacklog = 20 * busBatch
	busTimeout = 2 * time.Second
)

// Publish sends evs to every process's subscribers of their orders.
//
// One message carries many events: a worker's batch of a thousand orders
// costs one PUBLISH, not a thousand, and the single events of concurrent
// callers (a crowd cancelling, a sale's buyers paying) are group-committed:
// those that arrive while a message is sent go in the next one. A lone
// event goes at once.
//
// An event a message cannot carry (checkStatusEvent) is EINVALID, refused
// before it joins a message: the call's other events are sent, and it gets
// that error beside theirs.
func (b *Bus) Publish(ctx context.Context, evs ...seckill.StatusEvent) error {
	var invalid []error
	for i := range evs {
		if err := checkStatusEvent(evs[i]); err != nil {
			invalid = append(invalid, err)
		}
	}
	if invalid != nil {
		evs = slices.DeleteFunc(slices.Clone(evs), func(ev seckill.StatusEvent) bool { return checkStatusEvent(ev) != nil })
	}
	if len(evs) == 0 {
		return errors.Join(invalid...)
	}
	_, err := b.sends.Do(ctx, evs...)
	if invalid == nil {
		return err
	}
	return errors.Join(append(invalid, err)...)
}

// maxStatusLen bounds an event's status and reason: statuses and our
// failure reasons are short codes, a provider's reason is at most
// seckill.MaxReasonLen. One message carries up to busBatch events, so one
// event's size must not decide whether the message fits.
const maxStatusLen = seckill.MaxReasonLen

// checkStatusEvent returns EINVALID when ev cannot go in a message: an
// order id that is not positive, a time JSON cannot write (outside years 0
// to 9999, which would fail the encoding of every event in the message),
// a status or a reason longer than maxStatusLen.
func checkStatusEvent(ev seckill.StatusEvent) error {
	if ev.OrderID <= 0 {
		return seckill.Invalidf("orderId", "status event of order %d: the order id must be positive", ev.OrderID)
	}
	if y := ev.At.Year(); y < 0 || y > 9999 {
		return seckill.Invalidf("at", "status event of order %d: time %v cannot be written", ev.OrderID, ev.At)
	}
	if len(ev.Status) > maxStatusLen || len(ev.Reason) > maxStatusLen {
		return seckill.Invalidf("reason", "status event of order %d: status and reason must be at most %d bytes", ev.OrderID, maxStatusLen)
	}
	return nil
}

// send is Publish's commit: one message for evs.
func (b *Bus) send(ctx context.Context, evs []seckill.StatusEvent, _ []struct{}) error {
	data, err := appendStatusEvents(make([]byte, 0, 80*len(evs)), evs)
	if err != nil {
		return fmt.Errorf("admission: encode status events: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	return redisError("publish status", publish(ctx, b.rdb, b.channel, data), nil)
}

// appendStatusEvents appends evs as json.Marshal writes them
// (TestAppendStatusEvents holds it to that), without its reflection: every
// persisted purchase's event goes through it, so json.Marshal's reflection
// would be paid once a purchase.
func appendStatusEvents(b []byte, evs []seckill.StatusEvent) ([]byte, error) {
	b = append(b, '[')
	for i, ev := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"order_id":`...)
		b = strconv.AppendInt(b, ev.OrderID, 10)
		b = append(b, `,"status":`...)
		b = appendJSONString(b, string(ev.Status))
		b = append(b, `,"at":"`...)
		var err error
		b, err = ev.At.AppendText(b) // what MarshalJSON quotes
		if err != nil {
			return nil, err
		}
		b = append(b, '"')
		if ev.Reason != "" {
			b = append(b, `,"reason":`...)
			b = appendJSONString(b, ev.Reason)
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// appendJSONString appends s quoted as json.Marshal quotes it: as it is
// when it holds only printable ASCII that needs no escape (a status, a
// reason), through json.Marshal otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Subscribe delivers the events of orderID published from now on, until
// cancel is called or ctx ends; the channel is closed then, exactly once.
// The first call opens the process's subscription and returns only after
// Redis confirmed it, so an event published after Subscribe returns is
// delivered.
func (b *Bus) Subscribe(ctx context.Context, orderID int64) (<-chan seckill.StatusEvent, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := b.open(ctx); err != nil {
		return nil, nil, err
	}
	s := &subscriber{orderID: orderID, ch: make(chan seckill.StatusEvent, subscriberBuffer)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nil, errBusClosed
	}
	set := b.subs[orderID]
	if set == nil {
		set = make(map[*subscriber]struct{})
		b.subs[orderID] = set
	}
	set[s] = struct{}{}
	// context.AfterFunc costs no goroutine until ctx ends.
	s.stop = context.AfterFunc(ctx, func() { b.remove(s) })
	b.mu.Unlock()

	cancel := func() {
		b.mu.Lock()
		stop := s.stop
		b.mu.Unlock()
		stop()
		b.remove(s)
	}
	return s.ch, cancel, nil
}

// remove unregisters s and closes its channel, unless that happened before.
func (b *Bus) remove(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	set := b.subs[s.orderID]
	if _, ok := set[s]; !ok {
		return
	}
	delete(set, s)
	if len(set) == 0 {
		delete(b.subs, s.orderID)
	}
	close(s.ch)
}

// open subscribes the process once and starts the fan-out goroutine.
func (b *Bus) open(ctx context.Context) error {
	b.openMu.Lock()
	defer b.openMu.Unlock()
	if b.listener != nil {
		return nil
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return errBusClosed
	}
	l, err := listen(ctx, b.rdb, b.channel, b.logger, b.receive)
	if err != nil {
		return fmt.Errorf("admission: subscribe order_status: %w", err)
	}
	b.listener = l
	return nil
}

// receive fans one message's events out. Events published while the
// subscription was being renewed are lost (subscribers read the current
// state first).
func (b *Bus) receive(payload string) {
	var evs []seckill.StatusEvent
	if err := json.Unmarshal([]byte(payload), &evs); err != nil {
		b.logger.Warn("drop malformed status events", "err", err)
		return
	}
	b.fanOut(evs)
}

func (b *Bus) fanOut(evs []seckill.StatusEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) == 0 {
		return
	}
	for _, ev := range evs {
		for s := range b.subs[ev.OrderID] {
			select {
			case s.ch <- ev:
			default:
				b.logger.Warn("drop status event for a slow subscriber", "order_id", ev.OrderID, "status", ev.Status)
			}
		}
	}
}

// Close ends every subscription (closing their channels), closes the
// PubSub and waits for the fan-out goroutine to exit. Subscribe fails
// afterwards; Close may be called again.
func (b *Bus) Close() error {
	b.openMu.Lock()
	defer b.openMu.Unlock()

	b.mu.Lock()
	b.closed = true
	subs := b.subs
	b.subs = make(map[int64]map[*subscriber]struct{})
	for _, set := range subs {
		for s := range set {
			s.stop()
			close(s.ch)
		}
	}
	b.mu.Unlock()

	if b.listener != nil {
		b.listener.stop()
		b.listener = nil
	}
	return nil
}
