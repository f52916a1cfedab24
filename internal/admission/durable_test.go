package admission_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// The tests in this file run against a private master (and replica) of
// their own: they count the commands the master served and pause the
// replica.

// durableAdmitter returns an Admitter with opts on a client of server.
func durableAdmitter(t *testing.T, server *testenv.RedisServer, opts admission.Options) (*admission.Admitter, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
	t.Cleanup(func() { rdb.Close() })
	a := admission.New(rdb, opts)
	if err := a.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a, rdb
}

var waitCalls = regexp.MustCompile(`(?m)^cmdstat_wait:calls=(\d+),`)

// waits returns how many WAIT commands the server behind rdb has served.
func waits(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := waitCalls.FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// admitAll admits users from..to-1 concurrently, released together, and
// returns each one's outcome and error.
func admitAll(a *admission.Admitter, voucherID, from, to int64) (map[int64]seckill.Outcome, map[int64]error) {
	var mu sync.Mutex
	outcomes, errs := make(map[int64]seckill.Outcome), make(map[int64]error)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for u := from; u < to; u++ {
		wg.Go(func() {
			<-start
			o, _, err := a.Admit(context.Background(), voucherID, u, seckill.Ticket{})
			mu.Lock()
			outcomes[u], errs[u] = o, err
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return outcomes, errs
}

// acceptedOf counts the acceptances among admitAll's results, failing t on
// any error.
func acceptedOf(t *testing.T, outcomes map[int64]seckill.Outcome, errs map[int64]error) int {
	t.Helper()
	n := 0
	for u, o := range outcomes {
		if errs[u] != nil {
			t.Fatalf("user %d: %v", u, errs[u])
		}
		if o == seckill.OutcomeAccepted {
			n++
		}
	}
	return n
}

// TestDurableAdmit: with a replica required, 400 concurrent buyers of 300
// units are all answered without error, the replica holds every acceptance
// by the time its buyer is answered, one WAIT covers many acceptances, and
// refusals send none.
func TestDurableAdmit(t *testing.T) {
	t.Parallel()
	master := testenv.StartRedisServer(t)
	replica := testenv.StartReplica(t, master)
	a, rdb := durableAdmitter(t, master, admission.Options{MinReplicas: 1, WaitTimeout: 5 * time.Second, SoldOutTTL: -1})
	rrdb := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer rrdb.Close()
	const voucher, stock = 7, 300
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(voucher, stock)})

	outcomes, errs := admitAll(a, voucher, 1, 401)
	if accepted := acceptedOf(t, outcomes, errs); accepted != stock {
		t.Fatalf("%d accepted, want %d", accepted, stock)
	}
	// WAIT returned, so the replica applied every admission already.
	ctx := context.Background()
	if n := rrdb.HLen(ctx, admission.PendingKey(a, voucher)).Val(); n != stock {
		t.Errorf("replica holds %d pending admissions, want %d", n, stock)
	}
	if n := rrdb.SCard(ctx, admission.BuyersKey(a, voucher)).Val(); n != stock {
		t.Errorf("replica holds %d buyers, want %d", n, stock)
	}
	w := waits(t, rdb)
	if w < 1 || w >= stock {
		t.Errorf("%d WAITs for %d acceptances: want at least one, and fewer than one per acceptance", w, stock)
	}
	t.Logf("%d acceptances, %d WAITs", stock, w)

	// Sold out and bought before: refusals wait for no replica.
	admitAll(a, voucher, 1, 101)
	admitAll(a, voucher, 1000, 1100)
	if got := waits(t, rdb); got != w {
		t.Errorf("refusals sent %d WAITs, want none", got-w)
	}
}

// TestDurableAdmitReplicaStalled: when the replica does not acknowledge in
// time, the acceptance comes back as ErrNotReplicated with its admission
// (pending in Redis, for the caller to persist or release), refusals are
// answered before the acceptances of their batch wait out the timeout, and
// once the replica is back acceptances are confirmed again.
func TestDurableAdmitReplicaStalled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := testenv.StartRedisServer(t)
	replica := testenv.StartReplica(t, master)
	// A refusal behind waiting acceptances (below) must take well under
	// the timeout, with room for a loaded make test's delays: a third of
	// 2.4 s is 800 ms, and a refusal that waited for the WAIT would still
	// take over 2 s.
	const timeout = 2400 * time.Millisecond
	a, rdb := durableAdmitter(t, master, admission.Options{MinReplicas: 1, WaitTimeout: timeout, SoldOutTTL: -1})
	const voucher = 8
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(voucher, 100)})
	for u := int64(1); u <= 20; u++ {
		mustAdmit(t, a, voucher, u)
	}

	replica.Pause()
	defer replica.Resume()

	began := time.Now()
	o, adm, err := a.Admit(ctx, voucher, 100, seckill.Ticket{})
	took := time.Since(began)
	if o != seckill.OutcomeAccepted || !errors.Is(err, seckill.ErrNotReplicated) || adm.OrderID == 0 {
		t.Fatalf("admit with the replica stalled: %s, %+v, %v; want ACCEPTED with its admission and ErrNotReplicated", o, adm, err)
	}
	if took < timeout {
		t.Errorf("answered after %s, before the WAIT timeout %s", took, timeout)
	}
	if p, err := a.Pending(ctx, adm.OrderID); err != nil || p.UserID != 100 {
		t.Fatalf("the unconfirmed admission is not pending: %+v, %v", p, err)
	}

	// Old buyers (refused) and new ones (accepted, unconfirmed) at once:
	// every refusal is answered before any acceptance.
	w := waits(t, rdb)
	type result struct {
		user int64
		o    seckill.Outcome
		err  error
		at   time.Time
	}
	results := make(chan result, 40)
	var wg sync.WaitGroup
	for u := int64(1); u <= 40; u++ {
		user := u // 1..20 bought before; 21..40 are new
		wg.Go(func() {
			o, _, err := a.Admit(ctx, voucher, user, seckill.Ticket{})
			results <- result{user, o, err, time.Now()}
		})
	}
	wg.Wait()
	close(results)
	var lastRefusal, firstAcceptance time.Time
	for r := range results {
		switch {
		case r.user <= 20:
			if r.o != seckill.OutcomeAlreadyPurchased || r.err != nil {
				t.Errorf("user %d: %s, %v; want ALREADY_PURCHASED", r.user, r.o, r.err)
			}
			if r.at.After(lastRefusal) {
				lastRefusal = r.at
			}
		default:
			if r.o != seckill.OutcomeAccepted || !errors.Is(r.err, seckill.ErrNotReplicated) {
				t.Errorf("user %d: %s, %v; want ACCEPTED, ErrNotReplicated", r.user, r.o, r.err)
			}
			if firstAcceptance.IsZero() || r.at.Before(firstAcceptance) {
				firstAcceptance = r.at
			}
		}
	}
	if !lastRefusal.Before(firstAcceptance) {
		t.Errorf("a refusal was answered %s after the first acceptance: refusals must not wait for WAIT",
			lastRefusal.Sub(firstAcceptance))
	}
	t.Logf("%d WAITs for 20 acceptances under a stalled replica", waits(t, rdb)-w)

	// Acceptances in batches of their own, enough to fill every pipeline
	// in flight, all waiting for the stalled replica: a refusal still goes
	// out at once, since a WAIT does not hold its pipeline's place.
	var waiting sync.WaitGroup
	for u := int64(41); u <= 48; u++ {
		waiting.Go(func() { _, _, _ = a.Admit(ctx, voucher, u, seckill.Ticket{}) })
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	began = time.Now()
	if o, _, err := a.Admit(ctx, voucher, 1, seckill.Ticket{}); o != seckill.OutcomeAlreadyPurchased || err != nil {
		t.Errorf("a refusal behind waiting acceptances: %s, %v; want ALREADY_PURCHASED", o, err)
	}
	if took := time.Since(began); took > timeout/3 {
		t.Errorf("a refusal took %s while acceptances waited for the stalled replica; want well under the WAIT timeout %s", took, timeout)
	}
	waiting.Wait()

	replica.Resume()
	if o, _, err := a.Admit(ctx, voucher, 200, seckill.Ticket{}); o != seckill.OutcomeAccepted || err != nil {
		t.Fatalf("admit with the replica back: %s, %v; want ACCEPTED, confirmed", o, err)
	}
}

