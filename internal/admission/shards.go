package admission

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/lua"
)

// Stock shards (issue #21): a campaign of N > 1 shards keeps its stock in N
// hash tags (shardTag), each with the keys a campaign of one shard has
// (campaign hash, buyers, pending, limits, challenge tokens, brake), so on a
// cluster its admissions spread over N slots, which shardTag puts on
// different masters. A buyer belongs to one shard (seckill.ShardOf): that
// shard's script decides their purchase alone, in one round trip, as before.
//
// Shard 0 is the campaign's own tag ({v42}) and its hash says how many
// shards there are (field shards; absent: 1), so a campaign of one shard is
// byte for byte what it always was.
//
// Units move to where the buyers are. A buyer whose shard has none left
// (the script answers sold out) makes this process survey every shard: if
// one has units, half of the richest one's move to the buyer's shard in two
// steps, each atomic in its own shard:
//
//  1. move_out.lua takes them from the donor's stock and records the move
//     (id, recipient, units, the donor's epoch and the recipient's) in the
//     donor's moves hash;
//  2. move_in.lua adds them to the recipient's stock once per move id
//     (its moved_in set), only while the recipient is in the epoch
//     recorded;
//  3. the donor's record is deleted.
//
// A process that dies between the steps leaves the record, and the
// reconciler (FinishMoves) applies it (step 2 is idempotent) and clears it.
// So a unit is always in one shard's stock or in one record (in both
// between steps 2 and 3, never counted twice: step 2 happens once), and a
// rebuild (a new epoch, read from Postgres, where moved units never left)
// makes the records of earlier epochs void (of the donor's, or of the
// recipient's: a shard rebuilt alone starts again with no units, and what
// it lost, records included, is counted back by the recount; rebuild.go's
// plan). The buyer is answered SOLD_OUT
// only when two surveys in a row find every shard at 0, no move recorded,
// no shard stopped and no move started between them (each shard's moved
// counter, which move_out.lua increments); while units remain anywhere it
// is TRY_AGAIN at worst, or, usually, the purchase itself once the units
// arrived (one more script call, only on this path). When every unit left
// is in a record, the buyer's process finishes those moves itself rather
// than wait for the reconciler.

// tryAgainAfter is the hint that comes with TRY_AGAIN.
const tryAgainAfter = 200 * time.Millisecond

// moveTimeout bounds one move, which runs detached from the buyer who
// started it: a move left halfway is the reconciler's to finish.
const moveTimeout = 2 * time.Second

// finishMovesAfter is how old a move's record must be before the
// reconciler finishes it: younger ones are usually being finished by their
// mover (doing it twice is harmless, only wasted).
const finishMovesAfter = time.Second

var (
	moveOutScript      = newScript(lua.MoveOut)
	moveInScript       = newScript(lua.MoveIn)
	shardStopScript    = newScript(lua.ShardStop)
	shardInstallScript = newScript(lua.ShardInstall)
)

// shardAdmitKeys returns the KEYS of admit.lua in one shard, by the shard's
// key base: the keys a.keys builds for shard 0, under another tag.
func shardAdmitKeys(base string, userID int64, nonce, addr string) []string {
	u := strconv.FormatInt(userID, 10)
	return []string{base + "campaign", base + "buyers", base + "pending", base + "pending_at",
		base + "guard", base + "limit:" + u, base + "used:" + nonce, base + "brake", base + "limit:a" + addr,
		base + "wrong:" + u}
}

// splitLimit returns one shard's share of a limit shared by the buyers of
// every shard (the per-address limit): the rate divided by shards (the
// interval between attempts multiplied), the burst too, at least 1. A
// client address's buyers fall on the shards by the hash of their user ids,
// so the shares add up to about the whole.
func splitLimit(every int64, burst, shards int) (int64, int) {
	if every <= 0 || shards <= 1 {
		return every, burst
	}
	return every * int64(shards), max(1, (burst+shards-1)/shards)
}

// splitBrake returns one shard's share of a campaign's brake (admissions a
// second; 0: none): brake / shards, at least 1, so a brake below the number
// of shards lets through one a second a shard.
func splitBrake(brake, shards int) int {
	if brake <= 0 || shards <= 1 {
		return max(brake, 0)
	}
	return max(1, brake/shards)
}

// bases returns the key base of every shard of a campaign of n shards.
func (a *Admitter) bases(voucherID int64, n int) []string {
	out := make([]string, max(n, 1))
	for i := range out {
		out[i] = a.keys.shardBase(voucherID, i, n)
	}
	return out
}

