package lua_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/lua"
)

var (
	keysLine = regexp.MustCompile(`(?m)^-- KEYS\[\d+\] -> `)
	argvLine = regexp.MustCompile(`(?m)^-- ARGV\[[^\]]+\] -> `)
)

// TestHeaders checks that every script documents its interface the way the
// admission adapter relies on.
func TestHeaders(t *testing.T) {
	for name, src := range lua.All {
		t.Run(name, func(t *testing.T) {
			if strings.TrimSpace(src) == "" {
				t.Fatal("empty script")
			}
			if !strings.HasPrefix(src, "-- ") {
				t.Error("script does not start with a header comment")
			}
			if !keysLine.MatchString(src) {
				t.Error("header lists no KEYS[i] ->")
			}
			if !argvLine.MatchString(src) {
				t.Error("header lists no ARGV[i] ->")
			}
			if !strings.Contains(src, "-- Returns:") {
				t.Error("header has no Returns:")
			}
		})
	}
}

// TestCompile loads every script into Redis, which compiles it.
func TestCompile(t *testing.T) {
	url := os.Getenv("SECKILL_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("parse SECKILL_TEST_REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, src := range lua.All {
		t.Run(name, func(t *testing.T) {
			if err := redis.NewScript(src).Load(ctx, rdb).Err(); err != nil {
				t.Fatalf("SCRIPT LOAD: %v", err)
			}
		})
	}
}
