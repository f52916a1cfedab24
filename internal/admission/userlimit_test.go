package admission

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestUserLimiter(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	l := NewUserLimiter(2, 3)
	l.now = func() time.Time { return clock }

	for i := range 3 {
		if !l.Allow(1, 7) {
			t.Fatalf("attempt %d within burst refused", i)
		}
	}
	if l.Allow(1, 7) {
		t.Fatal("attempt beyond burst allowed")
	}
	if !l.Allow(1, 8) {
		t.Fatal("another user limited by user 7's attempts")
	}
	clock = clock.Add(500 * time.Millisecond) // one token at 2/s
	if !l.Allow(1, 7) {
		t.Fatal("refilled token refused")
	}
	if l.Allow(1, 7) {
		t.Fatal("second attempt after one refill allowed")
	}
	clock = clock.Add(time.Hour)
	l.Allow(1, 7+64) // same shard as user 7: its sweep forgets the idle user 7
	if _, ok := l.shards[7].users[userCampaign{1, 7}]; ok {
		t.Fatal("idle user 7 still has a bucket after an idle hour")
	}
	if n := len(l.shards[7].users); n != 1 {
		t.Fatalf("shard keeps %d buckets, want only the active user", n)
	}
	for i := range 2 { // a forgotten user starts again with a full burst
		if !l.Allow(1, 7) {
			t.Fatalf("attempt %d of a returning user refused", i)
		}
	}
}

func TestUserLimiterConcurrent(t *testing.T) {
	l := NewUserLimiter(0.001, 5) // effectively no refill during the test
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() {
			if l.Allow(1, 42) {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 5 {
		t.Fatalf("allowed %d of 300 concurrent attempts, want the burst of 5", got)
	}
}

func TestUserLimiterDisabled(t *testing.T) {
	l := NewUserLimiter(0, 1)
	for range 100 {
		if !l.Allow(1, 1) {
			t.Fatal("a zero rate must disable limiting")
		}
	}
}
