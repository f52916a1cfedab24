package testenv

import (
	"context"
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
