package testenv

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a private redis-server on a free loopback port, with its
// files (AOF, everysec, and log) in a directory of its own, for tests that
// kill, pause, restart or replicate it. It is killed when the test ends.
type RedisServer struct {
	tb   testing.TB
	Port string
	Dir  string
	conf string // a config file to start from (Sentinel needs one it can rewrite); "" for none
	args []string
	cmd  *exec.Cmd
}

// StartRedisServer starts a private redis-server with extra arguments added
// to its command line, and waits until it answers. It skips the test when
// redis-server is not installed, unless CI is set.
func StartRedisServer(tb testing.TB, args ...string) *RedisServer {
	tb.Helper()
	r := newRedisServer(tb, args...)
	r.Start()
	tb.Cleanup(r.Kill)
	return r
}

// newRedisServer picks a free loopback port and a directory for a
// redis-server, without starting it.
func newRedisServer(tb testing.TB, args ...string) *RedisServer {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal("redis-server is not installed")
		}
		tb.Skip("redis-server is not installed")
	}
	// A cluster node also listens on its port + 10000 (the cluster bus),
	// which the free port says nothing about: an ephemeral port there
	// once made a node fail to start. Pick a port whose bus port is free
	// too.
	cluster := slices.Contains(args, "--cluster-enabled")
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		n, _ := strconv.Atoi(port)
		free := true
		if cluster {
			bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(n+10000))
			if free = err == nil; free {
				bus.Close()
			}
		}
		ln.Close()
		if free || try == 20 {
			return &RedisServer{tb: tb, Port: port, Dir: tb.TempDir(), args: args}
		}
	}
}

// StartReplica starts a private redis-server that replicates master, with
// extra arguments added to its command line, and waits until its link to
// master is up and it has loaded master's data.
func StartReplica(tb testing.TB, master *RedisServer, args ...string) *RedisServer {
	tb.Helper()
	r := StartRedisServer(tb, append([]string{"--replicaof", "127.0.0.1", master.Port}, args...)...)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer rdb.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, _ := rdb.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("replica on %s did not connect to its master on %s:\n%s", r.Port, master.Port, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is the server's host:port.
func (r *RedisServer) Addr() string { return "127.0.0.1:" + r.Port }

// URL is the server's redis:// URL, database 0.
func (r *RedisServer) URL() string { return "redis://" + r.Addr() + "/0" }

// Start starts the server (again, after Kill) with its files as they are.
func (r *RedisServer) Start() {
	r.tb.Helper()
	var args []string
	if r.conf != "" {
		args = append(args, r.conf) // redis-server takes its file first
	}
	args = append(append(args, "--port", r.Port, "--bind", "127.0.0.1", "--dir", r.Dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--aof-load-truncated", "yes",
		// A replica that connects gets the data at once, not after 5 s.
		"--repl-diskless-sync-delay", "0",
		"--logfile", filepath.Join(r.Dir, "redis.log")), r.args...)
	r.cmd = exec.Command("redis-server", args...)
	if err := r.cmd.Start(); err != nil {
		r.tb.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(30 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(r.Dir, "redis.log"))
			r.tb.Fatalf("redis-server on %s did not start:\n%s", r.Port, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (r *RedisServer) Kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGCONT) // a paused process dies as well
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Pause stops the process (SIGSTOP): it keeps its connections but answers
// nothing, as a replica stuck on a slow disk or a lost network would,
// until Resume.
func (r *RedisServer) Pause() {
	r.tb.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		r.tb.Fatal(err)
	}
}

// Resume continues a paused server (SIGCONT).
func (r *RedisServer) Resume() {
	r.tb.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		r.tb.Fatal(err)
	}
}
