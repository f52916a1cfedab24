package seckill

import (
	"sync"
	"time"
)

// UserLimiter is a per-process token bucket per user: rate attempts a second
// with bursts of burst. It lives in memory so that a limited attempt costs no
// round trip at all; with N API instances a user gets at most N times the
// rate, which is what it is for: keeping one client from flooding the path.
type UserLimiter struct {
	rate   float64
	burst  float64
	now    func() time.Time
	shards [64]limiterShard
}

type limiterShard struct {
	mu      sync.Mutex
	buckets map[int64]bucket
	swept   time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewUserLimiter returns a limiter allowing rate attempts a second per user
// with bursts up to burst. A rate of 0 or less allows everything.
func NewUserLimiter(rate float64, burst int) *UserLimiter {
	if burst < 1 {
		burst = 1
	}
	l := &UserLimiter{rate: rate, burst: float64(burst), now: time.Now}
	for i := range l.shards {
		l.shards[i].buckets = make(map[int64]bucket)
	}
	return l
}

// Allow takes one token from the user's bucket and reports whether there was one.
func (l *UserLimiter) Allow(userID int64) bool {
	if l == nil || l.rate <= 0 {
		return true
	}
	now := l.now()
	sh := &l.shards[uint64(userID)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.buckets[userID]
	if !ok {
		b = bucket{tokens: l.burst, last: now}
	} else {
		b.tokens += now.Sub(b.last).Seconds() * l.rate
		if b.tokens > l.burst {
			b.tokens = l.burst
		}
		b.last = now
	}
	allowed := b.tokens >= 1
	if allowed {
		b.tokens--
	}
	sh.buckets[userID] = b
	// Forget users whose bucket has refilled, so memory stays bounded by the
	// users active in the last few seconds.
	full := time.Duration(l.burst / l.rate * float64(time.Second))
	if now.Sub(sh.swept) > full && len(sh.buckets) > 0 {
		for id, bk := range sh.buckets {
			if now.Sub(bk.last) > full {
				delete(sh.buckets, id)
			}
		}
		sh.swept = now
	}
	return allowed
}
