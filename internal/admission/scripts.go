package admission

import "github.com/redis/go-redis/v9"

// Scripts are shared by every Admitter: a Script holds only its source and
// its SHA1. Each file declares the scripts it runs, with newScript.

// allScripts lists every script newScript made, for Load.
var allScripts []*redis.Script

func newScript(src string) *redis.Script {
	s := redis.NewScript(src)
	allScripts = append(allScripts, s)
	return s
}
