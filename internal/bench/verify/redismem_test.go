package verify

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"seckill/internal/bench/report"
	"seckill/internal/testenv"
)

func TestPattern(t *testing.T) {
	for key, want := range map[string]string{
		"seckill:{v42}:stock":                                    "seckill:{v*}:stock",
		"seckill:{v42}:buyers":                                   "seckill:{v*}:buyers",
		"asynq:{orders}:t:expire:184467440737":                   "asynq:{orders}:t:expire:*",
		"asynq:{orders}:t:5f0e6a3c-1b2c-4d5e-8f90-a1b2c3d4e5f6":  "asynq:{orders}:t:*",
		"asynq:{orders}:scheduled":                               "asynq:{orders}:scheduled",
		"asynq:servers:{host:1234:c0ffee00-aaaa-bbbb-cccc-dddd}": "asynq:servers:{host:*:*}",
		"bench:ceiling:deadbeef:seckill:{v1}:stock":              "bench:ceiling:deadbeef:seckill:{v*}:stock",
	} {
		if got := Pattern(key); got != want {
			t.Errorf("Pattern(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestGrowth(t *testing.T) {
	before := Census{
		"asynq:{orders}:scheduled": {Type: "zset", Keys: 1, Bytes: 1000},
		"seckill:{v*}:stock":       {Type: "string", Keys: 1, Bytes: 56},
		"gone:*":                   {Type: "string", Keys: 2, Bytes: 100},
	}
	after := Census{
		"asynq:{orders}:scheduled":  {Type: "zset", Keys: 1, Bytes: 1000 + 100*100, Sampled: 1},
		"asynq:{orders}:t:expire:*": {Type: "hash", Keys: 100, Bytes: 33_600, Sampled: 50},
		"seckill:{v*}:stock":        {Type: "string", Keys: 1, Bytes: 56, Sampled: 1},
	}
	got := Growth(before, after, 100)
	want := []report.KeyGrowth{
		{Pattern: "asynq:{orders}:t:expire:*", Type: "hash", KeysAfter: 100, BytesAfter: 33_600, PerOrderBytes: 336, Sampled: true},
		{Pattern: "asynq:{orders}:scheduled", Type: "zset", KeysBefore: 1, KeysAfter: 1, BytesBefore: 1000, BytesAfter: 11_000, PerOrderBytes: 100},
		{Pattern: "gone:*", Type: "string", KeysBefore: 2, BytesBefore: 100, PerOrderBytes: -1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("growth (-want +got):\n%s", diff)
	}
}

// TestCensus counts a private Redis's keys by pattern and measures them,
// and reads its used_memory.
func TestCensus(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server")
	}
	srv := testenv.StartRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	used0, shared, err := UsedMemory(ctx, rdb)
	if err != nil || used0 <= 0 || shared {
		t.Fatalf("UsedMemory = %d, %v, %v", used0, shared, err)
	}
	pipe := rdb.Pipeline()
	for i := range 2000 {
		pipe.HSet(ctx, fmt.Sprintf("asynq:{orders}:t:expire:%d", 1_000_000+i), "type", "order:expire", "payload", strings.Repeat("x", 40))
		pipe.ZAdd(ctx, "asynq:{orders}:scheduled", redis.Z{Score: float64(i), Member: fmt.Sprintf("expire:%d", 1_000_000+i)})
	}
	pipe.Set(ctx, "seckill:{v7}:stock", 100, 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := TakeCensus(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	tasks, set := c["asynq:{orders}:t:expire:*"], c["asynq:{orders}:scheduled"]
	if tasks == nil || tasks.Keys != 2000 || tasks.Type != "hash" || tasks.Sampled != censusSample || tasks.Bytes < 2000*50 {
		t.Errorf("tasks: %+v", tasks)
	}
	if set == nil || set.Keys != 1 || set.Type != "zset" || set.Bytes < 2000*10 {
		t.Errorf("scheduled set: %+v", set)
	}
	if s := c["seckill:{v*}:stock"]; s == nil || s.Keys != 1 {
		t.Errorf("stock: %+v", s)
	}
	used1, _, err := UsedMemory(ctx, rdb)
	if err != nil || used1 <= used0 {
		t.Errorf("used_memory %d after %d", used1, used0)
	}
	// Another database's keys make used_memory shared.
	other := redis.NewClient(&redis.Options{Addr: srv.Addr(), DB: 3})
	t.Cleanup(func() { other.Close() })
	if err := other.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, shared, err := UsedMemory(ctx, rdb); err != nil || !shared {
		t.Errorf("with another database's key: shared %v, %v", shared, err)
	}
}
