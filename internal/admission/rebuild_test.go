package admission_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// TestRebuild walks a campaign through a rebuild: the lock is exclusive, the
// campaign admits nobody meanwhile (and writes nothing), the pending
// admissions can be read for persisting, and the installed state replaces
// everything in a new epoch.
func TestRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newLiveAdmitter(t, 1, 10)
	_, adm1 := mustAdmit(t, a, 1, 1)
	_, adm2 := mustAdmit(t, a, 1, 2)

	if need, err := a.NeedsRebuild(ctx, []int64{1, 999}); err != nil || !slices.Equal(need, []int64{999}) {
		t.Fatalf("NeedsRebuild = %v, %v; want [999]", need, err)
	}
	// A campaign installed and admitting is not rebuilt: nothing changes.
	healthy := rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || ok {
		t.Fatalf("BeginRebuild of a campaign that needs none = %v, %v; want false", ok, err)
	}
	if diff := cmp.Diff(healthy, rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()); diff != "" {
		t.Errorf("BeginRebuild of a campaign that needs none wrote (-before +after):\n%s", diff)
	}
	stopCampaign(t, a, rdb, 1)
	lock, ok, err := a.BeginRebuild(ctx, 1)
	if err != nil || !ok {
		t.Fatalf("BeginRebuild = %v, %v", ok, err)
	}
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || ok {
		t.Fatalf("second BeginRebuild = %v, %v; want the lock taken", ok, err)
	}
	before := rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()
	if _, _, err := a.Admit(ctx, 1, 3, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Fatalf("admit while rebuilding: %v, want ErrRebuildNeeded", err)
	}
	if diff := cmp.Diff(before, rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()); diff != "" {
		t.Errorf("admit while rebuilding wrote (-before +after):\n%s", diff)
	}
	if need, _ := a.NeedsRebuild(ctx, []int64{1}); !slices.Equal(need, []int64{1}) {
		t.Errorf("NeedsRebuild while rebuilding = %v, want [1]", need)
	}
	pending, err := a.PendingOf(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]seckill.Admission{adm1, adm2}, pending); diff != "" {
		t.Errorf("PendingOf (-want +got):\n%s", diff)
	}

	st := seckill.WarmState{Campaign: liveCampaign(1, 7), Buyers: []int64{1, 50}}
	st.Campaign.Epoch = 4
	if ok, err := a.FinishRebuild(ctx, "not the token", st); err != nil || ok {
		t.Fatalf("FinishRebuild with a foreign token = %v, %v; want false", ok, err)
	}
	if ok, err := a.FinishRebuild(ctx, lock.Token, st); err != nil || !ok {
		t.Fatalf("FinishRebuild = %v, %v", ok, err)
	}
	if need, _ := a.NeedsRebuild(ctx, []int64{1}); len(need) != 0 {
		t.Errorf("NeedsRebuild after = %v, want none", need)
	}
	// The buyers were staged in a key that expires (in case the rebuild
	// dies); installed, they must not: an expired buyers set lets every
	// buyer buy again (issue #21).
	for _, key := range []string{admission.BuyersKey(a, 1), admission.CampaignKey(a, 1)} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
			t.Errorf("PTTL %s after the rebuild = %s, want none (-1)", key, ttl)
		}
	}
	if q, _ := a.Queued(ctx, []int64{1}); q[1] != 0 {
		t.Errorf("queued after = %d, want 0", q[1])
	}
	for _, u := range []int64{1, 50} {
		wantOutcome(t, a, 1, u, seckill.OutcomeAlreadyPurchased, "after rebuild")
	}
	// User 2 is not a buyer in Postgres (Redis lost it): the first order
	// of epoch 4.
	mustAccept(t, a, 1, 2, seckill.OrderID(1, 4<<22|1), "after rebuild")
	if rem, _ := a.Remaining(ctx, []int64{1}); rem[1] != 6 {
		t.Errorf("remaining = %d, want 6", rem[1])
	}
	// Installed: no rebuild now (a process that saw the campaign stopped
	// before this one installed it must not rebuild it again), and the
	// lock is free for the next time it is stopped.
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || ok {
		t.Errorf("BeginRebuild right after the rebuild = %v, %v; want false", ok, err)
	}
	stopCampaign(t, a, rdb, 1)
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || !ok {
		t.Errorf("BeginRebuild once stopped again = %v, %v", ok, err)
	}
}