// parseShards reads a shards field: absent or malformed is 1.
func parseShards(v any) int {
	s, _ := v.(string)
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > seckill.MaxShards {
		return 1
	}
	return n
}

// shardCounts returns the shards of each campaign of ids (remembered, or read
// from shard 0's hash and remembered: they never change; in one
// round trip for those not remembered); those Redis does not hold come from
// Options.CampaignShards (Postgres) when set, so that the shards of a
// campaign whose shard 0 Redis lost are still found, else count 1.
func (a *Admitter) shardCounts(ctx context.Context, ids []int64) (map[int64]int, error) {
	out := make(map[int64]int, len(ids))
	var miss []int64
	for _, id := range ids {
		if n, ok := a.shardN.Load(id); ok {
			out[id] = n.(int)
		} else if _, dup := out[id]; !dup {
			out[id] = 1
			miss = append(miss, id)
		}
	}
	if len(miss) == 0 {
		return out, nil
	}
	cmds := make([]*redis.SliceCmd, len(miss))
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range miss {
			cmds[i] = p.HMGet(ctx, a.keys.campaign(id), "stock", "shards")
		}
		return nil
	})
	var unknown []int64
	err = nil // a key of the wrong type answers an error for its campaign only
	for i, id := range miss {
		v, cerr := cmds[i].Result()
		var reply redis.Error
		if cerr != nil && !errors.As(cerr, &reply) {
			err = cerr // Redis out of reach
		}
		if cerr != nil || len(v) != 2 || v[0] == nil {
			unknown = append(unknown, id)
			continue
		}
		n := parseShards(v[1])
		a.shardN.Store(id, n)
		out[id] = n
	}
	if len(unknown) > 0 && a.campaignShards != nil {
		known, perr := a.campaignShards(ctx, unknown)
		if perr == nil {
			for id, n := range known {
				if n > 1 && n <= seckill.MaxShards {
					out[id] = n
					a.shardN.Store(id, n)
				}
			}
			return out, nil
		}
		err = errors.Join(err, perr)
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return out, redisError("shards", err, nil)
	}
	return out, nil
}

// shardView is one shard as a survey saw it.
type shardView struct {
	stock   int64
	epoch   int64
	stopped bool  // absent, or state set
	moved   int64 // moves out of it so far (move_out.lua's counter)
	moves   int64 // moves recorded, not cleared
	recount bool  // shard 0: units of shards rebuilt alone to count back
}

// survey reads every shard of a campaign: one command per shard, in one
// round trip (on a cluster, one pipeline per master, at once).
func (a *Admitter) survey(ctx context.Context, bases []string) ([]shardView, error) {
	hm := make([]*redis.SliceCmd, len(bases))
	hl := make([]*redis.IntCmd, len(bases))
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range bases {
			hm[i] = p.HMGet(ctx, b+"campaign", "stock", "epoch", "state", "moved", "recount")
			hl[i] = p.HLen(ctx, moves(b))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisError("survey shards", err, nil)
	}
	out := make([]shardView, len(bases))
	for i := range bases {
		v := hm[i].Val()
		if len(v) != 5 {
			return nil, fmt.Errorf("admission: survey shard %d: reply %v", i, v)
		}
		stock, ok1 := intField(v[0])
		epoch, ok2 := intField(v[1])
		moved, _ := intField(v[3])
		out[i] = shardView{stock: stock, epoch: epoch, stopped: !ok1 || !ok2 || v[2] != nil, moved: moved, moves: hl[i].Val(),
			recount: v[4] != nil}
	}
	return out, nil
}

