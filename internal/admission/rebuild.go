package admission

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/lua"
)

// rebuildLockTTL bounds how long a campaign stays locked by a process that
// died while rebuilding it.
const rebuildLockTTL = 10 * time.Second

var (
	beginScript   = newScript(lua.RebuildBegin)
	abortScript   = newScript(lua.RebuildAbort)
	rebuildScript = newScript(lua.Rebuild)
	stampScript   = newScript(lua.Stamp)
)

// NeedsRebuild returns those of ids whose campaign Redis does not hold, or
// holds with a state set (stale after a restart or failover, rebuilding),
// from before epochs, or with its epoch's sequence used up: the campaigns
// Admit would answer ENOTFOUND or seckill.ErrRebuildNeeded for. A campaign
// of several shards is listed when any shard is, and when its units are to
// be counted back (recountDue). One round trip.
func (a *Admitter) NeedsRebuild(ctx context.Context, ids []int64) ([]int64, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return !validVoucherID(id) })
	if len(ids) == 0 {
		return nil, nil
	}
	refs, err := a.allShards(ctx, ids)
	if err != nil {
		return nil, err
	}
	views, err := a.shardStates(ctx, refs)
	if err != nil {
		return nil, err
	}
	var out []int64
	for i := 0; i < len(refs); {
		j := i + 1
		for j < len(refs) && refs[j].voucherID == refs[i].voucherID {
			j++
		}
		if p, _ := plan(views[i:j]); p != rebuildNone {
			out = append(out, refs[i].voucherID)
		}
		i = j
	}
	return out, nil
}

// usedUp reports whether a campaign's seq field says its epoch handed out
// its last sequence (admit.lua then asks for a rebuild).
func usedUp(seq any) bool {
	s, _ := seq.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n >= seckill.MaxEpochSeq
}

// shardState is one stock shard as a rebuild's look saw it.
type shardState struct {
	held    bool   // stock and epoch present
	state   string // "" while it admits
	usedUp  bool   // its epoch's sequence is used up
	stock   int64
	recount bool  // shard 0 only: units to count back (rebuild_begin.lua)
	moves   int64 // moves recorded out of it (campaigns of several shards)
}

// needs reports whether the shard must be rebuilt before it admits.
func (s shardState) needs() bool { return !s.held || s.state != "" || s.usedUp }

