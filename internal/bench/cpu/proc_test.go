package cpu

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Stat
	}{
		{"postmaster", "2212 (postgres) S 1 2212 2212 0 -1 4194304 182147 10443458 0 233 43 554 41533 32427 20 0 1 0 3585 222543872 7629 18446744073709551615 0 0 0 0 0 0 0 24129536 84487 1 0 0 17 1 0 0 0 0 0\n",
			Stat{PID: 2212, PPID: 1, Comm: "postgres", State: 'S', UTime: 43, STime: 554, CUTime: 41533, CSTime: 32427, StartTime: 3585}},
		{"a name with spaces and parentheses", "77 (tmux: server) (x)) R 5 77 77 0 -1 0 0 0 0 0 1200 300 0 0 20 0 9 0 123456 0 0\n",
			Stat{PID: 77, PPID: 5, Comm: "tmux: server) (x)", State: 'R', UTime: 1200, STime: 300, StartTime: 123456}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tc.line))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"", "12 no name S 1", "12 (short) S 1 2 3", "x (name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) succeeded", bad)
		}
	}
}

func TestParseAuxv(t *testing.T) {
	vec := func(pairs ...uint64) []byte {
		var b []byte
		for _, v := range pairs {
			b = binary.NativeEndian.AppendUint64(b, v)
		}
		return b
	}
	// AT_PAGESZ (6), AT_CLKTCK (17), AT_NULL.
	if hz, ok := parseAuxv(vec(6, 4096, 17, 250, 0, 0)); !ok || hz != 250 {
		t.Errorf("parseAuxv = %d, %v; want 250", hz, ok)
	}
	if _, ok := parseAuxv(vec(6, 4096, 0, 0, 17, 100)); ok {
		t.Error("read past AT_NULL")
	}
	if hz := Host.ClockTicks(); hz < 1 || hz > 10000 {
		t.Errorf("this machine's clock ticks: %d", hz)
	}
}