func intField(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// empty reports whether a survey found nothing anywhere: every shard
// admitting with no stock and no move recorded.
func empty(vs []shardView) bool {
	for _, v := range vs {
		if v.stopped || v.stock > 0 || v.moves > 0 {
			return false
		}
	}
	return true
}

// sameMoves reports whether no move started between two surveys.
func sameMoves(x, y []shardView) bool {
	for i := range x {
		if x[i].moved != y[i].moved {
			return false
		}
	}
	return true
}

// restocks keeps this process's moves under way: one per campaign and
// recipient shard; the buyers of that shard who find it empty meanwhile
// wait for it instead of moving more.
type restocks struct {
	mu    sync.Mutex
	calls map[[2]int64]*restockCall
}

type restockCall struct {
	done    chan struct{}
	moved   bool
	soldOut bool
	err     error
}

// restock brings units to shard to of a campaign whose script answered
// that the shard has none, and runs the purchase again (keys, args) if it
// did: retried is then set and again is that reply. soldOut is set when
// no shard of the campaign has a unit left; neither set means units
// remain elsewhere but are not here yet: TRY_AGAIN.
func (a *Admitter) restock(ctx context.Context, voucherID int64, shards, to int, keys []string, args []any) (again pipeReply, retried, soldOut bool, err error) {
	k := [2]int64{voucherID, int64(to)}
	a.restocking.mu.Lock()
	if a.restocking.calls == nil {
		a.restocking.calls = make(map[[2]int64]*restockCall)
	}
	c, running := a.restocking.calls[k]
	if !running {
		c = &restockCall{done: make(chan struct{})}
		a.restocking.calls[k] = c
	}
	a.restocking.mu.Unlock()
	if !running {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), moveTimeout)
		c.soldOut, c.moved, c.err = a.bringUnits(mctx, voucherID, shards, to)
		cancel()
		a.restocking.mu.Lock()
		delete(a.restocking.calls, k)
		a.restocking.mu.Unlock()
		close(c.done)
	} else {
		select {
		case <-c.done:
		case <-ctx.Done():
			return pipeReply{}, false, false, nil
		}
	}
	switch {
	case errors.Is(c.err, seckill.ErrRebuildNeeded):
		// Nothing left anywhere, but units of shards rebuilt alone are
		// to be counted back: the Service rebuilds the campaign whole,
		// then asks again.
		return pipeReply{}, false, false, c.err
	case c.err != nil:
		a.logger.WarnContext(ctx, "move units between shards; the buyer tries again", "voucher_id", voucherID,
			"shard", to, "err", c.err)
		return pipeReply{}, false, false, nil
	case c.soldOut:
		return pipeReply{}, false, true, nil
	case c.moved:
		return a.admits.run(ctx, keys, args...), true, false, nil
	}
	return pipeReply{}, false, false, nil
}

// bringUnits moves units to shard to from the richest other shard (half of
// what it holds), or finds the whole campaign sold out. moved is set when
// shard to has units now. Moves that their movers left halfway are
// finished here when no shard has units in its stock, so that a buyer is
// not told TRY_AGAIN for units that nobody is moving any more. When
// nothing is left but shard 0 says units of shards rebuilt alone are to
// be counted back, it answers seckill.ErrRebuildNeeded instead of sold out
// (rebuild.go's recountDue).
func (a *Admitter) bringUnits(ctx context.Context, voucherID int64, shards, to int) (soldOut, moved bool, err error) {
	bases := a.bases(voucherID, shards)
	for round := 0; round < 3; round++ {
		first, err := a.survey(ctx, bases)
		if err != nil {
			return false, false, err
		}
		if v := first[to]; !v.stopped && v.stock > 0 {
			return false, true, nil // another process brought some
		}
		donor, recorded := -1, false
		for i, v := range first {
			if i != to && !v.stopped && v.stock > 0 && (donor < 0 || v.stock > first[donor].stock) {
				donor = i
			}
			recorded = recorded || v.moves > 0
		}
		switch {
		case donor >= 0:
			n, err := a.move(ctx, bases, donor, to, (first[donor].stock+1)/2, first[to].epoch)
			if err != nil || n > 0 {
				return false, n > 0, err
			}
			// The donor was emptied meanwhile: look again.
		case recorded:
			// Every unit left is in a move's record: finish them.
			if _, err := a.finishShardMoves(ctx, bases, 0); err != nil {
				return false, false, err
			}
		case !empty(first):
			return false, false, nil // a shard is stopped: its rebuild decides
		default:
			second, err := a.survey(ctx, bases)
			if err != nil {
				return false, false, err
			}
			if !empty(second) || !sameMoves(first, second) {
				return false, false, nil
			}
			if second[0].recount {
				return false, false, seckill.ErrRebuildNeeded
			}
			return true, false, nil
		}
	}
	return false, false, nil
}

// move moves up to n units from shard from to shard to, which a survey saw
// in toEpoch (bases are the campaign's shards), and returns how many
// arrived.
func (a *Admitter) move(ctx context.Context, bases []string, from, to int, n, toEpoch int64) (int64, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	res, err := runScript(ctx, a.rdb, moveOutScript, []string{bases[from] + "campaign", moves(bases[from])}, id, n, to, toEpoch).Int64Slice()
	if err != nil {
		return 0, redisError("move out", err, nil)
	}
	if len(res) != 2 || res[0] <= 0 {
		return 0, nil // the donor has none left, or is stopped
	}
	ok, err := a.finishMove(ctx, bases[from], bases[to], id, res[0], res[1])
	if err != nil || !ok {
		return 0, err
	}
	return res[0], nil
}

