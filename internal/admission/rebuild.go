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
// Admit would answer ENOTFOUND or seckill.ErrRebuildNeeded for. One round
// trip.
func (a *Admitter) NeedsRebuild(ctx context.Context, ids []int64) ([]int64, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return !validVoucherID(id) })
	if len(ids) == 0 {
		return nil, nil
	}
	// A campaign of several shards needs a rebuild when any shard does:
	// the rebuild restores them all from Postgres.
	refs, err := a.allShards(ctx, ids)
	if err != nil {
		return nil, err
	}
	cmds := make([]*redis.SliceCmd, len(refs))
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range refs {
			cmds[i] = p.HMGet(ctx, r.base+"campaign", "stock", "epoch", "state", "seq")
		}
		return nil
	})
	if err != nil {
		return nil, redisError("needs rebuild", err, nil)
	}
	var out []int64
	for i, cmd := range cmds {
		v := cmd.Val()
		id := refs[i].voucherID
		if len(v) != 4 || v[0] == nil || v[1] == nil || v[2] != nil || usedUp(v[3]) {
			if len(out) == 0 || out[len(out)-1] != id {
				out = append(out, id)
			}
		}
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

// BeginRebuild takes the campaign's rebuild lock (for rebuildLockTTL) and
// stops its admissions until FinishRebuild, if the campaign needs a rebuild
// (as NeedsRebuild decides, in the same step); ok is false while another
// process holds the lock, or when the campaign needs none.
func (a *Admitter) BeginRebuild(ctx context.Context, voucherID int64) (string, bool, error) {
	if !validVoucherID(voucherID) {
		return "", false, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	shards, err := a.shardCounts(ctx, []int64{voucherID})
	if err != nil {
		return "", false, err
	}
	var others []string // the key bases of shards 1 and up
	if n := shards[voucherID]; n > 1 {
		others = a.bases(voucherID, n)[1:]
		if err := a.stopForShards(ctx, voucherID, others); err != nil {
			return "", false, err
		}
	}
	n, err := runScript(ctx, a.rdb, beginScript, []string{a.keys.campaign(voucherID), a.keys.rebuild(voucherID)},
		token, rebuildLockTTL.Milliseconds(), seckill.MaxEpochSeq).Int64()
	if err != nil {
		return "", false, redisError("begin rebuild", err, nil)
	}
	if n != 1 {
		return "", false, nil
	}
	if len(others) > 0 {
		// The lock is ours: stop the other shards too, each recording the
		// token that alone may install it again.
		calls := make([]scriptCall, len(others))
		for i, b := range others {
			calls[i] = scriptCall{keys: []string{b + "campaign"}, args: []any{token}}
		}
		cmds := make([]*redis.Cmd, len(calls))
		runScripts(ctx, a.rdb, shardStopScript, calls, cmds)
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				_ = a.AbortRebuild(context.WithoutCancel(ctx), voucherID, token)
				return "", false, redisError("stop shards", err, nil)
			}
		}
	}
	// The campaign admits nobody now: drop any local mark, so that this
	// process asks Redis (and hears "rebuild") rather than repeat an
	// outcome from before.
	a.local.invalidate(voucherID)
	return token, true, nil
}

// stopForShards marks shard 0 of a campaign stale when another of its
// shards (others: their key bases) needs a rebuild, so that the lock taken
// on shard 0 (rebuild_begin.lua, which asks shard 0 only) covers them.
func (a *Admitter) stopForShards(ctx context.Context, voucherID int64, others []string) error {
	cmds := make([]*redis.SliceCmd, len(others))
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range others {
			cmds[i] = p.HMGet(ctx, b+"campaign", "stock", "epoch", "state", "seq")
		}
		return nil
	})
	if err != nil {
		return redisError("needs rebuild", err, nil)
	}
	for _, cmd := range cmds {
		if v := cmd.Val(); len(v) != 4 || v[0] == nil || v[1] == nil || v[2] != nil || usedUp(v[3]) {
			err := runScript(ctx, a.rdb, shardStopScript, []string{a.keys.campaign(voucherID)}, "").Err()
			return redisError("stop shard 0", err, nil)
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
	if err := runScript(ctx, a.rdb, abortScript, []string{a.keys.rebuild(voucherID)}, token).Err(); err != nil {
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
	if err := validShards(c); err != nil {
		return false, err
	}
	if err := validWarmState(st); err != nil {
		return false, err
	}
	bases := a.bases(id, n)
	stock := seckill.SplitStock(c.Stock, n)
	buyers := splitBuyers(st.Buyers, n)
	for i := n - 1; i >= 1; i-- {
		b := bases[i]
		if err := a.writeShardBuyers(ctx, b, buyers[i], rebuildLockTTL, c, n); err != nil {
			return false, err
		}
		sc := c
		sc.Stock = stock[i]
		keys := []string{b + "campaign", b + "buyers", b + "pending", b + "pending_at", b + "buyers_staged", moves(b), movedIn(b)}
		v, err := runScript(ctx, a.rdb, shardInstallScript, keys, append([]any{token}, campaignArgs(sc)...)...).Int64()
		if err != nil {
			return false, redisError("install shard", err, nil)
		}
		if v != 1 {
			return false, nil
		}
	}
	if err := a.writeShardBuyers(ctx, bases[0], buyers[0], rebuildLockTTL, c, n); err != nil {
		return false, err
	}
	sc := c
	sc.Stock = stock[0]
	keys := append(a.keys.admit(id), a.keys.rebuild(id), a.keys.buyersStaged(id))
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