// shardStates reads the shards refs name, in one round trip: the campaign
// hash's stock, epoch, state, seq and recount, and for a shard of a
// campaign of several the number of moves recorded out of it.
func (a *Admitter) shardStates(ctx context.Context, refs []shardRef) ([]shardState, error) {
	hm := make([]*redis.SliceCmd, len(refs))
	hl := make([]*redis.IntCmd, len(refs))
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range refs {
			hm[i] = p.HMGet(ctx, r.base+"campaign", "stock", "epoch", "state", "seq", "recount")
			if r.shards > 1 {
				hl[i] = p.HLen(ctx, moves(r.base))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisError("needs rebuild", err, nil)
	}
	out := make([]shardState, len(refs))
	for i := range refs {
		v := hm[i].Val()
		if len(v) != 5 {
			continue // not held (a key of another type): rebuilt
		}
		stock, ok := intField(v[0])
		st, _ := v[2].(string)
		out[i] = shardState{held: ok && v[1] != nil, state: st, usedUp: usedUp(v[3]), stock: stock, recount: v[4] != nil}
		if hl[i] != nil {
			out[i].moves = hl[i].Val()
		}
	}
	return out, nil
}

// What a campaign's rebuild is for (plan).
const (
	rebuildNone  = iota // it admits as it is
	rebuildSome         // some stock shards: those a failover or restart lost
	rebuildWhole        // every shard, from Postgres's stock
)

// plan decides, from a look at every shard of one campaign (shard 0
// first), what its rebuild must do, and for rebuildSome which shards.
//
// A campaign of one shard, or one whose every shard needs it, is rebuilt
// whole, as is one whose epoch's sequence is used up in a shard. When only
// some shards lost their state, only they are rebuilt: they start again
// with their buyers and no units, in a new epoch, while the others keep
// selling. The units the lost shards held are not lost (Postgres's stock
// still counts them) but cannot be counted while the others sell: shard 0
// is marked "recount", and once nothing is left anywhere (every shard
// admitting, at 0, no move recorded), the campaign is rebuilt whole, which
// counts them back from Postgres and stops nobody who could have bought.
// Shard 0 with state "recount" asks for that rebuild (shard_stop.lua).
func plan(vs []shardState) (int, []int) {
	var some []int
	for i, v := range vs {
		if v.usedUp {
			return rebuildWhole, nil
		}
		if v.needs() {
			some = append(some, i)
		}
	}
	switch {
	case len(some) == len(vs), vs[0].state == "recount":
		return rebuildWhole, nil
	case len(some) > 0:
		return rebuildSome, some
	case recountDue(vs):
		return rebuildWhole, nil
	}
	return rebuildNone, nil
}

// why says what in vs (every shard of a campaign, shard 0 first) needs a
// rebuild, for the rebuild's log line: each shard that does and how, and
// units to count back once nothing is left.
func why(vs []shardState) string {
	var out []string
	for i, v := range vs {
		switch {
		case !v.held:
			out = append(out, fmt.Sprintf("shard %d absent", i))
		case v.state != "":
			out = append(out, fmt.Sprintf("shard %d %s", i, v.state))
		case v.usedUp:
			out = append(out, fmt.Sprintf("shard %d sequence used up", i))
		}
	}
	if recountDue(vs) {
		out = append(out, "units to count back, none left to sell")
	}
	return strings.Join(out, "; ")
}

// recountDue reports whether a campaign of several shards has units to
// count back (shard 0 marked "recount") and nothing left to sell: every
// shard admitting at 0, no move recorded.
func recountDue(vs []shardState) bool {
	if len(vs) < 2 || !vs[0].recount {
		return false
	}
	for _, v := range vs {
		if v.needs() || v.stock > 0 || v.moves > 0 {
			return false
		}
	}
	return true
}

// BeginRebuild takes the campaign's rebuild lock (for rebuildLockTTL) and
// stops its admissions until FinishRebuild, if the campaign needs a rebuild
// (as NeedsRebuild decides, in the same step); ok is false while another
// process holds the lock, or when the campaign needs none. For a campaign
// of several shards of which only some need it (plan), the lock names
// them, and only they stop.
func (a *Admitter) BeginRebuild(ctx context.Context, voucherID int64) (seckill.RebuildLock, bool, error) {
	if !validVoucherID(voucherID) {
		return seckill.RebuildLock{}, false, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	lock := seckill.RebuildLock{Token: lockToken()}
	shards, err := a.shardCounts(ctx, []int64{voucherID})
	if err != nil {
		return seckill.RebuildLock{}, false, err
	}
	n := shards[voucherID]
	if n <= 1 {
		ok, err := a.lockWhole(ctx, voucherID, lock.Token)
		return lock, ok, err
	}
	refs := a.refs(voucherID, n)
	views, err := a.shardStates(ctx, refs)
	if err != nil {
		return seckill.RebuildLock{}, false, err
	}
	switch p, _ := plan(views); p {
	case rebuildNone:
		return seckill.RebuildLock{}, false, nil
	case rebuildWhole:
		lock.Reason = why(views)
		ok, err := a.lockWholeShards(ctx, voucherID, lock.Token, refs, views)
		return lock, ok, err
	}
	// Some shards: the lock first, then a second look under it (another
	// process may have rebuilt them meanwhile), then those shards stop.
	r, err := runScript(ctx, a.rdb, beginScript, []string{a.keys.campaign(voucherID), a.keys.rebuild(voucherID)},
		lock.Token, rebuildLockTTL.Milliseconds(), seckill.MaxEpochSeq, "shards").Int64()
	if err != nil {
		return seckill.RebuildLock{}, false, redisError("begin rebuild", err, nil)
	}
	if r != 1 && r != 3 {
		return seckill.RebuildLock{}, false, nil
	}
	// Not going on, take back the recount mark this call set (r == 3):
	// the first look may have caught a shard of a new campaign not yet
	// warmed (Warm installs them one by one, shard 0 last), and a mark left
	// behind rebuilds the campaign whole when it sells out.
	giveUp := func() { _ = a.abortRebuild(context.WithoutCancel(ctx), voucherID, lock.Token, r == 3) }
	if views, err = a.shardStates(ctx, refs); err != nil {
		giveUp()
		return seckill.RebuildLock{}, false, err
	}
	p, some := plan(views)
	if p != rebuildSome {
		// Rebuilt meanwhile, never needed (a look during Warm), or the
		// whole campaign needs it now: the next look decides.
		giveUp()
		return seckill.RebuildLock{}, false, nil
	}
	lock.Shards, lock.Reason = some, why(views)
	if err := a.stopShards(ctx, voucherID, lock.Token, refs, lock.Shards); err != nil {
		return seckill.RebuildLock{}, false, err
	}
	a.local.invalidate(voucherID)
	return lock, true, nil
}

// lockToken returns a new random token for the rebuild lock: the holder's
// alone may end it.
func lockToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// refs returns the shards of a campaign of n shards.
func (a *Admitter) refs(voucherID int64, n int) []shardRef {
	out := make([]shardRef, n)
	for i, b := range a.bases(voucherID, n) {
		out[i] = shardRef{voucherID: voucherID, shard: i, shards: n, base: b}
	}
	return out
}

// lockWhole takes the rebuild lock of a campaign of one shard (or shard 0
// of one of several), if it needs a rebuild (rebuild_begin.lua decides).
func (a *Admitter) lockWhole(ctx context.Context, voucherID int64, token string) (bool, error) {
	n, err := runScript(ctx, a.rdb, beginScript, []string{a.keys.campaign(voucherID), a.keys.rebuild(voucherID)},
		token, rebuildLockTTL.Milliseconds(), seckill.MaxEpochSeq).Int64()
	if err != nil {
		return false, redisError("begin rebuild", err, nil)
	}
	if n != 1 {
		return false, nil
	}
	// The campaign admits nobody now: drop any local mark, so that this
	// process asks Redis (and hears "rebuild") rather than repeat an
	// outcome from before.
	a.local.invalidate(voucherID)
	return true, nil
}

// lockWholeShards takes the lock of a rebuild of every shard of a campaign
// of several (views: how they were seen): shard 0 is marked "recount"
// first when it admits, so that rebuild_begin.lua (which asks shard 0)
// takes the lock, then every other shard stops too, each recording the
// token that alone may install it again. For the recount alone, shard 0
// is marked only while it still owes one.
func (a *Admitter) lockWholeShards(ctx context.Context, voucherID int64, token string, refs []shardRef, views []shardState) (bool, error) {
	if zero := views[0]; zero.held && zero.state == "" {
		args := []any{""}
		if recountDue(views) {
			args = append(args, "recount")
		}
		if err := runScript(ctx, a.rdb, shardStopScript, []string{a.keys.campaign(voucherID)}, args...).Err(); err != nil {
			return false, redisError("stop shard 0", err, nil)
		}
	}
	ok, err := a.lockWhole(ctx, voucherID, token)
	if err != nil || !ok {
		return false, err
	}
	others := make([]int, 0, len(refs)-1)
	for i := 1; i < len(refs); i++ {
		others = append(others, i)
	}
	return true, a.stopShards(ctx, voucherID, token, refs, others)
}

// stopShards stops the shards some of a campaign (refs: all its shards)
// for the rebuild holding token (shard_stop.lua); on an error it releases
// the lock.
func (a *Admitter) stopShards(ctx context.Context, voucherID int64, token string, refs []shardRef, some []int) error {
	calls := make([]scriptCall, len(some))
	for i, s := range some {
		calls[i] = scriptCall{keys: []string{refs[s].base + "campaign"}, args: []any{token}}
	}
	cmds := make([]*redis.Cmd, len(calls))
	runScripts(ctx, a.rdb, shardStopScript, calls, cmds)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			_ = a.AbortRebuild(context.WithoutCancel(ctx), voucherID, token)
			return redisError("stop shards", err, nil)
		}
	}
	return nil
}

