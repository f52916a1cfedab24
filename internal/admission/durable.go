package admission

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durable acceptance: an admission is confirmed by replicas before its
// buyer hears ACCEPTED.
//
// Redis replicates asynchronously: a master that dies right after an
// admission may take it along, and its promoted replica would sell the unit
// again and not know the buyer. With Options.MinReplicas set, the admit
// pipeline follows each batch that wrote anything with one WAIT on the same
// connection: WAIT counts the replicas that acknowledged every write made
// on that connection so far, so one WAIT covers every admission of the
// batch. A batch whose calls all refused (sold out, bought before, ...)
// sends no WAIT, and in a batch that wrote, the refusals are answered as
// soon as the scripts' replies are read, before the WAIT: a rejection stays
// one round trip. The WAIT runs outside the batch's flush slot, so a
// lagging replica slows only the acceptances that wait for it, never the
// batches behind them. On a cluster the admissions of one batch live on
// different masters, so the batch is split by master, and each part is a
// pipeline of its own, with its own WAIT, on a connection to that master;
// the parts run at once.
//
// When fewer replicas than required confirm within WaitTimeout (or the WAIT
// fails), the admissions of that part come back marked unconfirmed:
// Admit answers seckill.ErrNotReplicated, and the Service persists them
// to Postgres at once or releases them. Nothing else changes: they are
// pending in Redis like any other, and the rest of the system treats them
// as such.
//
// WAIT narrows the window but does not close it: a failover may still
// promote a replica that missed the writes (it acknowledged nothing, or the
// WAIT timed out and the fallback above ran). That is what the per-campaign
// detection and rebuild from Postgres are for (ConnectHook, rebuild.go).

// Defaults for durable acceptance.
const (
	// maxWaits bounds the WAITs under way at once, each holding a pooled
	// connection for up to its timeout, so that the pool keeps connections
	// for everything else while a replica stalls: a batch that wrote waits
	// for a place before it lets go of its pipeline. Refusals are held up
	// only once every place is taken.
	maxWaits = 2 * defaultPipelines
	// DefaultWaitTimeout bounds a WAIT: a replica on the same network
	// acknowledges in well under a millisecond, so reaching it means the
	// replica is stalled or gone, and the buyer should not wait much longer.
	DefaultWaitTimeout = 250 * time.Millisecond
)

// durability configures WAIT on a pipeline: replicas 0 sends none.
type durability struct {
	replicas int
	timeout  time.Duration
	// wrote reports whether a reply is that of a call that wrote (and so
	// must be replicated before it is answered).
	wrote func(res []any) bool
	// logger hears when replicas start and stop falling short: once each,
	// not once per admission.
	logger *slog.Logger
	short  atomic.Bool
	waits  chan struct{} // a place per WAIT under way (maxWaits)
}

// noteShortfall logs a change between replicas confirming in time and not.
func (d *durability) noteShortfall(short bool, got int64, err error) {
	if d.short.Swap(short) == short {
		return
	}
	if short {
		d.logger.Warn("redis replicas do not confirm admissions in time: each is written to Postgres at once, or released",
			"min_replicas", d.replicas, "confirmed", got, "wait_timeout", d.timeout, "err", err)
	} else {
		d.logger.Info("redis replicas confirm admissions in time again", "min_replicas", d.replicas)
	}
}

// admitWrote reports whether an admit script reply is an acceptance, the
// one reply after which the script has written.
func admitWrote(res []any) bool {
	code, ok := int64At(res, 0)
	return ok && code == codeAccepted
}

// errNoWaitTopology refuses durable admission on a client it cannot route
// WAIT with (a Ring, a wrapper): misconfiguration, not an outage.
var errNoWaitTopology = errors.New("admission: MinReplicas needs a single-node, Sentinel or cluster client")

// runDurable is run on a durable pipeline. Its call goes in a batch from a
// goroutine of its own, so that it can be answered as soon as its own reply
// is known: a refusal does not wait for the WAIT that its batch's
// acceptances need.
func (p *pipeline) runDurable(ctx context.Context, c scriptCall) pipeReply {
	call := pipeCall{scriptCall: c, reply: make(chan pipeReply, 1)}
	failed := make(chan error, 1)
	go func() {
		out, err := p.batches.Do(ctx, call)
		if err != nil {
			failed <- err
			return
		}
		if !out[0].deferred { // a deferred reply comes when its WAIT ends
			deliver(call, out[0]) // a no-op when send delivered it already
		}
	}()
	select {
	case r := <-call.reply:
		return r
	case err := <-failed:
		return pipeReply{err: err}
	case <-ctx.Done():
		return pipeReply{err: ctx.Err()}
	}
}

// deliver hands r to the caller of c, once: later deliveries are dropped.
func deliver(c pipeCall, r pipeReply) {
	if c.reply == nil {
		return
	}
	select {
	case c.reply <- r:
	default:
	}
}

