package admission

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"seckill/internal/testenv"
	"seckill/lua"
)

// TestLoadHasEveryScript: Load loads every script of package lua, so a
// script added there and used here cannot be missing from Redis when it
// is first pipelined.
func TestLoadHasEveryScript(t *testing.T) {
	var loaded []string
	for _, s := range allScripts {
		loaded = append(loaded, s.Hash())
	}
	for name, src := range lua.All {
		if !slices.Contains(loaded, redis.NewScript(src).Hash()) {
			t.Errorf("%s is not among the scripts Load loads", name)
		}
	}
	if len(allScripts) != len(lua.All) {
		t.Errorf("Load loads %d scripts, package lua has %d", len(allScripts), len(lua.All))
	}
}

// TestRunScripts runs echoScript through runScripts for calls on many hash
// tags (on a cluster, on every master), with the script cached, after every
// node lost it, after one master lost it, alone, and on one connection (as
// durable admission sends its parts). Every call runs exactly once and gets
// its own reply or error reply, and every node that lost the script holds
// it again afterwards: EVAL put it back.
func TestRunScripts(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := testenv.MustOpenRedis(t)
	cc, onCluster := rdb.(*redis.ClusterClient)
	masterOf := func(t *testing.T, key string) *redis.Client {
		t.Helper()
		if !onCluster {
			return rdb.(*redis.Client)
		}
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	callsOf := func(name string, n int) []scriptCall {
		calls := make([]scriptCall, n)
		for i := range calls {
			calls[i] = scriptCall{keys: []string{fmt.Sprintf("%s%s:{v%d}:runs", prefix, name, i)}, args: []any{i + 1}}
		}
		return calls
	}
	check := func(t *testing.T, calls []scriptCall, cmds []*redis.Cmd) {
		t.Helper()
		for i, call := range calls {
			arg := call.args[0].(int)
			res, err := cmds[i].Slice()
			if arg%7 == 0 {
				if err == nil || err.Error() != "ERR seven "+strconv.Itoa(arg) {
					t.Errorf("call %d: error %v, want its own error reply", i, err)
				}
			} else if err != nil || len(res) != 1 || res[0] != int64(2*arg) {
				t.Errorf("call %d: reply %v, %v; want [%d]", i, res, err, 2*arg)
			}
			if runs, err := rdb.Get(ctx, call.keys[0]).Int(); err != nil || runs != 1 {
				t.Errorf("call %d ran %d times (%v), want once", i, runs, err)
			}
			if ok, err := masterOf(t, call.keys[0]).ScriptExists(ctx, echoScript.Hash()).Result(); err != nil || !ok[0] {
				t.Errorf("call %d: its node does not hold the script afterwards (%v)", i, err)
			}
		}
	}
	load := func(t *testing.T) {
		t.Helper()
		if err := echoScript.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	flushAll := func(t *testing.T) {
		t.Helper()
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("cached", func(t *testing.T) {
		load(t)
		calls := callsOf("cached", 60)
		cmds := make([]*redis.Cmd, len(calls))
		runScripts(ctx, rdb, echoScript, calls, cmds)
		check(t, calls, cmds)
	})
	t.Run("lost everywhere", func(t *testing.T) {
		flushAll(t)
		calls := callsOf("lost", 60)
		cmds := make([]*redis.Cmd, len(calls))
		runScripts(ctx, rdb, echoScript, calls, cmds)
		check(t, calls, cmds)
	})
	t.Run("lost on one master", func(t *testing.T) {
		if !onCluster {
			t.Skip("needs the test cluster (SECKILL_TEST_REDIS_CLUSTER_ADDRS)")
		}
		load(t)
		calls := callsOf("one", 60)
		if err := masterOf(t, calls[0].keys[0]).ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		cmds := make([]*redis.Cmd, len(calls))
		runScripts(ctx, rdb, echoScript, calls, cmds)
		check(t, calls, cmds)
	})
	t.Run("alone", func(t *testing.T) {
		for _, arg := range []int{3, 7} {
			flushAll(t)
			calls := callsOf("alone"+strconv.Itoa(arg), 1)
			calls[0].args[0] = arg
			cmd := runScript(ctx, rdb, echoScript, calls[0].keys, calls[0].args...)
			check(t, calls, []*redis.Cmd{cmd})
		}
	})
	t.Run("one connection", func(t *testing.T) {
		flushAll(t)
		// The calls whose keys one master serves, on a connection to it.
		all := callsOf("conn", 60)
		node := masterOf(t, all[0].keys[0])
		var calls []scriptCall
		for _, c := range all {
			if masterOf(t, c.keys[0]).Options().Addr == node.Options().Addr {
				calls = append(calls, c)
			}
		}
		cn := node.Conn()
		defer cn.Close()
		cmds := make([]*redis.Cmd, len(calls))
		runScripts(ctx, cn, echoScript, calls, cmds)
		check(t, calls, cmds)
	})
}
