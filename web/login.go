package web

import (
	"context"
	"strings"
	"sync"
	"time"

	"seckill/internal/clientaddr"
	"seckill/internal/seckill"
)

// LoginLimiter bounds password guessing without handing a guesser the power
// to lock an operator out. Every password check is taken from the client
// address's budget and the (address, user name) pair's, so a guesser
// spends only budgets of their own and the bcrypt work one address can
// cause stays bounded; a right password hands the pair's attempt back.
// Wrong passwords on a user name from every address together spend the
// name's failure budget; while it is spent every attempt on the name is
// slowed, and an address that has itself failed on the name (since its
// pair's budget was last full) is refused. An address that has not failed
// on the name is never refused for the name's failures: the operator who
// knows the password signs in from any such address, slowed, however many
// addresses guess.
//
// The trade-off: a guesser with many addresses still gets a first guess
// from each (slowed, and each one spends that address's budget); refusing
// those too would let a stranger lock the operator out from anywhere,
// which is the attack this limiter exists to deny. Client addresses are
// counted as clientaddr.Bucket groups them (an IPv6 /64 is one address).
type LoginLimiter interface {
	// AllowLogin takes one attempt on user from the client address ip
	// from the pair's budget and from the address's, from both or from
	// neither. When either is spent, or when user's failures are over
	// budget and this pair has failed, it takes nothing and returns how
	// long to wait (retryAfter > 0). Otherwise slow reports whether user's
	// failures from every address are over their budget: the attempt then
	// waits before its password is checked.
	AllowLogin(ctx context.Context, ip, user string) (retryAfter time.Duration, slow bool, err error)
	// LoginFailed counts a wrong password for user from ip: against the
	// name's failure budget, and as a failure of the pair, which AllowLogin
	// remembers until the pair's budget would be full again.
	LoginFailed(ctx context.Context, ip, user string) error
	// LoginSucceeded hands the attempt AllowLogin took back to the pair's
	// budget and forgets the pair's failures: a right password costs the
	// pair nothing. The address's budget keeps it (it bounds the password
	// checks an address can cause, right or wrong).
	LoginSucceeded(ctx context.Context, ip, user string) error
}

// DefaultLoginLimits allow bursts of 5 wrong passwords per pair, 20
// password checks per address and 10 wrong passwords per user name,
// refilled at 5, 20 and 10 a minute.
var DefaultLoginLimits = seckill.LoginLimits{
	PerPair:    seckill.Limit{Burst: 5, Every: time.Minute / 5},
	PerAddress: seckill.Limit{Burst: 20, Every: time.Minute / 20},
	Failures:   seckill.Limit{Burst: 10, Every: time.Minute / 10},
}

// DefaultLoginSlowDown is how long an attempt on a user name whose failures
// are over budget waits before its password is checked.
const DefaultLoginSlowDown = 2 * time.Second

// LoginAddress is the key a limiter counts the client address ip under:
// its clientaddr.Bucket, or ip itself when it is not an address.
func LoginAddress(ip string) string {
	if b := clientaddr.Bucket(ip); b != "" {
		return b
	}
	return ip
}

// MemoryLimiter is a LoginLimiter of one process: a GCRA budget (the
// algorithm of lua/login.lua, each budget its theoretical arrival time)
// per pair, per address and per user name, and the pairs' failures.
type MemoryLimiter struct {
	limits seckill.LoginLimits
	now    func() time.Time

	mu        sync.Mutex
	pairs     map[string]time.Time
	addresses map[string]time.Time
	failures  map[string]time.Time
	failed    map[string]time.Time // pair -> when its failure is forgotten
	sweepAt   int                  // entries held when stale ones are next forgotten
}

// NewMemoryLimiter returns a limiter with these limits.
func NewMemoryLimiter(limits seckill.LoginLimits) *MemoryLimiter {
	return &MemoryLimiter{
		limits: limits, now: time.Now,
		pairs: map[string]time.Time{}, addresses: map[string]time.Time{}, failures: map[string]time.Time{},
		failed:  map[string]time.Time{},
		sweepAt: minSweep,
	}
}

// minSweep is the number of entries from which stale ones are forgotten.
const minSweep = 100_000

func pairKey(ip, user string) string { return LoginAddress(ip) + "\x00" + strings.ToLower(user) }

// AllowLogin implements LoginLimiter, all under one lock.
func (m *MemoryLimiter) AllowLogin(_ context.Context, ip, user string) (time.Duration, bool, error) {
	addr, pair, name := LoginAddress(ip), pairKey(ip, user), strings.ToLower(user)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	pairTAT, pairWait := gcra(m.pairs[pair], m.limits.PerPair, now)
	addrTAT, addrWait := gcra(m.addresses[addr], m.limits.PerAddress, now)
	if wait := max(pairWait, addrWait); wait > 0 {
		return wait, false, nil
	}
	_, attacked := gcra(m.failures[name], m.limits.Failures, now)
	if until, ok := m.failed[pair]; attacked > 0 && ok && until.After(now) {
		return min(attacked, until.Sub(now)), false, nil
	}
	m.pairs[pair], m.addresses[addr] = pairTAT, addrTAT
	return 0, attacked > 0, nil
}

// LoginFailed implements LoginLimiter. Once the name's budget is spent a
// failure is not counted against it: the budget refills at its rate
// however hard someone guesses, and attempts stay slowed while it is empty.
func (m *MemoryLimiter) LoginFailed(_ context.Context, ip, user string) error {
	name := strings.ToLower(user)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	if tat, wait := gcra(m.failures[name], m.limits.Failures, now); wait == 0 {
		m.failures[name] = tat
	}
	m.failed[pairKey(ip, user)] = now.Add(m.limits.FailureMemory())
	return nil
}

// LoginSucceeded implements LoginLimiter.
func (m *MemoryLimiter) LoginSucceeded(_ context.Context, ip, user string) error {
	pair := pairKey(ip, user)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	delete(m.failed, pair)
	if tat, ok := m.pairs[pair]; ok {
		if tat = tat.Add(-max(time.Millisecond, m.limits.PerPair.Every)); tat.After(now) {
			m.pairs[pair] = tat
		} else {
			delete(m.pairs, pair)
		}
	}
	return nil
}

// gcra is the budget l whose theoretical arrival time is tat (zero when
// full) after one more attempt at now: the new arrival time, and how long
// until the attempt would fit (0 when it fits now).
func gcra(tat time.Time, l seckill.Limit, now time.Time) (time.Time, time.Duration) {
	every := max(time.Millisecond, l.Every)
	next := now.Add(every)
	if tat.After(now) {
		next = tat.Add(every)
	}
	wait := next.Sub(now) - time.Duration(max(1, l.Burst))*every
	return next, max(0, wait)
}

// sweep forgets full budgets and forgotten failures, which hold nothing a
// missing entry would not, once there are sweepAt entries; the next sweep
// waits until there are twice as many as are left, so the cost per attempt
// stays constant.
func (m *MemoryLimiter) sweep(now time.Time) {
	sets := []map[string]time.Time{m.pairs, m.addresses, m.failures, m.failed}
	n := 0
	for _, set := range sets {
		n += len(set)
	}
	if n < m.sweepAt {
		return
	}
	n = 0
	for _, set := range sets {
		for k, t := range set {
			if !t.After(now) {
				delete(set, k)
			}
		}
		n += len(set)
	}
	m.sweepAt = max(minSweep, 2*n)
}