// TestBeginRebuildWhenNeeded: the rebuild lock is taken for a campaign
// Redis lacks, one stopped, and one whose epoch's sequence is used up, as
// NeedsRebuild says; never for one installed and admitting.
func TestBeginRebuildWhenNeeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	for id := int64(1); id <= 4; id++ {
		mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(id, 10)})
	}
	rdb.Del(ctx, admission.CampaignKey(a, 2))                              // lost
	stopCampaign(t, a, rdb, 3)                                             // stopped
	rdb.HSet(ctx, admission.CampaignKey(a, 4), "seq", seckill.MaxEpochSeq) // used up
	need, err := a.NeedsRebuild(ctx, []int64{1, 2, 3, 4})
	if err != nil || !slices.Equal(need, []int64{2, 3, 4}) {
		t.Fatalf("NeedsRebuild = %v, %v; want [2 3 4]", need, err)
	}
	for id := int64(1); id <= 4; id++ {
		_, ok, err := a.BeginRebuild(ctx, id)
		if err != nil || ok != slices.Contains(need, id) {
			t.Errorf("BeginRebuild(%d) = %v, %v; want %v", id, ok, err, slices.Contains(need, id))
		}
	}
}

// TestConnectHook: a process that connects to a Redis server it has not
// seen stops every campaign that another server installed (as after a
// restart or a failover), and only those, before the connection carries
// anything else.
func TestConnectHook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	prefix := admission.Prefix(a)
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 10)})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(2, 10)})
	// Campaign 2's state came from another server (a replica's old
	// master, or this server before it restarted).
	if err := rdb.HSet(ctx, admission.CampaignKey(a, 2), "rid", strings.Repeat("ab", 20)).Err(); err != nil {
		t.Fatal(err)
	}
	live := func(context.Context) ([]int64, error) { return []int64{1, 2, 3}, nil }
	hook := admission.NewConnectHook(admission.Options{Prefix: prefix, LiveCampaigns: live})
	fresh := testenv.NewRedis(t, hook.For)
	b := admission.New(fresh, admission.Options{Prefix: prefix})
	if o, _, err := b.Admit(ctx, 1, 5, seckill.Ticket{}); err != nil || o != seckill.OutcomeAccepted {
		t.Errorf("campaign of this server: %s %v, want ACCEPTED", o, err)
	}
	if _, _, err := b.Admit(ctx, 2, 5, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("campaign of another server: %v, want ErrRebuildNeeded", err)
	}
	if need, _ := b.NeedsRebuild(ctx, []int64{1, 2}); !slices.Equal(need, []int64{2}) {
		t.Errorf("NeedsRebuild = %v, want [2]", need)
	}
}

// TestAbortRebuild: a rebuild that failed halfway releases its lock at
// once, only with its own token, and the campaign still admits nobody until
// a rebuild installs it.
func TestAbortRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newLiveAdmitter(t, 1, 10)
	stopCampaign(t, a, rdb, 1)
	lock, ok, err := a.BeginRebuild(ctx, 1)
	if err != nil || !ok {
		t.Fatalf("BeginRebuild = %v, %v", ok, err)
	}
	if err := a.AbortRebuild(ctx, 1, "another-token"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || ok {
		t.Fatalf("BeginRebuild after an abort with another token = %v, %v; want the lock still taken", ok, err)
	}
	if err := a.AbortRebuild(ctx, 1, lock.Token); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Admit(ctx, 1, 3, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("admit after the abort: %v, want ErrRebuildNeeded", err)
	}
	if need, _ := a.NeedsRebuild(ctx, []int64{1}); !slices.Equal(need, []int64{1}) {
		t.Errorf("NeedsRebuild after the abort = %v, want [1]", need)
	}
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || !ok {
		t.Errorf("BeginRebuild after the abort = %v, %v; want the lock free", ok, err)
	}
	if err := a.AbortRebuild(ctx, 1, ""); err == nil {
		t.Error("AbortRebuild with an empty token: no error")
	}
}

// TestChangeWhileRebuilding: a window change or added stock is refused while
// the campaign is rebuilt, since the rebuild would overwrite it with what it
// read from Postgres before; the caller undoes its Postgres change.
func TestChangeWhileRebuilding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	c := liveCampaign(1, 10)
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	stopCampaign(t, a, rdb, 1)
	if _, ok, err := a.BeginRebuild(ctx, 1); err != nil || !ok {
		t.Fatalf("BeginRebuild = %v, %v", ok, err)
	}
	before := rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()
	if err := a.UpdateCampaign(ctx, 1, c.BeginTime, c.EndTime, true); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Errorf("UpdateCampaign while rebuilding: %v, want UNAVAILABLE", err)
	}
	if err := a.AddStock(ctx, 1, 5); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Errorf("AddStock while rebuilding: %v, want UNAVAILABLE", err)
	}
	if diff := cmp.Diff(before, rdb.HGetAll(ctx, admission.CampaignKey(a, 1)).Val()); diff != "" {
		t.Errorf("refused changes wrote (-before +after):\n%s", diff)
	}
}

