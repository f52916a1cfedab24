package admission

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
)

var testSeq atomic.Int64

// MustOpenRedis connects to the test Redis (SECKILL_TEST_REDIS_URL, default
// redis://127.0.0.1:6379/0) and returns a key prefix unique to tb. Every key
// under the prefix is deleted and the client closed when tb ends. Tests
// never flush the database: other packages share it.
func MustOpenRedis(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	url := os.Getenv("SECKILL_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("parse SECKILL_TEST_REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		tb.Fatalf("ping redis at %s: %v", url, err)
	}
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, tb.Name())
	prefix := fmt.Sprintf("test:%s:%d:%d:", name, time.Now().UnixNano(), testSeq.Add(1))
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

// SoldOutMark returns the outcome an Admitter would answer locally for a
// campaign right now.
func SoldOutMark(a *Admitter, voucherID int64) (seckill.Outcome, bool) {
	st := a.local.get(voucherID)
	if st == nil {
		return "", false
	}
	return a.local.marked(st, st.gen.Load())
}

// CampaignKey returns the key of a campaign's hash.
func CampaignKey(a *Admitter, voucherID int64) string { return a.keys.campaign(voucherID) }

// BuyersKey returns the key of a campaign's buyers set.
func BuyersKey(a *Admitter, voucherID int64) string { return a.keys.buyers(voucherID) }

// PendingAtKey returns the key of a campaign's pending_at sorted set.
func PendingAtKey(a *Admitter, voucherID int64) string { return a.keys.pendingAt(voucherID) }

// ListenerDone is closed when the stock_returned listener has stopped.
func ListenerDone(a *Admitter) <-chan struct{} { return a.subDone }

// Unpipelined makes every admission of a go to Redis alone, at once, as
// before pipelining (benchmarks compare the two).
func Unpipelined(a *Admitter) {
	a.admits = newPipeline(a.rdb, admitScript, 1<<20, 1, 1)
}

// Prefix returns the key prefix of an Admitter.
func Prefix(a *Admitter) string { return a.keys.prefix }
