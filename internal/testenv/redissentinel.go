package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name under which StartSentinel's sentinels watch
// their master.
const SentinelMaster = "seckill"

// SentinelDownAfter is the down-after-milliseconds of StartSentinel's
// sentinels: they promote the replica of a dead master about this long after
// it died, plus a second or two for their vote.
const SentinelDownAfter = time.Second

// RedisSentinel is a private master with one replica, watched by three
// sentinels (quorum 2), for tests that kill the master. Master and replica
// fsync every write (appendfsync always). Every process is killed when the
// test ends.
type RedisSentinel struct {
	tb        testing.TB
	Servers   []*RedisServer // the master at start, then its replica
	Sentinels []*RedisServer
}

// StartSentinel starts a master, its replica and three sentinels
// (`redis-server --sentinel` from a generated config they may rewrite), and
// waits until every sentinel knows the replica and the two other sentinels,
// so that a failover can be voted at once.
func StartSentinel(tb testing.TB) *RedisSentinel {
	tb.Helper()
	master := StartRedisServer(tb, "--appendfsync", "always")
	replica := StartReplica(tb, master, "--appendfsync", "always")
	s := &RedisSentinel{tb: tb, Servers: []*RedisServer{master, replica}}
	for range 3 {
		n := newRedisServer(tb, "--sentinel")
		n.conf = filepath.Join(n.Dir, "sentinel.conf")
		conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s 2\n"+
			"sentinel down-after-milliseconds %[1]s %[3]d\n"+
			// Also how long before a failover that failed is tried again.
			"sentinel failover-timeout %[1]s %[4]d\n",
			SentinelMaster, master.Port, SentinelDownAfter.Milliseconds(), (3 * SentinelDownAfter).Milliseconds())
		if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
			tb.Fatal(err)
		}
		n.Start()
		tb.Cleanup(n.Kill)
		s.Sentinels = append(s.Sentinels, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready, last := true, ""
		for _, n := range s.Sentinels {
			m := s.masterInfo(n)
			if m["ip"]+":"+m["port"] != master.Addr() || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
				ready, last = false, fmt.Sprintf("sentinel %s: %v", n.Addr(), m)
				break
			}
		}
		if ready {
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the sentinels are not ready after 30s: %s", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addrs are the sentinels' host:port.
func (s *RedisSentinel) Addrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		out[i] = n.Addr()
	}
	return out
}

// masterInfo is what sentinel n says of the master (SENTINEL MASTER); nil
// when it does not answer.
func (s *RedisSentinel) masterInfo(n *RedisServer) map[string]string {
	c := redis.NewSentinelClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	m, _ := c.Master(ctx, SentinelMaster).Result()
	return m
}

// Master returns the server the sentinels name master now.
func (s *RedisSentinel) Master() *RedisServer {
	s.tb.Helper()
	for _, n := range s.Sentinels {
		if n.cmd == nil {
			continue
		}
		m := s.masterInfo(n)
		for _, r := range s.Servers {
			if m["port"] == r.Port {
				return r
			}
		}
	}
	s.tb.Fatal("no sentinel names a master")
	return nil
}

// WaitFailover waits until every sentinel names another master than old,
// and that server says it is master, and returns it. It fails the test after
// timeout.
func (s *RedisSentinel) WaitFailover(old *RedisServer, timeout time.Duration) *RedisServer {
	s.tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var named *RedisServer
		agreed := true
		for _, n := range s.Sentinels {
			if n.cmd == nil {
				continue
			}
			port := s.masterInfo(n)["port"]
			if port == old.Port || (named != nil && port != named.Port) {
				agreed = false
				break
			}
			for _, r := range s.Servers {
				if r.Port == port {
					named = r
				}
			}
		}
		if agreed && named != nil && strings.Contains(replicationInfo(named), "role:master") {
			return named
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("the sentinels did not fail %s over within %s", old.Addr(), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitReplica waits until r replicates the current master with its link up
// (a killed master started again is turned into one by the sentinels),
// failing the test after timeout.
func (s *RedisSentinel) WaitReplica(r *RedisServer, timeout time.Duration) {
	s.tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		info := replicationInfo(r)
		if strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("%s is not a replica with its link up after %s:\n%s", r.Addr(), timeout, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func replicationInfo(r *RedisServer) string {
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, _ := rdb.Info(ctx, "replication").Result()
	return info
}
