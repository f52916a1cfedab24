package admission_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// newAdmitter returns an Admitter on a fresh key prefix with its scripts
// loaded, and the raw client for assertions.
func newAdmitter(tb testing.TB, opts admission.Options) (*admission.Admitter, redis.UniversalClient) {
	tb.Helper()
	rdb, prefix := testenv.MustOpenRedis(tb)
	opts.Prefix = prefix
	a := admission.New(rdb, opts)
	if err := a.Load(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return a, rdb
}

// newLiveAdmitter is newAdmitter with a campaign on sale now warmed.
func newLiveAdmitter(tb testing.TB, voucherID, stock int64) (*admission.Admitter, redis.UniversalClient) {
	tb.Helper()
	a, rdb := newAdmitter(tb, admission.Options{})
	mustWarm(tb, a, seckill.WarmState{Campaign: liveCampaign(voucherID, stock)})
	return a, rdb
}

// stopCampaign stops a campaign as a change of Redis server does
// (stamp.lua): it admits nobody until a rebuild installs it again.
func stopCampaign(tb testing.TB, a *admission.Admitter, rdb redis.UniversalClient, voucherID int64) {
	tb.Helper()
	if err := rdb.HSet(context.Background(), admission.CampaignKey(a, voucherID), "state", "stale").Err(); err != nil {
		tb.Fatal(err)
	}
}

// liveCampaign is a campaign that is on sale now.
func liveCampaign(voucherID, stock int64) seckill.Campaign {
	now := time.Now()
	return seckill.Campaign{
		VoucherID: voucherID, InitialStock: stock, Stock: stock,
		BeginTime: now.Add(-time.Minute), EndTime: now.Add(time.Hour),
	}
}

func mustWarm(tb testing.TB, a *admission.Admitter, st seckill.WarmState) {
	tb.Helper()
	ok, err := a.Warm(context.Background(), st)
	if err != nil {
		tb.Fatalf("warm %d: %v", st.Campaign.VoucherID, err)
	}
	if !ok {
		tb.Fatalf("warm %d: not installed", st.Campaign.VoucherID)
	}
}

func mustAdmit(tb testing.TB, a *admission.Admitter, voucherID, userID int64) (seckill.Outcome, seckill.Admission) {
	tb.Helper()
	o, adm, err := a.Admit(context.Background(), voucherID, userID, seckill.Ticket{})
	if err != nil {
		tb.Fatalf("admit voucher %d user %d: %v", voucherID, userID, err)
	}
	return o, adm
}

// wantOutcome admits userID and fails the test unless the outcome is want;
// when says what the admission comes after.
func wantOutcome(tb testing.TB, a *admission.Admitter, voucherID, userID int64, want seckill.Outcome, when string) {
	tb.Helper()
	if o, _ := mustAdmit(tb, a, voucherID, userID); o != want {
		tb.Errorf("%s: user %d got %s, want %s", when, userID, o, want)
	}
}

// mustAccept admits userID and fails the test unless the answer is ACCEPTED
// with order id want; when says what the admission comes after.
func mustAccept(tb testing.TB, a *admission.Admitter, voucherID, userID, want int64, when string) {
	tb.Helper()
	if o, adm := mustAdmit(tb, a, voucherID, userID); o != seckill.OutcomeAccepted || adm.OrderID != want {
		tb.Errorf("%s: user %d got %s with order %d, want ACCEPTED with order %d", when, userID, o, adm.OrderID, want)
	}
}

// TestNoScript checks that losing the script cache (SCRIPT FLUSH, a Redis
// restart) costs a fallback to EVAL, not an error. Flushing the cache is
// harmless to other tests: go-redis falls back the same way for them.
func TestNoScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newLiveAdmitter(t, 1, 10)

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	o, adm := mustAdmit(t, a, 1, 1)
	if o != seckill.OutcomeAccepted {
		t.Fatalf("admit after SCRIPT FLUSH: %s", o)
	}
	// Ack pipelines EVALSHA only; it must recover too.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Ack(ctx, []seckill.Admission{adm}); err != nil {
		t.Fatalf("ack after SCRIPT FLUSH: %v", err)
	}
	if _, err := a.Pending(ctx, adm.OrderID); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("pending after ack: %v", err)
	}
}