// AbortRebuild releases the campaign's rebuild lock if it is still token's,
// after a rebuild failed between BeginRebuild and FinishRebuild, so that
// the next attempt need not wait rebuildLockTTL. The campaign still admits
// nobody until it is rebuilt.
func (a *Admitter) AbortRebuild(ctx context.Context, voucherID int64, token string) error {
	if !validVoucherID(voucherID) {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	return a.abortRebuild(ctx, voucherID, token, false)
}

// abortRebuild is AbortRebuild; with unmark it also takes back the
// "recount" mark the holder's rebuild_begin.lua set.
func (a *Admitter) abortRebuild(ctx context.Context, voucherID int64, token string, unmark bool) error {
	keys, args := []string{a.keys.rebuild(voucherID)}, []any{token}
	if unmark {
		keys, args = append(keys, a.keys.campaign(voucherID)), append(args, "recount")
	}
	if err := runScript(ctx, a.rdb, abortScript, keys, args...).Err(); err != nil {
		return redisError("abort rebuild", err, nil)
	}
	return nil
}

// FinishRebuild installs st (stock, window, epoch, buyers) in place of
// everything Redis held for the campaign, releases the lock and tells every
// process that the campaign may admit again. It reports false, changing
// nothing, when the lock is no longer token's.
func (a *Admitter) FinishRebuild(ctx context.Context, token string, st seckill.WarmState) (bool, error) {
	c := st.Campaign
	id := c.VoucherID
	if c.ShardCount() > 1 && st.Shards != nil {
		return a.finishSome(ctx, token, st)
	}
	if c.ShardCount() > 1 {
		return a.finishShards(ctx, token, st)
	}
	// The buyers go to a staging set first, which the script renames into
	// place only if the lock is still ours. The staging set expires with
	// the lock, in case this process dies; the script takes the expiry off
	// the set it installs, or every buyer could buy again once it lapsed.
	staged := a.keys.buyersStaged(id)
	if err := a.writeBuyers(ctx, st, staged, rebuildLockTTL); err != nil {
		return false, err
	}
	keys := append(a.keys.admit(id), a.keys.rebuild(id), staged)
	n, err := runScript(ctx, a.rdb, rebuildScript, keys, append([]any{token}, campaignArgs(c)...)...).Int64()
	if err != nil {
		return false, redisError("rebuild", err, nil)
	}
	if n != 1 {
		return false, nil
	}
	a.stockReturned(ctx, id)
	return true, nil
}

// finishShards is FinishRebuild for a campaign of several shards: Postgres's
// stock is split evenly over the shards again and each buyer goes to their
// shard; the shards other than 0 are installed first, each only if still
// stopped by this rebuild (shard_install.lua), then shard 0, which ends the
// lock. Moves recorded before are void: their units are in Postgres's
// stock, which the rebuild read.
func (a *Admitter) finishShards(ctx context.Context, token string, st seckill.WarmState) (bool, error) {
	c := st.Campaign
	id, n := c.VoucherID, c.ShardCount()
	if err := validSharded(st); err != nil {
		return false, err
	}
	bases := a.bases(id, n)
	stock := seckill.SplitStock(c.Stock, n)
	buyers := splitBuyers(st.Buyers, n)
	for i := n - 1; i >= 1; i-- {
		b := bases[i]
		if ok, err := a.installShard(ctx, token, b, buyers[i], c, n, stock[i]); err != nil || !ok {
			return false, err
		}
	}
	if err := a.writeShardBuyers(ctx, bases[0], buyers[0], rebuildLockTTL, c, n); err != nil {
		return false, err
	}
	sc := c
	sc.Stock = stock[0]
	keys := append(a.keys.admit(id), a.keys.rebuild(id), a.keys.buyersStaged(id), moves(bases[0]), movedIn(bases[0]))
	args := append(append([]any{token}, campaignArgs(sc)...), n)
	v, err := runScript(ctx, a.rdb, rebuildScript, keys, args...).Int64()
	if err != nil {
		return false, redisError("rebuild", err, nil)
	}
	if v != 1 {
		return false, nil
	}
	a.shardN.Store(id, n)
	a.stockReturned(ctx, id)
	return true, nil
}

// installShard installs one shard (its key base b) of a campaign c of n
// shards for the rebuild holding token, with stock units and its buyers
// (shard_install.lua, which takes extra as its optional arguments); false
// when the shard is no longer stopped by this rebuild.
func (a *Admitter) installShard(ctx context.Context, token, b string, buyers []int64, c seckill.Campaign, n int, stock int64, extra ...any) (bool, error) {
	if err := a.writeShardBuyers(ctx, b, buyers, rebuildLockTTL, c, n); err != nil {
		return false, err
	}
	c.Stock = stock
	args := append(append([]any{token}, campaignArgs(c)...), extra...)
	keys := []string{b + "campaign", b + "buyers", b + "pending", b + "pending_at", b + "buyers_staged", moves(b), movedIn(b)}
	v, err := runScript(ctx, a.rdb, shardInstallScript, keys, args...).Int64()
	if err != nil {
		return false, redisError("install shard", err, nil)
	}
	return v == 1, nil
}

// finishSome is FinishRebuild for a rebuild of some shards of a campaign
// (st.Shards; plan): each starts again in the new epoch with its buyers and
// no units, only if still stopped by this rebuild (shard_install.lua);
// shard 0, when among them, stays marked "recount" (rebuild_begin.lua
// marked it when it took the lock). Then the lock is released. The other
// shards are not touched: they kept selling.
func (a *Admitter) finishSome(ctx context.Context, token string, st seckill.WarmState) (bool, error) {
	c := st.Campaign
	id, n := c.VoucherID, c.ShardCount()
	if err := validSharded(st); err != nil {
		return false, err
	}
	for _, s := range st.Shards {
		if s < 0 || s >= n {
			return false, seckill.Invalidf("shards", "campaign %d has shards 0 to %d", id, n-1)
		}
	}
	bases := a.bases(id, n)
	buyers := splitBuyers(st.Buyers, n)
	for _, s := range st.Shards {
		var zero []any // shard 0 says how many shards there are, and owes the recount
		if s == 0 {
			zero = []any{n, "1"}
		}
		if ok, err := a.installShard(ctx, token, bases[s], buyers[s], c, n, 0, zero...); err != nil || !ok {
			return false, err
		}
	}
	v, err := runScript(ctx, a.rdb, abortScript, []string{a.keys.rebuild(id)}, token).Int64()
	if err != nil {
		return false, redisError("end rebuild", err, nil)
	}
	if v != 1 {
		return false, nil
	}
	a.shardN.Store(id, n)
	a.stockReturned(ctx, id)
	return true, nil
}

// ConnectHook guards admission against Redis servers that may have lost
// acknowledged writes. Its For gives the go-redis OnConnect function of one
// node (one address of a cluster; "" for a single node or Sentinel's
// master, wherever it is). Whenever that node turns out to be another server
// than the last time (INFO run_id: a restart gives a new one; or, by its
// replication id, a replica promoted in a failover), it marks stale, before
// that connection carries anything else, every live campaign (as Postgres
// lists them, through Options.LiveCampaigns) that the node holds and
// another server installed. A stale campaign admits nobody until it is
// rebuilt from Postgres (seckill.Service), so admissions can neither reuse
// the order ids nor resell the units of admissions the server forgot.
// Campaigns whose slot is on another node answer MOVED and are left to that
// node's guard; no Redis index decides which campaigns to look at.
type ConnectHook struct {
	keys   keys
	live   func(ctx context.Context) ([]int64, error)
	shards func(ctx context.Context, ids []int64) (map[int64]int, error) // nil: one each
	logger *slog.Logger

	mu    sync.Mutex
	nodes map[string]*nodeGuard
}

// nodeGuard remembers which server one node was when it was last stamped.
type nodeGuard struct {
	mu   sync.Mutex
	last string // run_id and replication id
}

// NewConnectHook returns the guard for the campaigns of opts.LiveCampaigns
// (none when it is nil), under opts.Prefix.
func NewConnectHook(opts Options) *ConnectHook {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	live := opts.LiveCampaigns
	if live == nil {
		live = func(context.Context) ([]int64, error) { return nil, nil }
	}
	return &ConnectHook{keys: keys{prefix: opts.Prefix}, live: live, shards: opts.CampaignShards, logger: logger,
		nodes: make(map[string]*nodeGuard)}
}

// For returns the OnConnect function of the node at addr.
func (h *ConnectHook) For(addr string) func(ctx context.Context, cn *redis.Conn) error {
	h.mu.Lock()
	g := h.nodes[addr]
	if g == nil {
		g = &nodeGuard{}
		h.nodes[addr] = g
	}
	h.mu.Unlock()
	return func(ctx context.Context, cn *redis.Conn) error {
		// Two INFO commands in one round trip: Redis before 7 takes one
		// section a command.
		var server, repl *redis.StringCmd
		if _, err := cn.Pipelined(ctx, func(p redis.Pipeliner) error {
			server, repl = p.Info(ctx, "server"), p.Info(ctx, "replication")
			return nil
		}); err != nil {
			return fmt.Errorf("admission: info: %w", err)
		}
		info := server.Val() + repl.Val()
		rid := infoField(info, "run_id")
		if rid == "" {
			return fmt.Errorf("admission: info server: no run_id")
		}
		// A promoted replica keeps its run_id but takes a new replication
		// id: it is another server for our purpose, since it may have
		// missed its master's last writes.
		id := rid + ":" + infoField(info, "master_replid")
		g.mu.Lock()
		defer g.mu.Unlock()
		if id == g.last {
			return nil
		}
		if infoField(info, "role") != "master" {
			// A replica (a cluster client reads the slot map from any
			// node) holds no campaign we write; its promotion changes
			// its replication id, and then it is stamped.
			g.last = id
			return nil
		}
		ids, err := h.live(ctx)
		if err != nil {
			return fmt.Errorf("admission: live campaigns: %w", err)
		}
		var shards map[int64]int
		if h.shards != nil && len(ids) > 0 {
			if shards, err = h.shards(ctx, ids); err != nil {
				return fmt.Errorf("admission: shards of live campaigns: %w", err)
			}
		}
		n, err := stampAll(ctx, cn, h.keys, rid, ids, shards)
		if err != nil {
			return fmt.Errorf("admission: stamp campaigns: %w", err)
		}
		g.last = id
		if n > 0 {
			h.logger.Warn("redis server changed (restart or failover): campaigns stop until rebuilt from Postgres",
				"node", addr, "run_id", rid, "campaigns", n)
		}
		return nil
	}
}

// stampAll runs stamp.lua on cn for every shard of every campaign of ids
// (shards gives those with more than one shard) that cn's node serves, and
// returns how many it stopped. The others answer MOVED (a cluster node that
// does not serve their slot).
func stampAll(ctx context.Context, cn *redis.Conn, k keys, rid string, ids []int64, shards map[int64]int) (int, error) {
	var all []string
	for _, id := range ids {
		if validVoucherID(id) {
			for i := range max(shards[id], 1) {
				all = append(all, k.shardBase(id, i, shards[id])+"campaign")
			}
		}
	}
	stopped := 0
	for chunk := range slices.Chunk(all, 500) {
		calls := make([]scriptCall, 0, len(chunk))
		for _, key := range chunk {
			calls = append(calls, scriptCall{keys: []string{key}, args: []any{rid}})
		}
		cmds := make([]*redis.Cmd, len(calls))
		runScripts(ctx, cn, stampScript, calls, cmds)
		for _, c := range cmds {
			n, err := c.Int64()
			switch {
			case err == nil:
				if n == 1 {
					stopped++
				}
			case isRedirect(err):
			default:
				return stopped, err
			}
		}
	}
	return stopped, nil
}

// isRedirect reports whether err is a cluster's answer that the key's slot
// is served elsewhere.
func isRedirect(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// infoField returns one "name:value" line's value from an INFO reply.
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