// finishMove does steps 2 and 3 of a move recorded in shard from's moves
// hash, for the recipient in epoch; ok is false when the recipient cannot
// take it now (it is stopped or rebuilt), and the record stays for the
// reconciler.
func (a *Admitter) finishMove(ctx context.Context, from, to, id string, n, epoch int64) (bool, error) {
	r, err := runScript(ctx, a.rdb, moveInScript, []string{to + "campaign", movedIn(to)}, id, n, epoch).Int64()
	if err != nil {
		return false, redisError("move in", err, nil)
	}
	if r < 0 {
		return false, nil
	}
	if err := a.rdb.HDel(ctx, moves(from), id).Err(); err != nil {
		return true, redisError("clear move", err, nil)
	}
	return true, nil
}

// FinishMoves finishes the moves of units between the shards of the
// campaigns ids that were left halfway (their mover died, or lost Redis
// for a moment) for longer than finishMovesAfter, and drops the records of
// moves from an earlier epoch of their donor or of their recipient (the
// rebuild that started the new one counted their units from Postgres, or
// left them to the recount). It returns how many it finished; the
// reconciler calls it. Safe to run in many processes at once.
func (a *Admitter) FinishMoves(ctx context.Context, ids []int64) (int, error) {
	n, err := a.shardCounts(ctx, ids)
	if err != nil {
		return 0, err
	}
	done := 0
	var errs []error
	for _, id := range ids {
		if s := n[id]; s > 1 && validVoucherID(id) {
			k, err := a.finishShardMoves(ctx, a.bases(id, s), a.finishAfter)
			done += k
			errs = append(errs, err)
		}
	}
	return done, errors.Join(errs...)
}

// finishShardMoves finishes the moves recorded in the shards of one
// campaign (bases) for longer than age, and drops those of an earlier
// epoch; it returns how many it finished.
func (a *Admitter) finishShardMoves(ctx context.Context, bases []string, age time.Duration) (int, error) {
	recs := make([]*redis.MapStringStringCmd, len(bases))
	epochs := make([]*redis.StringCmd, len(bases))
	var now *redis.TimeCmd
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		for i, b := range bases {
			recs[i] = p.HGetAll(ctx, moves(b))
			epochs[i] = p.HGet(ctx, b+"campaign", "epoch")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, redisError("moves", err, nil)
	}
	cutoff := now.Val().Add(-age).UnixMilli()
	current := make([]int64, len(bases)) // -1: unknown
	for i := range bases {
		e, err := epochs[i].Int64()
		if err != nil {
			e = -1
		}
		current[i] = e
	}
	done := 0
	var errs []error
	for i, b := range bases {
		for id, rec := range recs[i].Val() {
			mv, ok := parseMove(rec)
			if !ok || mv.to >= len(bases) {
				a.logger.WarnContext(ctx, "skip malformed move record", "key", moves(b), "move", id, "record", rec)
				continue
			}
			if mv.at > cutoff {
				continue
			}
			if (current[i] >= 0 && mv.epoch < current[i]) || mv.toEpoch < current[mv.to] {
				// Void: the donor or the recipient was rebuilt from
				// Postgres since.
				if err := a.rdb.HDel(ctx, moves(b), id).Err(); err != nil {
					errs = append(errs, redisError("drop move", err, nil))
				}
				continue
			}
			ok, err := a.finishMove(ctx, b, bases[mv.to], id, mv.units, mv.toEpoch)
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				done++
			}
		}
	}
	return done, errors.Join(errs...)
}

// moveRecord is a move as move_out.lua recorded it.
type moveRecord struct {
	to             int
	units          int64
	epoch, toEpoch int64 // the donor's and the recipient's
	at             int64 // Unix milliseconds
}

// parseMove reads a move record "<to>:<n>:<epoch>:<ms>:<to epoch>"; one
// written before shards had epochs of their own has no last field (the
// recipient was in the donor's epoch).
func parseMove(rec string) (moveRecord, bool) {
	f := strings.Split(rec, ":")
	if len(f) != 4 && len(f) != 5 {
		return moveRecord{}, false
	}
	var n [5]int64
	for i, x := range f {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil || v < 0 {
			return moveRecord{}, false
		}
		n[i] = v
	}
	if len(f) == 4 {
		n[4] = n[2]
	}
	if n[1] <= 0 || n[0] >= seckill.MaxShards {
		return moveRecord{}, false
	}
	return moveRecord{to: int(n[0]), units: n[1], epoch: n[2], at: n[3], toEpoch: n[4]}, true
}
