package auth

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"seckill/internal/auth/idp"
	"seckill/internal/seckill"
)

// TestProviderRotation rotates the provider's key during a sale: buyers
// with tokens of the old key and of the new one verify side by side while
// both are published, and once the old key is withdrawn its tokens stop
// verifying within KeyMaxAge (cached ones included).
func TestProviderRotation(t *testing.T) {
	const maxAge = time.Minute
	e := newProviderEnv(t, func(c *ProviderConfig) { c.KeyMaxAge = maxAge }, jose.ES256)
	old := "k0-ES256"
	buy := func(kid string, n int) []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			tok := e.sign(t, kid, e.claims(fmt.Sprintf("%s-buyer-%d", kid, i)))
			wg.Go(func() { _, errs[i] = e.provider.Verify(t.Context(), tok) })
		}
		wg.Wait()
		return errs
	}
	noErrors := func(what string, errs []error) {
		t.Helper()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: buyer %d: %v", what, i, err)
			}
		}
	}
	noErrors("before the rotation", buy(old, 100))
	cachedOld := e.sign(t, old, e.claims("cached-old"))
	if _, err := e.provider.Verify(t.Context(), cachedOld); err != nil {
		t.Fatal(err)
	}

	// The provider publishes a new key beside the old one and signs with
	// it; the first unknown kid refetches the set.
	e.clock.advance(DefaultMinRefetch)
	if _, err := e.idp.AddNew("k1-RS256", jose.RS256); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var oldErrs, newErrs []error
	wg.Go(func() { oldErrs = buy(old, 200) })
	wg.Go(func() { newErrs = buy("k1-RS256", 200) })
	wg.Wait()
	noErrors("old key during the overlap", oldErrs)
	noErrors("new key during the overlap", newErrs)

	// The old key is withdrawn. Until the keys are maxAge old, what was
	// fetched still stands; after, the set is fetched again.
	// Its tokens were issued before the fetch that no longer names it, so
	// they are bad tokens (not ones of a key rotated in since: retryable).
	var oldTokens []string
	for i := range 50 {
		oldTokens = append(oldTokens, e.sign(t, old, e.claims(fmt.Sprintf("late-%d", i))))
	}
	e.idp.Withdraw(old)
	e.clock.advance(maxAge)
	noErrors("new key after the overlap", buy("k1-RS256", 50))
	for i, tok := range oldTokens {
		if _, err := e.provider.Verify(t.Context(), tok); seckill.ErrorMessage(err) != "invalid token" {
			t.Fatalf("old key after the overlap: buyer %d: %v, want invalid token", i, err)
		}
	}
	if _, err := e.provider.Verify(t.Context(), cachedOld); err == nil {
		t.Error("a token of the withdrawn key, verified before, is still answered from the cache after KeyMaxAge")
	}
}

// TestProviderKidFlood sends tokens with kids the provider never published,
// from many goroutines over a minute of the clock: the key set is fetched
// at most once per MinRefetch, and good tokens verify throughout.
func TestProviderKidFlood(t *testing.T) {
	e := newProviderEnv(t, nil, jose.RS256)
	good := e.sign(t, "k0-RS256", e.claims("honest"))
	if _, err := e.provider.Verify(t.Context(), good); err != nil {
		t.Fatal(err)
	}
	before := e.idp.Fetches()
	attacker, err := idp.NewKey("attacker", jose.ES256) // cheaper to sign than RSA: the test's time is the flood's
	if err != nil {
		t.Fatal(err)
	}
	const seconds, perSecond = 60, 100
	for s := range seconds {
		var wg sync.WaitGroup
		for i := range perSecond {
			tok, err := idp.SignWith(attacker, fmt.Sprintf("kid-%d-%d", s, i), jose.ES256,
				map[string]any{"iss": e.idp.URL(), "sub": "x", "aud": testAudience, "exp": e.clock.now().Add(time.Hour).Unix()})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				if _, err := e.provider.Verify(t.Context(), tok); err == nil {
					t.Error("a token of an unknown kid verified")
				}
			})
		}
		wg.Go(func() {
			fresh := e.sign(t, "k0-RS256", e.claims(fmt.Sprintf("honest-%d", s)))
			if _, err := e.provider.Verify(t.Context(), fresh); err != nil {
				t.Errorf("second %d: an honest token is refused during the flood: %v", s, err)
			}
		})
		wg.Wait()
		e.clock.advance(time.Second)
	}
	fetches := e.idp.Fetches() - before
	limit := int64(seconds/int(DefaultMinRefetch/time.Second) + 1)
	t.Logf("%d tokens with unknown kids over %ds: %d key set fetches (limit %d)", seconds*perSecond, seconds, fetches, limit)
	if fetches > limit {
		t.Errorf("%d fetches of the key set, want at most %d", fetches, limit)
	}
}

