package admission

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"seckill/internal/seckill"
)

// UserLimiter implements seckill.Limiter in the memory of one process: a
// token bucket per user and campaign (golang.org/x/time/rate), rate attempts a second
// with bursts of burst. A limited attempt costs no round trip at all; with N
// API instances a user gets at most N times the rate, which is what it is
// for: keeping one client from flooding the purchase path.
type UserLimiter struct {
	limit rate.Limit
	burst int
	full  time.Duration // how long an empty bucket takes to refill
	now   func() time.Time
	// Users are spread over shards so that concurrent attempts of
	// different users rarely wait on one lock.
	shards [64]userShard
}

type userShard struct {
	mu    sync.Mutex
	users map[userCampaign]*rate.Limiter
	swept time.Time
}

var _ seckill.Limiter = (*UserLimiter)(nil)

type userCampaign struct{ voucher, user int64 }

// NewUserLimiter returns a limiter allowing perSecond attempts a second per
// user with bursts up to burst (at least 1). A rate of 0 or less allows
// everything.
func NewUserLimiter(perSecond float64, burst int) *UserLimiter {
	burst = max(burst, 1)
	l := &UserLimiter{limit: rate.Limit(perSecond), burst: burst, now: time.Now}
	if perSecond > 0 {
		l.full = time.Duration(float64(burst) / perSecond * float64(time.Second))
	}
	for i := range l.shards {
		l.shards[i].users = make(map[userCampaign]*rate.Limiter)
	}
	return l
}

// Allow takes one token from the user's bucket for the campaign and
// reports whether there was one.
func (l *UserLimiter) Allow(voucherID, userID int64) bool {
	if l.limit <= 0 {
		return true
	}
	now := l.now()
	sh := &l.shards[uint64(userID)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	key := userCampaign{voucherID, userID}
	lim, ok := sh.users[key]
	if !ok {
		lim = rate.NewLimiter(l.limit, l.burst)
		sh.users[key] = lim
	}
	allowed := lim.AllowN(now, 1)
	// Forget users whose bucket has refilled: a full bucket is what a new
	// user gets, so memory stays bounded by the users active in the last
	// few seconds.
	if now.Sub(sh.swept) > l.full {
		for id, lim := range sh.users {
			if lim.TokensAt(now) >= float64(l.burst) {
				delete(sh.users, id)
			}
		}
		sh.swept = now
	}
	return allowed
}
