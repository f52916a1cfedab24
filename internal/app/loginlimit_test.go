package app

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
	"seckill/web"
)

// loginLimiters are every web.LoginLimiter we ship, each made fresh with
// the given limits: the in-memory one and the Redis one on real Redis
// under a key prefix of its own.
var loginLimiters = map[string]func(t *testing.T, l seckill.LoginLimits) web.LoginLimiter{
	"memory": func(_ *testing.T, l seckill.LoginLimits) web.LoginLimiter { return web.NewMemoryLimiter(l) },
	"redis": func(t *testing.T, l seckill.LoginLimits) web.LoginLimiter {
		rdb, prefix := testenv.MustOpenRedis(t)
		return admission.NewLoginLimiter(rdb, prefix, l)
	},
}

// TestLoginLimiterContract runs one suite against every LoginLimiter.
func TestLoginLimiterContract(t *testing.T) {
	for name, newLimiter := range loginLimiters {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testLoginLimiter(t, newLimiter)
		})
	}
}

const (
	guesser  = "192.0.2.1"
	operator = "198.51.100.7"
)

var contractLimits = seckill.LoginLimits{
	PerPair:    seckill.Limit{Burst: 3, Every: time.Hour},
	PerAddress: seckill.Limit{Burst: 5, Every: time.Hour},
	Failures:   seckill.Limit{Burst: 2, Every: time.Hour},
}