func TestParseNetTCP(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the fixtures were printed by a little-endian kernel")
	}
	read := func(name string) []Listener {
		f, err := os.Open(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ls, err := ParseNetTCP(f)
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	ap := netip.MustParseAddrPort
	want := []Listener{
		{ap("0.0.0.0:2024"), 1461}, {ap("127.0.0.1:5432"), 20710}, {ap("127.0.0.1:6379"), 11833},
		// The established connection on 5432 (state 01) is no listener.
	}
	if diff := cmp.Diff(want, read("net_tcp"), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("tcp (-want +got):\n%s", diff)
	}
	want6 := []Listener{{ap("[::1]:6379"), 4530}, {ap("[::]:8080"), 7001}, {ap("127.0.0.1:8081"), 7002}}
	if diff := cmp.Diff(want6, read("net_tcp6"), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("tcp6 (-want +got):\n%s", diff)
	}
	if _, err := ParseNetTCP(bytes.NewBufferString("header\n 0: 0100007F:zz 00000000:0000 0A 0 0 0 0 0 1\n")); err == nil {
		t.Error("a bad port parsed")
	}
}

// TestListeningPIDs finds this test's own listeners through the machine's
// /proc: an IPv4 one, an IPv6 one where the machine has IPv6, and one on
// every address.
func TestListeningPIDs(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp: not Linux")
	}
	self := []int{os.Getpid()}
	listen := func(network, addr string) int {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return 0
		}
		t.Cleanup(func() { ln.Close() })
		return ln.Addr().(*net.TCPAddr).Port
	}
	loop4, loop6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	for _, tc := range []struct {
		name    string
		network string
		addr    string
		ips     []netip.Addr
	}{
		{"IPv4 loopback", "tcp4", "127.0.0.1:0", []netip.Addr{loop4}},
		{"IPv6 loopback", "tcp6", "[::1]:0", []netip.Addr{loop6}},
		{"every address, asked for localhost", "tcp", ":0", []netip.Addr{loop4, loop6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := listen(tc.network, tc.addr)
			if port == 0 {
				t.Skipf("cannot listen on %s here", tc.addr)
			}
			got, err := Host.ListeningPIDs(tc.ips, port)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(self, got); diff != "" {
				t.Errorf("owners of port %d (-want +got):\n%s", port, diff)
			}
		})
	}
	// A port listened on at another address is not the one asked for.
	port := listen("tcp4", "127.0.0.1:0")
	if _, err := Host.ListeningPIDs([]netip.Addr{netip.MustParseAddr("127.0.0.2")}, port); !errors.Is(err, ErrNoListener) {
		t.Errorf("127.0.0.2:%d: %v, want ErrNoListener", port, err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if _, err := Host.ListeningPIDs([]netip.Addr{loop4}, closed); !errors.Is(err, ErrNoListener) {
		t.Errorf("closed port %d: %v, want ErrNoListener", closed, err)
	}
}

func TestLocalIPs(t *testing.T) {
	for _, host := range []string{"localhost", "127.0.0.1", "[::1]", ""} {
		ips, err := LocalIPs(t.Context(), host)
		if err != nil || len(ips) == 0 {
			t.Errorf("LocalIPs(%q) = %v, %v", host, ips, err)
		}
	}
	if _, err := LocalIPs(t.Context(), "192.0.2.1"); !errors.Is(err, ErrNotLocal) {
		t.Errorf("a documentation address: %v, want ErrNotLocal", err)
	}
}

func TestPostgresTitle(t *testing.T) {
	for _, tc := range []struct {
		cmdline, db string
		ok          bool
	}{
		{"postgres: 15/main: postgres seckill_bench 127.0.0.1(45170) idle", "seckill_bench", true},
		{"postgres: app shop [local] INSERT", "shop", true},
		{"postgres: 15/main: postgres seckill 127.0.0.1(36698) idle in transaction", "seckill", true},
		{"postgres: 15/main: autovacuum worker seckill", "seckill", true},
		{"postgres: 15/main: walwriter", "", false},
		{"postgres: checkpointer", "", false},
		{"postgres: 15/main: logical replication launcher", "", false},
		{"postgres: 15/main: background writer", "", false},
		{"/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main", "", false},
	} {
		db, ok := PostgresTitle(tc.cmdline)
		if db != tc.db || ok != tc.ok {
			t.Errorf("PostgresTitle(%q) = %q, %v; want %q, %v", tc.cmdline, db, ok, tc.db, tc.ok)
		}
	}
	counts := PostgresDatabase("seckill_bench")
	for cmd, want := range map[string]bool{
		"postgres: 15/main: postgres seckill_bench 127.0.0.1(1) idle": true,
		"postgres: 15/main: postgres other_db 127.0.0.1(2) idle":      false,
		"postgres: 15/main: walwriter":                                true,
		"postgres: 15/main: autovacuum worker other_db":               false,
	} {
		if got := counts(cmd); got != want {
			t.Errorf("counts(%q) = %v", cmd, got)
		}
	}
}

// fakeProc is a proc file system in a directory: stat, cmdline and
// children files a test writes and rewrites.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) *fakeProc {
	f := &fakeProc{t: t, root: t.TempDir()}
	f.write("uptime", "1000.00 1900.00\n")
	return f
}

