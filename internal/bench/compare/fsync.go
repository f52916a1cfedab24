package compare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The durability settings --compare fsync measures: Redis's appendfsync,
// with the append-only file on.
const (
	FsyncEverysec = "everysec" // fsync once a second: a host crash may lose the last second
	FsyncAlways   = "always"   // fsync before every reply: nothing acknowledged is lost
)

// process is a child process the bench started, with its output in a log
// file so that a failure can show its last lines.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

func startProcess(name, logPath string, cmd *exec.Cmd) (*process, error) {
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		out.Close()
	}()
	return p, nil
}

// exited returns the process's exit error with the end of its log, if it
// has ended.
func (p *process) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		return fmt.Errorf("%s exited (%v): %s", p.name, err, p.tail())
	default:
		return nil
	}
}

// tail returns the last lines of the log.
func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return string(bytes.TrimSpace(b))
}

// stop sends SIGTERM and waits up to grace before killing the process.
func (p *process) stop(grace time.Duration) {
	if p.exited() != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitUntil calls ready every 50 ms until it succeeds, p exits or timeout
// passes.
func (p *process) waitUntil(ctx context.Context, timeout time.Duration, ready func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		if exit := p.exited(); exit != nil {
			return exit
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %v; log %s", p.name, timeout, err, p.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePort returns a loopback port nothing listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Redis is a private redis-server on a free loopback port, with the
// append-only file on under a directory of its own.
type Redis struct {
	URL string
	Dir string // its AOF and log
	p   *process
}

// StartRedis starts bin (redis-server) with appendfsync set to fsync and
// args, its files in a new directory under dir, and waits until it answers.
func StartRedis(ctx context.Context, bin, dir, fsync string, args ...string) (*Redis, error) {
	if fsync != FsyncAlways && fsync != FsyncEverysec {
		return nil, fmt.Errorf("appendfsync %q: want %s or %s", fsync, FsyncAlways, FsyncEverysec)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	d, err := os.MkdirTemp(dir, "redis-"+fsync+"-")
	if err != nil {
		return nil, err
	}
	args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", d,
		"--appendonly", "yes", "--appendfsync", fsync, "--save", "", "--daemonize", "no"}, args...)
	return startRedis(ctx, "redis-server ("+fsync+")", d, port, exec.Command(bin, args...))
}

// StartReplica starts bin (redis-server) as a replica of master, with
// master's appendfsync setting, its files in a new directory under dir,
// and waits until it has master's data and follows it.
func StartReplica(ctx context.Context, bin, dir, fsync string, master *Redis) (*Redis, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	d, err := os.MkdirTemp(dir, "redis-replica-")
	if err != nil {
		return nil, err
	}
	mu, err := url.Parse(master.URL)
	if err != nil {
		return nil, err
	}
	r, err := startRedis(ctx, "redis-server (replica)", d, port, exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", d,
		"--appendonly", "yes", "--appendfsync", fsync, "--save", "", "--daemonize", "no",
		"--replicaof", mu.Hostname(), mu.Port()))
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer rdb.Close()
	err = r.p.waitUntil(ctx, 20*time.Second, func(ctx context.Context) error {
		info, err := rdb.Info(ctx, "replication").Result()
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			err = errors.New("not following its master yet")
		}
		return err
	})
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// startRedis runs cmd, a redis-server on port with its files in d, and
// waits until it answers.
func startRedis(ctx context.Context, name, d string, port int, cmd *exec.Cmd) (*Redis, error) {
	p, err := startProcess(name, filepath.Join(d, "redis.log"), cmd)
	if err != nil {
		os.RemoveAll(d)
		return nil, err
	}
	r := &Redis{URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port), Dir: d, p: p}
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer rdb.Close()
	err = p.waitUntil(ctx, 10*time.Second, func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Close stops the server and deletes its files.
func (r *Redis) Close() {
	r.p.stop(5 * time.Second)
	_ = os.RemoveAll(r.Dir)
}

// Seckill is a seckill server process (`seckill serve`, workers included)
// on a free loopback port.
type Seckill struct {
	URL string // its GraphQL endpoint
	p   *process
}

// StartSeckill runs `bin migrate up`, then `bin serve` on a free loopback
// port, with the bench's environment plus env (SECKILL_DATABASE_URL,
// SECKILL_REDIS_URL, ...), and waits until /readyz answers. Its output goes
// to a log file under dir.
func StartSeckill(ctx context.Context, bin, dir string, env []string) (*Seckill, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	env = append(append(os.Environ(), env...),
		"SECKILL_HTTP_ADDR="+addr,
		// Whatever the operator's own server listens on besides its API
		// is not this server's.
		"SECKILL_PPROF_ADDR=", "SECKILL_METRICS_ADDR=")
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	migrate := exec.CommandContext(mctx, bin, "migrate", "up")
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s migrate up: %v: %s", bin, err, bytes.TrimSpace(out))
	}
	log, err := os.CreateTemp(dir, "seckill-*.log")
	if err != nil {
		return nil, err
	}
	log.Close()
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	p, err := startProcess("seckill serve", log.Name(), cmd)
	if err != nil {
		return nil, err
	}
	s := &Seckill{URL: "http://" + addr + "/graphql", p: p}
	client := &http.Client{Timeout: time.Second}
	err = p.waitUntil(ctx, 30*time.Second, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Log is the path of the server's log file.
func (s *Seckill) Log() string { return s.p.log }

// Close stops the server gracefully: it drains and its workers finish.
func (s *Seckill) Close() { s.p.stop(30 * time.Second) }
