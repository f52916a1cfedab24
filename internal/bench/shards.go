package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"seckill/internal/bench/report"
)

// --shards 1,3: the same load against a campaign of each number of stock
// shards, one after the other, each measured on every Redis master: the
// admission scripts each ran (INFO commandstats: EVALSHA and EVAL calls)
// and its CPU time (INFO cpu), so that the report shows how a campaign's
// admissions spread over a cluster's masters and what the busiest one
// spent on each.

// masterStat is one master's counters at one moment.
type masterStat struct {
	scripts int64   // evalsha and eval calls so far
	cpuS    float64 // used_cpu_user + used_cpu_sys
}

// masters reads every master's counters: the cluster's (nodes) or the
// single Redis at redisURL.
func masters(ctx context.Context, nodes []string, redisURL string) (map[string]masterStat, error) {
	out := map[string]masterStat{}
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return err
		}
		st := parseMasterInfo(info)
		mu.Lock()
		out[c.Options().Addr] = st
		mu.Unlock()
		return nil
	}
	if len(nodes) > 0 {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes})
		defer cc.Close()
		if err := cc.ForEachMaster(ctx, read); err != nil {
			return nil, fmt.Errorf("redis masters: %w", err)
		}
		return out, nil
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	if err := read(ctx, c); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return out, nil
}

// parseMasterInfo reads the script calls and CPU time from INFO
// commandstats and cpu.
func parseMasterInfo(info string) masterStat {
	var st masterStat
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch name {
		case "cmdstat_evalsha", "cmdstat_eval":
			for f := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(f, "calls="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					st.scripts += n
				}
			}
		case "used_cpu_user", "used_cpu_sys":
			v, _ := strconv.ParseFloat(rest, 64)
			st.cpuS += v
		}
	}
	return st
}

// masterLoads is what each master did between before and after, in
// address order.
func masterLoads(before, after map[string]masterStat) []report.MasterLoad {
	var total int64
	var out []report.MasterLoad
	for addr, a := range after {
		b := before[addr]
		m := report.MasterLoad{Addr: addr, Scripts: a.scripts - b.scripts, CPUS: a.cpuS - b.cpuS}
		total += m.Scripts
		out = append(out, m)
	}
	for i := range out {
		if total > 0 {
			out[i].Share = float64(out[i].Scripts) / float64(total)
		}
	}
	slices.SortFunc(out, func(x, y report.MasterLoad) int { return strings.Compare(x.Addr, y.Addr) })
	return out
}

// runShards runs the load against a new campaign of each of
// cfg.Shards stock shards.
func (r *runner) runShards(ctx context.Context, res *report.Result) error {
	for _, n := range r.cfg.Shards {
		if ctx.Err() != nil {
			break
		}
		before, err := masters(ctx, r.cfg.RedisClusterAddrs, r.cfg.RedisURL)
		if err != nil {
			return err
		}
		var after map[string]masterStat
		rep, err := r.runSeckill(ctx, seckillTarget{
			label: fmt.Sprintf("shards=%d", n), url: r.cfg.URL, shards: n,
			databaseURL: r.cfg.DatabaseURL, redisURL: r.cfg.RedisURL, redisNodes: r.cfg.RedisClusterAddrs,
			afterLoad: func() { after, _ = masters(context.WithoutCancel(ctx), r.cfg.RedisClusterAddrs, r.cfg.RedisURL) },
		})
		if err != nil {
			return fmt.Errorf("--shards %d: %w", n, err)
		}
		rep.Shards = n
		if after != nil {
			rep.Masters = masterLoads(before, after)
		}
		res.Runs = append(res.Runs, rep)
	}
	return nil
}
