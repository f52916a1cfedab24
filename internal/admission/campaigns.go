package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/lua"
)

// Campaigns in Redis: Warm installs one as Postgres holds it, UpdateCampaign,
// AddStock and UpdateGuard change it, Retire trims it once it is long over,
// and Forget deletes it.

var (
	warmScript     = newScript(lua.Warm)
	updateScript   = newScript(lua.Update)
	addStockScript = newScript(lua.AddStock)
	retireScript   = newScript(lua.Retire)
)

// buyersChunk bounds the size of one SADD when warming buyers.
const buyersChunk = 5000

// errRebuilding refuses a campaign change while the campaign is rebuilt from
// Postgres: the rebuild would overwrite it with what it read before.
var errRebuilding = seckill.Errorf(seckill.EUNAVAILABLE, "the campaign is being restored; try again")

// Warm installs a campaign unless Redis holds it already, and reports
// whether it did. It adds the buyers first (in chunks; adding a present one
// is harmless), then creates the campaign hash, so the campaign never admits
// before its buyers are known. EINVALID for a campaign Redis cannot hold.
func (a *Admitter) Warm(ctx context.Context, st seckill.WarmState) (bool, error) {
	c := st.Campaign
	id := c.VoucherID
	if c.ShardCount() > 1 {
		return a.warmShards(ctx, st)
	}
	if err := a.writeBuyers(ctx, st, a.keys.buyers(id), 0); err != nil {
		return false, err
	}
	n, err := runScript(ctx, a.rdb, warmScript, []string{a.keys.campaign(id)}, campaignArgs(c)...).Int64()
	if err != nil {
		return false, redisError("warm", err, nil)
	}
	if n == 1 {
		a.shardN.Store(id, 1)
		a.local.invalidate(id)
	}
	return n == 1, nil
}

// warmShards is Warm for a campaign of several stock shards: the stock is
// split evenly over the shards and each buyer goes to their shard; shard 0
// is installed last, with the number of shards, so a campaign whose shard 0
// Redis holds has all its shards. Nothing is installed when shard 0 exists.
//
// It holds the campaign's rebuild lock meanwhile. The campaign is live in
// Postgres before Warm installs it, and a reconciler's look at it half
// installed (shard 0 missing) would otherwise rebuild shard 0 alone, in a
// new epoch with no units, and the campaign whole at its sell-out to count
// them back. A rebuild that holds the lock already installs the campaign
// from Postgres itself: Warm then installs nothing.
func (a *Admitter) warmShards(ctx context.Context, st seckill.WarmState) (bool, error) {
	c := st.Campaign
	id, n := c.VoucherID, c.ShardCount()
	if err := validSharded(st); err != nil {
		return false, err
	}
	token := lockToken()
	if ok, err := a.rdb.SetNX(ctx, a.keys.rebuild(id), token, rebuildLockTTL).Result(); err != nil {
		return false, redisError("warm", err, nil)
	} else if !ok {
		return false, nil
	}
	defer func() { _ = a.abortRebuild(context.WithoutCancel(ctx), id, token, false) }()
	if exists, err := a.rdb.Exists(ctx, a.keys.campaign(id)).Result(); err != nil {
		return false, redisError("warm", err, nil)
	} else if exists == 1 {
		return false, nil
	}
	bases := a.bases(id, n)
	stock := seckill.SplitStock(c.Stock, n)
	buyers := splitBuyers(st.Buyers, n)
	var installed int64
	for i := n - 1; i >= 0; i-- {
		if err := a.writeShardBuyers(ctx, bases[i], buyers[i], 0, c, n); err != nil {
			return false, err
		}
		sc := c
		sc.Stock = stock[i]
		args := campaignArgs(sc)
		if i == 0 {
			args = append(args, n)
		}
		v, err := runScript(ctx, a.rdb, warmScript, []string{bases[i] + "campaign"}, args...).Int64()
		if err != nil {
			return false, redisError("warm", err, nil)
		}
		installed = v
	}
	if installed == 1 {
		a.shardN.Store(id, n)
		a.local.invalidate(id)
		a.warnPlacement(ctx, id, n)
	}
	return installed == 1, nil
}

