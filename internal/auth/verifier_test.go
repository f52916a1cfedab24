package auth

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/seckill"
)

func TestVerifierModes(t *testing.T) {
	e := newProviderEnv(t, nil, jose.RS256)
	hs, _ := newTestTokens(t)
	hs.Now = e.clock.now
	ours, err := hs.Issue(42, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// An HS256 token in another header shape (jwt's full path).
	other := sign(t, jwt.SigningMethodHS256, testSecret, claims{Role: RoleUser, RegisteredClaims: jwt.RegisteredClaims{
		Subject: "7", Issuer: testIssuer, Audience: jwt.ClaimStrings{"x"},
		ExpiresAt: jwt.NewNumericDate(e.clock.now().Add(time.Hour)),
	}})
	theirs := e.sign(t, "k0-RS256", e.claims("alice"))

	both, err := NewVerifier(hs, e.provider)
	if err != nil {
		t.Fatal(err)
	}
	hsOnly, _ := NewVerifier(hs, nil)
	providerOnly, _ := NewVerifier(nil, e.provider)
	if _, err := NewVerifier(nil, nil); err == nil {
		t.Error("NewVerifier(nil, nil) succeeded")
	}
	for _, tc := range []struct {
		name   string
		v      *Verifier
		token  string
		wantID int64 // 0: refused
	}{
		{"both: ours", both, ours, 42},
		{"both: ours, jwt's shape", both, other, 7},
		{"both: the provider's", both, theirs, seckill.FirstExternalUserID},
		{"HS256 only: ours", hsOnly, ours, 42},
		{"HS256 only: the provider's", hsOnly, theirs, 0},
		{"provider only: ours", providerOnly, ours, 0},
		{"provider only: the provider's", providerOnly, theirs, seckill.FirstExternalUserID},
		{"both: garbage", both, "a.b.c", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := tc.v.Authenticate(t.Context(), tc.token)
			switch {
			case tc.wantID == 0 && err == nil:
				t.Fatalf("accepted as %+v", u)
			case tc.wantID == 0:
				if seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED {
					t.Errorf("code %q, want UNAUTHENTICATED", seckill.ErrorCode(err))
				}
			case err != nil:
				t.Fatal(err)
			case u.ID != tc.wantID:
				t.Errorf("user %d, want %d", u.ID, tc.wantID)
			}
		})
	}
}

// BenchmarkVerify compares what a request pays to prove its user: our
// HS256 fast path, a provider's RS256, ES256 and EdDSA tokens checked cold
// (every token new to the process: a signature check) and cached (the
// token seen before: a SHA-256 and a map lookup).
func BenchmarkVerify(b *testing.B) {
	hs, _ := newTestTokens(b)
	hs.Now = nil
	tok, err := hs.Issue(42, false, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("HS256", func(b *testing.B) {
		for b.Loop() {
			if _, err := hs.Parse(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, alg := range ProviderAlgs {
		// A cache of one and 256 tokens in turn: every verification misses.
		cold := newProviderEnv(b, func(c *ProviderConfig) { c.VerifiedSize = 1 }, alg)
		tokens := make([]string, 256)
		for i := range tokens {
			c := cold.claims("alice")
			c.Extra = map[string]any{"jti": fmt.Sprint(i)}
			tokens[i] = cold.sign(b, "k0-"+string(alg), c)
		}
		b.Run(string(alg)+"/cold", func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := cold.provider.Verify(b.Context(), tokens[i%len(tokens)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if n := cold.provider.sigChecks.Load(); n < int64(b.N) {
				b.Fatalf("%d signature checks for %d verifications: the cache answered", n, b.N)
			}
		})
		b.Run(string(alg)+"/cached", func(b *testing.B) {
			warm := newProviderEnv(b, nil, alg)
			one := warm.sign(b, "k0-"+string(alg), warm.claims("alice"))
			for b.Loop() {
				if _, err := warm.provider.Verify(b.Context(), one); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAuthenticate is what the API pays per request through the
// Verifier (both modes on): our HS256 token, and a provider's RS256 token
// seen before.
func BenchmarkAuthenticate(b *testing.B) {
	e := newProviderEnv(b, nil, jose.RS256)
	hs, _ := newTestTokens(b)
	hs.Now = nil
	v, err := NewVerifier(hs, e.provider)
	if err != nil {
		b.Fatal(err)
	}
	e.clock.ns.Store(time.Now().UnixNano())
	ours, _ := hs.Issue(42, false, time.Hour)
	theirs := e.sign(b, "k0-RS256", e.claims("alice"))
	for name, tok := range map[string]string{"HS256": ours, "RS256-cached": theirs} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Authenticate(b.Context(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
