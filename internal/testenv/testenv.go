// Package testenv tells tests where the real services they run against are,
// and opens them. It is imported by tests only.
package testenv

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis databases owned by the test packages that run Asynq: its queue keys
// are global within a database, so two such packages never share one. Tests
// that only use key prefixes stay on the database of SECKILL_TEST_REDIS_URL.
const (
	RedisDBApp       = 3 // internal/app: the purchase path end to end
	RedisDBDashboard = 5 // internal/app: the dashboard
	RedisDBBench     = 6 // internal/bench
	RedisDBReadme    = 7 // cmd/seckill: the README's examples against `seckill serve`
)

// OwnedDB returns the database a package's tests own, db, moved by
// SECKILL_TEST_REDIS_DB_SHIFT when it is set: make test runs a second suite
// of internal/app's tests beside the first (test-app-slow), each suite on
// databases of its own. The shifted databases (9 and 11 for a shift of 6)
// must exist: Redis has 16 by default.
func OwnedDB(db int) int {
	shift, _ := strconv.Atoi(os.Getenv("SECKILL_TEST_REDIS_DB_SHIFT"))
	return db + shift
}

// ClusterAddrs returns the seed nodes of SECKILL_TEST_REDIS_CLUSTER_ADDRS
// (comma-separated host:port), or nil. When it is set, the Redis tests run
// against that Redis Cluster instead of the single node (the same suites on
// both topologies: `make test` runs them twice). A cluster has only
// database 0: the database numbers below then select nothing, and the
// packages that run Asynq must not share the cluster at once.
func ClusterAddrs() []string {
	var out []string
	for _, a := range strings.Split(os.Getenv("SECKILL_TEST_REDIS_CLUSTER_ADDRS"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// OnCluster reports whether the tests run against a Redis Cluster.
func OnCluster() bool { return len(ClusterAddrs()) > 0 }

// redisURL is SECKILL_TEST_REDIS_URL, or the local server.
func redisURL() string {
	return cmp.Or(os.Getenv("SECKILL_TEST_REDIS_URL"), "redis://127.0.0.1:6379/0")
}

// RedisURL returns SECKILL_TEST_REDIS_URL (default the local server) with its
// database set to db.
func RedisURL(tb testing.TB, db int) string {
	tb.Helper()
	u, err := url.Parse(redisURL())
	if err != nil {
		tb.Fatalf("SECKILL_TEST_REDIS_URL: %v", err)
	}
	u.Path = "/" + strconv.Itoa(db)
	return u.String()
}

// FlushedRedisURL returns RedisURL(tb, db) after emptying that database (on
// the cluster: every master), for a package whose tests own it and start
// each run from nothing.
func FlushedRedisURL(tb testing.TB, db int) string {
	tb.Helper()
	raw := RedisURL(tb, db)
	var rdb redis.UniversalClient
	if OnCluster() {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: ClusterAddrs()})
	} else {
		opt, err := redis.ParseURL(raw)
		if err != nil {
			tb.Fatal(err)
		}
		rdb = redis.NewClient(opt)
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := FlushRedis(ctx, rdb); err != nil {
		tb.Fatalf("flush redis DB %d: %v", db, err)
	}
	return raw
}

// FlushRedis empties rdb's database: on a cluster, that of every master.
func FlushRedis(ctx context.Context, rdb redis.UniversalClient) error {
	return ForEachServer(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		return c.FlushDB(ctx).Err()
	})
}

// ForEachServer runs f on every server holding rdb's keys: each master of
// a cluster, or the one server.
func ForEachServer(ctx context.Context, rdb redis.UniversalClient, f func(ctx context.Context, c *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, f)
	case *redis.Client:
		return f(ctx, c)
	}
	return fmt.Errorf("testenv: unexpected redis client %T", rdb)
}

var prefixSeq atomic.Int64

// MustOpenRedis connects to the test Redis (SECKILL_TEST_REDIS_URL, default
// redis://127.0.0.1:6379/0, or the cluster of ClusterAddrs) and returns a
// key prefix unique to tb. Every key under the prefix is deleted and the
// client closed when tb ends. Tests never flush the database: other
// packages share it.
func MustOpenRedis(tb testing.TB) (redis.UniversalClient, string) {
	tb.Helper()
	rdb, where := openRedis(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		tb.Fatalf("ping redis at %s: %v", where, err)
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, tb.Name())
	prefix := fmt.Sprintf("test:%s:%d:%d:", name, time.Now().UnixNano(), prefixSeq.Add(1))
	tb.Cleanup(func() {
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := ForEachServer(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
			iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				// One key a command: on a cluster the keys of one
				// UNLINK must share a slot.
				c.Unlink(ctx, iter.Val())
			}
			return iter.Err()
		})
		if err != nil {
			tb.Errorf("clean up redis keys %s*: %v", prefix, err)
		}
	})
	return rdb, prefix
}

// NewRedis returns a new client of the test Redis (closed when tb ends)
// whose connections to each server run onConnect(addr) first, as the app
// wires admission.ConnectHook: addr is the node's on a cluster, "" on a
// single node.
func NewRedis(tb testing.TB, onConnect func(addr string) func(context.Context, *redis.Conn) error) redis.UniversalClient {
	tb.Helper()
	var rdb redis.UniversalClient
	if addrs := ClusterAddrs(); len(addrs) > 0 {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, NewClient: func(opt *redis.Options) *redis.Client {
			opt.OnConnect = onConnect(opt.Addr)
			return redis.NewClient(opt)
		}})
	} else {
		opt, err := redis.ParseURL(redisURL())
		if err != nil {
			tb.Fatalf("parse SECKILL_TEST_REDIS_URL: %v", err)
		}
		opt.OnConnect = onConnect("")
		rdb = redis.NewClient(opt)
	}
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// openRedis returns a client of the test Redis and where it is.
func openRedis(tb testing.TB) (redis.UniversalClient, string) {
	tb.Helper()
	if addrs := ClusterAddrs(); len(addrs) > 0 {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}), "cluster " + strings.Join(addrs, ",")
	}
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		tb.Fatalf("parse SECKILL_TEST_REDIS_URL: %v", err)
	}
	return redis.NewClient(opt), opt.Addr
}

// WaitFor polls cond every millisecond until it holds, failing tb if it
// does not within 5 seconds.
func WaitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			tb.Fatal("condition not reached in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
