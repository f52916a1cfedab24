package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
)

// SoldOutMark returns the outcome an Admitter would answer locally for a
// campaign right now.
func SoldOutMark(a *Admitter, voucherID int64) (seckill.Outcome, bool) {
	st := a.local.get(voucherID)
	if st == nil {
		return "", false
	}
	return a.local.marked(st, st.gen.Load())
}

// CampaignKey returns the key of a campaign's hash.
func CampaignKey(a *Admitter, voucherID int64) string { return a.keys.campaign(voucherID) }

// RebuildKey returns the key of a campaign's rebuild lock.
func RebuildKey(a *Admitter, voucherID int64) string { return a.keys.rebuild(voucherID) }

// BuyersKey returns the key of a campaign's buyers set.
func BuyersKey(a *Admitter, voucherID int64) string { return a.keys.buyers(voucherID) }

// PendingAtKey returns the key of a campaign's pending_at sorted set.
func PendingAtKey(a *Admitter, voucherID int64) string { return a.keys.pendingAt(voucherID) }

func PendingKey(a *Admitter, voucherID int64) string { return a.keys.pending(voucherID) }

func ReturnedKey(a *Admitter, voucherID int64) string { return a.keys.returned(voucherID) }

// ListenerDone is closed when the stock_returned listener has stopped.
func ListenerDone(a *Admitter) <-chan struct{} { return a.subDone }

// Unpipelined makes every admission of a go to Redis alone, at once, as
// before pipelining (benchmarks compare the two).
func Unpipelined(a *Admitter) {
	a.admits = newPipeline(a.rdb, admitScript, 1<<20, 1, 1)
}

// Prefix returns the key prefix of an Admitter.
func Prefix(a *Admitter) string { return a.keys.prefix }

// OrderStatusChannel returns the Bus's channel under prefix.
func OrderStatusChannel(prefix string) string { return keys{prefix: prefix}.orderStatus() }

// UserLimitKey is the key of a user's shared limit at a campaign.
func UserLimitKey(a *Admitter, voucherID, userID int64) string {
	return a.keys.userLimit(voucherID, userID)
}

// AddressLimitKey is the key of a client address's shared limit at a
// campaign; addr is a clientaddr.Bucket.
func AddressLimitKey(a *Admitter, voucherID int64, addr string) string {
	return a.keys.addressLimit(voucherID, addr)
}

// WrongKey is the key of a user's wrong answers to a campaign's challenge.
func WrongKey(a *Admitter, voucherID, userID int64) string { return a.keys.wrong(voucherID, userID) }

// ShardCampaignKey returns the key of one shard's campaign hash.
func ShardCampaignKey(a *Admitter, voucherID int64, shard, shards int) string {
	return a.keys.shardBase(voucherID, shard, shards) + "campaign"
}

// ShardBuyersKey returns the key of one shard's buyers set.
func ShardBuyersKey(a *Admitter, voucherID int64, shard, shards int) string {
	return a.keys.shardBase(voucherID, shard, shards) + "buyers"
}

// ShardMovesKey returns the key of one shard's moves hash.
func ShardMovesKey(a *Admitter, voucherID int64, shard, shards int) string {
	return moves(a.keys.shardBase(voucherID, shard, shards))
}

// KeySlot is keySlot.
func KeySlot(key string) uint16 { return keySlot(key) }

// MoveOut runs only the first step of a move (move_out.lua), as a mover
// that dies right after it leaves it: id, units taken, epoch.
func MoveOut(ctx context.Context, a *Admitter, voucherID int64, shards, from, to int, n int64) (string, int64, int64, error) {
	bases := a.bases(voucherID, shards)
	id := fmt.Sprintf("t%d-%d-%d-%d", voucherID, from, to, time.Now().UnixNano())
	args := []any{id, n, to}
	if e, err := a.rdb.HGet(ctx, bases[to]+"campaign", "epoch").Result(); err == nil {
		args = append(args, e) // the recipient's epoch, as a survey reads it
	}
	res, err := runScript(ctx, a.rdb, moveOutScript, []string{bases[from] + "campaign", moves(bases[from])}, args...).Int64Slice()
	if err == nil && len(res) == 1 && res[0] == -1 {
		return id, 0, 0, nil // the donor is stopped: nothing moves
	}
	if err != nil || len(res) != 2 {
		return "", 0, 0, fmt.Errorf("move out: %v %v", res, err)
	}
	return id, res[0], res[1], nil
}

// MoveIn runs only the second step of a move (move_in.lua), as a mover that
// dies before it clears the donor's record.
func MoveIn(ctx context.Context, a *Admitter, voucherID int64, shards, to int, id string, n, epoch int64) (int64, error) {
	base := a.keys.shardBase(voucherID, to, shards)
	return runScript(ctx, a.rdb, moveInScript, []string{base + "campaign", movedIn(base)}, id, n, epoch).Int64()
}

// FinishMovesNow makes FinishMoves of a finish every move, however young.
func FinishMovesNow(a *Admitter) { a.finishAfter = 0 }

// ShardMovedInKey returns the key of one shard's moved_in set.
func ShardMovedInKey(a *Admitter, voucherID int64, shard, shards int) string {
	return movedIn(a.keys.shardBase(voucherID, shard, shards))
}

// RoomKey returns the key of a waiting room's counters.
func RoomKey(a *Admitter, voucherID int64) string { return a.keys.room(voucherID) }

// RoomJoinersKey returns the key of the bucket of a room's joiners that
// holds userID.
func RoomJoinersKey(a *Admitter, voucherID, userID int64) string {
	return a.keys.roomJoiners(voucherID, userID)
}

// RoomBuckets is how many buckets hold a room's joiners.
const RoomBuckets = roomBuckets

// SetStaleScan sets how many pending fields Stale reads an HSCAN and at
// most a shard a call, until the test ends.
func SetStaleScan(t interface{ Cleanup(func()) }, count int64, most int) {
	c, m := staleScanCount, staleScanMax
	staleScanCount, staleScanMax = count, most
	t.Cleanup(func() { staleScanCount, staleScanMax = c, m })
}

// SubscribeStock subscribes to the stock_returned channel a publishes on
// (sharded on a Redis Cluster).
func SubscribeStock(ctx context.Context, a *Admitter) (*redis.PubSub, error) {
	return subscribe(ctx, a.rdb, a.stockChannel)
}

// SubscribeStatus subscribes to the order-status channel b publishes on.
func SubscribeStatus(ctx context.Context, b *Bus) (*redis.PubSub, error) {
	return subscribe(ctx, b.rdb, b.channel)
}

// SetRedisLogClock makes l read the time from now.
func SetRedisLogClock(l *RedisLog, now func() time.Time) { l.now = now }