// TestConnectHookFailover (on the cluster only): each node has its own
// guard. A process that knew a replica as a replica, and connects to it again
// after it was promoted (CLUSTER FAILOVER), takes it for another server (its
// replication id changed, its run_id did not) and stops the campaigns it
// now serves that the old master installed; a campaign on another shard is
// untouched.
func TestConnectHookFailover(t *testing.T) {
	if !testenv.OnCluster() {
		t.Skip("needs the test cluster (SECKILL_TEST_REDIS_CLUSTER_ADDRS)")
	}
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	cc := rdb.(*redis.ClusterClient)
	// Two campaigns on different shards.
	var here, there int64 = 1, 0
	for v := int64(2); there == 0; v++ {
		if shardOf(t, cc, admission.CampaignKey(a, v))[0] != shardOf(t, cc, admission.CampaignKey(a, here))[0] {
			there = v
		}
	}
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(here, 10)})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(there, 10)})

	live := func(context.Context) ([]int64, error) { return []int64{here, there}, nil }
	hook := admission.NewConnectHook(admission.Options{Prefix: admission.Prefix(a), LiveCampaigns: live})
	connect := func(addr string) {
		c := redis.NewClient(&redis.Options{Addr: addr, OnConnect: hook.For(addr)})
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("connect to %s: %v", addr, err)
		}
	}
	state := func(v int64) string { return rdb.HGet(ctx, admission.CampaignKey(a, v), "state").Val() }
	replica := promoteReplica(t, cc, admission.CampaignKey(a, here), func(replica string) {
		connect(replica) // known as a replica: nothing to stop
		if state(here) != "" || state(there) != "" {
			t.Fatalf("states after connecting to a replica: %q %q", state(here), state(there))
		}
	})

	connect(replica) // the same address, another server now
	if got := state(here); got != "stale" {
		t.Errorf("campaign on the promoted replica: state %q, want stale", got)
	}
	if got := state(there); got != "" {
		t.Errorf("campaign on another shard: state %q, want none", got)
	}
	connect(replica) // seen already: nothing more
	if _, _, err := a.Admit(ctx, here, 5, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
		t.Errorf("admit on the stopped campaign: %v, want ErrRebuildNeeded", err)
	}
	if o, _, err := a.Admit(ctx, there, 5, seckill.Ticket{}); err != nil || o != seckill.OutcomeAccepted {
		t.Errorf("admit on the other shard: %s %v, want ACCEPTED", o, err)
	}
}

// TestWarmDuringRebuild: a new campaign is live in Postgres a moment before
// Warm installs it, and the reconciler restores every live campaign Redis
// lacks; the two can race on a campaign of 3 shards (buyers accepted
// twice): the rebuild takes the lock of a campaign Redis lacks, Warm then
// installs shard 0 and it admits, and the rebuild, which read no pending
// admission, replaces it and forgets them. A rebuild under way now
// stops Warm from installing anything; the rebuild installs the campaign.
func TestWarmDuringRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, shards := range []int{1, 3} {
		a, _ := newAdmitter(t, admission.Options{CampaignShards: func(context.Context, []int64) (map[int64]int, error) {
			return map[int64]int{21: shards}, nil
		}})
		c := liveCampaign(21, 30)
		c.Shards = shards
		lock, ok, err := a.BeginRebuild(ctx, 21)
		if err != nil || !ok {
			t.Fatalf("%d shards: BeginRebuild of a campaign Redis lacks = %v, %v", shards, ok, err)
		}
		if installed, err := a.Warm(ctx, seckill.WarmState{Campaign: c}); err != nil || installed {
			t.Fatalf("%d shards: Warm during a rebuild = %v, %v; want nothing installed", shards, installed, err)
		}
		for u := int64(1); u <= 6; u++ {
			if o, _, err := a.Admit(ctx, 21, u, seckill.Ticket{}); !errors.Is(err, seckill.ErrRebuildNeeded) {
				t.Fatalf("%d shards: user %d admitted during the rebuild: %s %v", shards, u, o, err)
			}
		}
		c.Epoch = 1
		if ok, err := a.FinishRebuild(ctx, lock.Token, seckill.WarmState{Campaign: c}); err != nil || !ok {
			t.Fatalf("%d shards: FinishRebuild = %v, %v", shards, ok, err)
		}
		mustAccept(t, a, 21, 1, seckill.ShardOrderID(21, seckill.ShardOf(1, shards), 1<<22|1), "after the rebuild")
	}
}
