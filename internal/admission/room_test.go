package admission_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

// TestJoinRoom: joiners are numbered in arrival order, before the open and
// after it apart, once each; the room's clock is Redis's; a room Redis lost
// numbers on from the caller's floor.
func TestJoinRoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	const v = 77
	now := time.Now()
	join := func(user int64, opens, begin time.Time, floor seckill.RoomCounts) (seckill.RoomPlace, error) {
		return a.JoinRoom(ctx, v, user, opens, begin, now.Add(time.Hour), 1, floor)
	}
	if _, err := join(1, now.Add(time.Minute), now.Add(2*time.Minute), seckill.RoomCounts{}); seckill.ErrorCode(err) != seckill.ECONFLICT {
		t.Fatalf("join before the room opens: %v, want CONFLICT", err)
	}
	if _, err := a.JoinRoom(ctx, v, 1, now.Add(-2*time.Hour), now.Add(-time.Hour-time.Minute), now.Add(-time.Hour), 1, seckill.RoomCounts{}); seckill.ErrorCode(err) != seckill.ECONFLICT {
		t.Fatalf("join after the sale: %v, want CONFLICT", err)
	}
	opens, begin := now.Add(-time.Minute), now.Add(time.Minute)
	for u := int64(1); u <= 5; u++ {
		pl, err := join(u, opens, begin, seckill.RoomCounts{})
		if err != nil || pl != (seckill.RoomPlace{BeforeOpen: true, Seq: u - 1}) {
			t.Fatalf("user %d joins: %+v %v", u, pl, err)
		}
	}
	if pl, err := join(3, opens, begin, seckill.RoomCounts{}); err != nil || pl != (seckill.RoomPlace{BeforeOpen: true, Seq: 2}) {
		t.Fatalf("user 3 joins again: %+v %v, want the same place", pl, err)
	}
	// After the open (a begin a second ago, a turn a second): behind the
	// five drawn ones, in arrival order.
	for u := int64(6); u <= 8; u++ {
		pl, err := join(u, opens, now.Add(-time.Second), seckill.RoomCounts{})
		if err != nil || pl != (seckill.RoomPlace{Seq: u - 1}) {
			t.Fatalf("user %d joins after the open: %+v %v, want place %d", u, pl, err, u-1)
		}
	}
	c, err := a.RoomCounts(ctx, v, begin)
	if err != nil || c != (seckill.RoomCounts{Before: 5, After: 3, Next: 8}) {
		t.Fatalf("counts %+v %v", c, err)
	}
	// One who comes when every place so far has had its turn (the open 100
	// s ago at a turn a second) takes the place whose turn is now, not one
	// long past.
	if pl, err := join(20, now.Add(-200*time.Second), now.Add(-100*time.Second), seckill.RoomCounts{}); err != nil || pl.Seq < 99 || pl.Seq > 101 {
		t.Fatalf("a late joiner: %+v %v, want the place of now (about 100)", pl, err)
	}
	if c, _ := a.RoomCounts(ctx, v, now.Add(-time.Second)); !c.Opened {
		t.Errorf("counts with a begin in the past: %+v, want opened", c)
	}
	if ttl := rdb.PTTL(ctx, admission.RoomKey(a, v)).Val(); ttl < time.Hour || ttl > 3*time.Hour {
		t.Errorf("room keys expire in %s, want the sale's end and an hour", ttl)
	}

	// Redis loses the room: the next joiner is numbered from the floor the
	// caller saw, not from 0 again.
	if err := rdb.Del(ctx, admission.RoomKey(a, v)).Err(); err != nil {
		t.Fatal(err)
	}
	pl, err := join(9, opens, begin, seckill.RoomCounts{Before: 5, After: 3})
	if err != nil || pl != (seckill.RoomPlace{BeforeOpen: true, Seq: 5}) {
		t.Fatalf("join after the room was lost: %+v %v, want place 5", pl, err)
	}
	if pl, err := join(10, opens, begin, seckill.RoomCounts{}); err != nil || pl.Seq != 6 {
		t.Fatalf("the next join: %+v %v, want place 6", pl, err)
	}
}

// TestRoomJoinerCost: what a joiner costs in Redis memory, at the density
// of two million joiners (about 61 in each of the 32768 buckets): the
// buckets stay listpacks, at well under 32 bytes a joiner, key included.
// It logs the figure a crowd's Redis is sized by.
func TestRoomJoinerCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{})
	const v, buckets, perBucket = 78, 16, 64
	now := time.Now()
	var users []int64
	for b := int64(0); b < buckets; b++ {
		for i := int64(0); i < perBucket; i++ {
			users = append(users, (1<<40)+i*admission.RoomBuckets+b) // large ids, as an identity provider's
		}
	}
	for _, u := range users {
		if _, err := a.JoinRoom(ctx, v, u, now.Add(-time.Minute), now.Add(time.Minute), now.Add(time.Hour), 1, seckill.RoomCounts{}); err != nil {
			t.Fatal(err)
		}
	}
	var bytes int64
	for b := int64(0); b < buckets; b++ {
		key := admission.RoomJoinersKey(a, v, (1<<40)+b)
		if enc := rdb.ObjectEncoding(ctx, key).Val(); enc != "listpack" {
			t.Errorf("bucket %s is a %s, want a listpack", key, enc)
		}
		n, err := rdb.MemoryUsage(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		bytes += n
	}
	per := float64(bytes) / float64(len(users))
	t.Logf("%.1f bytes a joiner at %d a bucket (%d joiners): 2M joiners ≈ %.0f MB", per, perBucket, len(users), per*2e6/1e6)
	if per > 32 {
		t.Errorf("%.1f bytes a joiner, want at most 32", per)
	}
}

// BenchmarkRoomJoin measures one joiner (one EVALSHA that numbers them) and
// what Redis spends on it, from INFO commandstats: run it alone, on a
// Redis no one else uses, or other clients' commands count in its figure.
func BenchmarkRoomJoin(b *testing.B) {
	ctx := context.Background()
	a, rdb := newAdmitter(b, admission.Options{})
	now := time.Now()
	usec := func() float64 {
		info := rdb.Info(ctx, "commandstats").Val()
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
				for _, kv := range strings.Split(rest, ",") {
					if v, ok := strings.CutPrefix(kv, "usec="); ok {
						n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
						return n
					}
				}
			}
		}
		return 0
	}
	var next atomic.Int64
	before := usec()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := next.Add(1) + 1<<40
			if _, err := a.JoinRoom(ctx, 79, u, now.Add(-time.Minute), now.Add(time.Hour), now.Add(2*time.Hour), 1, seckill.RoomCounts{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric((usec()-before)/float64(b.N), "redis-µs/join")
}
