package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/clientaddr"
	"seckill/internal/seckill"
	"seckill/lua"
)

// loginScript takes sign-in attempts from GCRA budgets. redis_rate, which
// we use elsewhere for the same algorithm, checks one key a call and puts
// its own "rate:" in front of every key: it could neither take from two
// budgets at once nor keep the keys under Options.Prefix.
var loginScript = newScript(lua.Login)

// LoginLimiter limits sign-in attempts in Redis, so every instance shares
// the budgets (it implements the dashboard's web.LoginLimiter, whose doc
// says what it guarantees). One script (lua/login.lua) takes an attempt
// from the pair's and the address's budgets at once, from both or from
// neither, refusing it while the pair's failure mark exists if the name is
// under attack. Keys:
//
//	<p>seckill:login:{a<address>}:user:<hash>    the pair's budget
//	<p>seckill:login:{a<address>}:address        the address's budget
//	<p>seckill:login:{a<address>}:failed:<hash>  the pair failed lately
//	<p>seckill:login:{u<hash>}:failures          the name's wrong passwords
//
// where <hash> is a digest of the lower-cased user name, so any name makes
// a short key that cannot break out of its hash tag, and <address> the
// address as clientaddr.Bucket counts it (an IPv6 /64 is one). Every key
// expires once its budget is full again, a mark once the pair's would be.
type LoginLimiter struct {
	rdb    redis.UniversalClient
	keys   keys
	limits seckill.LoginLimits
}

// NewLoginLimiter returns a limiter on rdb with keys under prefix.
func NewLoginLimiter(rdb redis.UniversalClient, prefix string, limits seckill.LoginLimits) *LoginLimiter {
	return &LoginLimiter{rdb: rdb, keys: keys{prefix: prefix}, limits: limits}
}

// AllowLogin takes one attempt on user from address. retryAfter > 0 refuses
// it (the pair's or the address's budget is spent, or the name's failures
// are over budget and this pair has failed; nothing was taken); slow
// reports that the name's failures from every address are over their
// budget, so the caller should make the attempt wait. The name's budget
// lives in another Cluster slot than the address's keys, so it is read
// first, on its own: a failure counted in between at worst lets one more
// attempt through unslowed.
func (l *LoginLimiter) AllowLogin(ctx context.Context, address, user string) (retryAfter time.Duration, slow bool, err error) {
	addr, name := loginAddress(address), loginUser(user)
	attacked, err := l.run(ctx, "check", []string{l.keys.loginFailures(name)}, l.limits.Failures)
	if err != nil {
		return 0, false, err
	}
	keys := []string{l.keys.loginPair(addr, name), l.keys.loginAddress(addr)}
	if attacked > 0 {
		keys = append(keys, l.keys.loginFailed(addr, name))
	}
	retryAfter, err = l.run(ctx, "take", keys, l.limits.PerPair, l.limits.PerAddress)
	if err != nil || retryAfter > 0 {
		if attacked > 0 && retryAfter > attacked {
			// Refused on the mark, or on a budget that refills later
			// than the name's: the name's refill may lift the mark first.
			retryAfter = l.retryAfter(ctx, addr, name, attacked, retryAfter)
		}
		return retryAfter, false, err
	}
	return 0, attacked > 0, nil
}

// retryAfter is how long an attempt refused while its name is under attack
// waits: the budgets' own wait when they refused it, else the sooner of
// the mark's end and the name's refill.
func (l *LoginLimiter) retryAfter(ctx context.Context, addr, name string, attacked, refused time.Duration) time.Duration {
	budgets, err := l.run(ctx, "check", []string{l.keys.loginPair(addr, name), l.keys.loginAddress(addr)}, l.limits.PerPair, l.limits.PerAddress)
	if err != nil || budgets > 0 {
		return refused
	}
	return min(refused, attacked)
}

// LoginFailed counts a wrong password for user from address: against the
// name's budget (once it is spent a failure is not counted: the budget
// refills at its rate however hard someone guesses, and attempts stay
// slowed while it is empty) and as the pair's failure mark.
func (l *LoginLimiter) LoginFailed(ctx context.Context, address, user string) error {
	addr, name := loginAddress(address), loginUser(user)
	if _, err := l.run(ctx, "take", []string{l.keys.loginFailures(name)}, l.limits.Failures); err != nil {
		return err
	}
	if err := l.rdb.Set(ctx, l.keys.loginFailed(addr, name), "1", l.limits.FailureMemory()).Err(); err != nil {
		return fmt.Errorf("admission: login failure mark: %w", err)
	}
	return nil
}

// LoginSucceeded hands the attempt back to the pair's budget and deletes
// its failure mark.
func (l *LoginLimiter) LoginSucceeded(ctx context.Context, address, user string) error {
	addr, name := loginAddress(address), loginUser(user)
	_, err := l.run(ctx, "give", []string{l.keys.loginPair(addr, name), l.keys.loginFailed(addr, name)}, l.limits.PerPair)
	return err
}

// run runs the login script in mode on keys: a budget for each of limits,
// and after them, when there is one key more, the pair's failure mark.
func (l *LoginLimiter) run(ctx context.Context, mode string, keys []string, limits ...seckill.Limit) (time.Duration, error) {
	marks := len(keys) - len(limits)
	args := make([]any, 0, 2+2*len(limits))
	args = append(args, mode, strconv.Itoa(marks))
	for _, lim := range limits {
		args = append(args, strconv.FormatInt(max(1, lim.Every.Milliseconds()), 10), strconv.Itoa(max(1, lim.Burst)))
	}
	ms, err := runScript(ctx, l.rdb, loginScript, keys, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("admission: login budget: %w", err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// loginUser is the key part of a user name: case does not make a new name.
func loginUser(user string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(user)))
	return hex.EncodeToString(sum[:12])
}

// loginAddress is the key part of a client address: the address as
// clientaddr.Bucket counts it when it is one (an IPv6 /64 is one address),
// else a digest.
func loginAddress(address string) string {
	if b := clientaddr.Bucket(address); b != "" {
		return b
	}
	sum := sha256.Sum256([]byte(address))
	return "h" + hex.EncodeToString(sum[:12])
}
