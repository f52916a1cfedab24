package admission

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Admissions that arrive together go to Redis together.
//
// A purchase is one EVALSHA. Sent alone, each costs the server a write and
// a read system call and Redis a read, a write and an event-loop turn, and
// under load those dominate: the script itself runs in a few microseconds.
// pipeline gathers the admissions that arrive while earlier ones are on the
// wire and sends them as one pipeline: one write, one read, and Redis runs
// the scripts back to back. It is group commit again, as in jobs.Coalescer:
// with light load every admission goes at once, alone; under heavy load
// batches grow to what the connections drain, with no timer to wait for.
//
// A pipeline changes nothing Redis decides: each script is still atomic,
// and scripts from different callers were never ordered among themselves.

// Defaults for pipeline.
const (
	defaultPipelines   = 4   // pipelines in flight at once, each on its own connection
	defaultMaxPipeline = 128 // admissions in one pipeline
)

type pipeline struct {
	rdb      redis.UniversalClient
	script   *redis.Script
	slots    chan struct{}
	maxBatch int

	mu      sync.Mutex
	pending *pipeBatch // gathering calls while it waits for a slot

	// sent, when set, is told each batch's size (tests).
	sent func(n int)
}

type pipeBatch struct {
	calls []pipeCall
	done  chan struct{}
}

type pipeCall struct {
	keys []string
	arg  int64
	res  []any
	err  error
}

func newPipeline(rdb redis.UniversalClient, script *redis.Script, inFlight, maxBatch int) *pipeline {
	return &pipeline{rdb: rdb, script: script, slots: make(chan struct{}, max(inFlight, 1)), maxBatch: max(maxBatch, 1)}
}

// run runs the script with keys and arg and returns its array reply. The
// first caller of a batch sends it: it waits for a free slot while later
// callers join, then sends them all. The sender finishes sending even if
// its own ctx ends, since the others wait on it; go-redis's timeouts bound
// that. A caller whose ctx ends while it waits gets ctx's error; its
// admission may still be decided, as when a reply is lost, and the
// reconciler persists what was admitted.
func (p *pipeline) run(ctx context.Context, keys []string, arg int64) ([]any, error) {
	p.mu.Lock()
	b := p.pending
	leader := b == nil || len(b.calls) >= p.maxBatch
	if leader {
		b = &pipeBatch{done: make(chan struct{}), calls: make([]pipeCall, 0, 8)}
		p.pending = b
	}
	i := len(b.calls)
	b.calls = append(b.calls, pipeCall{keys: keys, arg: arg})
	p.mu.Unlock()

	if leader {
		p.send(context.WithoutCancel(ctx), b)
	} else {
		select {
		case <-b.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &b.calls[i]
	return c.res, c.err
}

// send waits for a slot, closes b to newcomers and runs it.
func (p *pipeline) send(ctx context.Context, b *pipeBatch) {
	p.slots <- struct{}{}
	defer func() { <-p.slots }()
	p.mu.Lock()
	if p.pending == b {
		p.pending = nil
	}
	p.mu.Unlock()
	defer close(b.done)
	if p.sent != nil {
		p.sent(len(b.calls))
	}
	if len(b.calls) == 1 {
		c := &b.calls[0]
		c.res, c.err = p.script.Run(ctx, p.rdb, c.keys, c.arg).Slice()
		return
	}
	cmds := make([]*redis.Cmd, len(b.calls))
	_, _ = p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, c := range b.calls {
			cmds[i] = p.script.EvalSha(ctx, pipe, c.keys, c.arg)
		}
		return nil
	})
	for i := range b.calls {
		c := &b.calls[i]
		c.res, c.err = cmds[i].Slice()
		if c.err != nil && redis.HasErrorPrefix(c.err, "NOSCRIPT") {
			// Redis lost its script cache (a restart, SCRIPT FLUSH): the
			// script did not run, so running it again is safe. Run loads
			// it with EVAL once; the calls after that find it again.
			c.res, c.err = p.script.Run(ctx, p.rdb, c.keys, c.arg).Slice()
		}
	}
}
