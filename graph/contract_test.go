package graph

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
	"seckill/internal/testenv"
)

// The fakes in fakes_test.go stand in for the Redis adapter so that these
// tests exercise the edge alone. The contract tests below hold them to the
// real adapters: the same calls, on the fake and on admission's Admitter
// and Bus against real Redis or the Store against real Postgres, must give
// the same answers.

// TestMemAdmitterContract runs one purchase story against memAdmitter and
// the Redis Admitter and compares what each answered, step by step.
func TestMemAdmitterContract(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	real := admission.New(rdb, admission.Options{Prefix: prefix})
	if err := real.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	sameStory(t, admitterStory, admitterPorts(real), admitterPorts(newMemAdmitter()))
}

// sameStory tells story on the real adapter and on its fake, and fails on
// any difference in what they answered.
func sameStory[T any](t *testing.T, story func(*testing.T, T) []string, real, fake T) {
	t.Helper()
	if diff := cmp.Diff(story(t, real), story(t, fake)); diff != "" {
		t.Fatalf("the fake %T differs from the real %T (-real +fake):\n%s", fake, real, diff)
	}
}

// transcript collects one line per step of a story.
type transcript []string

func (tr *transcript) say(format string, args ...any) {
	*tr = append(*tr, fmt.Sprintf(format, args...))
}

// code is how a step's error reads in a transcript: its domain code.
func code(err error) string {
	if err != nil {
		return "error " + string(seckill.ErrorCode(err))
	}
	return "ok"
}

// admitterStory warms an open campaign with two units (and one not started,
// one ended), buys, refuses, releases and acknowledges, and returns one line
// per step.
// admitterPorts are the Redis ports memAdmitter stands in for.
type admitterPorts interface {
	seckill.Admitter
	seckill.Outbox
	seckill.Rebuilder
	seckill.CampaignAdmitter
}

func admitterStory(t *testing.T, a admitterPorts) []string {
	ctx := t.Context()
	now := time.Now()
	campaign := func(id int64, begin, end time.Time, stock int64) seckill.WarmState {
		return seckill.WarmState{Campaign: seckill.Campaign{VoucherID: id, Stock: stock, BeginTime: begin, EndTime: end}}
	}
	var out transcript
	say := out.say
	for _, st := range []seckill.WarmState{
		campaign(1, now.Add(-time.Hour), now.Add(time.Hour), 2),
		campaign(2, now.Add(time.Hour), now.Add(2*time.Hour), 2),
		campaign(3, now.Add(-2*time.Hour), now.Add(-time.Hour), 2),
		campaign(1, now.Add(-time.Hour), now.Add(time.Hour), 5), // held already
	} {
		warmed, err := a.Warm(ctx, st)
		say("warm %d: %v %s", st.Campaign.VoucherID, warmed, code(err))
	}
	adms := map[int64]seckill.Admission{}
	admit := func(voucherID, userID int64) {
		o, adm, err := a.Admit(ctx, voucherID, userID, seckill.Ticket{})
		say("admit voucher %d user %d: %s order %d %s", voucherID, userID, o, adm.OrderID, code(err))
		if o == seckill.OutcomeAccepted {
			adms[userID] = adm
		}
	}
	remaining := func() {
		rem, err := a.Remaining(ctx, []int64{1, 2, 3, 99})
		say("remaining %v %s", rem, code(err))
	}
	pending := func(userID int64) {
		p, err := a.Pending(ctx, adms[userID].OrderID)
		if p != nil {
			say("pending of user %d: order %d user %d voucher %d", userID, p.OrderID, p.UserID, p.VoucherID)
			return
		}
		say("pending of user %d: %s", userID, code(err))
	}
	release := func(adm seckill.Admission, keepBuyer bool) {
		ok, err := a.Release(ctx, adm, keepBuyer)
		say("release order %d of user %d keep %v: %v %s", adm.OrderID, adm.UserID, keepBuyer, ok, code(err))
	}

	admit(1, 100)
	admit(1, 100)
	admit(1, 101)
	admit(1, 102)
	admit(2, 100)
	admit(3, 100)
	admit(99, 100)
	remaining()
	pending(100)
	other := adms[101]
	other.UserID = 555
	release(other, false)
	release(adms[101], false)
	release(adms[101], false)
	pending(101)
	remaining()
	admit(1, 101) // its buyer slot was given back with the unit
	if err := a.Ack(ctx, []seckill.Admission{adms[100]}); err != nil {
		t.Fatal(err)
	}
	pending(100)
	release(adms[100], false) // acknowledged: nothing to give back
	remaining()
	return out
}

// TestMemBusContract runs one subscription story against memBus and the
// Redis Bus and compares what each subscriber received.
func TestMemBusContract(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	real := admission.NewBus(rdb, prefix, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { _ = real.Close() })
	sameStory(t, busStory, seckill.StatusBus(real), seckill.StatusBus(newMemBus()))
}

