package lua_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
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
			if !argvLine.MatchString(src) && !strings.Contains(src, "\n-- ARGV: none\n") {
				t.Error("header lists no ARGV[i] -> (nor says ARGV: none)")
			}
			if !strings.Contains(src, "-- Returns:") {
				t.Error("header has no Returns:")
			}
		})
	}
}

// TestPreludeUse: a script that calls a helper of prelude.lua has the
// prelude put in (its header says "-- Uses: prelude.lua"), and one that
// asks for it has it; otherwise Redis would compile the script and fail
// only when the call is reached.
func TestPreludeUse(t *testing.T) {
	b, err := os.ReadFile("prelude.lua")
	if err != nil {
		t.Fatal(err)
	}
	prelude := string(b)
	var helpers []string
	for _, m := range localFunc.FindAllStringSubmatch(prelude, -1) {
		helpers = append(helpers, m[1])
	}
	if len(helpers) == 0 {
		t.Fatal("no helpers found in prelude.lua")
	}
	for name, src := range lua.All {
		t.Run(name, func(t *testing.T) {
			has := strings.Contains(src, prelude)
			if asks := usesPrelude.MatchString(src); asks != has {
				t.Fatalf("asks for the prelude: %v; has it: %v", asks, has)
			}
			if has {
				return
			}
			code := comment.ReplaceAllString(src, "")
			own := map[string]bool{}
			for _, m := range localFunc.FindAllStringSubmatch(code, -1) {
				own[m[1]] = true
			}
			for _, h := range helpers {
				if !own[h] && regexp.MustCompile(`\b`+h+`\(`).MatchString(code) {
					t.Errorf("calls the prelude's %s without the prelude (add \"-- Uses: prelude.lua\" to its header)", h)
				}
			}
		})
	}
}

var (
	localFunc   = regexp.MustCompile(`(?m)^local function (\w+)\(`)
	comment     = regexp.MustCompile(`--[^\n]*`)
	usesPrelude = regexp.MustCompile(`(?m)^-- Uses: prelude\.lua\b`)
)

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

// TestPreludeArguments runs the scripts that share the prelude's argument
// checks with one malformed argument at a time: each is refused naming the
// script and the argument, and writes nothing.
func TestPreludeArguments(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := make([]string, 6)
	for i := range keys {
		keys[i] = prefix + "{v1}:" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name, src string
		args      []any
		want      string
	}{
		{"warm", lua.Warm, []any{"x", "0", "0", "1", "0"}, "ERR warm: ARGV[1] stock must be an integer >= 0"},
		{"warm", lua.Warm, []any{"1", "1024", "0", "1", "0"}, "ERR warm: ARGV[2] epoch must be an integer in [0, 1024)"},
		{"warm", lua.Warm, []any{"1", "0", "-1", "1", "0"}, "ERR warm: ARGV[3] begin_ms must be an integer >= 0"},
		{"warm", lua.Warm, []any{"1", "0", "5", "5", "0"}, "ERR warm: ARGV[4] end_ms must be an integer > begin_ms"},
		{"warm", lua.Warm, []any{"1", "0", "0", "1", "2"}, "ERR warm: ARGV[5] paused must be 0 or 1"},
		{"rebuild", lua.Rebuild, []any{"tok", "1e3", "0", "0", "1", "0"}, "ERR rebuild: ARGV[2] stock must be an integer >= 0"},
		{"rebuild", lua.Rebuild, []any{"tok", "1", "-1", "0", "1", "0"}, "ERR rebuild: ARGV[3] epoch must be an integer in [0, 1024)"},
		{"rebuild", lua.Rebuild, []any{"tok", "1", "0", "", "1", "0"}, "ERR rebuild: ARGV[4] begin_ms must be an integer >= 0"},
		{"rebuild", lua.Rebuild, []any{"tok", "1", "0", "9", "2", "0"}, "ERR rebuild: ARGV[5] end_ms must be an integer > begin_ms"},
		{"rebuild", lua.Rebuild, []any{"tok", "1", "0", "0", "1"}, "ERR rebuild: ARGV[6] paused must be 0 or 1"},
		{"update", lua.Update, []any{"1.5", "2", "0"}, "ERR update: ARGV[1] begin_ms must be an integer >= 0"},
		{"update", lua.Update, []any{"0", "12345678901234567", "0"}, "ERR update: ARGV[2] end_ms must be an integer > begin_ms"},
		{"update", lua.Update, []any{"0", "1", "yes"}, "ERR update: ARGV[3] paused must be 0 or 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := redis.NewScript(tc.src).Run(ctx, rdb, keys, tc.args...).Err()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if n := rdb.Exists(ctx, keys...).Val(); n != 0 {
				t.Fatalf("%d keys written", n)
			}
		})
	}
}

