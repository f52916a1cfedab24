package admission

import (
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
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

// TestUserLimiterIsRateLimiter: the limiter answers every attempt as
// golang.org/x/time/rate's Limiter with the same rate and burst does (one
// per user and campaign, created full), over random sequences of attempts
// on a microsecond grid: bursts, pauses shorter and longer than a refill,
// and idle spells after which the user is forgotten and comes back full.
func TestUserLimiterIsRateLimiter(t *testing.T) {
	r := mathrand.New(mathrand.NewPCG(20, 12))
	for _, tc := range []struct {
		perSecond float64
		burst     int
	}{{5, 10}, {2, 3}, {1, 1}, {100, 300}, {0.5, 2}, {1000, 1}} {
		start := time.Unix(1_800_000_000, 0)
		clock := start
		l := NewUserLimiter(tc.perSecond, tc.burst)
		l.now = func() time.Time { return clock }
		lib := map[int64]*rate.Limiter{}
		interval := time.Duration(float64(time.Second) / tc.perSecond)
		for i := range 20_000 {
			switch k := r.IntN(10); {
			case k < 5: // within a burst
			case k < 9:
				clock = clock.Add(time.Duration(r.Int64N(int64(2*interval))) / time.Microsecond * time.Microsecond)
			default:
				clock = clock.Add(time.Duration(r.Int64N(int64(3*l.full + time.Second))))
			}
			user := int64(1 + r.IntN(3))
			lim := lib[user]
			if lim == nil {
				lim = rate.NewLimiter(rate.Limit(tc.perSecond), tc.burst)
				lib[user] = lim
			}
			want := lim.AllowN(clock, 1)
			if got := l.Allow(9, user); got != want {
				t.Fatalf("%v/s burst %d, attempt %d of user %d at +%v: allowed %v, rate.Limiter %v",
					tc.perSecond, tc.burst, i, user, clock.Sub(start), got, want)
			}
		}
	}
}

// BenchmarkUserLimiter measures a sale's attempt: every one a new user's.
func BenchmarkUserLimiter(b *testing.B) {
	l := NewUserLimiter(5, 10)
	b.ReportAllocs()
	user := int64(0)
	for b.Loop() {
		user++
		l.Allow(1, user)
	}
}