// validShards refuses a number of shards Redis cannot hold for c:
// EINVALID.
func validShards(c seckill.Campaign) error {
	n := c.ShardCount()
	switch {
	case n > seckill.MaxShards:
		return seckill.Invalidf("shards", "shards must be between 1 and %d", seckill.MaxShards)
	case n > 1 && c.VoucherID > seckill.MaxShardedVoucherID:
		return seckill.Invalidf("shards", "a campaign of several shards needs a voucher id up to %d", seckill.MaxShardedVoucherID)
	}
	return nil
}

// validSharded checks the state of a campaign of several shards before
// any of it is written: its shards, then what validWarmState checks.
func validSharded(st seckill.WarmState) error {
	if err := validShards(st.Campaign); err != nil {
		return err
	}
	return validWarmState(st)
}

// splitBuyers puts each buyer in their shard (seckill.ShardOf).
func splitBuyers(buyers []int64, n int) [][]int64 {
	out := make([][]int64, n)
	for _, u := range buyers {
		s := seckill.ShardOf(u, n)
		out[s] = append(out[s], u)
	}
	return out
}

// writeShardBuyers writes, in one round trip, the buyers of one shard
// (base) into its buyers set, or its staging set when ttl > 0 (emptied
// first, expiring after ttl), and the shard's guard: the campaign's
// challenge and its share of the brake.
func (a *Admitter) writeShardBuyers(ctx context.Context, base string, buyers []int64, ttl time.Duration, c seckill.Campaign, n int) error {
	key := base + "buyers"
	if ttl > 0 {
		key = base + "buyers_staged"
	}
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if ttl > 0 {
			p.Del(ctx, key)
		}
		for chunk := range slices.Chunk(buyers, buyersChunk) {
			members := make([]any, len(chunk))
			for i, u := range chunk {
				members[i] = u
			}
			p.SAdd(ctx, key, members...)
		}
		if ttl > 0 {
			p.Expire(ctx, key, ttl)
		}
		setGuardAt(ctx, p, base+"guard", c.Challenge, c.Brake, n)
		setRoom(ctx, p, base+"guard", c.Room)
		return nil
	})
	return redisError("write buyers", err, nil)
}

// writeBuyers checks st, then writes, in one round trip, the campaign's
// guard settings and its buyers added to key (in chunks: there may be
// many). A staging key (ttl > 0) is emptied first and expires after ttl,
// so one left by a process that died goes away.
func (a *Admitter) writeBuyers(ctx context.Context, st seckill.WarmState, key string, ttl time.Duration) error {
	if err := validWarmState(st); err != nil {
		return err
	}
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if ttl > 0 {
			p.Del(ctx, key)
		}
		for chunk := range slices.Chunk(st.Buyers, buyersChunk) {
			members := make([]any, len(chunk))
			for i, u := range chunk {
				members[i] = u
			}
			p.SAdd(ctx, key, members...)
		}
		if ttl > 0 {
			p.Expire(ctx, key, ttl)
		}
		a.setGuard(ctx, p, st.Campaign)
		return nil
	})
	return redisError("write buyers", err, nil)
}

// validWarmState checks a state before Warm or FinishRebuild writes any of
// it: EINVALID for a campaign Redis cannot hold.
func validWarmState(st seckill.WarmState) error {
	c := st.Campaign
	switch {
	case !validVoucherID(c.VoucherID):
		return seckill.Invalidf("voucherId", "voucher id %d out of range", c.VoucherID)
	case c.Stock < 0:
		return seckill.Invalidf("stock", "stock must be 0 or more")
	case c.Epoch < 0 || c.Epoch > seckill.MaxEpoch:
		return seckill.Invalidf("epoch", "epoch %d out of range", c.Epoch)
	}
	if err := validWindow(c.BeginTime, c.EndTime); err != nil {
		return err
	}
	for _, u := range st.Buyers {
		if u <= 0 {
			return seckill.Invalidf("buyers", "buyer id %d is not positive", u)
		}
	}
	return nil
}

// validWindow checks a sale window before a script is given it: EINVALID
// for one that does not begin or that ends before it begins.
func validWindow(begin, end time.Time) error {
	if begin.UnixMilli() < 0 {
		return seckill.Invalidf("beginTime", "beginTime is required")
	}
	if end.UnixMilli() <= begin.UnixMilli() {
		return seckill.Invalidf("endTime", "endTime must be after beginTime")
	}
	return nil
}

