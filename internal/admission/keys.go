package admission

import (
	"strconv"
	"sync"
)

// keys builds every Redis key and channel name of the adapter, one function
// each. A campaign's keys carry the voucher in a hash tag ({v42}) so that they
// share one Redis Cluster slot and a script may touch them together.
type keys struct {
	prefix string
}

func (k keys) tagged(voucherID int64, suffix string) string {
	return k.prefix + "seckill:{v" + strconv.FormatInt(voucherID, 10) + "}:" + suffix
}

// shardBase is the prefix of every key of one stock shard of a campaign of
// shards shards: "<p>seckill:{<tag>}:". Shard 0's tag is the campaign's
// own, v42, so a campaign of one shard has exactly the keys it always had;
// see shardTag for the others.
func (k keys) shardBase(voucherID int64, shard, shards int) string {
	return k.prefix + "seckill:{" + shardTag(voucherID, shard, shards) + "}:"
}

// The keys of a shard other than 0, by its base (shardBase). Shard 0's are
// the functions above.
func moves(base string) string   { return base + "moves" }
func movedIn(base string) string { return base + "moved_in" }

// tags caches the tags of the shards of each campaign (shardTag searches).
var tags sync.Map // [2]int64{voucherID, shards} -> []string

// ShardTag returns the hash tag of one stock shard of a campaign of shards
// shards (shardTag): "v42" for shard 0, so that an operator or a test can
// ask CLUSTER KEYSLOT where a shard lives.
func ShardTag(voucherID int64, shard, shards int) string { return shardTag(voucherID, shard, shards) }

// shardTag is the hash tag of one shard of a campaign: v42 for shard 0 and,
// for shard k of N, "v42.k.s" with the smallest s >= 0 whose Redis Cluster
// slot lies in the N-th part of the 16384 slots k parts after shard 0's:
// so the N shards of a campaign sit in N different N-ths of the slot space,
// and a cluster of N masters that split the slots evenly (as redis-cli
// --cluster create does) holds one shard on each; a cluster of M masters
// holds about N/M on each. The search takes about N tries a shard, once
// per process and campaign.
func shardTag(voucherID int64, shard, shards int) string {
	base := "v" + strconv.FormatInt(voucherID, 10)
	if shard == 0 || shards <= 1 {
		return base
	}
	key := [2]int64{voucherID, int64(shards)}
	if t, ok := tags.Load(key); ok {
		if ts := t.([]string); shard < len(ts) {
			return ts[shard]
		}
	}
	ts := make([]string, shards)
	ts[0] = base
	first := int(keySlot(base)) * shards / slots
	for i := 1; i < shards; i++ {
		want := (first + i) % shards
		for s := 0; ; s++ {
			tag := base + "." + strconv.Itoa(i) + "." + strconv.Itoa(s)
			if int(keySlot(tag))*shards/slots == want {
				ts[i] = tag
				break
			}
		}
	}
	tags.Store(key, ts)
	return ts[shard]
}

// campaign is a hash: stock, seq, begin_ms, end_ms, paused, epoch, rid,
// state.
func (k keys) campaign(voucherID int64) string { return k.tagged(voucherID, "campaign") }

// buyers is a set of the user ids that hold a unit of the campaign.
func (k keys) buyers(voucherID int64) string { return k.tagged(voucherID, "buyers") }

// pending is a hash: id -> "<user>:<admitted_ms>" of admissions that
// Postgres does not hold yet.
func (k keys) pending(voucherID int64) string { return k.tagged(voucherID, "pending") }

// pendingAt is a sorted set of the pending ids scored by admitted_ms.
func (k keys) pendingAt(voucherID int64) string { return k.tagged(voucherID, "pending_at") }

// guard is a hash beside the campaign: challenge (a seckill.ChallengeKind)
// and brake (admissions a second, 0: none). Rebuilds leave it alone; Warm
// and FinishRebuild write it from Postgres.
func (k keys) guard(voucherID int64) string { return k.tagged(voucherID, "guard") }

// userLimit is one user's shared limit of attempts at the campaign (GCRA).
func (k keys) userLimit(voucherID, userID int64) string {
	return k.tagged(voucherID, "limit:"+strconv.FormatInt(userID, 10))
}

// addressLimit is one client address's shared limit of attempts at the
// campaign (GCRA); addr is a clientaddr.Bucket.
func (k keys) addressLimit(voucherID int64, addr string) string {
	return k.tagged(voucherID, "limit:a"+addr)
}

// used marks a challenge token's nonce as used until the token expires.
func (k keys) used(voucherID int64, nonce string) string {
	return k.tagged(voucherID, "used:"+nonce)
}

// wrong is a hash of one user's wrong answers to the campaign's challenge:
// n, their count, and until, the Unix milliseconds before which they may
// not try again. It expires on its own (wrongKeep after the wait).
func (k keys) wrong(voucherID, userID int64) string {
	return k.tagged(voucherID, "wrong:"+strconv.FormatInt(userID, 10))
}

// brake is the state of the campaign's ceiling on admissions a second.
func (k keys) brake(voucherID int64) string { return k.tagged(voucherID, "brake") }

// returned is a set of the order ids (low 32 bits) whose unit a cancel or
// an expiry gave back: each is given back once.
func (k keys) returned(voucherID int64) string { return k.tagged(voucherID, "returned") }

// rebuild is a campaign's rebuild lock: the holder's token, with a TTL.
func (k keys) rebuild(voucherID int64) string { return k.tagged(voucherID, "rebuild") }

// buyersStaged holds the buyers a rebuild installs when it ends.
func (k keys) buyersStaged(voucherID int64) string { return k.tagged(voucherID, "buyers_staged") }

// global names what is not any one campaign's: the pub/sub channels. They
// share one hash tag, so on a cluster their sharded messages live on one
// shard and one subscription there hears them all.
func (k keys) global(suffix string) string { return k.prefix + "seckill:{global}:" + suffix }

// orderStatus is the pub/sub channel of order status events (JSON).
func (k keys) orderStatus() string { return k.global("order_status") }

// stockReturned is the pub/sub channel on which a voucher id is published
// when its campaign may admit again (stock returned or added, window
// changed): every process drops its local sold-out mark for it.
func (k keys) stockReturned() string { return k.global("stock_returned") }

// admit returns the KEYS of the admit and release scripts, in their order.
func (k keys) admit(voucherID int64) []string {
	return []string{k.campaign(voucherID), k.buyers(voucherID), k.pending(voucherID), k.pendingAt(voucherID)}
}

// loginPair is the budget of sign-in attempts for one user name (its hash)
// from one client address. It and loginAddress carry the address in their
// hash tag, so the login script checks both at once.
func (k keys) loginPair(address, userHash string) string {
	return k.prefix + "seckill:login:{a" + address + "}:user:" + userHash
}

// loginAddress is the budget of sign-in attempts from one client address.
func (k keys) loginAddress(address string) string {
	return k.prefix + "seckill:login:{a" + address + "}:address"
}

// loginFailed marks that one user name (its hash) had a wrong password
// from one client address; it shares the pair's hash tag, so the login
// script reads it with the pair's budget.
func (k keys) loginFailed(address, userHash string) string {
	return k.prefix + "seckill:login:{a" + address + "}:failed:" + userHash
}

// loginFailures is the budget of wrong passwords for one user name (its
// hash) from every address.
func (k keys) loginFailures(userHash string) string {
	return k.prefix + "seckill:login:{u" + userHash + "}:failures"
}
