package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"seckill/internal/bench/cpu"
	"seckill/internal/bench/report"
)

// cpuEvery is how often the CPU probe samples /proc between the start and
// the end of its window: often enough that a Postgres backend that exits
// meanwhile loses little of its time.
const cpuEvery = 250 * time.Millisecond

// cpuProbe measures the CPU time of a run's local processes over a window:
// the server, Redis, Postgres (the run's database) and the bench itself.
type cpuProbe struct {
	groups  []cpu.Group // the processes found, sampled from start on
	sampler *cpu.Sampler
	missing map[string]string // process name -> why it is not measured
	window  *cpuWindow        // set by stop
}

// cpuTarget is where a run's processes listen.
type cpuTarget struct {
	serverURL   string   // the GraphQL endpoint
	inProcess   bool     // the server runs in the bench (sync, ceiling)
	redisAddrs  []string // host:port of each Redis node
	databaseURL string   // "": no Postgres to measure
}

// redisAddrs returns the host:port of a Redis URL, or nil.
func redisAddrs(redisURL string) []string {
	u, err := url.Parse(redisURL)
	if err != nil || u.Host == "" {
		return nil
	}
	return []string{net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "6379"))}
}

// startCPU finds t's processes and starts sampling them. What it cannot
// find is reported as missing, never an error: the run goes on.
func startCPU(ctx context.Context, t cpuTarget) *cpuProbe {
	return findCPU(ctx, t).start()
}

// findCPU finds t's processes without sampling them yet. The search reads
// every process's sockets, which takes seconds on a crowded machine: a run
// with a deadline (a waiting room opens at a set time) searches before it
// sets one and starts the window when its load starts.
func findCPU(ctx context.Context, t cpuTarget) *cpuProbe {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p := &cpuProbe{missing: map[string]string{}}
	self := os.Getpid()
	var groups []cpu.Group

	if t.inProcess {
		p.missing[report.ProcServer] = "it runs in the bench's process (counted under bench)"
	} else if pids, err := findByURL(ctx, t.serverURL, "80"); err != nil {
		p.missing[report.ProcServer] = err.Error()
	} else if slices.Contains(pids, self) {
		p.missing[report.ProcServer] = "it runs in the bench's process (counted under bench)"
	} else {
		groups = append(groups, cpu.Group{Name: report.ProcServer, PIDs: pids, Reaped: cpu.ReapedOwn})
	}

	var redisPIDs []int
	var redisErr error
	for _, addr := range t.redisAddrs {
		pids, err := findByAddr(ctx, addr)
		if err != nil {
			redisErr = err
			break
		}
		redisPIDs = append(redisPIDs, pids...)
	}
	switch {
	case len(t.redisAddrs) == 0:
		p.missing[report.ProcRedis] = report.NotUsed
	case redisErr != nil:
		p.missing[report.ProcRedis] = redisErr.Error()
	default:
		slices.Sort(redisPIDs)
		groups = append(groups, cpu.Group{Name: report.ProcRedis, PIDs: slices.Compact(redisPIDs), Reaped: cpu.ReapedOwn})
	}

	if t.databaseURL == "" {
		p.missing[report.ProcPostgres] = report.NotUsed
	} else if pids, db, err := findPostgres(ctx, t.databaseURL); err != nil {
		p.missing[report.ProcPostgres] = err.Error()
	} else {
		groups = append(groups, cpu.Group{Name: report.ProcPostgres, PIDs: pids, Children: true,
			Counts: cpu.PostgresDatabase(db), Reaped: cpu.ReapedOther})
	}

	p.groups = append(groups, cpu.Group{Name: report.ProcBench, PIDs: []int{self}, Reaped: cpu.ReapedIgnored})
	return p
}

// start begins the probe's window.
func (p *cpuProbe) start() *cpuProbe {
	p.sampler = cpu.Start(cpu.Host, p.groups, cpuEvery)
	return p
}

// findByURL finds the process listening on a URL's port (defPort when it
// names none).
func findByURL(ctx context.Context, raw, defPort string) ([]int, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("no host in %q", raw)
	}
	if u.Port() == "" && u.Scheme == "https" {
		defPort = "443"
	}
	return findByAddr(ctx, net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), defPort)))
}

// findByAddr finds the process listening on host:port on this machine.
func findByAddr(ctx context.Context, addr string) ([]int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("port %q", portStr)
	}
	ips, err := cpu.LocalIPs(ctx, host)
	if err != nil {
		return nil, err
	}
	return cpu.Host.ListeningPIDs(ips, port)
}

// findPostgres finds the postmaster of a database URL and the database's
// name.
func findPostgres(ctx context.Context, dsn string) ([]int, string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, "", errors.New("not a postgres:// URL (a Unix socket has no port to look up)")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = u.User.Username()
	}
	pids, err := findByAddr(ctx, net.JoinHostPort(cmp.Or(u.Hostname(), "localhost"), cmp.Or(u.Port(), "5432")))
	return pids, db, err
}

// stop ends the window, once, and returns what each process spent in it.
func (p *cpuProbe) stop() *cpuWindow {
	if p.window == nil {
		usages, window := p.sampler.Stop()
		p.window = &cpuWindow{probe: p, usages: usages, window: window, ticks: p.sampler.TicksPerSecond()}
	}
	return p.window
}

// cpuWindow is what a probe measured, waiting for the units to divide by.
type cpuWindow struct {
	probe  *cpuProbe
	usages []cpu.Usage
	window time.Duration
	ticks  int64
}

// report returns the window's CPU report, per unit of units.
func (w *cpuWindow) report(units map[string]int64) *report.CPU {
	tick := 1 / float64(w.ticks)
	c := &report.CPU{WindowS: w.window.Seconds(), TickMs: 1000 * tick, Units: units}
	for _, name := range []string{report.ProcServer, report.ProcRedis, report.ProcPostgres, report.ProcBench} {
		if why, ok := w.probe.missing[name]; ok {
			c.Processes = append(c.Processes, report.ProcessCPU{Name: name, Missing: why})
			continue
		}
		for _, u := range w.usages {
			if u.Name != name {
				continue
			}
			c.Processes = append(c.Processes, report.ProcessCPU{
				Name: name, PIDs: u.PIDs, Gone: u.Gone,
				Seconds: float64(u.Ticks) * tick, ErrorS: float64(u.Processes) * tick, OtherS: float64(u.Other) * tick,
			})
		}
	}
	c.AddSum()
	return c
}

// merge adds o, a later window of the same processes, to w: the CPU of
// both and their lengths summed.
func (w *cpuWindow) merge(o *cpuWindow) *cpuWindow {
	m := &cpuWindow{probe: w.probe, window: w.window + o.window, ticks: w.ticks}
	for _, u := range w.usages {
		for _, v := range o.usages {
			if v.Name != u.Name {
				continue
			}
			u.Ticks += v.Ticks
			u.Other += v.Other
			u.Processes += v.Processes
			u.Gone = u.Gone || v.Gone
			for _, pid := range v.PIDs {
				if !slices.Contains(u.PIDs, pid) {
					u.PIDs = append(u.PIDs, pid)
				}
			}
		}
		m.usages = append(m.usages, u)
	}
	for name, why := range o.probe.missing {
		if _, ok := w.probe.missing[name]; !ok {
			w.probe.missing[name] = why
		}
	}
	return m
}
