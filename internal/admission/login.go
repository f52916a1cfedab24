package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/seckill"
	"seckill/lua"
)

// loginScript takes sign-in attempts from GCRA budgets. redis_rate, which
// we use elsewhere for the same algorithm, checks one key a call and puts
// its own "rate:" in front of every key: it could neither take from two
// budgets at once nor keep the keys under Options.Prefix.
var loginScript = newScript(lua.Login)

// LoginLimiter limits sign-in attempts in Redis, so every instance shares
// the budgets (it implements the dashboard's web.LoginLimiter). One script
// (lua/login.lua) takes an attempt from the pair's and the address's budgets
// at once, from both or from neither. Keys:
//
//	<p>seckill:login:{a<address>}:user:<hash>  the pair's budget
//	<p>seckill:login:{a<address>}:address      the address's budget
//	<p>seckill:login:{u<hash>}:failures        the name's wrong passwords
//
// where <hash> is a digest of the lower-cased user name, so any name makes
// a short key that cannot break out of its hash tag. Every key expires once
// its budget is full again.
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
// it (the pair's or the address's budget is spent, and nothing was taken);
// slow reports that the name's failures from every address are over their
// budget, so the caller should make the attempt wait.
func (l *LoginLimiter) AllowLogin(ctx context.Context, address, user string) (retryAfter time.Duration, slow bool, err error) {
	addr, name := loginAddress(address), loginUser(user)
	retryAfter, err = l.run(ctx, "take",
		[]string{l.keys.loginPair(addr, name), l.keys.loginAddress(addr)}, l.limits.PerPair, l.limits.PerAddress)
	if err != nil || retryAfter > 0 {
		return retryAfter, false, err
	}
	wait, err := l.run(ctx, "check", []string{l.keys.loginFailures(name)}, l.limits.Failures)
	return 0, wait > 0, err
}

// LoginFailed counts a wrong password for user. Once the budget is spent a
// failure is not counted: the budget refills at its rate however hard
// someone guesses, and attempts stay slowed while it is empty.
func (l *LoginLimiter) LoginFailed(ctx context.Context, user string) error {
	_, err := l.run(ctx, "take", []string{l.keys.loginFailures(loginUser(user))}, l.limits.Failures)
	return err
}

func (l *LoginLimiter) run(ctx context.Context, mode string, keys []string, limits ...seckill.Limit) (time.Duration, error) {
	args := make([]any, 0, 1+2*len(limits))
	args = append(args, mode)
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

// loginAddress is the key part of a client address: the address itself
// when it is one, else a digest.
func loginAddress(address string) string {
	if a, err := netip.ParseAddr(address); err == nil && a.Zone() == "" {
		return a.String()
	}
	sum := sha256.Sum256([]byte(address))
	return "h" + hex.EncodeToString(sum[:12])
}