// TestRebuildAbortArguments: rebuild_abort.lua's optional "recount" needs
// the campaign's key; anything else is refused before a write, the lock
// kept.
func TestRebuildAbortArguments(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lock, campaign := prefix+"{v1}:rebuild", prefix+"{v1}:campaign"
	if err := rdb.Set(ctx, lock, "tok", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, campaign, "stock", "1", "recount", "1").Err(); err != nil {
		t.Fatal(err)
	}
	const want = `ERR rebuild_abort: ARGV[2] must be "recount", with KEYS[2], or absent`
	for _, tc := range []struct {
		keys []string
		args []any
	}{
		{[]string{lock, campaign}, []any{"tok", "yes"}},
		{[]string{lock}, []any{"tok", "recount"}},
	} {
		if err := redis.NewScript(lua.RebuildAbort).Run(ctx, rdb, tc.keys, tc.args...).Err(); err == nil || err.Error() != want {
			t.Errorf("%v %v: error %v, want %q", tc.keys, tc.args, err, want)
		}
	}
	if rdb.Exists(ctx, lock).Val() != 1 || rdb.HExists(ctx, campaign, "recount").Val() != true {
		t.Fatal("a refused abort released the lock or took the mark")
	}
	// Not the holder's token: nothing changes.
	if n, err := redis.NewScript(lua.RebuildAbort).Run(ctx, rdb, []string{lock, campaign}, "other", "recount").Int(); err != nil || n != 0 {
		t.Fatalf("another token's abort: %d, %v; want 0", n, err)
	}
	if !rdb.HExists(ctx, campaign, "recount").Val() {
		t.Fatal("another token's abort took the mark")
	}
	if n, err := redis.NewScript(lua.RebuildAbort).Run(ctx, rdb, []string{lock, campaign}, "tok", "recount").Int(); err != nil || n != 1 {
		t.Fatalf("the holder's abort: %d, %v; want 1", n, err)
	}
	if rdb.Exists(ctx, lock).Val() != 0 || rdb.HExists(ctx, campaign, "recount").Val() {
		t.Fatal("the holder's abort kept the lock or the mark")
	}
}

// TestLoginArguments: login.lua refuses a malformed call before any
// write; "take" is refused while the pair's failure mark exists (for the
// mark's time to live) and takes nothing; "give" hands the attempt back
// and deletes the mark.
func TestLoginArguments(t *testing.T) {
	rdb, prefix := testenv.MustOpenRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pair, addr, mark := prefix+"{a1}:user", prefix+"{a1}:address", prefix+"{a1}:failed"
	script := redis.NewScript(lua.Login)
	for _, tc := range []struct {
		keys []string
		args []any
	}{
		{[]string{pair, addr}, []any{"steal", "0", "1000", "5", "1000", "5"}},
		{[]string{pair, addr}, []any{"take", "2", "1000", "5", "1000", "5"}},
		{[]string{pair, addr}, []any{"take", "0", "1000", "5"}},
		{[]string{pair, addr, mark}, []any{"take", "0", "1000", "5", "1000", "5"}},
		{[]string{mark}, []any{"take", "1"}},
		{[]string{pair, addr}, []any{"take", "0", "0", "5", "1000", "5"}},
		{[]string{pair, addr}, []any{"take", "0", "1000", "05", "1000", "5"}},
		{[]string{pair, addr}, []any{"take", "0", "1000", "1000001", "1000", "5"}},
	} {
		if err := script.Run(ctx, rdb, tc.keys, tc.args...).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR login: ") {
			t.Errorf("%v: error %v, want ERR login: …", tc.args, err)
		}
	}
	if n := rdb.Exists(ctx, pair, addr, mark).Val(); n != 0 {
		t.Fatalf("%d keys written by refused calls", n)
	}

	// run runs mode on keys, the last a mark, each other a budget of 5
	// attempts a minute.
	run := func(mode string, keys ...string) int64 {
		t.Helper()
		args := []any{mode, "1"}
		for range len(keys) - 1 {
			args = append(args, "12000", "5")
		}
		n, err := script.Run(ctx, rdb, keys, args...).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := run("take", pair, addr, mark); n != 0 {
		t.Fatalf("take without a mark: %d", n)
	}
	if err := rdb.Set(ctx, mark, "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	before := rdb.Get(ctx, pair).Val()
	if n := run("take", pair, addr, mark); n <= 0 || n > time.Minute.Milliseconds() {
		t.Fatalf("take with a mark: %d, want its time to live", n)
	}
	if after := rdb.Get(ctx, pair).Val(); after != before {
		t.Fatalf("a refused take moved the pair's budget from %s to %s", before, after)
	}
	if n := run("give", pair, mark); n != 0 {
		t.Fatalf("give: %d", n)
	}
	if rdb.Exists(ctx, pair, mark).Val() != 0 {
		t.Fatal("give kept the pair's budget (one attempt, now handed back) or the mark")
	}
	if rdb.Exists(ctx, addr).Val() != 1 {
		t.Fatal("give touched the address's budget")
	}
}
