package app

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/testenv"
)

// TestCheckShards: `seckill shards` on a cluster that split its slots
// evenly finds a campaign's 3 shards on its 3 masters; after a reshard
// moves one shard's slot (and its keys) to another shard's master, it
// names the shared master and fails, the server's log warned of nothing
// at creation, and the campaign still sells. On a single Redis it says so
// and passes.
func TestCheckShards(t *testing.T) {
	cluster := testenv.StartCluster(t)
	e := newTestEnv(t, "", onCluster(cluster))
	const shards = 3
	v := e.createShardedCampaign(30, shards, 300)
	ctx := context.Background()

	var out bytes.Buffer
	if err := CheckShards(ctx, e.app.Config, []int64{v}, &out); err != nil {
		t.Fatalf("CheckShards on an even cluster: %v\n%s", err, out.String())
	}
	if want := fmt.Sprintf("campaign %d: 3 shard(s) on 3 of 3 masters: ok", v); !strings.Contains(out.String(), want) {
		t.Errorf("CheckShards printed\n%s\nwant %q", out.String(), want)
	}
	if strings.Contains(e.logs.String(), "share Redis masters") {
		t.Errorf("a warning for an even placement:\n%s", e.logs.String())
	}

	tag1 := admission.ShardTag(v, 1, shards)
	any0 := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
	defer any0.Close()
	slot := int(any0.ClusterKeySlot(ctx, "{"+tag1+"}").Val())
	to, from := cluster.MasterOf("{"+admission.ShardTag(v, 0, shards)+"}"), cluster.MasterOf("{"+tag1+"}")
	reshard(t, cluster, slot, from, to)

	out.Reset()
	err := CheckShards(ctx, e.app.Config, []int64{v}, &out)
	if err == nil || !strings.Contains(err.Error(), "share masters") {
		t.Errorf("CheckShards after the reshard: %v, want an error", err)
	}
	got := out.String()
	if want := fmt.Sprintf("campaign %d: 3 shard(s) on 2 of 3 masters: UNEVEN", v); !strings.Contains(got, want) {
		t.Errorf("CheckShards printed\n%s\nwant %q", got, want)
	}
	if want := fmt.Sprintf("{%s}  slot %-5d  %s", tag1, slot, to.Addr()); !strings.Contains(got, want) {
		t.Errorf("CheckShards printed\n%s\nwant shard 1 as %q", got, want)
	}
	// The campaign sells on: its keys moved with the slot. The process's
	// slot map is stale until a MOVED reply; the admission that gets it
	// is sent again to the new master (before, it was answered
	// UNAVAILABLE, once per process and moved campaign).
	buyer := shardUsers(1, 1, 1, shards)[0]
	if res, err := e.buy(nil, e.token(buyer, false), v); err != nil || res.Outcome != "ACCEPTED" {
		t.Errorf("the first buyer of the moved shard after the reshard: %+v, %v; want ACCEPTED", res, err)
	}

	// On a single Redis every shard is on the one server.
	single := *e.app.Config
	single.RedisClusterAddrs = nil
	single.RedisURL = testenv.RedisURL(t, 0)
	out.Reset()
	if err := CheckShards(ctx, &single, []int64{v}, &out); err != nil || !strings.Contains(out.String(), "not a cluster") {
		t.Errorf("CheckShards on a single Redis: %v\n%s", err, out.String())
	}
}

// reshard moves a slot and its keys from one master to another, as
// redis-cli --cluster reshard does, and waits until every node agrees.
func reshard(t *testing.T, cluster *testenv.RedisCluster, slot int, from, to *testenv.RedisServer) {
	t.Helper()
	ctx := context.Background()
	node := func(addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		return c
	}
	src, dst := node(from.Addr()), node(to.Addr())
	srcID, dstID := src.ClusterMyID(ctx).Val(), dst.ClusterMyID(ctx).Val()
	do := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, c.Options().Addr, err)
		}
	}
	do(dst, "cluster", "setslot", slot, "importing", srcID)
	do(src, "cluster", "setslot", slot, "migrating", dstID)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", "127.0.0.1", to.Port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		do(src, args...)
	}
	do(dst, "cluster", "setslot", slot, "node", dstID)
	do(src, "cluster", "setslot", slot, "node", dstID)
	deadline := time.Now().Add(10 * time.Second)
	for _, addr := range cluster.Addrs() {
		c := node(addr)
		for !servedBy(ctx, c, slot, to.Addr()) {
			if time.Now().After(deadline) {
				t.Fatalf("node %s does not see slot %d on %s", addr, slot, to.Addr())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func servedBy(ctx context.Context, c *redis.Client, slot int, addr string) bool {
	for _, r := range c.ClusterSlots(ctx).Val() {
		if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 {
			return r.Nodes[0].Addr == addr
		}
	}
	return false
}
