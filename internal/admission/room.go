package admission

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"seckill/internal/seckill"
	"seckill/lua"
)

// The waiting room's line in Redis (seckill/waitingroom.go): two counters
// and, for each joiner, their number beside their user id, in one of
// roomBuckets small hashes so that each stays a compact listpack (about 16
// bytes a joiner; TestRoomJoinerCost holds it under 32). The keys carry a
// tag of their own, {w<voucher>}, apart from the stock's, and expire
// roomKeep after the sale.

var (
	roomJoinScript   = newScript(lua.RoomJoin)
	roomCountsScript = newScript(lua.RoomCounts)
)

// roomBuckets is how many hashes hold a room's joiners: 2 million joiners
// put about 61 in each, under Redis's default hash-max-listpack-entries
// (128).
const roomBuckets = 1 << 15

// roomKeep is how long a room's keys outlive the sale.
const roomKeep = time.Hour

// room is a waiting room's counters.
func (k keys) room(voucherID int64) string {
	return k.prefix + "seckill:{w" + strconv.FormatInt(voucherID, 10) + "}:room"
}

// roomJoiners is the bucket of a room's joiners that holds userID.
func (k keys) roomJoiners(voucherID, userID int64) string {
	return k.room(voucherID) + ":u:" + strconv.FormatInt(userID&(roomBuckets-1), 10)
}

// JoinRoom numbers a buyer who joins a campaign's waiting room, by Redis's
// clock: before the open (their number among those), or after it (their
// place in line: the next free one, never one whose turn is past, at rate
// turns a second); the same again for one who joined before. floor holds
// the highest counts the caller has seen, from which a room Redis lost
// numbers on. ECONFLICT before the room opens (saying when) and after the
// sale.
func (a *Admitter) JoinRoom(ctx context.Context, voucherID, userID int64, opens, begin, end time.Time, rate int, floor seckill.RoomCounts) (seckill.RoomPlace, error) {
	if !validVoucherID(voucherID) {
		return seckill.RoomPlace{}, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	if userID <= 0 {
		return seckill.RoomPlace{}, seckill.Invalidf("userId", "user id must be positive")
	}
	if rate < 1 {
		return seckill.RoomPlace{}, seckill.Invalidf("admitPerSecond", "a room lets at least one buyer through a second")
	}
	res, err := runScript(ctx, a.rdb, roomJoinScript, []string{a.keys.room(voucherID), a.keys.roomJoiners(voucherID, userID)},
		userID, opens.UnixMilli(), begin.UnixMilli(), end.UnixMilli(), max(0, floor.Before), max(0, floor.After),
		end.Add(roomKeep).UnixMilli(), max(0, floor.Next), rate).Slice()
	if err != nil {
		return seckill.RoomPlace{}, redisError("join room", err, nil)
	}
	code, _ := int64At(res, 0)
	switch code {
	case 0:
		kind, ok1 := int64At(res, 1)
		n, ok2 := int64At(res, 2)
		if ok1 && ok2 && n >= 0 {
			return seckill.RoomPlace{BeforeOpen: kind == 1, Seq: n}, nil
		}
	case 1:
		wait, _ := int64At(res, 1)
		return seckill.RoomPlace{}, seckill.Errorf(seckill.ECONFLICT, "the waiting room opens at %s, in %s",
			opens.UTC().Format(time.RFC3339), (time.Duration(wait) * time.Millisecond).Round(time.Second))
	case 2:
		return seckill.RoomPlace{}, seckill.Errorf(seckill.ECONFLICT, "the sale has ended")
	}
	return seckill.RoomPlace{}, fmt.Errorf("admission: join room of voucher %d: reply %v", voucherID, res)
}

// RoomCounts reads how many joined a campaign's waiting room before and
// after the open, and whether Redis's clock has passed begin.
func (a *Admitter) RoomCounts(ctx context.Context, voucherID int64, begin time.Time) (seckill.RoomCounts, error) {
	if !validVoucherID(voucherID) {
		return seckill.RoomCounts{}, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	res, err := runScript(ctx, a.rdb, roomCountsScript, []string{a.keys.room(voucherID)}, begin.UnixMilli()).Slice()
	if err != nil {
		return seckill.RoomCounts{}, redisError("room counts", err, nil)
	}
	b, ok1 := int64At(res, 0)
	n, ok2 := int64At(res, 1)
	o, ok3 := int64At(res, 2)
	next, ok4 := int64At(res, 3)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return seckill.RoomCounts{}, fmt.Errorf("admission: room counts of voucher %d: reply %v", voucherID, res)
	}
	return seckill.RoomCounts{Before: b, After: n, Next: next, Opened: o == 1}, nil
}