func testLoginLimiter(t *testing.T, newLimiter func(*testing.T, seckill.LoginLimits) web.LoginLimiter) {
	ctx := context.Background()
	// allow tells whether an attempt was taken, failing the test on an
	// error or a refusal without a wait.
	allow := func(t *testing.T, l web.LoginLimiter, ip, user string) (bool, bool) {
		t.Helper()
		wait, slow, err := l.AllowLogin(ctx, ip, user)
		if err != nil {
			t.Fatal(err)
		}
		if wait < 0 || wait > time.Hour {
			t.Fatalf("retry after %v", wait)
		}
		return wait == 0, slow
	}
	want := func(t *testing.T, l web.LoginLimiter, ip, user string, ok bool) {
		t.Helper()
		if got, _ := allow(t, l, ip, user); got != ok {
			t.Fatalf("attempt on %q from %s allowed = %v, want %v", user, ip, got, ok)
		}
	}
	// wantN makes n attempts, each of which must be allowed or not as ok says.
	wantN := func(t *testing.T, l web.LoginLimiter, n int, ip, user string, ok bool) {
		t.Helper()
		for range n {
			want(t, l, ip, user, ok)
		}
	}

	t.Run("pair", func(t *testing.T) {
		l := newLimiter(t, contractLimits)
		wantN(t, l, 3, guesser, "admin", true)
		// Spent for the guesser on this name, whatever its case...
		want(t, l, guesser, "ADMIN", false)
		// ...but not for the operator elsewhere, nor for other names.
		want(t, l, operator, "admin", true)
		want(t, l, guesser, "alice", true)
	})

	t.Run("address", func(t *testing.T) {
		l := newLimiter(t, contractLimits)
		for i := range 5 {
			want(t, l, guesser, "u"+strconv.Itoa(i), true)
		}
		want(t, l, guesser, "someone-else", false)
		want(t, l, operator, "u0", true)
	})

	t.Run("both or neither", func(t *testing.T) {
		l := newLimiter(t, contractLimits)
		wantN(t, l, 3, guesser, "admin", true)
		// Refused on the pair: the address's budget is not charged.
		wantN(t, l, 10, guesser, "admin", false)
		want(t, l, guesser, "u1", true)
		want(t, l, guesser, "u2", true)
		want(t, l, guesser, "u3", false)
	})

	// The two below refill a budget within the test. What they assert
	// before the refill holds only for attempts answered before it: on a
	// loaded machine ten attempts can take longer than the refill, and
	// the address's budget is back.
	t.Run("neither when the address is spent", func(t *testing.T) {
		every := time.Second
		l := newLimiter(t, seckill.LoginLimits{
			PerPair: seckill.Limit{Burst: 3, Every: time.Hour}, PerAddress: seckill.Limit{Burst: 1, Every: every}, Failures: contractLimits.Failures,
		})
		refill := time.Now().Add(every) // the refill is no sooner
		want(t, l, guesser, "u1", true)
		// Refused on the address: the pair's budget is not charged, or
		// ten refusals would spend its three.
		refused := 0
		for range 10 {
			ok, _ := allow(t, l, guesser, "admin")
			if time.Now().After(refill) {
				break // answered after the refill: it says nothing
			}
			if ok {
				t.Fatalf("attempt on admin from %s allowed %d attempts after the address's last", guesser, refused+1)
			}
			refused++
		}
		if refused <= contractLimits.PerPair.Burst {
			t.Skipf("only %d attempts before the address's budget came back: the machine is too slow to tell", refused)
		}
		time.Sleep(time.Until(refill) + 50*time.Millisecond)
		want(t, l, guesser, "admin", true)
	})

	t.Run("retry after", func(t *testing.T) {
		every := time.Second
		l := newLimiter(t, seckill.LoginLimits{PerPair: seckill.Limit{Burst: 1, Every: every}, PerAddress: contractLimits.PerAddress, Failures: contractLimits.Failures})
		refill := time.Now().Add(every)
		want(t, l, guesser, "admin", true)
		wait, _, err := l.AllowLogin(ctx, guesser, "admin")
		if err == nil && wait == 0 && time.Now().After(refill) {
			t.Skip("the second attempt was answered after the refill: the machine is too slow to tell")
		}
		if err != nil || wait <= 0 || wait > every {
			t.Fatalf("second attempt: retry after %v, %v; want (0, %v]", wait, err, every)
		}
		time.Sleep(wait + 20*time.Millisecond)
		want(t, l, guesser, "admin", true)
	})

	t.Run("failures slow, never refuse", func(t *testing.T) {
		l := newLimiter(t, contractLimits)
		if _, slow := allow(t, l, operator, "admin"); slow {
			t.Error("slowed before any failure")
		}
		// Failures from anywhere, more than the budget.
		for i := range 5 {
			if err := l.LoginFailed(ctx, "203.0.113."+strconv.Itoa(10+i), "Admin"); err != nil {
				t.Fatal(err)
			}
		}
		ok, slow := allow(t, l, operator, "admin")
		if !ok || !slow {
			t.Errorf("after the failures: allowed %v, slowed %v; want allowed and slowed", ok, slow)
		}
		if _, slow := allow(t, l, operator, "alice"); slow {
			t.Error("another name is slowed")
		}
	})

	// guess is one wrong password: an attempt, then its failure. It
	// returns how long the attempt was refused for (0 when it was checked).
	guess := func(t *testing.T, l web.LoginLimiter, ip, user string) time.Duration {
		t.Helper()
		wait, _, err := l.AllowLogin(ctx, ip, user)
		if err != nil {
			t.Fatal(err)
		}
		if wait == 0 {
			if err := l.LoginFailed(ctx, ip, user); err != nil {
				t.Fatal(err)
			}
		}
		return wait
	}
	// signIn is one right password; it reports whether it was checked.
	signIn := func(t *testing.T, l web.LoginLimiter, ip, user string) (bool, bool) {
		t.Helper()
		ok, slow := allow(t, l, ip, user)
		if ok {
			if err := l.LoginSucceeded(ctx, ip, user); err != nil {
				t.Fatal(err)
			}
		}
		return ok, slow
	}

	// The lockout of issue 41: a guesser spends the pair's budget and the
	// name's failures; the operator elsewhere signs in (slowed).
	t.Run("no lockout", func(t *testing.T) {
		l := newLimiter(t, contractLimits)
		// The name's failures are spent at the 2nd guess, so the 3rd,
		// from an address that has failed on it, is refused.
		for range 2 {
			if wait := guess(t, l, guesser, "admin"); wait != 0 {
				t.Fatalf("guess refused for %v", wait)
			}
		}
		for range 5 {
			if wait := guess(t, l, guesser, "admin"); wait <= 0 {
				t.Fatal("the guesser's guess was checked after the name's failures were spent")
			}
		}
		if ok, slow := signIn(t, l, operator, "admin"); !ok || !slow {
			t.Errorf("operator: allowed %v, slowed %v; want allowed and slowed", ok, slow)
		}
	})

	// Many addresses guessing one name: each gets its first guess, and
	// once the name's failures are spent, none that has failed gets
	// another until they refill; the operator, from an address that has
	// not failed, still signs in.
	t.Run("many addresses", func(t *testing.T) {
		l := newLimiter(t, contractLimits)
		const n = 8
		addr := func(i int) string { return "203.0.113." + strconv.Itoa(20+i) }
		for i := range n {
			if wait := guess(t, l, addr(i), "admin"); wait != 0 {
				t.Fatalf("first guess from %s refused for %v", addr(i), wait)
			}
		}
		for i := range n {
			wait := guess(t, l, addr(i), "ADMIN")
			if wait <= 0 || wait > contractLimits.Failures.Every {
				t.Errorf("second guess from %s: retry after %v, want (0, %v]", addr(i), wait, contractLimits.Failures.Every)
			}
		}
		if ok, slow := signIn(t, l, operator, "admin"); !ok || !slow {
			t.Errorf("operator: allowed %v, slowed %v; want allowed and slowed", ok, slow)
		}
		// Another name is not under attack: the same addresses try it.
		if wait := guess(t, l, addr(0), "alice"); wait != 0 {
			t.Errorf("another name refused for %v", wait)
		}
	})

	// A right password costs the pair nothing and forgets its failures.
	t.Run("success is free", func(t *testing.T) {
		limits := contractLimits
		limits.PerAddress.Burst = 8
		l := newLimiter(t, limits)
		checked := 0
		if wait := guess(t, l, operator, "admin"); wait != 0 { // a typo
			t.Fatalf("typo refused for %v", wait)
		}
		checked++
		for i := range limits.PerPair.Burst + 1 {
			if ok, _ := signIn(t, l, operator, "admin"); !ok {
				t.Fatalf("sign-in %d refused", i+1)
			}
			checked++
		}
		// The name now comes under attack: the operator's typo was
		// forgotten at the sign-in, so the operator is not refused.
		for i := range 3 {
			guess(t, l, "203.0.113."+strconv.Itoa(40+i), "admin")
		}
		if ok, slow := signIn(t, l, operator, "admin"); !ok || !slow {
			t.Errorf("operator after the attack began: allowed %v, slowed %v", ok, slow)
		}
		checked++
		// The address still counts every password checked: it bounds the
		// bcrypt work one address causes.
		for ; checked <= limits.PerAddress.Burst; checked++ {
			if ok, _ := signIn(t, l, operator, "admin"); !ok {
				break
			}
		}
		if checked != limits.PerAddress.Burst {
			t.Errorf("%d password checks from one address, want its budget of %d", checked, limits.PerAddress.Burst)
		}
	})

	// An IPv6 /64 is one address: walking it does not buy guesses.
	t.Run("ipv6 /64", func(t *testing.T) {
		l := newLimiter(t, contractLimits)
		for i := range 5 {
			want(t, l, "2001:db8:1:2::"+strconv.Itoa(i+1), "u"+strconv.Itoa(i), true)
		}
		want(t, l, "2001:db8:1:2:ffff::1", "v", false)
		want(t, l, "2001:db8:1:3::1", "v", true)
	})

	t.Run("concurrent", func(t *testing.T) {
		l := newLimiter(t, contractLimits)
		const n = 300
		var pair, addr atomic.Int64
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if ok, _ := allow(t, l, guesser, "admin"); ok {
					pair.Add(1)
				}
			})
			wg.Go(func() {
				// Many names from one address.
				if ok, _ := allow(t, l, "203.0.113.5", "u"+strconv.Itoa(i)); ok {
					addr.Add(1)
				}
			})
			wg.Go(func() {
				if err := l.LoginFailed(ctx, "203.0.113.9", "admin"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if pair.Load() != 3 || addr.Load() != 5 {
			t.Errorf("allowed %d on one pair (want 3) and %d from one address (want 5)", pair.Load(), addr.Load())
		}
		// The operator, elsewhere, still gets in (slowed).
		if ok, slow := allow(t, l, operator, "admin"); !ok || !slow {
			t.Errorf("operator: allowed %v, slowed %v", ok, slow)
		}
	})
}
