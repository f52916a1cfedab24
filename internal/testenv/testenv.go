// Package testenv tells tests where the real services they run against are.
// It is imported by tests only.
package testenv

import (
	"context"
	"net/url"
	"os"
	"strconv"
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

// RedisURL returns SECKILL_TEST_REDIS_URL (default the local server) with its
// database set to db.
func RedisURL(tb testing.TB, db int) string {
	tb.Helper()
	base := os.Getenv("SECKILL_TEST_REDIS_URL")
	if base == "" {
		base = "redis://127.0.0.1:6379/0"
	}
	u, err := url.Parse(base)
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
