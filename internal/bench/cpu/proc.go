// Package cpu measures the CPU time each local process of a bench run
// spends, from /proc: which process listens on a TCP port (the socket's
// inode in /proc/net/tcp{,6}, found among /proc/<pid>/fd), its utime and
// stime (/proc/<pid>/stat, in clock ticks), and a process tree such as
// Postgres's postmaster and its children, sampled while the run goes on.
// It reads Linux's /proc only; elsewhere every lookup fails.
package cpu

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Proc reads a proc file system.
type Proc struct {
	Root string // "/proc"; a test points it at a fixture
}

// Host is the machine's /proc.
var Host = Proc{Root: "/proc"}

func (p Proc) path(elem ...string) string {
	return filepath.Join(append([]string{p.Root}, elem...)...)
}

// DefaultTicks is the clock tick rate of Linux on every common
// architecture (USER_HZ), used when the auxiliary vector does not say.
const DefaultTicks = 100

// atClkTck is the auxiliary vector's entry for the clock tick rate: what
// sysconf(_SC_CLK_TCK) returns, read without cgo.
const atClkTck = 17

// ClockTicks returns the clock ticks per second in which /proc counts CPU
// time (sysconf(_SC_CLK_TCK)), from the running program's auxiliary vector
// (/proc/self/auxv), else DefaultTicks.
func (p Proc) ClockTicks() int64 {
	b, err := os.ReadFile(p.path("self", "auxv"))
	if err != nil {
		return DefaultTicks
	}
	if hz, ok := parseAuxv(b); ok {
		return hz
	}
	return DefaultTicks
}

// parseAuxv finds AT_CLKTCK in an auxiliary vector of native-endian
// 64-bit pairs (type, value), ended by AT_NULL.
func parseAuxv(b []byte) (int64, bool) {
	for len(b) >= 16 {
		typ, val := binary.NativeEndian.Uint64(b), binary.NativeEndian.Uint64(b[8:])
		switch {
		case typ == 0:
			return 0, false
		case typ == atClkTck && val > 0 && val < 1<<20:
			return int64(val), true
		}
		b = b[16:]
	}
	return 0, false
}

// Stat is what the bench reads of /proc/<pid>/stat.
type Stat struct {
	PID, PPID int
	Comm      string
	State     byte
	// CPU time in clock ticks: of the process (all its threads) in user
	// and kernel mode, and of its children that exited and were waited for.
	UTime, STime, CUTime, CSTime int64
	StartTime                    int64 // clock ticks after boot
}

// Own is the process's own CPU time in ticks.
func (s Stat) Own() int64 { return s.UTime + s.STime }

// Reaped is the CPU time in ticks of its children that exited and were
// waited for.
func (s Stat) Reaped() int64 { return s.CUTime + s.CSTime }

// ParseStat reads one /proc/<pid>/stat line. The command name sits in
// parentheses and may hold spaces and parentheses itself: the fields
// resume after the last ')'.
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return s, errors.New("cpu: stat: no command name")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return s, fmt.Errorf("cpu: stat: pid: %w", err)
	}
	s.PID, s.Comm = pid, string(b[open+1:end])
	// After the name: state (field 3), ppid (4), ..., utime (14), stime
	// (15), cutime (16), cstime (17), ..., starttime (22).
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 {
		return s, fmt.Errorf("cpu: stat of %d: %d fields after the name, want at least 20", pid, len(f))
	}
	field := func(n int) int64 {
		if err != nil {
			return 0
		}
		var v int64
		v, err = strconv.ParseInt(f[n-3], 10, 64)
		return v
	}
	s.State = f[0][0]
	s.PPID = int(field(4))
	s.UTime, s.STime, s.CUTime, s.CSTime = field(14), field(15), field(16), field(17)
	s.StartTime = field(22)
	if err != nil {
		return s, fmt.Errorf("cpu: stat of %d: %w", pid, err)
	}
	return s, nil
}