func (f *fakeProc) write(name, content string) {
	f.t.Helper()
	p := filepath.Join(f.root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// proc sets pid's stat (own and reaped ticks split evenly between user
// and kernel time), its command line and its children.
func (f *fakeProc) proc(pid, ppid int, start, own, reaped int64, cmdline string, children ...int) {
	s := strconv.Itoa(pid)
	f.write(s+"/stat", s+" (x) S "+strconv.Itoa(ppid)+" 0 0 0 -1 0 0 0 0 0 "+
		strconv.FormatInt(own/2, 10)+" "+strconv.FormatInt(own-own/2, 10)+" "+
		strconv.FormatInt(reaped/2, 10)+" "+strconv.FormatInt(reaped-reaped/2, 10)+
		" 20 0 1 0 "+strconv.FormatInt(start, 10)+" 0 0\n")
	f.write(s+"/cmdline", cmdline+"\x00")
	var kids string
	for _, c := range children {
		kids += strconv.Itoa(c) + " "
	}
	f.write(s+"/task/"+s+"/children", kids)
}

func (f *fakeProc) gone(pid int) {
	if err := os.RemoveAll(filepath.Join(f.root, strconv.Itoa(pid))); err != nil {
		f.t.Fatal(err)
	}
}

// TestSampler follows a fake Postgres, server and bench through a window:
// a backend of the run's database that exits before the end still counts
// up to its last sample, one born during the window counts whole, other
// databases' backends and the postmaster's reaped children are reported
// apart, and a server that exits is said to be gone.
func TestSampler(t *testing.T) {
	f := newFakeProc(t)
	f.write("self/auxv", "") // no auxiliary vector: the default rate
	const before = 50_000    // ticks after boot: before the window (uptime 1000 s = 100,000 ticks)
	const db = "postgres: 15/main: postgres bench 127.0.0.1(1) idle"
	const other = "postgres: 15/main: postgres other 127.0.0.1(2) idle"
	f.proc(10, 1, 100, 500, 9000, "postgres -D /data", 11, 12, 13)
	f.proc(11, 10, 200, 70, 0, "postgres: 15/main: walwriter")
	f.proc(12, 10, before, 1000, 0, db)
	f.proc(13, 10, before, 4000, 0, other)
	f.proc(20, 1, before, 800, 0, "seckill serve")
	groups := []Group{
		{Name: "postgres", PIDs: []int{10}, Children: true, Counts: PostgresDatabase("bench"), Reaped: ReapedOther},
		{Name: "server", PIDs: []int{20}, Reaped: ReapedOwn},
	}
	s := Start(Proc{Root: f.root}, groups, 1<<40)
	if s.TicksPerSecond() != DefaultTicks {
		t.Fatalf("ticks %d", s.TicksPerSecond())
	}

	// Mid-window: each worked; backend 14 (the run's database) is born.
	f.proc(10, 1, 100, 510, 9000, "postgres -D /data", 11, 12, 13, 14)
	f.proc(11, 10, 200, 75, 0, "postgres: 15/main: walwriter")
	f.proc(12, 10, before, 1300, 0, db)
	f.proc(13, 10, before, 4100, 0, other)
	f.proc(14, 10, 100_100, 40, 0, db)
	f.proc(20, 1, before, 900, 0, "seckill serve")
	s.sample()

	// By the end backend 12 exited (the postmaster reaped it: 1,350
	// ticks) and the server too.
	f.gone(12)
	f.proc(10, 1, 100, 520, 10350, "postgres -D /data", 11, 13, 14)
	f.proc(11, 10, 200, 80, 0, "postgres: 15/main: walwriter")
	f.proc(13, 10, before, 4300, 0, other)
	f.proc(14, 10, 100_100, 90, 0, db)
	f.gone(20)
	got, _ := s.Stop()

	want := []Usage{
		// postmaster 20 + walwriter 10 + backend 12 300 (to its last
		// sample) + backend 14 90 (born in the window).
		{Name: "postgres", PIDs: []int{10}, Ticks: 20 + 10 + 300 + 90, Processes: 4,
			// backend 13 of another database 300, reaped 1,350.
			Other: 300 + 1350},
		{Name: "server", PIDs: []int{20}, Ticks: 100, Processes: 1, Gone: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// TestSamplerOwnProcess measures this test's own CPU while it spins.
func TestSamplerOwnProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: not Linux")
	}
	s := Start(Host, []Group{{Name: "bench", PIDs: []int{os.Getpid()}}}, 50_000_000)
	st0, err := Host.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until this process has used 200 ms of CPU more, however busy
	// the machine is.
	for {
		st, err := Host.Stat(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if st.Own()-st0.Own() >= 20*s.TicksPerSecond()/DefaultTicks {
			break
		}
		for range 1_000_000 {
		}
	}
	got, window := s.Stop()
	if u := got[0]; u.Ticks < 20 || u.Processes != 1 || u.Gone || float64(u.Ticks)/float64(s.TicksPerSecond()) > 2*window.Seconds()+0.1 {
		t.Errorf("usage %+v over %v", u, window)
	}
}
