package admission

import (
	"sync"
	"time"

	"seckill/internal/seckill"
)

// UserLimiter implements seckill.Limiter in the memory of one process: a
// token bucket per user and campaign, rate attempts a second with bursts
// of burst, as golang.org/x/time/rate's Limiter would keep it. A limited
// attempt costs no round trip at all; with N API instances a user gets at
// most N times the rate, which is what it is for: keeping one client from
// flooding the purchase path.
//
// Each bucket is one integer, its theoretical arrival time (the generic
// cell rate algorithm, which is the same bucket seen from its end): in a
// sale every purchase is a new user's, and a rate.Limiter allocated for
// each would put an allocation, a mutex and a map of pointers for the
// collector to mark on every purchase.
// TestUserLimiterIsRateLimiter holds the two to the same answers.
type UserLimiter struct {
	interval int64 // nanoseconds a token takes to refill
	burst    int
	full     time.Duration // how long an empty bucket takes to refill
	now      func() time.Time
	// Users are spread over shards so that concurrent attempts of
	// different users rarely wait on one lock.
	shards [64]userShard
}

type userShard struct {
	mu    sync.Mutex
	users map[userCampaign]int64 // the bucket's theoretical arrival time, Unix nanoseconds
	swept time.Time
}

var _ seckill.Limiter = (*UserLimiter)(nil)

type userCampaign struct{ voucher, user int64 }

// NewUserLimiter returns a limiter allowing perSecond attempts a second per
// user with bursts up to burst (at least 1). A rate of 0 or less allows
// everything.
func NewUserLimiter(perSecond float64, burst int) *UserLimiter {
	burst = max(burst, 1)
	l := &UserLimiter{burst: burst, now: time.Now}
	if perSecond > 0 {
		l.interval = max(int64(float64(time.Second)/perSecond), 1)
		l.full = time.Duration(l.interval * int64(burst))
	}
	for i := range l.shards {
		l.shards[i].users = make(map[userCampaign]int64)
	}
	return l
}

// Allow takes one token from the user's bucket for the campaign and
// reports whether there was one.
func (l *UserLimiter) Allow(voucherID, userID int64) bool {
	if l.interval <= 0 {
		return true
	}
	t := l.now()
	now := t.UnixNano()
	sh := &l.shards[uint64(userID)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	key := userCampaign{voucherID, userID}
	// A bucket is full when its arrival time has passed; a missing one is
	// full.
	tat := max(sh.users[key], now)
	allowed := tat+l.interval-now <= l.full.Nanoseconds()
	if allowed {
		sh.users[key] = tat + l.interval
	}
	// Forget users whose bucket has refilled: a full bucket is what a new
	// user gets, so memory stays bounded by the users active in the last
	// few seconds.
	if t.Sub(sh.swept) > l.full {
		for id, tat := range sh.users {
			if tat <= now {
				delete(sh.users, id)
			}
		}
		sh.swept = t
	}
	return allowed
}
