package cpu

import (
	"slices"
	"sync"
	"time"
)

// Reaped says what the CPU time of a group's exited children (cutime and
// cstime of its PIDs, their children's once waited for) is.
type Reaped int

const (
	// ReapedIgnored leaves it out: the bench's children are the servers
	// it started, measured on their own.
	ReapedIgnored Reaped = iota
	// ReapedOwn counts it as the group's: Redis's forks for a rewrite.
	ReapedOwn
	// ReapedOther reports it apart, not counted: a postmaster reaps the
	// backends of every database, not only the run's.
	ReapedOther
)

// Group is processes measured together: a server, Redis, Postgres, the
// bench.
type Group struct {
	Name string
	PIDs []int
	// Children adds every descendant of PIDs, found by parent at each
	// sample (Postgres: the postmaster's backends and auxiliary
	// processes).
	Children bool
	// Counts, when set, says from a descendant's command line whether its
	// CPU belongs to the run (Postgres: not another database's backend);
	// the CPU of those it refuses is reported apart as Other.
	Counts func(cmdline string) bool
	Reaped Reaped
}

// Usage is the CPU time a group spent between Start and Stop.
type Usage struct {
	Name string
	PIDs []int
	// Ticks is the group's CPU time over the window; Other what its
	// descendants that do not count (and, with ReapedOther, its exited
	// children) spent.
	Ticks, Other int64
	// Processes is how many processes Ticks sums: each reading is
	// truncated to a whole tick, so Ticks is within ±Processes ticks.
	Processes int
	// Gone says the group's main process ended during the window: its CPU
	// after its last sample is missing.
	Gone bool
}

// key tells a process apart from a later one that reuses its pid.
type key struct {
	pid   int
	start int64
}

// tracked is one process seen during the window.
type tracked struct {
	group      int
	root       bool
	counts     bool
	base, last int64 // own (and, for ReapedOwn roots, reaped) ticks
	reaped0    int64 // a ReapedOther root's reaped ticks at first sight
	reapedLast int64
	seen       int // the sample of the last sight
}

// Sampler follows the CPU time of groups of processes from Start to Stop,
// sampling every so often in between, so that a descendant that exits
// during the window still counts up to its last sample.
type Sampler struct {
	proc   Proc
	groups []Group
	ticks  int64
	t0     int64 // uptime in ticks at Start
	begin  time.Time

	mu      sync.Mutex
	procs   map[key]*tracked
	samples int
	rootSet []map[int]bool

	stop chan struct{}
	done chan struct{}
}

// Start takes the first sample of groups at once and then one every
// every, until Stop.
func Start(p Proc, groups []Group, every time.Duration) *Sampler {
	s := &Sampler{proc: p, groups: groups, ticks: p.ClockTicks(), begin: time.Now(),
		procs: map[key]*tracked{}, stop: make(chan struct{}), done: make(chan struct{})}
	s.t0, _ = p.Uptime(s.ticks)
	for _, g := range groups {
		roots := map[int]bool{}
		for _, pid := range g.PIDs {
			roots[pid] = true
		}
		s.rootSet = append(s.rootSet, roots)
	}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

// TicksPerSecond is the clock tick rate the usages are counted in.
func (s *Sampler) TicksPerSecond() int64 { return s.ticks }

// Stop takes the last sample and returns each group's usage since Start,
// and the window's length.
func (s *Sampler) Stop() ([]Usage, time.Duration) {
	close(s.stop)
	<-s.done
	s.sample()
	window := time.Since(s.begin)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Usage, len(s.groups))
	for i, g := range s.groups {
		out[i] = Usage{Name: g.Name, PIDs: slices.Clone(g.PIDs)}
	}
	for _, t := range s.procs {
		u := &out[t.group]
		d := t.last - t.base
		if t.counts {
			u.Ticks += d
			u.Processes++
		} else {
			u.Other += d
		}
		u.Other += t.reapedLast - t.reaped0
		if t.root && t.seen < s.samples {
			u.Gone = true
		}
	}
	return out, window
}

// sample reads every group's processes once.
func (s *Sampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for i, g := range s.groups {
		for _, pid := range g.PIDs {
			s.visit(i, g, pid, true)
		}
	}
}

// visit records pid of group i and, for a group with Children, its
// descendants.
func (s *Sampler) visit(i int, g Group, pid int, root bool) {
	st, err := s.proc.Stat(pid)
	if err != nil {
		return // exited since it was listed
	}
	k := key{pid: pid, start: st.StartTime}
	t := s.procs[k]
	own, reaped := st.Own(), int64(0)
	switch {
	case !root:
		own += st.Reaped() // a descendant's children are its own work
	case g.Reaped == ReapedOwn:
		own += st.Reaped()
	case g.Reaped == ReapedOther:
		reaped = st.Reaped()
	}
	if t == nil {
		t = &tracked{group: i, root: root, counts: true, base: own, reaped0: reaped}
		if !root && g.Counts != nil {
			cmd, _ := s.proc.Cmdline(pid)
			t.counts = g.Counts(cmd)
		}
		// A process born during the window spent all its time in it.
		if s.t0 > 0 && st.StartTime >= s.t0 {
			t.base = 0
		}
		s.procs[k] = t
	}
	t.last, t.reapedLast, t.seen = own, reaped, s.samples
	if !g.Children {
		return
	}
	kids, err := s.proc.Children(pid)
	if err != nil {
		return
	}
	for _, c := range kids {
		if !s.rootSet[i][c] {
			s.visit(i, g, c, false)
		}
	}
}
