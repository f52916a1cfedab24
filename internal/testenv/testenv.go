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

// FlushedRedisURL returns RedisURL(tb, db) after emptying that database, for
// a package whose tests own it and start each run from nothing.
func FlushedRedisURL(tb testing.TB, db int) string {
	tb.Helper()
	raw := RedisURL(tb, db)
	opt, err := redis.ParseURL(raw)
	if err != nil {
		tb.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		tb.Fatalf("flush redis DB %d: %v", db, err)
	}
	return raw
}

var prefixSeq atomic.Int64

// MustOpenRedis connects to the test Redis (SECKILL_TEST_REDIS_URL, default
// redis://127.0.0.1:6379/0) and returns a key prefix unique to tb. Every key
// under the prefix is deleted and the client closed when tb ends. Tests
// never flush the database: other packages share it.
func MustOpenRedis(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		tb.Fatalf("parse SECKILL_TEST_REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		tb.Fatalf("ping redis at %s: %v", opt.Addr, err)
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
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 500 {
				rdb.Unlink(ctx, batch...)
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			rdb.Unlink(ctx, batch...)
		}
		if err := iter.Err(); err != nil {
			tb.Errorf("clean up redis keys %s*: %v", prefix, err)
		}
	})
	return rdb, prefix
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