// TestProviderCache checks that a token verified once is answered from the
// cache (no second signature check) until its exp, and not after.
func TestProviderCache(t *testing.T) {
	e := newProviderEnv(t, func(c *ProviderConfig) { c.Leeway = time.Second }, jose.ES256)
	c := e.claims("alice")
	c.Expiry = e.clock.now().Add(10 * time.Second)
	tok := e.sign(t, "k0-ES256", c)
	for range 3 {
		if _, err := e.provider.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.provider.sigChecks.Load(); n != 1 {
		t.Errorf("%d signature checks for one token verified three times, want 1", n)
	}
	e.clock.advance(11 * time.Second) // past exp and the leeway
	if _, err := e.provider.Verify(t.Context(), tok); seckill.ErrorMessage(err) != "token expired" {
		t.Errorf("after exp: %v, want token expired", err)
	}
	if n := e.provider.sigChecks.Load(); n != 2 {
		t.Errorf("after exp the cache answered (%d checks)", n)
	}

	// The cache is bounded.
	small := newProviderEnv(t, func(c *ProviderConfig) { c.VerifiedSize = 10 }, jose.ES256)
	for i := range 50 {
		if _, err := small.provider.Verify(t.Context(), small.sign(t, "k0-ES256", small.claims(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if n := small.provider.verified.c.Len(); n != 10 {
		t.Errorf("cache holds %d tokens, want its bound 10", n)
	}
}

// TestProviderNewSubjects verifies 500 first requests of new users at
// once, some users twice: every subject gets one id, and the store is asked
// once per subject.
func TestProviderNewSubjects(t *testing.T) {
	e := newProviderEnv(t, nil, jose.EdDSA)
	e.subjects.delay = 100 * time.Millisecond // a lookup outlasts the signature checks: later arrivals batch
	const users, requests = 250, 500
	tokens := make([]string, requests)
	for i := range requests {
		c := e.claims(fmt.Sprintf("user-%d", i%users))
		c.Extra = map[string]any{"jti": fmt.Sprint(i)} // a different token each request
		tokens[i] = e.sign(t, "k0-EdDSA", c)
	}
	ids := make([]int64, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			u, err := e.provider.Verify(t.Context(), tokens[i])
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = u.ID
		})
	}
	wg.Wait()
	seen := map[int64]int{}
	for i, id := range ids {
		if j, ok := seen[id]; ok && j != i%users {
			t.Fatalf("users %d and %d share id %d", j, i%users, id)
		}
		seen[id] = i % users
		if id != ids[i%users] {
			t.Fatalf("user %d got ids %d and %d", i%users, ids[i%users], id)
		}
		if !seckill.IsExternalUserID(id) {
			t.Fatalf("id %d is below seckill.FirstExternalUserID", id)
		}
	}
	if len(seen) != users {
		t.Errorf("%d ids for %d users", len(seen), users)
	}
	if n := e.subjects.calls.Load(); n != users {
		t.Errorf("the store was asked %d times for %d new users, want once each", n, users)
	}
	// Unbatched is one a user (250). Batched, the lookups that arrive while
	// the two in flight (subjectFlushes) take their delay go together: at
	// most two batches a delay while arrivals last. Beside the whole suite
	// under -race the signature checks spread the arrivals over seconds,
	// so the bound follows the spread from first to last arrival, and a
	// batch must still hold two users on average.
	n := e.subjects.batches.Load()
	spread := time.Duration(e.subjects.last.Load() - e.subjects.first.Load())
	if bound := 2*int64(spread/e.subjects.delay) + 4; n > bound || n > users/2 {
		t.Errorf("%d batches for %d new users arriving within %v: the lookups are not batched (at most %d, and %d)",
			n, users, spread.Round(time.Millisecond), bound, users/2)
	}
	t.Logf("%d new users arriving within %v: %d store calls", users, spread.Round(time.Millisecond), n)
}

// TestProviderColdStartBurst verifies many first tokens at once against a
// provider whose keys this process has not fetched yet, again and again:
// none may be refused, though the refetch limit lets only one fetch
// through (the tokens that read the empty key set just before the fetch
// ended ask for another, which the limit refuses: they must use the keys
// that fetch brought).
func TestProviderColdStartBurst(t *testing.T) {
	e := newProviderEnv(t, nil, jose.ES256)
	const rounds, buyers = 20, 200
	tokens := make([]string, buyers)
	for i := range tokens {
		tokens[i] = e.sign(t, "k0-ES256", e.claims(fmt.Sprintf("b-%d", i)))
	}
	for r := range rounds {
		p, err := NewProvider(t.Context(), ProviderConfig{Issuer: e.idp.URL(), Audience: testAudience, Now: e.clock.now}, e.subjects)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var refused atomic.Int64
		for i := range buyers {
			wg.Go(func() {
				if _, err := p.Verify(t.Context(), tokens[i]); err != nil {
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		if n := refused.Load(); n > 0 {
			t.Fatalf("round %d: %d of %d first tokens refused (%+v)", r, n, buyers, p.Stats())
		}
	}

	// The same for a rotation: a burst of tokens of a new kid, once the
	// limit allows a fetch, on the last round's provider.
	p := e.provider
	if _, err := p.Verify(t.Context(), tokens[0]); err != nil {
		t.Fatal(err)
	}
	for r := range rounds {
		kid := fmt.Sprintf("rotated-%d", r)
		if _, err := e.idp.AddNew(kid, jose.ES256); err != nil {
			t.Fatal(err)
		}
		e.clock.advance(DefaultMinRefetch)
		fresh := make([]string, buyers)
		for i := range fresh {
			fresh[i] = e.sign(t, kid, e.claims(fmt.Sprintf("r%d-b-%d", r, i)))
		}
		var wg sync.WaitGroup
		var refused atomic.Int64
		for i := range buyers {
			wg.Go(func() {
				if _, err := p.Verify(t.Context(), fresh[i]); err != nil {
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		if n := refused.Load(); n > 0 {
			t.Fatalf("rotation %d: %d of %d tokens of the new key refused (%+v)", r, n, buyers, p.Stats())
		}
	}
}

// TestProviderKeysUnreachable: a token of a key the provider has just
// rotated in, arriving while the key set may not be fetched again (within
// MinRefetch of the last fetch) or cannot be (the provider's key set is
// down), is answered UNAVAILABLE, which clients retry, not "invalid token",
// which makes them drop it; once the set is fetched it verifies. A token
// of a kid that verified before and does not verify now is a bad token,
// whatever the fetch.
func TestProviderKeysUnreachable(t *testing.T) {
	e := newProviderEnv(t, nil, jose.ES256)
	known := "k0-ES256"
	if _, err := e.provider.Verify(t.Context(), e.sign(t, known, e.claims("first"))); err != nil {
		t.Fatal(err)
	}
	forger, err := idp.NewKey(known, jose.ES256) // another key under the known kid
	if err != nil {
		t.Fatal(err)
	}
	forged, err := idp.SignWith(forger, known, jose.ES256,
		map[string]any{"iss": e.idp.URL(), "sub": "x", "aud": testAudience, "exp": e.clock.now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	// wantCode asks until tok's answer has code ("" for a verified token),
	// for a moment. go-oidc answers the waiters of a key set fetch before
	// it lets the next fetch start, so a verification right after another
	// may meet that finished fetch and its answer (its refusal, or keys
	// from before the rotation) instead of its own, as both do under load.
	// A retry meets its own.
	wantCode := func(what, tok, code string) {
		t.Helper()
		var err error
		for range 50 {
			if _, err = e.provider.Verify(t.Context(), tok); seckill.ErrorCode(err) == code {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s: %v, want %q", what, err, code)
	}
	verifies := func(what, tok string) { t.Helper(); wantCode(what, tok, "") }

	// Rotated in right after a fetch: the limiter holds the next one.
	if _, err := e.idp.AddNew("k1-ES256", jose.ES256); err != nil {
		t.Fatal(err)
	}
	rotated := e.sign(t, "k1-ES256", e.claims("rotated"))
	wantCode("a new key's token within MinRefetch of the last fetch", rotated, seckill.EUNAVAILABLE)
	wantCode("a forged token of a known kid within MinRefetch", forged, seckill.EUNAUTHENTICATED)
	e.clock.advance(DefaultMinRefetch)
	verifies("the new key's token once the set may be fetched", rotated)

	// The provider's key set is down when the next key comes.
	e.clock.advance(DefaultMinRefetch)
	e.idp.SetDown(true)
	if _, err := e.idp.AddNew("k2-ES256", jose.ES256); err != nil {
		t.Fatal(err)
	}
	next := e.sign(t, "k2-ES256", e.claims("next"))
	wantCode("a new key's token while the key set is down", next, seckill.EUNAVAILABLE)
	e.clock.advance(DefaultMinRefetch)
	wantCode("a forged token of a known kid while the key set is down", forged, seckill.EUNAUTHENTICATED)
	e.idp.SetDown(false)
	e.clock.advance(DefaultMinRefetch)
	verifies("the new key's token once the key set is back", next)
}
