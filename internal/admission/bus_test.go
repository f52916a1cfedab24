package admission_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// newBus returns a Bus on a Redis client of its own, with hooks added.
func newBus(tb testing.TB, hooks ...redis.Hook) *admission.Bus {
	tb.Helper()
	rdb, prefix := testenv.MustOpenRedis(tb)
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	b := admission.NewBus(rdb, prefix, nil)
	tb.Cleanup(func() { b.Close() })
	return b
}

// receive returns the next event, failing after a timeout.
func receive(t *testing.T, ch <-chan seckill.StatusEvent) seckill.StatusEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return seckill.StatusEvent{}
}

// closed reports whether ch is closed (after draining what it holds).
func closed(t *testing.T, ch <-chan seckill.StatusEvent) bool {
	t.Helper()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return true
			}
		case <-time.After(2 * time.Second):
			return false
		}
	}
}

func TestBusPublishAfterSubscribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBus(t)
	const orderID = 42<<32 | 1

	// Publish right after the first Subscribe returns: it must arrive.
	ch, cancel, err := b.Subscribe(ctx, orderID)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	want := seckill.StatusEvent{OrderID: orderID, Status: seckill.OrderFailed,
		At: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), Reason: "no stock"}
	if err := b.Publish(ctx, want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, receive(t, ch)); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

func TestBusFanOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBus(t)
	a1, c1, err := b.Subscribe(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c1()
	a2, c2, err := b.Subscribe(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c2()
	other, c3, err := b.Subscribe(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c3()

	ev := seckill.StatusEvent{OrderID: 1, Status: seckill.OrderCreated, At: time.Now().UTC()}
	if err := b.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []<-chan seckill.StatusEvent{a1, a2} {
		if diff := cmp.Diff(ev, receive(t, ch)); diff != "" {
			t.Errorf("subscriber %d (-want +got):\n%s", i, diff)
		}
	}
	// Order 2's subscriber gets its own event only.
	ev2 := seckill.StatusEvent{OrderID: 2, Status: seckill.OrderCreated, At: time.Now().UTC()}
	if err := b.Publish(ctx, ev2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ev2, receive(t, other)); diff != "" {
		t.Errorf("order 2 subscriber (-want +got):\n%s", diff)
	}
}

func TestBusAcrossBuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testenv.MustOpenRedis(t)
	sub := admission.NewBus(rdb, prefix, nil)
	defer sub.Close()
	pub := admission.NewBus(rdb, prefix, nil)
	defer pub.Close()
	ch, cancel, err := sub.Subscribe(ctx, 9)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	ev := seckill.StatusEvent{OrderID: 9, Status: seckill.OrderCreated, At: time.Now().UTC()}
	if err := pub.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ev, receive(t, ch)); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

func TestBusCancelCloses(t *testing.T) {
	t.Parallel()
	b := newBus(t)

	t.Run("cancel", func(t *testing.T) {
		ch, cancel, err := b.Subscribe(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		cancel() // a second call is harmless
		if !closed(t, ch) {
			t.Error("channel open after cancel")
		}
	})
	t.Run("context", func(t *testing.T) {
		ctx, stop := context.WithCancel(context.Background())
		ch, cancel, err := b.Subscribe(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		stop()
		if !closed(t, ch) {
			t.Error("channel open after ctx ended")
		}
		cancel() // after ctx: harmless
	})
	t.Run("context done before subscribe", func(t *testing.T) {
		ctx, stop := context.WithCancel(context.Background())
		stop()
		if _, _, err := b.Subscribe(ctx, 1); err == nil {
			t.Error("subscribe with a done ctx succeeded")
		}
	})
	t.Run("close", func(t *testing.T) {
		b := newBus(t)
		ch, cancel, err := b.Subscribe(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if !closed(t, ch) {
			t.Error("channel open after Close")
		}
		cancel()
		if _, _, err := b.Subscribe(context.Background(), 1); err == nil {
			t.Error("subscribe after Close succeeded")
		}
	})
}

// TestBusSlowSubscriber checks that a subscriber that never reads loses
// events but never delays the others.
func TestBusSlowSubscriber(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBus(t)
	slow, c1, err := b.Subscribe(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer c1()
	fast, c2, err := b.Subscribe(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer c2()

	// Publish one event at a time and wait for the reading subscriber to
	// get it: it must get all of them while the other never reads.
	const n = 50
	for i := range n {
		ev := seckill.StatusEvent{OrderID: 5, Status: seckill.OrderQueued, At: time.Unix(int64(i), 0).UTC()}
		if err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ev, receive(t, fast)); diff != "" {
			t.Fatalf("event %d (-want +got):\n%s", i, diff)
		}
	}
	// The slow one holds the first events, up to its buffer; the rest
	// were dropped for it.
	if got := len(slow); got == 0 || got == n {
		t.Errorf("slow subscriber holds %d events; want its buffer full, the rest dropped", got)
	}
	if ev := receive(t, slow); !ev.At.Equal(time.Unix(0, 0)) {
		t.Errorf("slow subscriber's first event at %v, want the first one", ev.At)
	}
}

// TestBusGathers publishes the events of 300 orders from 300 callers at
// once, while Redis is slow to take a message: every subscriber gets its
// order's event, and far fewer messages than events carried them. (Gathering
// happens while messages are under way; on a fast Redis and a busy machine
// the callers trickle in one or two per message, whatever the Bus does.)
func TestBusGathers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gate := make(chan struct{})
	b := newBus(t, holdPublishes(gate))
	const orders = 300
	chans := make([]<-chan seckill.StatusEvent, orders)
	for i := range chans {
		ch, cancel, err := b.Subscribe(ctx, int64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
		chans[i] = ch
	}
	raw, err := admission.SubscribeStatus(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var wg, started sync.WaitGroup
	started.Add(orders)
	for i := range orders {
		wg.Go(func() {
			started.Done()
			if err := b.Publish(ctx, seckill.StatusEvent{OrderID: int64(i + 1), Status: seckill.OrderPaid, At: time.Unix(int64(i), 0).UTC()}); err != nil {
				t.Error(err)
			}
		})
	}
	// The first messages wait in Redis until every caller has called
	// Publish, and a moment more for the last ones to reach the Bus.
	started.Wait()
	time.Sleep(100 * time.Millisecond)
	close(gate)
	wg.Wait()
	for i, ch := range chans {
		if ev := receive(t, ch); ev.OrderID != int64(i+1) || ev.Status != seckill.OrderPaid {
			t.Errorf("subscriber of order %d got %+v", i+1, ev)
		}
	}
	messages := messagesHeld(ctx, raw)
	t.Logf("%d events in %d messages", orders, messages)
	if messages == 0 || messages > orders/3 {
		t.Errorf("%d events published at once in %d messages: want far fewer", orders, messages)
	}
}

// holdPublishes returns a hook that holds every PUBLISH (SPUBLISH on a
// cluster) until gate is closed: a slow Redis.
func holdPublishes(gate <-chan struct{}) redis.Hook { return publishHook{gate} }

type publishHook struct{ gate <-chan struct{} }

func (publishHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h publishHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "publish" || name == "spublish" {
			<-h.gate
		}
		return next(ctx, cmd)
	}
}
func (publishHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// messagesHeld counts the messages ps received: those that come within
// 200 ms of each other.
func messagesHeld(ctx context.Context, ps *redis.PubSub) int {
	n := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := ps.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			return n
		}
		n++
	}
}

// TestBusNoGoroutineLeak runs many subscribe/cancel cycles and checks that
// the number of goroutines settles back, and that Close releases the rest.
// It does not run in parallel: it counts every goroutine of the process.
func TestBusNoGoroutineLeak(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	base := settledGoroutines(0)

	b := admission.NewBus(rdb, prefix, nil)
	_, cancel, err := b.Subscribe(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	open := settledGoroutines(0)

	for i := range 200 {
		ctx, stop := context.WithCancel(context.Background())
		ch, cancel, err := b.Subscribe(ctx, int64(i%7))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			cancel()
		} else {
			stop()
		}
		if !closed(t, ch) {
			t.Fatalf("cycle %d: channel not closed", i)
		}
		stop()
	}
	if n := settledGoroutines(open); n > open {
		t.Errorf("%d goroutines after 200 cycles, %d before", n, open)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	n := settledGoroutines(base)
	if n > base {
		t.Errorf("%d goroutines after Close, %d before the bus", n, base)
	}
	t.Logf("goroutines: %d before the bus, %d with it open, %d after Close", base, open, n)
}

// TestAdmitterListenerNoLeak checks that the stock_returned listener goes
// away with its context. Not parallel: it counts every goroutine.
func TestAdmitterListenerNoLeak(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	base := settledGoroutines(0)
	for range 20 {
		a := admission.New(rdb, admission.Options{Prefix: prefix})
		ctx, cancel := context.WithCancel(context.Background())
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	if n := settledGoroutines(base); n > base {
		t.Errorf("%d goroutines after 20 listeners stopped, %d before", n, base)
	}
}

// settledGoroutines waits up to 5s for the goroutine count to drop to want
// (or, with want 0, to stop changing) and returns it.
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if (want > 0 && m <= want) || (want == 0 && m == n) {
			return m
		}
		n = m
	}
	return n
}

// TestBusFollowsFailover (on the cluster only): the master of the status
// channel's shard fails over; the process's sharded subscription follows
// the slot to the promoted replica, so events published after it are heard
// again (those published meanwhile may be lost: pub/sub is at most once).
func TestBusFollowsFailover(t *testing.T) {
	if !testenv.OnCluster() {
		t.Skip("needs the test cluster (SECKILL_TEST_REDIS_CLUSTER_ADDRS)")
	}
	ctx := context.Background()
	rdb, prefix := testenv.MustOpenRedis(t)
	b := admission.NewBus(rdb, prefix, nil)
	t.Cleanup(func() { b.Close() })
	const orderID = 43<<32 | 1
	ch, cancel, err := b.Subscribe(ctx, orderID)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	promoteReplica(t, rdb.(*redis.ClusterClient), admission.OrderStatusChannel(prefix), func(string) {})

	start := time.Now()
	for deadline := start.Add(20 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no event heard within 20 s of the failover")
		}
		_ = b.Publish(ctx, seckill.StatusEvent{OrderID: orderID, Status: seckill.OrderCreated})
		select {
		case ev := <-ch:
			if ev.Status != seckill.OrderCreated {
				t.Fatalf("event %+v", ev)
			}
			t.Logf("events heard again %s after the failover", time.Since(start).Round(time.Millisecond))
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestBusDatabasesApart: two deployments on databases 0 and 3 of one Redis
// server hear nothing of each other's order statuses (Redis's pub/sub
// ignores databases, and order ids repeat across deployments: a buyer's
// page would show another deployment's PAID for its order id),
// while two processes of one database hear each other.
func TestBusDatabasesApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.StartRedisServer(t)
	bus := func(db int) *admission.Bus {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: db})
		b := admission.NewBus(rdb, "", nil)
		t.Cleanup(func() { b.Close(); rdb.Close() })
		return b
	}
	db0, db3, alsoDB3 := bus(0), bus(3), bus(3)
	mine, cancel, err := db3.Subscribe(ctx, 4294967297)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	theirs := seckill.StatusEvent{OrderID: 4294967297, Status: seckill.OrderPaid, At: time.Now().UTC()}
	if err := db0.Publish(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-mine:
		t.Fatalf("a subscriber on database 3 heard database 0's event %+v", ev)
	case <-time.After(500 * time.Millisecond):
	}
	own := seckill.StatusEvent{OrderID: 4294967297, Status: seckill.OrderCreated, At: time.Now().UTC()}
	if err := alsoDB3.Publish(ctx, own); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(own, receive(t, mine)); diff != "" {
		t.Errorf("event of database 3 (-want +got):\n%s", diff)
	}
}

// TestStockReturnedDatabasesApart holds the stock_returned channel to the
// same rule as the status channel: a unit returned on database 0 does not
// drop a sold-out mark of the campaign with the same id on database 3,
// whose units did not come back; one returned on database 3 does.
func TestStockReturnedDatabasesApart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := testenv.StartRedisServer(t)
	admitter := func(db int, warm bool) *admission.Admitter {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: db})
		t.Cleanup(func() { rdb.Close() })
		// An hour: only a message can drop a mark during the test.
		a := admission.New(rdb, admission.Options{SoldOutTTL: time.Hour})
		if err := a.Load(ctx); err != nil {
			t.Fatal(err)
		}
		if warm {
			mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 1)})
		}
		return a
	}
	db0, db3, alsoDB3 := admitter(0, true), admitter(3, true), admitter(3, false)
	if err := db3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, db3, 1, 1)
	if o, _ := mustAdmit(t, db3, 1, 2); o != seckill.OutcomeSoldOut {
		t.Fatalf("user 2 on database 3: %s, want SOLD_OUT", o)
	}
	if _, ok := admission.SoldOutMark(db3, 1); !ok {
		t.Fatal("no sold-out mark on database 3")
	}

	if err := db0.AddStock(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, ok := admission.SoldOutMark(db3, 1); !ok {
		t.Fatal("a unit returned on database 0 dropped database 3's sold-out mark")
	}

	if err := alsoDB3.AddStock(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, func() bool {
		_, ok := admission.SoldOutMark(db3, 1)
		return !ok
	})
}
