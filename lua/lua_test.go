package lua_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/testenv"
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
	rdb, _ := testenv.MustOpenRedis(t)
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
