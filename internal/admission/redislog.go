package admission

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// RedisLog takes go-redis's own log lines (a pool that cannot dial, a
// cluster client that cannot reload its slots) into a slog.Logger, at WARN
// with component=go-redis, and lets through at most one line of each kind
// (go-redis's format string) every interval. While a Redis server is away
// every connection attempt of every pool logs a line, hundreds a second,
// as unstructured text on stderr that would bury the service's own lines
// (which say the same once: "persist orders failing; retrying"). The
// lines of a kind that were held back are counted in the next line of that
// kind, as repeated. Install it with redis.SetLogger (process-wide).
type RedisLog struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu    sync.Mutex
	kinds map[string]*redisLogKind
}

type redisLogKind struct {
	last time.Time // when a line of this kind was last logged
	held int       // lines held back since
}

// maxRedisLogKinds bounds the kinds RedisLog tells apart; go-redis has a
// few dozen format strings, and any beyond the first 63 share the last kind.
const maxRedisLogKinds = 64

// NewRedisLog returns a RedisLog that logs to l, one line of each kind per
// interval at most.
func NewRedisLog(l *slog.Logger, interval time.Duration) *RedisLog {
	return &RedisLog{log: l.With("component", "go-redis"), interval: interval, now: time.Now, kinds: map[string]*redisLogKind{}}
}

// Printf implements go-redis's logger (internal.Logging).
func (r *RedisLog) Printf(ctx context.Context, format string, v ...any) {
	now := r.now()
	r.mu.Lock()
	k := r.kinds[format]
	if k == nil {
		key := format
		if len(r.kinds) >= maxRedisLogKinds-1 {
			key = ""
		}
		if k = r.kinds[key]; k == nil {
			k = &redisLogKind{}
			r.kinds[key] = k
		}
	}
	if !k.last.IsZero() && now.Sub(k.last) < r.interval {
		k.held++
		r.mu.Unlock()
		return
	}
	held := k.held
	k.last, k.held = now, 0
	r.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	if held > 0 {
		r.log.WarnContext(ctx, msg, "repeated", held)
		return
	}
	r.log.WarnContext(ctx, msg)
}
