package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/lua"
)

// The outbox of pending admissions: an admission is pending in Redis (the
// pending hash and the pending_at zset, beside its campaign) from Admit
// until Postgres holds it (Ack) or its unit goes back on sale (Release).
// Stale and Queued find those left behind, for the reconciler and the
// dashboard; PendingOf lists a campaign's, which a rebuild persists first.

var (
	ackScript     = newScript(lua.Ack)
	releaseScript = newScript(lua.Release)
)

// Queued returns how many admissions of each campaign are pending (admitted
// in Redis, not yet held by Postgres), in one round trip. Every id is in the
// map; a campaign Redis does not hold counts 0.
func (a *Admitter) Queued(ctx context.Context, voucherIDs []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(voucherIDs))
	if len(voucherIDs) == 0 {
		return out, nil
	}
	for _, id := range voucherIDs {
		out[id] = 0
	}
	refs, err := a.allShards(ctx, voucherIDs)
	if err != nil {
		return nil, err
	}
	cmds := make([]*redis.IntCmd, len(refs))
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range refs {
			cmds[i] = p.HLen(ctx, r.base+"pending")
		}
		return nil
	})
	if err != nil {
		return nil, redisError("queued", err, nil)
	}
	for i, cmd := range cmds {
		out[refs[i].voucherID] += cmd.Val()
	}
	return out, nil
}

// Ack forgets admissions that Postgres holds now: one script call per
// campaign, all in one pipeline. It is idempotent. The campaign of each
// admission is read from its order id.
func (a *Admitter) Ack(ctx context.Context, adms []seckill.Admission) error {
	if len(adms) == 0 {
		return nil
	}
	type shardOf struct {
		voucherID int64
		shard     int
	}
	seqs := make(map[shardOf][]any)
	bases := make(map[shardOf]string)
	var order []shardOf
	for _, adm := range adms {
		voucherID, shard, seq, base, err := a.orderBase(ctx, adm.OrderID)
		if errors.Is(err, errMalformedID) {
			return seckill.Invalidf("orderId", "order id %d is malformed", adm.OrderID)
		} else if err != nil {
			return err
		}
		k := shardOf{voucherID, shard}
		if _, ok := seqs[k]; !ok {
			order = append(order, k)
			bases[k] = base
		}
		seqs[k] = append(seqs[k], seq)
	}
	calls := make([]scriptCall, len(order))
	for i, k := range order {
		calls[i] = scriptCall{keys: []string{bases[k] + "pending", bases[k] + "pending_at"}, args: seqs[k]}
	}
	cmds := make([]*redis.Cmd, len(calls))
	runScripts(ctx, a.rdb, ackScript, calls, cmds)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return redisError("ack", err, nil)
		}
	}
	return nil
}

// Release gives a failed admission's unit back (and its buyer slot unless
// keepBuyer is set), and tells every process that the campaign may admit
// again. It reports false when
// the admission was not pending (released or acknowledged before), so
// concurrent or repeated calls give back exactly one unit. ECONFLICT when
// the order is pending for another user than adm.UserID.
func (a *Admitter) Release(ctx context.Context, adm seckill.Admission, keepBuyer bool) (bool, error) {
	voucherID, _, seq, base, err := a.orderBase(ctx, adm.OrderID)
	if errors.Is(err, errMalformedID) {
		return false, seckill.Invalidf("orderId", "order id %d is malformed", adm.OrderID)
	} else if err != nil {
		return false, err
	}
	if adm.UserID <= 0 {
		return false, seckill.Invalidf("userId", "user id must be positive")
	}
	keep := 0
	if keepBuyer {
		keep = 1
	}
	keys := []string{base + "campaign", base + "buyers", base + "pending", base + "pending_at"}
	n, err := runScript(ctx, a.rdb, releaseScript, keys, seq, adm.UserID, keep).Int64()
	if err != nil {
		return false, redisError("release", err, nil)
	}
	switch n {
	case 1:
		a.stockReturned(ctx, voucherID)
		return true, nil
	case 0:
		return false, nil
	case -1:
		return false, seckill.Errorf(seckill.ECONFLICT, "order %d is pending for another user", adm.OrderID)
	}
	return false, fmt.Errorf("admission: release order %d: unexpected script reply %d", adm.OrderID, n)
}

