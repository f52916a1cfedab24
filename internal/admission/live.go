package admission

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/lua"
)

var liveScript = newScript(lua.Live)

// LiveCounts returns, for each campaign, the units left and the admissions
// pending (admitted, not yet persisted), read by one script a campaign so the
// two agree: an admission moves a unit from one to the other atomically. Every
// valid id is in the map; Known is false for a campaign Redis does not hold.
func (a *Admitter) LiveCounts(ctx context.Context, voucherIDs []int64) (map[int64]seckill.LiveCounts, error) {
	out := make(map[int64]seckill.LiveCounts, len(voucherIDs))
	ids := make([]int64, 0, len(voucherIDs))
	seen := make(map[int64]bool, len(voucherIDs))
	for _, id := range voucherIDs {
		if validVoucherID(id) && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	// A campaign of several shards is read one script a shard: each
	// shard's counts agree, a unit on its way between shards counts as left
	// in its donor until its recipient applied it (then in the recipient's
	// stock only, though the donor's record stays a moment longer), and the
	// sums are what the shards held at nearly one instant.
	refs, err := a.allShards(ctx, ids)
	if err != nil {
		return nil, err
	}
	calls := make([]scriptCall, len(refs))
	sharded := make(map[int64]bool)
	for _, r := range refs {
		sharded[r.voucherID] = sharded[r.voucherID] || r.shard > 0
	}
	for i, r := range refs {
		calls[i] = scriptCall{keys: []string{r.base + "campaign", r.base + "pending"}}
		if sharded[r.voucherID] {
			calls[i].keys = append(calls[i].keys, moves(r.base), movedIn(r.base))
		}
	}
	cmds := make([]*redis.Cmd, len(refs))
	runScripts(ctx, a.rdb, liveScript, calls, cmds)
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return nil, redisError("live counts", err, nil)
		}
	}
	reads := make(map[int64][]liveShard)
	for i, r := range refs {
		s, err := parseLive(cmds[i].Val(), sharded[r.voucherID])
		if err != nil {
			return nil, fmt.Errorf("admission: live counts of campaign %d: %w", r.voucherID, err)
		}
		if sharded[r.voucherID] {
			reads[r.voucherID] = append(reads[r.voucherID], s)
			continue
		}
		c := out[r.voucherID]
		c.Queued += s.Queued
		if s.Known {
			c.Remaining += s.Remaining
			c.Known = true
		}
		out[r.voucherID] = c
	}
	for id, shards := range reads {
		out[id] = sumShards(shards)
	}
	return out, nil
}

// liveShard is one shard as live.lua read it: its counts (Remaining with
// every move recorded out of it in its epoch), those moves, and the ids of
// the moves applied to it.
type liveShard struct {
	seckill.ShardLive
	out     []liveMove
	in      map[string]bool
	recount bool
}

// liveMove is a move recorded in its donor: its id, recipient and units.
type liveMove struct {
	id      string
	to      int
	units   int64
	toEpoch int64 // the recipient's epoch the move is for
}

// parseLive reads live.lua's reply: 4 numbers, and for a shard of a
// campaign of several the moves recorded out of it and those applied to it.
func parseLive(v any, sharded bool) (liveShard, error) {
	f, ok := v.([]any)
	if !ok || len(f) < 4 || (sharded && len(f) != 7) {
		return liveShard{}, fmt.Errorf("reply %v", v)
	}
	var n [4]int64
	for i := range n {
		if n[i], ok = f[i].(int64); !ok {
			return liveShard{}, fmt.Errorf("reply %v", v)
		}
	}
	s := liveShard{ShardLive: seckill.ShardLive{Queued: n[1], Epoch: n[2], Admitted: n[3], Known: n[0] >= 0}}
	if s.Known {
		s.Remaining = n[0]
	}
	if !sharded {
		return s, nil
	}
	out, ok1 := f[4].([]any)
	in, ok2 := f[5].([]any)
	recount, ok3 := f[6].(int64)
	if !ok1 || !ok2 || !ok3 || len(out)%4 != 0 {
		return liveShard{}, fmt.Errorf("reply %v", v)
	}
	s.recount = recount == 1
	for i := 0; i < len(out); i += 4 {
		id, ok1 := out[i].(string)
		to, ok2 := out[i+1].(int64)
		units, ok3 := out[i+2].(int64)
		toEpoch, ok4 := out[i+3].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return liveShard{}, fmt.Errorf("move in reply %v", v)
		}
		s.out = append(s.out, liveMove{id: id, to: int(to), units: units, toEpoch: toEpoch})
	}
	if len(in) > 0 {
		s.in = make(map[string]bool, len(in))
		for _, x := range in {
			id, ok := x.(string)
			if !ok {
				return liveShard{}, fmt.Errorf("moved_in in reply %v", v)
			}
			s.in[id] = true
		}
	}
	return s, nil
}

// sumShards adds up the shards of one campaign, in shard order. A move
// recorded in its donor whose id its recipient applied already, in the
// epoch it was recorded for (move_in.lua's second step done, the record not
// cleared yet), is in the recipient's stock: it is taken off the donor's
// count, so that no unit counts twice; one whose recipient is in another
// epoch now is void (shards.go) and is not counted either: the recount
// counts its units back. Shard 0's recount mark is the campaign's
// (Recount).
func sumShards(shards []liveShard) seckill.LiveCounts {
	var c seckill.LiveCounts
	for i, s := range shards {
		for _, m := range s.out {
			if m.to >= 0 && m.to < len(shards) {
				r := shards[m.to]
				// Applied (in the recipient's stock now), or void (the
				// recipient was rebuilt since: the recount counts them).
				if r.Known && (r.Epoch != m.toEpoch || r.in[m.id]) {
					s.Remaining -= m.units
				}
			}
		}
		c.Queued += s.Queued
		if s.Known {
			c.Remaining += s.Remaining
		}
		c.Known = c.Known || (i == 0 && s.Known) // shard 0 holds the campaign
		c.Recount = c.Recount || (i == 0 && s.recount)
		c.Shards = append(c.Shards, s.ShardLive)
	}
	return c
}