// nodeCalls is the part of a batch that goes to one master.
type nodeCalls struct {
	node *redis.Client
	idx  []int // positions in the batch
}

// sendDurable runs one batch, part by part, each part on its master, at
// once. A call that a node turned away without running the script is sent
// again, within one redirectWait for the whole batch: answered MOVED (its
// slot moved: a resharding, a failover), to the master the reloaded slot
// map names; answered ASK or TRYAGAIN (its slot is being migrated: the
// source sends it to the target, and the target refuses a script some of
// whose keys it lacks, as the user's keys of an admission always are), to
// the slot's master once more after a pause, until the migration ends.
// Without that, the first purchase of each moved campaign in each process
// after a resharding, and every purchase of it during the migration, was
// answered UNAVAILABLE.
func (p *pipeline) sendDurable(ctx context.Context, calls []pipeCall, out []pipeReply) {
	redirected := p.sendParts(ctx, p.byMaster(ctx, calls, out), calls, out, true)
	deadline := time.Now().Add(redirectWait) // for the whole batch
	for len(redirected) > 0 {
		// One pause a round, however many calls met a migration.
		migrating := slices.ContainsFunc(redirected, func(r redirectedCall) bool { return r.addr == "" }) &&
			p.pauseForMigration(ctx, deadline)
		var parts byNode
		for _, r := range redirected {
			var node *redis.Client
			switch key := calls[r.i].keys[0]; {
			case r.addr != "":
				node = p.masterAt(ctx, key, r.addr, deadline)
			case migrating:
				node = p.slotMaster(ctx, key)
			}
			if node == nil {
				out[r.i] = r.reply
				deliver(calls[r.i], r.reply)
				continue
			}
			parts.add(node, r.i)
		}
		redirected = p.sendParts(ctx, parts.parts, calls, out, time.Now().Before(deadline))
	}
}

// redirectedCall is a call of a batch that a node turned away (MOVED, ASK,
// TRYAGAIN) without running its script.
type redirectedCall struct {
	i     int       // its position in the batch
	addr  string    // the node a MOVED reply names; "" for ASK and TRYAGAIN
	reply pipeReply // the node's reply, delivered if it cannot be sent again
}

