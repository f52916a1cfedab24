package admission_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// TestPlacementUneven: a campaign's shards are uneven when they use fewer
// masters than min(shards, masters), or more than ⌈shards/masters⌉ on one.
func TestPlacementUneven(t *testing.T) {
	t.Parallel()
	on := func(masters int, at ...string) admission.Placement {
		p := admission.Placement{Masters: masters}
		for i, m := range at {
			p.Shards = append(p.Shards, admission.ShardPlacement{Shard: i, Master: m})
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    admission.Placement
		want bool
	}{
		{"not a cluster", on(0, "", "", ""), false},
		{"one shard", on(3, "a"), false},
		{"one a master", on(3, "a", "b", "c"), false},
		{"two on one, one idle", on(3, "a", "a", "c"), true},
		{"more shards than masters, spread", on(3, "a", "b", "c", "a"), false},
		{"more shards than masters, one idle", on(3, "a", "a", "c", "c"), true},
		{"more shards than masters, three on one", on(3, "a", "a", "a", "b", "c"), true},
		{"fewer shards than masters", on(6, "a", "b"), false},
		{"fewer shards than masters, together", on(6, "a", "a"), true},
	} {
		if got := tc.p.Uneven(); got != tc.want {
			t.Errorf("%s: Uneven() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPlacementResharded: on a cluster that split its slots evenly, the 3
// shards of a campaign sit on its 3 masters and warming it warns of
// nothing. Once a shard's slot has moved to another shard's master (a
// reshard), Placement says the shards are uneven and where they are, and
// warming a campaign placed so logs a warning; the tags stay what they
// were.
func TestPlacementResharded(t *testing.T) {
	t.Parallel()
	cluster := testenv.StartCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { cc.Close() })
	ctx := context.Background()
	var logs testenv.LogBuffer
	a := admission.New(cc, admission.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := a.Load(ctx); err != nil {
		t.Fatal(err)
	}
	const even, moved, shards = 601, 602, 3
	mustWarm(t, a, seckill.WarmState{Campaign: shardedCampaign(even, 30, shards)})
	if strings.Contains(logs.String(), "share Redis masters") {
		t.Errorf("warning for an even placement:\n%s", logs.String())
	}
	ps, err := a.Placement(ctx, []int64{even})
	if err != nil {
		t.Fatal(err)
	}
	if p := ps[0]; len(p.Shards) != shards || p.Masters != 3 || p.Used() != 3 || p.Uneven() {
		t.Fatalf("placement on an even cluster: %s (%d masters, %d used), want 3 shards on 3", p, p.Masters, p.Used())
	}
	for _, s := range ps[0].Shards {
		if want := shardOf(t, cc, admission.ShardCampaignKey(a, even, s.Shard, shards))[0]; s.Master != want {
			t.Errorf("shard %d on %s, the cluster says %s", s.Shard, s.Master, want)
		}
	}

	// Reshard: shard 1's slot of campaign `moved` goes to shard 0's master.
	tag1 := admission.ShardTag(moved, 1, shards)
	slot := int(admission.KeySlot("{" + tag1 + "}"))
	to := shardOf(t, cc, admission.ShardCampaignKey(a, moved, 0, shards))[0]
	from := shardOf(t, cc, admission.ShardCampaignKey(a, moved, 1, shards))[0]
	if to == from {
		t.Fatalf("shards 0 and 1 of %d on one master before the reshard", moved)
	}
	moveSlot(t, cluster, slot, from, to)

	mustWarm(t, a, seckill.WarmState{Campaign: shardedCampaign(moved, 30, shards)})
	if got := logs.String(); !strings.Contains(got, "share Redis masters") || !strings.Contains(got, "voucher_id=602") {
		t.Errorf("no warning for shards that share a master:\n%s", got)
	}
	ps, err = a.Placement(ctx, []int64{moved})
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	if !p.Uneven() || p.Used() != 2 || p.Shards[1].Master != to || p.Shards[1].Tag != tag1 || p.Shards[1].Slot != slot {
		t.Errorf("placement after the reshard: %s (%d used), want shard 1 {%s} in slot %d on %s with shard 0", p, p.Used(), tag1, slot, to)
	}
	// The campaign sells as before.
	if o, _ := mustAdmit(t, a, moved, usersOn(1, 1, 1, shards)[0]); o != seckill.OutcomeAccepted {
		t.Errorf("a buyer of the moved shard: %s", o)
	}
}

// moveSlot moves an empty slot from one master to another (the addresses
// CLUSTER SLOTS gives) as redis-cli --cluster reshard would, and waits
// until every node agrees.
func moveSlot(t *testing.T, cluster *testenv.RedisCluster, slot int, from, to string) {
	t.Helper()
	ctx := context.Background()
	node := func(addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		return c
	}
	src, dst := node(from), node(to)
	srcID, dstID := src.ClusterMyID(ctx).Val(), dst.ClusterMyID(ctx).Val()
	for _, step := range []struct {
		c    *redis.Client
		args []any
	}{
		{dst, []any{"cluster", "setslot", slot, "importing", srcID}},
		{src, []any{"cluster", "setslot", slot, "migrating", dstID}},
		{dst, []any{"cluster", "setslot", slot, "node", dstID}},
		{src, []any{"cluster", "setslot", slot, "node", dstID}},
	} {
		if err := step.c.Do(ctx, step.args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", step.args, step.c.Options().Addr, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, addr := range cluster.Addrs() {
		c := node(addr)
		for {
			ok := false
			for _, r := range c.ClusterSlots(ctx).Val() {
				if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 && r.Nodes[0].Addr == to {
					ok = true
				}
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s does not see slot %d on %s", addr, slot, to)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