// Stat reads the stat of process pid.
func (p Proc) Stat(pid int) (Stat, error) {
	b, err := os.ReadFile(p.path(strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// Cmdline returns process pid's command line with its NUL separators (and
// the padding a retitled process such as a Postgres backend leaves) as
// single spaces.
func (p Proc) Cmdline(pid int) (string, error) {
	b, err := os.ReadFile(p.path(strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\x00", " ")), " "), nil
}

// Children returns the pids whose parent is pid, from the kernel's
// per-thread children lists, else by reading every process's stat.
func (p Proc) Children(pid int) ([]int, error) {
	tasks, err := os.ReadDir(p.path(strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, err
	}
	var out []int
	listed := false
	for _, t := range tasks {
		b, err := os.ReadFile(p.path(strconv.Itoa(pid), "task", t.Name(), "children"))
		if err != nil {
			continue
		}
		listed = true
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	if listed {
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	// A kernel without CONFIG_PROC_CHILDREN.
	pids, err := p.PIDs()
	if err != nil {
		return nil, err
	}
	for _, c := range pids {
		if st, err := p.Stat(c); err == nil && st.PPID == pid {
			out = append(out, c)
		}
	}
	return out, nil
}

// PIDs lists the processes.
func (p Proc) PIDs() ([]int, error) {
	entries, err := os.ReadDir(p.Root)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Uptime returns the clock ticks since boot (/proc/uptime), the scale of
// Stat.StartTime.
func (p Proc) Uptime(ticks int64) (int64, error) {
	b, err := os.ReadFile(p.path("uptime"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("cpu: empty uptime")
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("cpu: uptime: %w", err)
	}
	return int64(s * float64(ticks)), nil
}

// Listener is a listening TCP socket of /proc/net/tcp or tcp6.
type Listener struct {
	Addr  netip.AddrPort
	Inode uint64
}

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// ParseNetTCP reads the listening sockets of /proc/net/tcp (or tcp6: the
// address's length tells). Addresses are hexadecimal 32-bit words in the
// kernel's byte order, ports hexadecimal numbers.
func ParseNetTCP(r io.Reader) ([]Listener, error) {
	var out []Listener
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<16)
	first := true
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if first { // the header
			first = false
			continue
		}
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		addr, err := parseSocketAddr(f[1])
		if err != nil {
			return nil, err
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cpu: net/tcp: inode %q: %w", f[9], err)
		}
		out = append(out, Listener{Addr: addr, Inode: inode})
	}
	return out, sc.Err()
}

// parseSocketAddr reads "0100007F:1F90" (127.0.0.1:8080 on a
// little-endian machine) or its 32-digit IPv6 form.
func parseSocketAddr(s string) (netip.AddrPort, error) {
	h, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil {
		return netip.AddrPort{}, fmt.Errorf("cpu: net/tcp: address %q", s)
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("cpu: net/tcp: address %q", s)
	}
	// The kernel prints each 32-bit word of the address as the number a
	// native-endian load of its bytes makes: store the number back the
	// same way to get the bytes in network order.
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// Listeners returns the listening TCP sockets of IPv4 and IPv6 (a kernel
// without IPv6 has no tcp6).
func (p Proc) Listeners() ([]Listener, error) {
	var out []Listener
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(p.path("net", name))
		if errors.Is(err, os.ErrNotExist) && name == "tcp6" {
			continue
		} else if err != nil {
			return nil, err
		}
		ls, err := ParseNetTCP(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

// SocketOwners returns the processes holding an open descriptor on one of
// the socket inodes, from the links in /proc/<pid>/fd ("socket:[N]").
// Processes it may not look into are skipped: it then finds only those of
// its own user.
func (p Proc) SocketOwners(inodes []uint64) ([]int, error) {
	want := map[string]bool{}
	for _, in := range inodes {
		want["socket:["+strconv.FormatUint(in, 10)+"]"] = true
	}
	pids, err := p.PIDs()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pid := range pids {
		dir := p.path(strconv.Itoa(pid), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && want[link] {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

// ErrNoListener says no process this program can see listens on a port.
var ErrNoListener = errors.New("no process listening")

// ListeningPIDs returns the processes that listen on port at one of ips
// (or on every address): the owners of the listening socket, without those
// whose parent owns it too (a child that inherited the socket across a
// fork is its parent's).
func (p Proc) ListeningPIDs(ips []netip.Addr, port int) ([]int, error) {
	ls, err := p.Listeners()
	if err != nil {
		return nil, err
	}
	var inodes []uint64
	for _, l := range ls {
		a := l.Addr.Addr()
		if int(l.Addr.Port()) == port && (a.IsUnspecified() || slices.Contains(ips, a)) {
			inodes = append(inodes, l.Inode)
		}
	}
	if len(inodes) == 0 {
		return nil, fmt.Errorf("%w on port %d", ErrNoListener, port)
	}
	owners, err := p.SocketOwners(inodes)
	if err != nil {
		return nil, err
	}
	if len(owners) == 0 {
		return nil, fmt.Errorf("%w on port %d that this user may inspect (/proc/<pid>/fd)", ErrNoListener, port)
	}
	var roots []int
	for _, pid := range owners {
		st, err := p.Stat(pid)
		if err == nil && slices.Contains(owners, st.PPID) {
			continue
		}
		roots = append(roots, pid)
	}
	return roots, nil
}

// ErrNotLocal says a host is not this machine: its processes are not in
// this /proc.
var ErrNotLocal = errors.New("not this machine")

// LocalIPs returns the addresses host (of a URL: "localhost", "127.0.0.1",
// "" for the loopback) stands for on this machine, or ErrNotLocal when
// none is the loopback or an address of a local interface.
func LocalIPs(ctx context.Context, host string) ([]netip.Addr, error) {
	var ips []netip.Addr
	if host == "" {
		host = "localhost"
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		ips = []netip.Addr{a.Unmap()}
	} else {
		found, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("cpu: resolve %s: %w", host, err)
		}
		for _, a := range found {
			ips = append(ips, a.Unmap())
		}
	}
	var local []netip.Addr
	ifaces, _ := net.InterfaceAddrs()
	for _, a := range ips {
		if a.IsLoopback() || a.IsUnspecified() {
			local = append(local, a)
			continue
		}
		for _, ia := range ifaces {
			if n, ok := ia.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
					local = append(local, a)
				}
			}
		}
	}
	if len(local) == 0 {
		return nil, fmt.Errorf("%s is %w", host, ErrNotLocal)
	}
	return local, nil
}
