package verify

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"seckill/internal/bench/report"
)

// BenchDSN returns dsn with the bench's application_name, so that the
// pool sampler can tell the bench's connections from the server's.
func BenchDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set("application_name", BenchApplication)
	u.RawQuery = q.Encode()
	return u.String()
}

// UsedMemory returns Redis's used_memory (INFO memory), and whether the
// instance holds keys in another database than db: then used_memory is
// not the server's alone.
func UsedMemory(ctx context.Context, rdb *redis.Client) (used int64, others bool, err error) {
	info, err := rdb.Info(ctx, "memory", "keyspace").Result()
	if err != nil {
		return 0, false, fmt.Errorf("redis INFO: %w", err)
	}
	db := "db" + strconv.Itoa(rdb.Options().DB)
	sc := bufio.NewScanner(strings.NewReader(info))
	found := false
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		switch {
		case !ok:
		case k == "used_memory":
			used, err = strconv.ParseInt(v, 10, 64)
			found = err == nil
		case strings.HasPrefix(k, "db") && k != db && !strings.HasPrefix(v, "keys=0,"):
			others = true
		}
	}
	if !found {
		return 0, others, fmt.Errorf("redis INFO memory has no used_memory")
	}
	return used, others, nil
}

// KeyGroup is a pattern's keys in a census.
type KeyGroup struct {
	Type    string
	Keys    int64
	Bytes   float64 // MEMORY USAGE of the sampled keys, scaled to Keys
	Sampled int
}

// Census is a Redis database's keys by pattern (Pattern).
type Census map[string]*KeyGroup

// censusSample is how many keys of each pattern MEMORY USAGE measures;
// the rest are counted and assumed alike.
const censusSample = 500

// TakeCensus counts every key of rdb's database by pattern and measures
// the memory (MEMORY USAGE, every element of an aggregate) of up to
// censusSample keys of each.
func TakeCensus(ctx context.Context, rdb *redis.Client) (Census, error) {
	c := Census{}
	samples := map[string][]string{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		p := Pattern(k)
		g := c[p]
		if g == nil {
			g = &KeyGroup{}
			c[p] = g
		}
		g.Keys++
		if len(samples[p]) < censusSample {
			samples[p] = append(samples[p], k)
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("redis SCAN: %w", err)
	}
	for p, keys := range samples {
		pipe := rdb.Pipeline()
		mem := make([]*redis.IntCmd, len(keys))
		types := make([]*redis.StatusCmd, len(keys))
		for i, k := range keys {
			mem[i] = pipe.MemoryUsage(ctx, k, 0)
			types[i] = pipe.Type(ctx, k)
		}
		_, _ = pipe.Exec(ctx) // a key gone since the scan answers nil
		g := c[p]
		var bytes int64
		for i := range keys {
			if n, err := mem[i].Result(); err == nil {
				bytes += n
				g.Sampled++
				g.Type = cmp.Or(g.Type, types[i].Val())
			}
		}
		if g.Sampled > 0 {
			g.Bytes = float64(bytes) / float64(g.Sampled) * float64(g.Keys)
		}
	}
	return c, nil
}

// patternID matches the parts of a key that name one thing among many:
// hexadecimal ids and UUIDs of eight digits or more, and numbers.
var patternID = regexp.MustCompile(`[0-9a-fA-F-]{8,}|[0-9]+`)

// Pattern turns a key into the pattern of its kind: "seckill:{v42}:stock"
// is "seckill:{v*}:stock", "asynq:{orders}:t:expire:123" is
// "asynq:{orders}:t:expire:*".
func Pattern(key string) string {
	return patternID.ReplaceAllStringFunc(key, func(m string) string {
		// A run of hex letters alone is a word of the key's name, not an id.
		if strings.ContainsAny(m, "0123456789") {
			return "*"
		}
		return m
	})
}

// Growth is what grew from before to after, by pattern, largest first:
// the keys and bytes of each pattern that changed, and per awaiting order
// (the orders between the two).
func Growth(before, after Census, awaiting int64) []report.KeyGrowth {
	var out []report.KeyGrowth
	for p, a := range after {
		b := before[p]
		if b == nil {
			b = &KeyGroup{}
		}
		g := report.KeyGrowth{Pattern: p, Type: cmp.Or(a.Type, b.Type), KeysBefore: b.Keys, KeysAfter: a.Keys,
			BytesBefore: int64(b.Bytes), BytesAfter: int64(a.Bytes), Sampled: a.Sampled < int(a.Keys)}
		if g.BytesAfter == g.BytesBefore && g.KeysAfter == g.KeysBefore {
			continue
		}
		if awaiting > 0 {
			g.PerOrderBytes = float64(g.BytesAfter-g.BytesBefore) / float64(awaiting)
		}
		out = append(out, g)
	}
	for p, b := range before {
		if after[p] == nil {
			out = append(out, report.KeyGrowth{Pattern: p, Type: b.Type, KeysBefore: b.Keys, BytesBefore: int64(b.Bytes),
				PerOrderBytes: -b.Bytes / float64(max(awaiting, 1))})
		}
	}
	slices.SortFunc(out, func(x, y report.KeyGrowth) int {
		dx, dy := x.BytesAfter-x.BytesBefore, y.BytesAfter-y.BytesBefore
		return cmp.Or(cmp.Compare(abs(dy), abs(dx)), strings.Compare(x.Pattern, y.Pattern))
	})
	return out
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
