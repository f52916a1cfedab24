package admission

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
)

// rebuildLockTTL bounds how long a campaign stays locked by a process that
// died while rebuilding it.
const rebuildLockTTL = 10 * time.Second

// NeedsRebuild returns those of ids whose campaign Redis does not hold, or
// holds with a state set (stale after a restart or failover, rebuilding),
// or from before epochs: the campaigns Admit would answer ENOTFOUND or
// seckill.ErrRebuildNeeded for. One round trip.
func (a *Admitter) NeedsRebuild(ctx context.Context, ids []int64) ([]int64, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return !validVoucherID(id) })
	if len(ids) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, a.keys.campaign(id), "stock", "epoch", "state")
		}
		return nil
	})
	if err != nil {
		return nil, redisError("needs rebuild", err, nil)
	}
	var out []int64
	for i, cmd := range cmds {
		v := cmd.Val()
		if len(v) != 3 || v[0] == nil || v[1] == nil || v[2] != nil {
			out = append(out, ids[i])
		}
	}
	return out, nil
}

// BeginRebuild takes the campaign's rebuild lock (for rebuildLockTTL) and
// stops its admissions until FinishRebuild; ok is false while another
// process holds the lock.
func (a *Admitter) BeginRebuild(ctx context.Context, voucherID int64) (string, bool, error) {
	if !validVoucherID(voucherID) {
		return "", false, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	n, err := beginScript.Run(ctx, a.rdb, []string{a.keys.campaign(voucherID), a.keys.rebuild(voucherID)},
		token, rebuildLockTTL.Milliseconds()).Int64()
	if err != nil {
		return "", false, redisError("begin rebuild", err, nil)
	}
	if n != 1 {
		return "", false, nil
	}
	// The campaign admits nobody now: drop any local mark, so that this
	// process asks Redis (and hears "rebuild") rather than repeat an
	// outcome from before.
	a.local.invalidate(voucherID)
	return token, true, nil
}

// PendingOf returns every admission of a campaign that is still pending.
func (a *Admitter) PendingOf(ctx context.Context, voucherID int64) ([]seckill.Admission, error) {
	if !validVoucherID(voucherID) {
		return nil, nil
	}
	m, err := a.rdb.HGetAll(ctx, a.keys.pending(voucherID)).Result()
	if err != nil {
		return nil, redisError("pending of campaign", err, nil)
	}
	out := make([]seckill.Admission, 0, len(m))
	for field, v := range m {
		seq, err := strconv.ParseInt(field, 10, 64)
		if err != nil || seq <= 0 || seq > maxSeq {
			a.logger.Warn("skip malformed pending admission", "voucher_id", voucherID, "field", field)
			continue
		}
		adm, err := parsePending(voucherID, seq, v)
		if err != nil {
			a.logger.Warn("skip malformed pending admission", "voucher_id", voucherID, "err", err)
			continue
		}
		out = append(out, *adm)
	}
	slices.SortFunc(out, func(x, y seckill.Admission) int { return int(x.OrderID - y.OrderID) })
	return out, nil
}

// FinishRebuild installs st (stock, window, epoch, buyers) in place of
// everything Redis held for the campaign, releases the lock and tells every
// process that the campaign may admit again. It reports false, changing
// nothing, when the lock is no longer token's.
func (a *Admitter) FinishRebuild(ctx context.Context, token string, st seckill.WarmState) (bool, error) {
	if err := validWarmState(st); err != nil {
		return false, err
	}
	c := st.Campaign
	id := c.VoucherID
	// The buyers go to a staging set first (in chunks: there may be many),
	// which the script renames into place only if the lock is still ours.
	staged := a.keys.buyersStaged(id)
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, staged)
		addBuyers(ctx, p, staged, st.Buyers)
		p.Expire(ctx, staged, rebuildLockTTL)
		p.SAdd(ctx, a.keys.campaigns(), id)
		a.setGuard(ctx, p, c)
		return nil
	})
	if err != nil {
		return false, redisError("rebuild: stage buyers", err, nil)
	}
	keys := append(a.keys.admit(id), a.keys.rebuild(id), staged)
	n, err := rebuildScript.Run(ctx, a.rdb, keys, token, c.Stock, c.Epoch,
		c.BeginTime.UnixMilli(), c.EndTime.UnixMilli(), boolArg(c.Paused)).Int64()
	if err != nil {
		return false, redisError("rebuild", err, nil)
	}
	if n != 1 {
		return false, nil
	}
	a.stockReturned(ctx, id)
	return true, nil
}

// ConnectHook returns a go-redis OnConnect function that guards admission
// against a Redis server that may have lost acknowledged writes. Whenever a
// process connects to another server than the last one it connected to (by
// INFO run_id: a restart gives a new one, and a failover, even back to a
// former master, another), it marks stale, before
// that connection carries anything else, every campaign listed in the
// campaigns set whose state another server installed. A stale campaign
// admits nobody until it is rebuilt from Postgres (seckill.Service), so
// admissions can neither reuse the order ids nor resell the units of
// admissions the server forgot. Set it as redis.Options.OnConnect of the
// client the Admitter uses.
func ConnectHook(opts Options) func(ctx context.Context, cn *redis.Conn) error {
	k := keys{prefix: opts.Prefix}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var (
		mu   sync.Mutex
		last string // the run_id of the server the last stamping was for
	)
	return func(ctx context.Context, cn *redis.Conn) error {
		info, err := cn.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("admission: info server: %w", err)
		}
		rid := infoField(info, "run_id")
		if rid == "" {
			return fmt.Errorf("admission: info server: no run_id")
		}
		mu.Lock()
		defer mu.Unlock()
		if rid == last {
			return nil
		}
		n, err := stampAll(ctx, cn, k, rid)
		if err != nil {
			return fmt.Errorf("admission: stamp campaigns: %w", err)
		}
		last = rid
		if n > 0 {
			logger.Warn("redis server changed (restart or failover): campaigns stop until rebuilt from Postgres",
				"run_id", rid, "campaigns", n)
		}
		return nil
	}
}

// stampAll runs stamp.lua for every campaign in the campaigns set, on cn,
// and returns how many it stopped.
func stampAll(ctx context.Context, cn *redis.Conn, k keys, rid string) (int, error) {
	var ids []string
	var cursor uint64
	for {
		batch, next, err := cn.SScan(ctx, k.campaigns(), cursor, "", 1000).Result()
		if err != nil {
			return 0, err
		}
		ids = append(ids, batch...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	stopped := 0
	for chunk := range slices.Chunk(ids, 500) {
		cmds := make([]*redis.Cmd, 0, len(chunk))
		_, err := cn.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, m := range chunk {
				id, err := strconv.ParseInt(m, 10, 64)
				if err != nil || !validVoucherID(id) {
					continue
				}
				cmds = append(cmds, stampScript.Eval(ctx, p, []string{k.campaign(id)}, rid))
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		for _, c := range cmds {
			if n, _ := c.Int64(); n == 1 {
				stopped++
			}
		}
	}
	return stopped, nil
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
