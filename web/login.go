package web

import (
	"context"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"seckill/internal/seckill"
)

// LoginLimiter bounds password guessing without handing a guesser the power
// to lock an operator out: attempts are refused per (address, user name)
// pair and per address, so a guesser spends only their own budgets; a user
// name's failures from every address together only slow its attempts down.
type LoginLimiter interface {
	// AllowLogin takes one attempt on user from the client address ip from
	// the pair's budget and from the address's, from both or from neither.
	// When either is spent it takes nothing and returns how long to wait
	// (retryAfter > 0). Otherwise slow reports whether user's failures from
	// every address are over their budget: the attempt then waits before
	// its password is checked.
	AllowLogin(ctx context.Context, ip, user string) (retryAfter time.Duration, slow bool, err error)
	// LoginFailed counts a wrong password for user, from any address.
	LoginFailed(ctx context.Context, user string) error
}

// DefaultLoginLimits allow bursts of 5 attempts per pair, 20 per address
// and 10 failures per user name, refilled at 5, 20 and 10 a minute.
var DefaultLoginLimits = seckill.LoginLimits{
	PerPair:    seckill.Limit{Burst: 5, Every: time.Minute / 5},
	PerAddress: seckill.Limit{Burst: 20, Every: time.Minute / 20},
	Failures:   seckill.Limit{Burst: 10, Every: time.Minute / 10},
}

// DefaultLoginSlowDown is how long an attempt on a user name whose failures
// are over budget waits before its password is checked.
const DefaultLoginSlowDown = 2 * time.Second

// MemoryLimiter is a LoginLimiter of one process: a token bucket
// (golang.org/x/time/rate) per pair, per address and per user name.
type MemoryLimiter struct {
	limits seckill.LoginLimits
	now    func() time.Time

	mu        sync.Mutex
	pairs     map[string]*rate.Limiter
	addresses map[string]*rate.Limiter
	failures  map[string]*rate.Limiter
	sweepAt   int // buckets held when full ones are next forgotten
}

// NewMemoryLimiter returns a limiter with these limits.
func NewMemoryLimiter(limits seckill.LoginLimits) *MemoryLimiter {
	return &MemoryLimiter{
		limits: limits, now: time.Now,
		pairs: map[string]*rate.Limiter{}, addresses: map[string]*rate.Limiter{}, failures: map[string]*rate.Limiter{},
		sweepAt: minSweep,
	}
}

// minSweep is the number of buckets from which full ones are forgotten.
const minSweep = 100_000

// AllowLogin implements LoginLimiter. The attempt is reserved from both
// budgets and handed back to both when either cannot serve it now, all
// under one lock.
func (m *MemoryLimiter) AllowLogin(_ context.Context, ip, user string) (time.Duration, bool, error) {
	user = strings.ToLower(user)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	pair := bucket(m.pairs, ip+"\x00"+user, m.limits.PerPair, now).ReserveN(now, 1)
	addr := bucket(m.addresses, ip, m.limits.PerAddress, now).ReserveN(now, 1)
	if wait := max(pair.DelayFrom(now), addr.DelayFrom(now)); wait > 0 {
		pair.CancelAt(now)
		addr.CancelAt(now)
		return wait, false, nil
	}
	slow := false
	if f, ok := m.failures[user]; ok {
		slow = f.TokensAt(now) < 1
	}
	return 0, slow, nil
}

// LoginFailed implements LoginLimiter. Once the budget is spent a failure
// is not counted: the budget refills at its rate however hard someone
// guesses, and attempts stay slowed while it is empty.
func (m *MemoryLimiter) LoginFailed(_ context.Context, user string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	bucket(m.failures, strings.ToLower(user), m.limits.Failures, now).AllowN(now, 1)
	return nil
}

// bucket returns the limiter of key, made (full) when missing.
func bucket(set map[string]*rate.Limiter, key string, l seckill.Limit, now time.Time) *rate.Limiter {
	if b, ok := set[key]; ok {
		return b
	}
	b := rate.NewLimiter(rate.Every(l.Every), max(1, l.Burst))
	set[key] = b
	return b
}

// sweep forgets full buckets, which hold nothing a new one would not, once
// there are sweepAt of them; the next sweep waits until there are twice as
// many as are left, so the cost per attempt stays constant.
func (m *MemoryLimiter) sweep(now time.Time) {
	sets := []map[string]*rate.Limiter{m.pairs, m.addresses, m.failures}
	n := 0
	for _, set := range sets {
		n += len(set)
	}
	if n < m.sweepAt {
		return
	}
	n = 0
	for _, set := range sets {
		for k, b := range set {
			if b.TokensAt(now) >= float64(b.Burst()) {
				delete(set, k)
			}
		}
		n += len(set)
	}
	m.sweepAt = max(minSweep, 2*n)
}
