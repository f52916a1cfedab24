package admission

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/batch"
)

// Admissions that arrive together go to Redis together.
//
// A purchase is one EVALSHA. Sent alone, each costs the server a write and
// a read system call and Redis a read, a write and an event-loop turn, and
// under load those dominate: the script itself runs in a few microseconds.
// pipeline gathers the admissions that arrive while earlier ones are on the
// wire and sends them as one pipeline: one write, one read, and Redis runs
// the scripts back to back. It is group commit (package batch, as the
// enqueuer and the workers use it): with light load every admission goes at
// once, alone; under heavy load batches grow to what the connections drain,
// with no timer to wait for.
//
// A pipeline changes nothing Redis decides: each script is still atomic,
// and scripts from different callers were never ordered among themselves.

// Defaults for pipeline.
const (
	defaultPipelines   = 4    // pipelines in flight at once, each on its own connection
	defaultMaxPipeline = 128  // admissions in one pipeline
	defaultBacklog     = 4096 // admissions waiting for a pipeline; more wait for room
	// defaultCrowd is the fewest admissions a pipeline carries when it is
	// sent beside another one in flight (batch.Options.Crowd): under a
	// steady load one pipeline at a time gathers what arrives during its
	// round trip, and the others are for bursts.
	defaultCrowd = 16
)

type pipeline struct {
	rdb     redis.UniversalClient
	script  *redis.Script
	batches *batch.Committer[pipeCall, pipeReply]
	dur     *durability // nil: no WAIT

	// sent, when set, is told each batch's size (tests).
	sent func(n int)
}

// pipeCall is one run of the script: its keys and arguments.
type pipeCall struct {
	scriptCall
	// reply, when set (durable pipelines), receives the call's reply as
	// soon as it is known, before the batch's WAIT if it wrote nothing.
	reply chan pipeReply
}

// pipeReply is the script's array reply to one call, or its error.
type pipeReply struct {
	res []any
	err error
	// unconfirmed is set when the call wrote but fewer replicas than
	// required acknowledged its batch in time (durable pipelines only).
	unconfirmed bool
	// deferred marks, in a durable batch's results, a call that wrote: its
	// reply is delivered once the batch's WAIT ends, after the batch.
	deferred bool
}

func newPipeline(rdb redis.UniversalClient, script *redis.Script, inFlight, maxBatch, backlog int) *pipeline {
	p := &pipeline{rdb: rdb, script: script}
	p.batches = batch.New(p.send, batch.Options{MaxBatch: maxBatch, Flushes: inFlight, Backlog: backlog, Crowd: defaultCrowd})
	return p
}

// run runs the script with keys and args and returns its array reply. A
// caller whose ctx ends while its call waits gets ctx's error (wrapping
// batch.ErrBusy if it was still waiting for room in the backlog); its
// admission may still be decided, as when a reply is lost, and the
// reconciler persists what was admitted. A batch, once sent, finishes even
// if the ctx of its sender ends, since other callers wait on it; go-redis's
// timeouts bound it.
func (p *pipeline) run(ctx context.Context, keys []string, args ...any) pipeReply {
	return p.runCall(ctx, scriptCall{keys: keys, args: args})
}

// runArgv is run with the call's whole EVALSHA built by the caller (see
// scriptCall.argv); keys[0] is its first key, which routes it.
func (p *pipeline) runArgv(ctx context.Context, keys []string, argv []any) pipeReply {
	return p.runCall(ctx, scriptCall{keys: keys, argv: argv})
}

func (p *pipeline) runCall(ctx context.Context, c scriptCall) pipeReply {
	if p.dur != nil {
		return p.runDurable(ctx, c)
	}
	out, err := p.batches.Do(ctx, pipeCall{scriptCall: c})
	if err != nil {
		return pipeReply{err: err}
	}
	return out[0]
}

// send runs one batch.
func (p *pipeline) send(ctx context.Context, calls []pipeCall, out []pipeReply) error {
	if p.sent != nil {
		p.sent(len(calls))
	}
	if p.dur != nil {
		p.sendDurable(ctx, calls, out)
		return nil
	}
	p.exec(ctx, p.rdb, calls, out)
	if _, ok := p.rdb.(*redis.ClusterClient); ok {
		p.sendTurnedAway(ctx, calls, out)
	}
	return nil
}

// sendTurnedAway sends again, within redirectWait, the calls of a batch on
// a cluster client that a node turned away without running their script
// after the client's own few redirects: while a slot is being migrated,
// the target answers TRYAGAIN to an admission (its user keys exist nowhere)
// until the migration ends, which takes longer than those redirects. The
// cluster client routes each call as its slot map says, after a pause.
func (p *pipeline) sendTurnedAway(ctx context.Context, calls []pipeCall, out []pipeReply) {
	deadline := time.Now().Add(redirectWait)
	for {
		var idx []int
		for i := range out {
			if _, ok := turnedAway(out[i].err); ok {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 || !migrationWait(ctx, deadline) {
			return
		}
		sub := make([]pipeCall, len(idx))
		res := make([]pipeReply, len(idx))
		for j, i := range idx {
			sub[j] = calls[i]
		}
		p.exec(ctx, p.rdb, sub, res)
		for j, i := range idx {
			out[i] = res[j]
		}
	}
}

// exec runs calls on c (runScripts): alone, or as one pipeline.
func (p *pipeline) exec(ctx context.Context, c redis.Cmdable, calls []pipeCall, out []pipeReply) {
	var one [1]*redis.Cmd // a call alone, the usual case under light load, allocates no slice
	cmds := one[:]
	if len(calls) > 1 {
		cmds = make([]*redis.Cmd, len(calls))
	}
	runScripts(ctx, c, p.script, calls, cmds)
	for i := range calls {
		if cmds[i].Err() == nil && cmds[i].Val() == nil {
			// Neither a reply nor an error: go-redis's cluster pipeline left
			// one so while the cluster failed over under it (CLUSTERDOWN, in
			// TestClusterMasterKilled). Whether the script ran is unknown,
			// as after a timeout: the caller hears UNAVAILABLE, not an
			// internal error.
			out[i].err = &unavailableError{op: "admit", err: errNoReply}
			continue
		}
		out[i].res, out[i].err = cmds[i].Slice()
	}
}

// errNoReply is a script call that came back with neither a reply nor an
// error.
var errNoReply = errors.New("redis: no reply and no error for the script call")
