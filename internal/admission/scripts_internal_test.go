package admission

import (
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

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
