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
// pending hash, beside its campaign) from Admit
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
// for longer than age, measured on Redis's clock, oldest first among those
// it read. The caller names the campaigns (from Postgres): no Redis index
// decides which are looked at.
//
// It reads each shard's pending hash itself, whose values carry the
// admission's time: an admission is pending for as long as Postgres does
// not hold it, normally a few hundred a shard, so the hash is what an index
// of them would be, and an admission writes nothing else. A shard whose
// outbox has grown past staleScanMax (Postgres out of reach, a worker
// backlog) is read staleScanMax fields a call, going on where the last call
// stopped: each call stays bounded, and every admission is looked at within
// a few calls.
func (a *Admitter) Stale(ctx context.Context, voucherIDs []int64, age time.Duration, limit int) ([]seckill.Admission, error) {
	ids := slices.DeleteFunc(slices.Clone(voucherIDs), func(id int64) bool { return !validVoucherID(id) })
	if limit <= 0 || len(ids) == 0 {
		return nil, nil
	}
	now, err := a.rdb.Time(ctx).Result()
	if err != nil {
		return nil, redisError("stale: time", err, nil)
	}
	cutoff := now.Add(-age)
	refs, err := a.allShards(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []seckill.Admission
	for _, r := range refs {
		key := r.base + "pending"
		cursor := a.staleCursor(key, 0, false)
		for read := 0; read < staleScanMax; {
			fields, next, err := a.rdb.HScan(ctx, key, cursor, "", staleScanCount).Result()
			if err != nil {
				return nil, redisError("stale: pending", err, nil)
			}
			for i := 0; i+1 < len(fields); i += 2 {
				seq, err := strconv.ParseInt(fields[i], 10, 64)
				if err != nil || !validSeq(seq) {
					a.logger.WarnContext(ctx, "skip malformed pending admission", "voucher_id", r.voucherID, "field", fields[i])
					continue
				}
				adm, err := parsePending(r.voucherID, r.shard, seq, fields[i+1])
				if err != nil {
					a.logger.WarnContext(ctx, "skip malformed pending admission", "voucher_id", r.voucherID, "err", err)
					continue
				}
				if adm.AdmittedAt.Before(cutoff) {
					out = append(out, *adm)
				}
			}
			read += len(fields) / 2
			cursor = next
			if cursor == 0 {
				break
			}
		}
		a.staleCursor(key, cursor, true)
	}
	slices.SortFunc(out, func(x, y seckill.Admission) int {
		return cmp.Or(x.AdmittedAt.Compare(y.AdmittedAt), cmp.Compare(x.VoucherID, y.VoucherID), cmp.Compare(x.OrderID, y.OrderID))
	})
	return out[:min(len(out), limit)], nil
}

// How Stale reads a pending hash: staleScanCount fields an HSCAN, at most
// staleScanMax a shard a call (variables for the tests).
var (
	staleScanCount int64 = 1000
	staleScanMax         = 100_000
)

// staleCursor returns where Stale's last call stopped reading the pending
// hash key (0: it read it to the end), or records it when set.
func (a *Admitter) staleCursor(key string, cursor uint64, set bool) uint64 {
	if set {
		if cursor == 0 {
			a.staleAt.Delete(key)
		} else {
			a.staleAt.Store(key, cursor)
		}
		return cursor
	}
	if c, ok := a.staleAt.Load(key); ok {
		return c.(uint64)
	}
	return 0
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