// Stale returns up to limit admissions of the campaigns voucherIDs pending
// for longer than age, oldest first, measured on Redis's clock. The caller
// names the campaigns (from Postgres): no Redis index decides which are
// looked at.
func (a *Admitter) Stale(ctx context.Context, voucherIDs []int64, age time.Duration, limit int) ([]seckill.Admission, error) {
	ids := slices.DeleteFunc(slices.Clone(voucherIDs), func(id int64) bool { return !validVoucherID(id) })
	if limit <= 0 || len(ids) == 0 {
		return nil, nil
	}
	now, err := a.rdb.Time(ctx).Result()
	if err != nil {
		return nil, redisError("stale: time", err, nil)
	}
	cutoff := "(" + strconv.FormatInt(now.Add(-age).UnixMilli(), 10)

	// The oldest `limit` of each shard of each campaign, then the oldest
	// `limit` of all.
	refs, err := a.allShards(ctx, ids)
	if err != nil {
		return nil, err
	}
	ranges := make([]*redis.ZSliceCmd, len(refs))
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range refs {
			ranges[i] = p.ZRangeByScoreWithScores(ctx, r.base+"pending_at",
				&redis.ZRangeBy{Min: "-inf", Max: cutoff, Count: int64(limit)})
		}
		return nil
	})
	if err != nil {
		return nil, redisError("stale: pending_at", err, nil)
	}
	type candidate struct {
		ref shardRef
		seq int64
		ms  float64
	}
	var cands []candidate
	for i, cmd := range ranges {
		for _, z := range cmd.Val() {
			member, _ := z.Member.(string)
			seq, err := strconv.ParseInt(member, 10, 64)
			if err != nil {
				a.logger.WarnContext(ctx, "bad member of pending_at", "voucher_id", refs[i].voucherID, "member", z.Member)
				continue
			}
			cands = append(cands, candidate{ref: refs[i], seq: seq, ms: z.Score})
		}
	}
	slices.SortFunc(cands, func(x, y candidate) int {
		return cmp.Or(cmp.Compare(x.ms, y.ms), cmp.Compare(x.ref.voucherID, y.ref.voucherID),
			cmp.Compare(x.ref.shard, y.ref.shard), cmp.Compare(x.seq, y.seq))
	})
	cands = cands[:min(len(cands), limit)]
	if len(cands) == 0 {
		return nil, nil
	}

	// The users, from the pending hash; an entry acknowledged meanwhile is
	// no longer stale.
	values := make([]*redis.SliceCmd, len(cands))
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range cands {
			values[i] = p.HMGet(ctx, c.ref.base+"pending", strconv.FormatInt(c.seq, 10))
		}
		return nil
	})
	if err != nil {
		return nil, redisError("stale: pending", err, nil)
	}
	out := make([]seckill.Admission, 0, len(cands))
	for i, c := range cands {
		v, ok := values[i].Val()[0].(string)
		if !ok {
			continue
		}
		adm, err := parsePending(c.ref.voucherID, c.ref.shard, c.seq, v)
		if err != nil {
			a.logger.WarnContext(ctx, "skip malformed pending admission", "voucher_id", c.ref.voucherID, "err", err)
			continue
		}
		out = append(out, *adm)
	}
	return out, nil
}

// PendingOf returns every admission of a campaign that is still pending,
// in every shard.
func (a *Admitter) PendingOf(ctx context.Context, voucherID int64) ([]seckill.Admission, error) {
	if !validVoucherID(voucherID) {
		return nil, nil
	}
	refs, err := a.allShards(ctx, []int64{voucherID})
	if err != nil {
		return nil, err
	}
	cmds := make([]*redis.MapStringStringCmd, len(refs))
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range refs {
			cmds[i] = p.HGetAll(ctx, r.base+"pending")
		}
		return nil
	})
	if err != nil {
		return nil, redisError("pending of campaign", err, nil)
	}
	var out []seckill.Admission
	for i, cmd := range cmds {
		for field, v := range cmd.Val() {
			seq, err := strconv.ParseInt(field, 10, 64)
			if err != nil || !validSeq(seq) {
				a.logger.Warn("skip malformed pending admission", "voucher_id", voucherID, "field", field)
				continue
			}
			adm, err := parsePending(voucherID, refs[i].shard, seq, v)
			if err != nil {
				a.logger.Warn("skip malformed pending admission", "voucher_id", voucherID, "err", err)
				continue
			}
			out = append(out, *adm)
		}
	}
	slices.SortFunc(out, func(x, y seckill.Admission) int { return cmp.Compare(x.OrderID, y.OrderID) })
	return out, nil
}

// parsePending decodes a pending hash value "<user>:<admitted_ms>" of one
// shard.
func parsePending(voucherID int64, shard int, seq int64, v string) (*seckill.Admission, error) {
	u, ms, ok := strings.Cut(v, ":")
	userID, err1 := strconv.ParseInt(u, 10, 64)
	admitted, err2 := strconv.ParseInt(ms, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("admission: pending %d/%d/%d: malformed value %q", voucherID, shard, seq, v)
	}
	return &seckill.Admission{
		OrderID:    seckill.ShardOrderID(voucherID, shard, seq),
		VoucherID:  voucherID,
		UserID:     userID,
		AdmittedAt: time.UnixMilli(admitted).UTC(),
	}, nil
}