func TestListenerStopsWithContext(t *testing.T) {
	t.Parallel()
	a, _ := newAdmitter(t, admission.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-admission.ListenerDone(a):
	case <-time.After(5 * time.Second):
		t.Fatal("the listener did not stop after its context ended")
	}
	if err := a.Start(context.Background()); err == nil {
		t.Error("second Start succeeded")
	}
}

func TestRedisDown(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	a := admission.New(rdb, admission.Options{})
	_, _, err := a.Admit(context.Background(), 1, 1, seckill.Ticket{})
	if err == nil {
		t.Fatal("admit without Redis succeeded")
	}
	if code := seckill.ErrorCode(err); code != seckill.EUNAVAILABLE {
		t.Errorf("code %s, want UNAVAILABLE", code)
	}
	if !strings.HasPrefix(err.Error(), "admission: admit: ") || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %q does not wrap its cause with context", err)
	}
}

// shardOf returns the addresses of the master serving key's slot, then of
// its replicas.
func shardOf(t *testing.T, cc *redis.ClusterClient, key string) []string {
	t.Helper()
	ctx := context.Background()
	slot := cc.ClusterKeySlot(ctx, key).Val()
	for _, s := range cc.ClusterSlots(ctx).Val() {
		if int64(s.Start) <= slot && slot <= int64(s.End) {
			var addrs []string
			for _, n := range s.Nodes {
				addrs = append(addrs, n.Addr)
			}
			return addrs
		}
	}
	t.Fatalf("no node serves %s", key)
	return nil
}

// promoteReplica promotes a replica of key's shard with CLUSTER FAILOVER,
// after calling before with its address, and returns the address; the old
// master is promoted back at cleanup.
func promoteReplica(t *testing.T, cc *redis.ClusterClient, key string, before func(replica string)) string {
	t.Helper()
	// A master demoted by an earlier test's failover back is listed as a
	// replica only once it has reconnected: until then it is missing.
	nodes := shardOf(t, cc, key)
	for deadline := time.Now().Add(30 * time.Second); len(nodes) < 2; nodes = shardOf(t, cc, key) {
		if time.Now().After(deadline) {
			t.Fatalf("the shard of %s has had no replica for 30 s: %v", key, nodes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	oldMaster, replica := nodes[0], nodes[1]
	before(replica)
	failover(t, cc, key, replica)
	t.Cleanup(func() { failover(t, cc, key, oldMaster) })
	return replica
}

// failover makes the replica at to the master of key's shard and waits
// until the cluster routes key there.
func failover(t *testing.T, cc *redis.ClusterClient, key, to string) {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: to})
	defer c.Close()
	promoted := func() bool {
		r, _ := c.Do(ctx, "ROLE").Slice()
		return len(r) > 0 && r[0] == "master"
	}
	// A manual failover needs the replica in sync; one that is still
	// catching up lets it time out, so wait for the link and retry.
	for deadline := time.Now().Add(30 * time.Second); !promoted(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not promoted in 30 s", to)
		}
		if !strings.Contains(c.Info(ctx, "replication").Val(), "master_link_status:up") {
			continue
		}
		if err := c.ClusterFailover(ctx).Err(); err != nil {
			t.Fatalf("CLUSTER FAILOVER on %s: %v", to, err)
		}
		for wait := time.Now().Add(5 * time.Second); !promoted() && time.Now().Before(wait); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Every node agrees before the test goes on.
	for deadline := time.Now().Add(30 * time.Second); shardOf(t, cc, key)[0] != to; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster does not route %s to %s", key, to)
		}
	}
}