// busStory subscribes twice to one order and once to another, publishes,
// cancels one subscription, publishes again, and returns what each
// subscriber saw and whether its channel was closed.
func busStory(t *testing.T, b seckill.StatusBus) []string {
	ctx := t.Context()
	subscribe := func(orderID int64) (<-chan seckill.StatusEvent, func()) {
		ch, cancel, err := b.Subscribe(ctx, orderID)
		if err != nil {
			t.Fatal(err)
		}
		return ch, cancel
	}
	a1, cancelA1 := subscribe(1)
	a2, cancelA2 := subscribe(1)
	defer cancelA2()
	b1, cancelB1 := subscribe(2)
	defer cancelB1()
	at := time.Unix(1_800_000_000, 0).UTC()
	publish := func(evs ...seckill.StatusEvent) {
		if err := b.Publish(ctx, evs...); err != nil {
			t.Fatal(err)
		}
	}
	publish(seckill.StatusEvent{OrderID: 1, Status: seckill.OrderCreated, At: at},
		seckill.StatusEvent{OrderID: 2, Status: seckill.OrderFailed, At: at, Reason: "no stock left"})

	var out transcript
	next := func(name string, ch <-chan seckill.StatusEvent) {
		select {
		case ev, ok := <-ch:
			if !ok {
				out.say("%s: closed", name)
				return
			}
			out.say("%s: order %d %s %s %q", name, ev.OrderID, ev.Status, ev.At.UTC().Format(time.RFC3339), ev.Reason)
		case <-time.After(5 * time.Second):
			out.say("%s: nothing in 5 s", name)
		}
	}
	next("a1", a1)
	next("a2", a2)
	next("b1", b1)
	cancelA1()
	next("a1 after cancel", a1)
	publish(seckill.StatusEvent{OrderID: 1, Status: seckill.OrderFailed, At: at, Reason: "expired"})
	next("a2", a2)
	return out
}

// TestMemStoreContract runs one story of vouchers and orders against
// memStore and the Postgres Store and compares what each answered.
func TestMemStoreContract(t *testing.T) {
	sameStory(t, storeStory, storePorts(store.New(storetest.NewDB(t))), storePorts(newMemStore()))
}

// storeStory creates two campaigns of one unit, persists admissions (one
// twice, one beyond the stock), reads them back, and returns one line per
// step.
// storePorts are the Postgres ports memStore stands in for.
type storePorts interface {
	seckill.CatalogStore
	seckill.OrderStore
	seckill.RecoveryStore
}

func storeStory(t *testing.T, s storePorts) []string {
	ctx := t.Context()
	var out transcript
	say := out.say
	now := time.Now().UTC().Truncate(time.Millisecond)
	var ids []int64
	for _, title := range []string{"first", "second"} {
		v := &seckill.Voucher{ShopID: 7, Title: title, PayValue: 100, ActualValue: 1000, Type: seckill.VoucherSeckill,
			Campaign: &seckill.Campaign{InitialStock: 1, Stock: 1, BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)}}
		err := s.CreateVoucher(ctx, v)
		say("create %s: %s", title, code(err))
		ids = append(ids, v.ID)
	}
	// Ids are the store's; the story speaks of them by position.
	pos := func(id int64) int {
		for i, x := range ids {
			if x == id {
				return i
			}
		}
		return -1
	}
	v, err := s.Voucher(ctx, ids[0])
	if v != nil {
		say("voucher %d: %s shop %d stock %d campaign of %d", pos(v.ID), v.Title, v.ShopID, v.Campaign.Stock, pos(v.Campaign.VoucherID))
	}
	say("voucher read: %s", code(err))
	_, err = s.Voucher(ctx, ids[1]+1000)
	say("unknown voucher: %s", code(err))
	page, err := s.Vouchers(ctx, seckill.VoucherFilter{First: 1, After: 0})
	for _, v := range page {
		say("page: voucher %d", pos(v.ID))
	}
	say("page: %s", code(err))

	adm := func(voucher, seq, user int64) seckill.Admission {
		return seckill.Admission{OrderID: seckill.OrderID(voucher, seq), VoucherID: voucher, UserID: user, AdmittedAt: now}
	}
	persist := func(adms ...seckill.Admission) {
		res, err := s.PersistOrders(ctx, adms)
		for _, r := range res {
			say("persist order %d/%d: %s inserted %v", pos(r.Admission.VoucherID), r.Admission.OrderID&0xffffffff, r.Status, r.Inserted)
		}
		say("persist: %s", code(err))
	}
	first, again, beyond := adm(ids[0], 1, 100), adm(ids[0], 1, 100), adm(ids[0], 2, 101)
	persist(first)
	persist(again, beyond)
	persist(adm(ids[1], 1, 100))

	o, err := s.Order(ctx, first.OrderID)
	if o != nil {
		say("order: voucher %d user %d %s", pos(o.VoucherID), o.UserID, o.Status)
	}
	say("order read: %s", code(err))
	o, err = s.Order(ctx, beyond.OrderID)
	if o != nil {
		say("order beyond the stock: voucher %d user %d %s %q", pos(o.VoucherID), o.UserID, o.Status, o.FailureReason)
	}
	say("order beyond the stock: %s", code(err))
	orders, err := s.OrdersByUser(ctx, 100, 10)
	for _, o := range orders {
		say("orders of user 100: voucher %d %s", pos(o.VoucherID), o.Status)
	}
	say("orders of user 100: %s", code(err))
	v, _ = s.Voucher(ctx, ids[0])
	say("stock left of voucher 0: %d", v.Campaign.Stock)
	return out
}