// sendParts runs the parts at once. With retry, the calls turned away are
// returned instead of delivered.
func (p *pipeline) sendParts(ctx context.Context, parts []nodeCalls, calls []pipeCall, out []pipeReply, retry bool) []redirectedCall {
	if len(parts) == 1 {
		return p.sendNode(ctx, parts[0], calls, out, retry)
	}
	var (
		mu         sync.Mutex
		redirected []redirectedCall
		wg         sync.WaitGroup
	)
	for _, part := range parts {
		wg.Go(func() {
			r := p.sendNode(ctx, part, calls, out, retry)
			mu.Lock()
			redirected = append(redirected, r...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return redirected
}

// redirectWait bounds how long a batch sends again the calls turned away:
// the wait for the cluster client's slot map to name the nodes its MOVED
// replies named (it reloads in the background, in milliseconds; longer on
// a loaded machine), or for a slot's migration to end. The batch's flush
// slot is held meanwhile: it happens only while or after a slot moves.
const redirectWait = 2 * time.Second

// migrationPause is how long a call answered ASK or TRYAGAIN waits before
// it is sent again.
const migrationPause = 20 * time.Millisecond

// pauseForMigration waits migrationPause before the calls answered ASK or
// TRYAGAIN are sent again, then reloads the slot map (which names the
// target once the migration ended); false, without waiting, when that
// would pass deadline or the client is not a cluster's.
func (p *pipeline) pauseForMigration(ctx context.Context, deadline time.Time) bool {
	cc, ok := p.rdb.(*redis.ClusterClient)
	if !ok || !migrationWait(ctx, deadline) {
		return false
	}
	cc.ReloadState(ctx)
	return true
}

// migrationWait waits migrationPause, unless that would pass deadline or
// ctx ends first; it reports whether it waited.
func migrationWait(ctx context.Context, deadline time.Time) bool {
	if time.Now().Add(migrationPause).After(deadline) {
		return false
	}
	t := time.NewTimer(migrationPause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// slotMaster returns the master the cluster client's slot map names for
// key, or nil.
func (p *pipeline) slotMaster(ctx context.Context, key string) *redis.Client {
	cc, ok := p.rdb.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil
	}
	return node
}

// masterAt returns the master of key once the cluster client's slot map
// says it is the node at addr, or nil after deadline.
func (p *pipeline) masterAt(ctx context.Context, key, addr string, deadline time.Time) *redis.Client {
	cc, ok := p.rdb.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	for {
		if node, err := cc.MasterForKey(ctx, key); err == nil && node.Options().Addr == addr {
			return node
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		cc.ReloadState(ctx)
		time.Sleep(10 * time.Millisecond)
	}
}

// turnedAway reports whether a reply is a cluster node's refusal to run the
// call at all, and for MOVED the node it names ("MOVED 3999
// 127.0.0.1:7002"). ASK ("ASK 3999 127.0.0.1:7002") is not followed to
// its node with ASKING: that node answers TRYAGAIN to an admission, whose
// user keys it lacks, until the migration ends.
func turnedAway(err error) (addr string, ok bool) {
	switch {
	case err == nil:
		return "", false
	case redis.HasErrorPrefix(err, "MOVED"):
		f := strings.Fields(err.Error())
		if len(f) != 3 {
			return "", false
		}
		return f[2], true
	case redis.HasErrorPrefix(err, "ASK"), redis.HasErrorPrefix(err, "TRYAGAIN"):
		return "", true
	}
	return "", false
}

// byNode gathers a batch's calls into a part per node, in the order the
// nodes first appear.
type byNode struct {
	parts []nodeCalls
	at    map[*redis.Client]int
}

func (b *byNode) add(node *redis.Client, i int) {
	if b.at == nil {
		b.at = make(map[*redis.Client]int)
	}
	j, ok := b.at[node]
	if !ok {
		j = len(b.parts)
		b.at[node] = j
		b.parts = append(b.parts, nodeCalls{node: node})
	}
	b.parts[j].idx = append(b.parts[j].idx, i)
}

// byMaster splits a batch by the master that holds each call's keys. A call
// whose master cannot be found gets that error (delivered) and is in no
// part.
func (p *pipeline) byMaster(ctx context.Context, calls []pipeCall, out []pipeReply) []nodeCalls {
	all := func(node *redis.Client) []nodeCalls {
		idx := make([]int, len(calls))
		for i := range idx {
			idx[i] = i
		}
		return []nodeCalls{{node: node, idx: idx}}
	}
	switch c := p.rdb.(type) {
	case *redis.Client: // a single node, or Sentinel's failover client
		return all(c)
	case *redis.ClusterClient:
		var parts byNode
		for i, call := range calls {
			node, err := c.MasterForKey(ctx, call.keys[0])
			if err != nil {
				out[i].err = err
				deliver(call, out[i])
				continue
			}
			parts.add(node, i)
		}
		return parts.parts
	}
	for i, call := range calls {
		out[i].err = errNoWaitTopology
		deliver(call, out[i])
	}
	return nil
}

// sendNode runs one part of a batch on a connection of its own to its
// master: the scripts (one pipeline), then, if any of them wrote, one WAIT.
// The refusals are answered as soon as the scripts' replies are read. The
// WAIT holds the connection for up to the timeout while a replica lags or
// stalls, so it runs after sendNode returns, outside the batch's flush
// slot: the next batches, and their refusals, go out at once instead of
// queueing behind it; the acceptances are answered when it ends.
func (p *pipeline) sendNode(ctx context.Context, part nodeCalls, calls []pipeCall, out []pipeReply, retry bool) []redirectedCall {
	sub := make([]pipeCall, len(part.idx))
	res := make([]pipeReply, len(part.idx))
	for j, i := range part.idx {
		sub[j] = calls[i]
	}
	cn := part.node.Conn()
	p.exec(ctx, cn, sub, res)
	p.reloadIfUnreachable(ctx, res)

	var (
		writers    []int // positions in sub of the calls that wrote
		redirected []redirectedCall
	)
	for j, r := range res {
		if r.err == nil && p.dur.wrote(r.res) {
			writers = append(writers, j)
			out[part.idx[j]] = pipeReply{deferred: true}
			continue
		}
		if addr, ok := turnedAway(r.err); ok && retry {
			redirected = append(redirected, redirectedCall{i: part.idx[j], addr: addr, reply: r})
			continue
		}
		out[part.idx[j]] = r
		deliver(sub[j], r)
	}
	if len(writers) == 0 {
		_ = cn.Close()
		return redirected
	}
	wctx := context.WithoutCancel(ctx) // the callers wait on it, whoever sent the batch
	p.dur.waits <- struct{}{}
	go func() {
		defer func() { <-p.dur.waits }()
		defer cn.Close()
		n, err := cn.Wait(wctx, p.dur.replicas, p.dur.timeout).Result()
		unconfirmed := err != nil || n < int64(p.dur.replicas)
		p.dur.noteShortfall(unconfirmed, n, err)
		for _, j := range writers {
			r := res[j]
			r.unconfirmed = unconfirmed
			deliver(sub[j], r)
		}
	}()
	return redirected
}

// reloadIfUnreachable asks a cluster client to reload its slot map when a
// part's master could not be reached.
func (p *pipeline) reloadIfUnreachable(ctx context.Context, res []pipeReply) {
	if cc, ok := p.rdb.(*redis.ClusterClient); ok && slices.ContainsFunc(res, func(r pipeReply) bool { return r.err != nil && unreachable(r.err) }) {
		// This part bypassed the cluster client's routing, which reloads
		// the slot map when a node fails: ask for that reload here, or the
		// part's master would be looked up stale until the next periodic
		// reload, well after a failover.
		cc.ReloadState(ctx)
	}
}