// TestNoReplicasNoWait: with MinReplicas 0 (a single node's default),
// admission sends no WAIT at all.
func TestNoReplicasNoWait(t *testing.T) {
	t.Parallel()
	master := testenv.StartRedisServer(t)
	testenv.StartReplica(t, master) // a replica is there, but not required
	a, rdb := durableAdmitter(t, master, admission.Options{SoldOutTTL: -1})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(9, 100)})
	outcomes, errs := admitAll(a, 9, 1, 201)
	if accepted := acceptedOf(t, outcomes, errs); accepted != 100 {
		t.Fatalf("%d accepted, want 100", accepted)
	}
	if w := waits(t, rdb); w != 0 {
		t.Fatalf("%d WAITs sent with no replica required, want 0", w)
	}
}

// TestDurableAdmitOnCluster (on the test cluster only): the admissions of
// one batch live on different masters; each master's part is confirmed by
// that master's replica with a WAIT of its own, and every buyer is answered
// without error.
func TestDurableAdmitOnCluster(t *testing.T) {
	if !testenv.OnCluster() {
		t.Skip("needs SECKILL_TEST_REDIS_CLUSTER_ADDRS")
	}
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testenv.MustOpenRedis(t)
	cc := rdb.(*redis.ClusterClient)
	a := admission.New(rdb, admission.Options{Prefix: prefix, MinReplicas: 1, WaitTimeout: 5 * time.Second, SoldOutTTL: -1})
	if err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	masterWaits := func() map[string]int {
		var mu sync.Mutex
		out := map[string]int{}
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n := waits(t, c)
			mu.Lock()
			out[c.Options().Addr] = n
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// Campaigns until every master holds at least one.
	const stock = 50
	var vouchers []int64
	masters := map[string]bool{}
	for v := int64(1); v <= 64 && len(vouchers) < 12; v++ {
		node, err := cc.MasterForKey(ctx, admission.CampaignKey(a, v))
		if err != nil {
			t.Fatal(err)
		}
		mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(v, stock)})
		vouchers = append(vouchers, v)
		masters[node.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("the campaigns sit on %d master(s); the test needs several", len(masters))
	}
	before := masterWaits()

	var (
		mu       sync.Mutex
		accepted = map[int64]int{}
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for _, v := range vouchers {
		for u := int64(1); u <= stock; u++ {
			wg.Go(func() {
				<-start
				o, _, err := a.Admit(ctx, v, u, seckill.Ticket{})
				if err != nil {
					t.Errorf("voucher %d user %d: %v", v, u, err)
					return
				}
				if o == seckill.OutcomeAccepted {
					mu.Lock()
					accepted[v]++
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for _, v := range vouchers {
		if accepted[v] != stock {
			t.Errorf("voucher %d: %d accepted, want %d", v, accepted[v], stock)
		}
	}
	after := masterWaits()
	total := 0
	for addr := range masters {
		d := after[addr] - before[addr]
		if d < 1 {
			t.Errorf("master %s: no WAIT for its admissions", addr)
		}
		total += d
	}
	if n := len(vouchers) * stock; total >= n {
		t.Errorf("%d WAITs for %d acceptances: want fewer than one per acceptance", total, n)
	}
	t.Logf("%d acceptances on %d masters, %d WAITs", len(vouchers)*stock, len(masters), total)
}
