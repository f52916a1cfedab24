package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterNodeTimeout is the cluster-node-timeout of StartCluster's nodes: a
// replica takes over from a dead master about this long after it died,
// plus a second or two.
const ClusterNodeTimeout = 2 * time.Second

// RedisCluster is a private Redis Cluster of three masters and three
// replicas (one each), for tests that kill its nodes. Every node is killed
// when the test ends.
type RedisCluster struct {
	tb    testing.TB
	Nodes []*RedisServer
}

// StartCluster starts six private redis-servers in cluster mode, joins them
// into a cluster of three masters with one replica each, and waits until
// every node serves every slot.
func StartCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		tb.Skip("redis-cli is not installed")
	}
	c := &RedisCluster{tb: tb}
	for range 6 {
		c.Nodes = append(c.Nodes, StartRedisServer(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout.Milliseconds())),
			"--appendfsync", "always", "--cluster-require-full-coverage", "no"))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy(30 * time.Second)
	return c
}

// Addrs are the nodes' host:port.
func (c *RedisCluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// WaitHealthy waits until every running node says cluster_state:ok and
// that every slot is served, failing the test after timeout.
func (c *RedisCluster) WaitHealthy(timeout time.Duration) {
	c.tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := true, ""
		for _, n := range c.Nodes {
			if n.cmd == nil {
				continue
			}
			info := clusterInfo(n)
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				ok, last = false, n.Addr()+": "+info
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("the cluster is not healthy after %s: %s", timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clusterInfo(n *RedisServer) string {
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, _ := rdb.ClusterInfo(ctx).Result()
	return info
}

// MasterOf returns the node that serves key now, as the cluster says.
func (c *RedisCluster) MasterOf(key string) *RedisServer {
	c.tb.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	node, err := rdb.MasterForKey(context.Background(), key)
	if err != nil {
		c.tb.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n.Addr() == node.Options().Addr {
			return n
		}
	}
	c.tb.Fatalf("no node at %s", node.Options().Addr)
	return nil
}

// ReplicaOf returns a replica of master, as master says (INFO replication).
func (c *RedisCluster) ReplicaOf(master *RedisServer) *RedisServer {
	c.tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr()})
	defer rdb.Close()
	info, err := rdb.Info(context.Background(), "replication").Result()
	if err != nil {
		c.tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "slave0:") {
			continue
		}
		for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "slave0:")), ",") {
			if port, ok := strings.CutPrefix(kv, "port="); ok {
				for _, n := range c.Nodes {
					if n.Port == port {
						return n
					}
				}
			}
		}
	}
	c.tb.Fatalf("master %s has no replica:\n%s", master.Addr(), info)
	return nil
}

// MigrateSlot moves a slot's keys from one master to another and leaves
// the slot migrating: the source answers ASK to a command whose keys it no
// longer has, and the target TRYAGAIN to one of several keys some of which
// it lacks (it serves only those it holds, and only after ASKING). The
// function it returns ends the migration, as redis-cli --cluster reshard
// does, and waits until every node agrees; it may be called from another
// goroutine, and reports errors without stopping the test.
func (c *RedisCluster) MigrateSlot(slot int, from, to *RedisServer) func() {
	c.tb.Helper()
	ctx := context.Background()
	node := func(addr string) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		c.tb.Cleanup(func() { rdb.Close() })
		return rdb
	}
	src, dst := node(from.Addr()), node(to.Addr())
	srcID, dstID := src.ClusterMyID(ctx).Val(), dst.ClusterMyID(ctx).Val()
	do := func(rdb *redis.Client, args ...any) error {
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("%v on %s: %w", args, rdb.Options().Addr, err)
		}
		return nil
	}
	must := func(err error) {
		c.tb.Helper()
		if err != nil {
			c.tb.Fatal(err)
		}
	}
	must(do(dst, "cluster", "setslot", slot, "importing", srcID))
	must(do(src, "cluster", "setslot", slot, "migrating", dstID))
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		must(err)
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", "127.0.0.1", to.Port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(do(src, args...))
	}
	return func() {
		for _, rdb := range []*redis.Client{dst, src} {
			if err := do(rdb, "cluster", "setslot", slot, "node", dstID); err != nil {
				c.tb.Error(err)
				return
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for _, addr := range c.Addrs() {
			rdb := node(addr)
			for !servedBy(ctx, rdb, slot, to.Addr()) {
				if time.Now().After(deadline) {
					c.tb.Errorf("node %s does not see slot %d on %s", addr, slot, to.Addr())
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// servedBy reports whether the node behind rdb says slot is served by the
// master at addr.
func servedBy(ctx context.Context, rdb *redis.Client, slot int, addr string) bool {
	for _, r := range rdb.ClusterSlots(ctx).Val() {
		if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 {
			return r.Nodes[0].Addr == addr
		}
	}
	return false
}