// windowArgs and campaignArgs are a sale window and a campaign as the
// scripts take them in ARGV, in the order lua/prelude.lua's window and
// campaign read them.
func windowArgs(begin, end time.Time, paused bool) []any {
	return []any{begin.UnixMilli(), end.UnixMilli(), boolArg(paused)}
}

func campaignArgs(c seckill.Campaign) []any {
	return append([]any{c.Stock, c.Epoch}, windowArgs(c.BeginTime, c.EndTime, c.Paused)...)
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// The guard: what a campaign asks of a purchase beyond stock and window,
// kept in Redis beside the campaign (same hash tag) so that the admit script
// checks it in the same step: the challenge and the brake. Warm and
// FinishRebuild write it from the campaign Postgres holds, before the
// campaign hash admits anyone, so a campaign that Redis lost comes back with
// its guard; UpdateGuard changes it.

// setGuard queues the write of c's guard on p.
func (a *Admitter) setGuard(ctx context.Context, p redis.Pipeliner, c seckill.Campaign) {
	setGuardAt(ctx, p, a.keys.guard(c.VoucherID), c.Challenge, c.Brake, 1)
	setRoom(ctx, p, a.keys.guard(c.VoucherID), c.Room)
}

// setRoom queues the write of whether a campaign's purchases need a
// waiting room's pass (fixed at creation, so UpdateGuard leaves it).
func setRoom(ctx context.Context, p redis.Pipeliner, key string, w seckill.WaitingRoom) {
	p.HSet(ctx, key, "room", boolArg(w.Enabled()))
}

// setGuardAt queues the write of one shard's guard (key) of a campaign of
// shards shards on p: the challenge, and the shard's share of the brake.
func setGuardAt(ctx context.Context, p redis.Pipeliner, key string, ch seckill.ChallengeKind, brake, shards int) {
	if ch == "" {
		ch = seckill.ChallengeNone
	}
	p.HSet(ctx, key, "challenge", string(ch), "brake", splitBrake(brake, shards))
}

// UpdateCampaign changes the window and the pause of a campaign Redis holds,
// and tells every process that it may admit again. ENOTFOUND when Redis
// does not hold it; EINVALID for a window that ends before it begins.
func (a *Admitter) UpdateCampaign(ctx context.Context, voucherID int64, begin, end time.Time, paused bool) error {
	if !validVoucherID(voucherID) {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	if err := validWindow(begin, end); err != nil {
		return err
	}
	shards, err := a.shardCounts(ctx, []int64{voucherID})
	if err != nil {
		return err
	}
	// Every shard takes the window; shard 0 last, whose answer is the
	// campaign's.
	bases := a.bases(voucherID, shards[voucherID])
	calls := make([]scriptCall, len(bases))
	for i := range bases {
		calls[i] = scriptCall{keys: []string{bases[len(bases)-1-i] + "campaign"}, args: windowArgs(begin, end, paused)}
	}
	cmds := make([]*redis.Cmd, len(calls))
	runScripts(ctx, a.rdb, updateScript, calls, cmds)
	var n int64
	for _, cmd := range cmds {
		if n, err = cmd.Int64(); err != nil {
			return redisError("update campaign", err, nil)
		}
	}
	switch n {
	case 0:
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	case -1:
		return errRebuilding
	}
	a.stockReturned(ctx, voucherID)
	return nil
}

// AddStock puts n more units of a campaign Redis holds on sale and tells
// every process. ENOTFOUND when Redis does not hold it; EINVALID unless
// 1 <= n <= 10^12.
func (a *Admitter) AddStock(ctx context.Context, voucherID, n int64) error {
	if !validVoucherID(voucherID) {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	if n <= 0 || n > 1e12 {
		return seckill.Invalidf("stock", "stock to add must be between 1 and 10^12")
	}
	stock, err := runScript(ctx, a.rdb, addStockScript, []string{a.keys.campaign(voucherID)}, n).Int64()
	if err != nil {
		return redisError("add stock", err, nil)
	}
	switch {
	case stock == 0:
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	case stock < 0:
		return errRebuilding
	}
	a.stockReturned(ctx, voucherID)
	return nil
}

// UpdateGuard sets a campaign's challenge and brake. EINVALID for values
// the admit script does not know.
func (a *Admitter) UpdateGuard(ctx context.Context, voucherID int64, challenge seckill.ChallengeKind, brake int) error {
	if !validVoucherID(voucherID) {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	if !challenge.Valid() {
		return seckill.Invalidf("challenge", "challenge must be NONE, QUIZ or PROOF_OF_WORK")
	}
	if brake < 0 || brake > seckill.MaxBrake {
		return seckill.Invalidf("brake", "brake must be between 0 and %d", seckill.MaxBrake)
	}
	shards, err := a.shardCounts(ctx, []int64{voucherID})
	if err != nil {
		return err
	}
	n := shards[voucherID]
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, b := range a.bases(voucherID, n) {
			setGuardAt(ctx, p, b+"guard", challenge, brake, n)
		}
		return nil
	})
	if err != nil {
		return redisError("update guard", err, nil)
	}
	return nil
}

// Retire trims each campaign of ids that ended more than after ago, has no
// pending admission and is not being rebuilt, down to its hash and guard:
// its buyers and returned orders (one member per buyer) leave Redis, which
// otherwise keeps every campaign it ever sold. Purchases of it still hear
// ENDED from Redis. It returns how many it trimmed now; a campaign trimmed
// before is left as it is. A campaign whose script failed is not counted,
// and its error, naming it, is in the error returned, with those of the
// others that failed (joined; past maxRetireErrors, only counted):
// the campaigns that did not fail are trimmed all the same.
func (a *Admitter) Retire(ctx context.Context, ids []int64, after time.Duration) (int, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return !validVoucherID(id) })
	if len(ids) == 0 {
		return 0, nil
	}
	// Each shard is trimmed on its own (its buyers and returns are its
	// own, and so are its pending admissions); a campaign counts once, by
	// its shard 0.
	refs, err := a.allShards(ctx, ids)
	if err != nil {
		return 0, err
	}
	calls := make([]scriptCall, len(refs))
	for i, r := range refs {
		calls[i] = scriptCall{keys: []string{r.base + "campaign", r.base + "buyers", r.base + "pending",
			r.base + "returned"}, args: []any{after.Milliseconds()}}
	}
	cmds := make([]*redis.Cmd, len(refs))
	runScripts(ctx, a.rdb, retireScript, calls, cmds)
	n, failed := 0, 0
	var errs []error
	for i, c := range cmds {
		v, err := c.Int64()
		switch {
		case err != nil:
			if failed++; failed <= maxRetireErrors {
				name := fmt.Sprintf("campaign %d", refs[i].voucherID)
				if refs[i].shard > 0 {
					name += fmt.Sprintf(" (shard %d)", refs[i].shard)
				}
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		case v == 1 && refs[i].shard == 0:
			n++
		}
	}
	if failed > maxRetireErrors {
		errs = append(errs, fmt.Errorf("and %d more campaigns", failed-maxRetireErrors))
	}
	return n, redisError("retire", errors.Join(errs...), nil)
}

// maxRetireErrors bounds the errors Retire returns: when Redis is out of
// reach every campaign fails alike, and one line each would bury the cause.
const maxRetireErrors = 5

// Forget deletes a campaign from Redis: its hash, buyers and pending
// admissions. Pending admissions are
// lost with it; tests and operators use it for campaigns that are over.
func (a *Admitter) Forget(ctx context.Context, voucherID int64) error {
	if !validVoucherID(voucherID) {
		return nil
	}
	refs, err := a.allShards(ctx, []int64{voucherID})
	if err != nil {
		return err
	}
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, r := range refs {
			b := r.base
			p.Del(ctx, b+"campaign", b+"buyers", b+"pending", b+"pending_at", b+"returned")
			p.Del(ctx, b+"guard", b+"brake")
			if r.shard > 0 || len(refs) > 1 {
				p.Del(ctx, moves(b), movedIn(b))
			}
		}
		return nil
	})
	a.local.forget(voucherID)
	a.shardN.Delete(voucherID)
	return redisError("forget", err, nil)
}
