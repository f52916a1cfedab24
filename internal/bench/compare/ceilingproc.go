package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"seckill/internal/auth"
)

// The ceiling in a process of its own (seckill-bench --compare
// ceiling-process): the same handler and admission script as Ceiling, served
// by `seckill-bench serve-ceiling`, which the bench starts. In the bench's
// own process the ceiling shares a Go runtime with the load generator, so
// that a request and its answer often pass between goroutines of one process
// without waking another; seckill serve never can. Measured apart, the
// ceiling pays what any server process pays.

// ServeCeiling is `seckill-bench serve-ceiling`: it warms a ceiling campaign
// of stock units on the Redis at redisURL, serves its purchases on addr at
// /graphql and its state at GET /state until ctx ends, then deletes its keys.
func ServeCeiling(ctx context.Context, addr, redisURL string, poolSize int, stock int64, end time.Time, tokens *auth.Tokens) error {
	c, err := OpenCeiling(ctx, redisURL, poolSize, stock, end)
	if err != nil {
		return err
	}
	defer c.Close()
	mux := http.NewServeMux()
	mux.Handle("/graphql", PurchaseHandler(tokens, c.Purchase))
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		remaining, pending, err := c.State(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ceilingState{Remaining: remaining, Pending: pending})
	})
	srv, err := serve(addr, mux)
	if err != nil {
		return err
	}
	<-ctx.Done()
	srv.Close()
	return nil
}

type ceilingState struct {
	Remaining int64 `json:"remaining"`
	Pending   int64 `json:"pending"`
}

// CeilingProcess is a `seckill-bench serve-ceiling` the bench started.
type CeilingProcess struct {
	URL  string // its GraphQL endpoint
	base string
	p    *process
}

// StartCeilingProcess runs `bin serve-ceiling` on a free loopback port with a
// campaign of stock units on sale until end, on the Redis at redisURL (a pool
// of poolSize connections; 0: go-redis's default), verifying tokens of
// secret and issuer; its output goes to a log file under dir.
func StartCeilingProcess(ctx context.Context, bin, dir, redisURL string, poolSize int, stock int64, end time.Time, secret, issuer string) (*CeilingProcess, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	log, err := os.CreateTemp(dir, "ceiling-*.log")
	if err != nil {
		return nil, err
	}
	log.Close()
	cmd := exec.Command(bin, "serve-ceiling", "--addr", addr, "--stock", strconv.FormatInt(stock, 10),
		"--until", end.UTC().Format(time.RFC3339), "--pool", strconv.Itoa(poolSize))
	// The secret goes by the environment, never on a command line others
	// can read.
	cmd.Env = append(os.Environ(), "SECKILL_REDIS_URL="+redisURL, "SECKILL_JWT_SECRET="+secret, "SECKILL_JWT_ISSUER="+issuer)
	p, err := startProcess("seckill-bench serve-ceiling", log.Name(), cmd)
	if err != nil {
		return nil, err
	}
	c := &CeilingProcess{URL: "http://" + addr + "/graphql", base: "http://" + addr, p: p}
	if err := p.waitUntil(ctx, 30*time.Second, func(ctx context.Context) error {
		_, _, err := c.State(ctx)
		return err
	}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// State returns the live stock and the pending admissions of its campaign.
func (c *CeilingProcess) State(ctx context.Context) (remaining, pending int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/state", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, errors.New(resp.Status + ": " + string(body))
	}
	var s ceilingState
	if err := json.Unmarshal(body, &s); err != nil {
		return 0, 0, err
	}
	return s.Remaining, s.Pending, nil
}

// Close stops the process, which deletes its keys.
func (c *CeilingProcess) Close() { c.p.stop(10 * time.Second) }
