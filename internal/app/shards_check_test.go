package app

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
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
	cluster.MigrateSlot(slot, from, to)()
}

// TestAdmitDuringSlotMigration: purchases made while their campaign's slot
// moves between masters (the source answers ASK, the target TRYAGAIN, as
// the script's user keys exist nowhere: it ran on neither) are sent again
// until the migration ends, and ACCEPTED, on the durable path (WAIT for a
// replica, the default on a cluster) and without it; before, both answered
// them UNAVAILABLE. Sixty buyers at once share batches, which pause once a
// round, not once a call. Every ACCEPTED order reaches Postgres.
func TestAdmitDuringSlotMigration(t *testing.T) {
	for _, minReplicas := range []string{"1", "0"} {
		t.Run("min replicas "+minReplicas, func(t *testing.T) {
			admitDuringSlotMigration(t, minReplicas)
		})
	}
}

func admitDuringSlotMigration(t *testing.T, minReplicas string) {
	cluster := testenv.StartCluster(t)
	e := newTestEnv(t, "", onCluster(cluster), func(m map[string]string) { m["SECKILL_REDIS_MIN_REPLICAS"] = minReplicas })
	e.worker()
	v := e.createCampaign(100)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		accepted []int64
	)
	buy := func(user int64, when string) {
		t.Helper()
		res, err := e.buy(nil, e.token(user, false), v)
		if err != nil || res.Outcome != "ACCEPTED" {
			t.Errorf("buyer %d %s: %+v, %v; want ACCEPTED", user, when, res, err)
			return
		}
		if res.OrderID == nil {
			t.Errorf("buyer %d: ACCEPTED without an order id", user)
			return
		}
		id, err := strconv.ParseInt(*res.OrderID, 10, 64)
		if err != nil {
			t.Errorf("order id %q: %v", *res.OrderID, err)
			return
		}
		mu.Lock()
		accepted = append(accepted, id)
		mu.Unlock()
	}
	buy(1001, "before the migration")

	tag := "{" + admission.ShardTag(v, 0, 1) + "}"
	any0 := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
	defer any0.Close()
	slot := int(any0.ClusterKeySlot(ctx, tag).Val())
	// Shard 1 of 3 lies on another master of an even cluster.
	from, to := cluster.MasterOf(tag), cluster.MasterOf("{"+admission.ShardTag(v, 1, 3)+"}")
	if from == to {
		t.Fatalf("no other master than %s", from.Addr())
	}
	finish := cluster.MigrateSlot(slot, from, to)
	const migrating = 400 * time.Millisecond
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(migrating)
		finish()
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for u := range int64(60) {
		wg.Go(func() { buy(2001+u, "while the slot migrates") })
	}
	wg.Wait()
	t.Logf("60 buyers answered within %s (the migration ended after %s)", time.Since(start).Round(time.Millisecond), migrating)
	<-done
	buy(3001, "after the migration")
	for _, id := range accepted {
		eventually(t, 20*time.Second, fmt.Sprintf("order %d CREATED", id), func() bool { return e.status(id) == seckill.OrderCreated })
	}
}
