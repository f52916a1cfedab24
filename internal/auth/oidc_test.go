package auth

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"seckill/internal/auth/idp"
	"seckill/internal/seckill"
)

const testAudience = "seckill-api"

// memSubjects is a SubjectStore in memory that counts the subjects it is
// asked for (calls) and its batches, and when its first and last batches
// came (Unix ns).
type memSubjects struct {
	mu          sync.Mutex
	ids         map[seckill.Subject]int64
	calls       atomic.Int64
	batches     atomic.Int64
	first, last atomic.Int64
	delay       time.Duration
}

func newMemSubjects() *memSubjects { return &memSubjects{ids: map[seckill.Subject]int64{}} }

func (m *memSubjects) UserIDsForSubjects(ctx context.Context, subjects []seckill.Subject) ([]int64, error) {
	m.calls.Add(int64(len(subjects)))
	now := time.Now().UnixNano()
	if m.batches.Add(1) == 1 {
		m.first.Store(now)
	}
	m.last.Store(now)
	time.Sleep(m.delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int64, len(subjects))
	for i, k := range subjects {
		id, ok := m.ids[k]
		if !ok {
			id = seckill.FirstExternalUserID + int64(len(m.ids))
			m.ids[k] = id
		}
		out[i] = id
	}
	return out, nil
}

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock        { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// providerEnv is a test IdP, a Provider configured by discovery against it,
// and a clock both share.
type providerEnv struct {
	idp      *idp.IdP
	provider *Provider
	subjects *memSubjects
	clock    *clock
}

func newProviderEnv(tb testing.TB, modify func(*ProviderConfig), keys ...jose.SignatureAlgorithm) *providerEnv {
	tb.Helper()
	e := &providerEnv{idp: idp.Start(), subjects: newMemSubjects(), clock: newClock(time.Now())}
	tb.Cleanup(e.idp.Close)
	for i, alg := range keys {
		if _, err := e.idp.AddNew(fmt.Sprintf("k%d-%s", i, alg), alg); err != nil {
			tb.Fatal(err)
		}
	}
	cfg := ProviderConfig{Issuer: e.idp.URL(), Audience: testAudience, AdminClaim: "roles:seckill-admin", Now: e.clock.now}
	if modify != nil {
		modify(&cfg)
	}
	p, err := NewProvider(context.Background(), cfg, e.subjects)
	if err != nil {
		tb.Fatal(err)
	}
	e.provider = p
	return e
}

// claims are valid claims for subject at the env's clock.
func (e *providerEnv) claims(subject string) idp.Claims {
	now := e.clock.now()
	return idp.Claims{Subject: subject, Audience: []string{testAudience}, IssuedAt: now, NotBefore: now, Expiry: now.Add(time.Hour)}
}

func (e *providerEnv) sign(tb testing.TB, kid string, c idp.Claims) string {
	tb.Helper()
	s, err := e.idp.Sign(kid, c)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestProviderAlgorithms(t *testing.T) {
	for _, alg := range ProviderAlgs {
		t.Run(string(alg), func(t *testing.T) {
			e := newProviderEnv(t, nil, alg)
			kid := "k0-" + string(alg)
			u, err := e.provider.Verify(t.Context(), e.sign(t, kid, e.claims("alice")))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if diff := cmp.Diff(&seckill.User{ID: seckill.FirstExternalUserID}, u); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
			c := e.claims("root")
			c.Extra = map[string]any{"roles": []string{"viewer", "seckill-admin"}}
			u, err = e.provider.Verify(t.Context(), e.sign(t, kid, c))
			if err != nil {
				t.Fatalf("Verify admin: %v", err)
			}
			if diff := cmp.Diff(&seckill.User{ID: seckill.FirstExternalUserID + 1, Admin: true}, u); diff != "" {
				t.Errorf("admin (-want +got):\n%s", diff)
			}
			// alice again: the same id, from the subject cache.
			calls := e.subjects.calls.Load()
			u, err = e.provider.Verify(t.Context(), e.sign(t, kid, e.claims("alice")))
			if err != nil || u.ID != seckill.FirstExternalUserID {
				t.Fatalf("alice again: %+v, %v", u, err)
			}
			if got := e.subjects.calls.Load(); got != calls {
				t.Errorf("a known subject asked the store again (%d calls, was %d)", got, calls)
			}
		})
	}
}

func TestProviderAdminClaim(t *testing.T) {
	claims := map[string]any{"roles": "seckill-admin", "groups": []any{"a", "ops"}, "realm_access": map[string]any{"roles": []any{"seckill-admin"}}, "n": 3.0}
	for _, tc := range []struct {
		path string
		want string
		is   bool
	}{
		{"roles", "seckill-admin", true},
		{"roles", "seckill", false},
		{"groups", "ops", true},
		{"groups", "b", false},
		{"realm_access.roles", "seckill-admin", true},
		{"realm_access.other", "seckill-admin", false},
		{"n", "3", false},
		{"missing", "x", false},
	} {
		if got := ClaimHolds(claims, splitPath(tc.path), tc.want); got != tc.is {
			t.Errorf("ClaimHolds(%s, %s) = %v, want %v", tc.path, tc.want, got, tc.is)
		}
	}
}

func splitPath(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func TestProviderRefuses(t *testing.T) {
	e := newProviderEnv(t, nil, jose.RS256, jose.ES256)
	rsaKid, ecKid := "k0-RS256", "k1-ES256"
	stranger, err := idp.NewKey("stranger", jose.RS256)
	if err != nil {
		t.Fatal(err)
	}
	e.idp.Hold(stranger)
	now := e.clock.now()
	with := func(f func(*idp.Claims)) idp.Claims { c := e.claims("mallory"); f(&c); return c }
	withIss := func(c idp.Claims) idp.Claims { c.Issuer = e.idp.URL(); return c }

	// HS256 whose secret is the provider's public RSA key, as a confused
	// verifier would take it.
	var pub *rsa.PublicKey
	set := fetchJWKS(t, e.idp.JWKSURL())
	for _, k := range set.Keys {
		if k.KeyID == rsaKid {
			pub = k.Key.(*rsa.PublicKey)
		}
	}
	der := x509.MarshalPKCS1PublicKey(pub)
	hsClaims := jwt.MapClaims{"iss": e.idp.URL(), "sub": "mallory", "aud": testAudience, "exp": now.Add(time.Hour).Unix()}
	hsToken := func(secret []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, hsClaims)
		tok.Header["kid"] = rsaKid
		s, err := tok.SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	noneTok := jwt.NewWithClaims(jwt.SigningMethodNone, hsClaims)
	noneTok.Header["kid"] = rsaKid
	none, err := noneTok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	ecKey := func() *idp.Key {
		k, _ := idp.NewKey("x", jose.ES256)
		return k
	}()
	good := e.sign(t, rsaKid, e.claims("mallory"))

	tests := []struct {
		name, token, message string
	}{
		{"empty", "", "missing token"},
		{"garbage", "not.a.token", "invalid token"},
		{"tampered", good[:len(good)-4] + "AAAA", "invalid token"},
		{"alg none", none, "invalid token"},
		{"HS256 with the public key (PKCS#1) as secret", hsToken(der), "invalid token"},
		{"HS256 with the public key (PEM-ish base64) as secret", hsToken([]byte(base64.StdEncoding.EncodeToString(der))), "invalid token"},
		// Issued before the provider's key set was fetched, which does not
		// name its kid (one issued since may be of a key rotated in since:
		// TestProviderKeysUnreachable).
		{"unpublished key", e.sign(t, "stranger", with(func(c *idp.Claims) { c.IssuedAt = now.Add(-2 * time.Second) })), "invalid token"},
		{"ES256 header on the RSA key's kid", mustSignWith(t, ecKey, rsaKid, jose.ES256, withIss(e.claims("mallory"))), "invalid token"},
		{"RS256 header on the EC key's kid", mustSignWith(t, stranger, ecKid, jose.RS256, withIss(e.claims("mallory"))), "invalid token"},
		{"PS256 (not accepted)", mustSignWith(t, stranger, rsaKid, jose.PS256, withIss(e.claims("mallory"))), "invalid token"},
		{"wrong audience", e.sign(t, rsaKid, with(func(c *idp.Claims) { c.Audience = []string{"another-api"} })), "invalid token"},
		{"no audience", e.sign(t, rsaKid, with(func(c *idp.Claims) { c.Audience = nil })), "invalid token"},
		{"wrong issuer", e.sign(t, rsaKid, with(func(c *idp.Claims) { c.Issuer = "https://evil.example" })), "invalid token"},
		{"expired beyond the leeway", e.sign(t, rsaKid, with(func(c *idp.Claims) { c.Expiry = now.Add(-DefaultLeeway - time.Second) })), "token expired"},
		{"no exp", e.sign(t, rsaKid, with(func(c *idp.Claims) { c.Expiry = time.Time{} })), "invalid token"},
		{"not yet valid beyond the leeway", e.sign(t, rsaKid, with(func(c *idp.Claims) { c.NotBefore = now.Add(DefaultLeeway + time.Second) })), "invalid token"},
		{"issued in the future beyond the leeway", e.sign(t, rsaKid, with(func(c *idp.Claims) { c.IssuedAt = now.Add(DefaultLeeway + time.Second) })), "invalid token"},
		{"no sub", e.sign(t, rsaKid, with(func(c *idp.Claims) { c.Subject = "" })), "invalid token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := e.provider.Verify(t.Context(), tc.token)
			if err == nil {
				t.Fatalf("Verify succeeded with %+v", u)
			}
			if got := seckill.ErrorCode(err); got != seckill.EUNAUTHENTICATED {
				t.Errorf("code = %q, want %q", got, seckill.EUNAUTHENTICATED)
			}
			if got := seckill.ErrorMessage(err); got != tc.message {
				t.Errorf("message = %q, want %q", got, tc.message)
			}
		})
	}
	if n := e.subjects.calls.Load(); n != 0 {
		t.Errorf("refused tokens asked the subject store %d times", n)
	}

	// Within the leeway, the same claims pass.
	for name, c := range map[string]idp.Claims{
		"expired within the leeway":   with(func(c *idp.Claims) { c.Expiry = now.Add(-DefaultLeeway + time.Second) }),
		"not yet valid within it":     with(func(c *idp.Claims) { c.NotBefore = now.Add(DefaultLeeway - time.Second) }),
		"issued in the future within": with(func(c *idp.Claims) { c.IssuedAt = now.Add(DefaultLeeway - time.Second) }),
	} {
		if _, err := e.provider.Verify(t.Context(), e.sign(t, rsaKid, c)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func mustSignWith(tb testing.TB, k *idp.Key, kid string, alg jose.SignatureAlgorithm, c idp.Claims) string {
	tb.Helper()
	m := map[string]any{"iss": c.Issuer, "sub": c.Subject, "aud": c.Audience, "exp": c.Expiry.Unix()}
	s, err := idp.SignWith(k, kid, alg, m)
	if err != nil {
		// go-jose refuses to sign with a key of the wrong type: build the
		// token by hand with a signature of the right length but wrong.
		hdr, _ := json.Marshal(map[string]string{"alg": string(alg), "kid": kid, "typ": "JWT"})
		body, _ := json.Marshal(m)
		sum := sha256.Sum256(body)
		return base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(body) + "." +
			base64.RawURLEncoding.EncodeToString(append(sum[:], sum[:]...))
	}
	return s
}

func fetchJWKS(tb testing.TB, url string) jose.JSONWebKeySet {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		tb.Fatal(err)
	}
	return set
}

// TestOriginOf: the dashboard's sign-in pages let their form go on to the
// origin of the provider's authorization endpoint (their
// Content-Security-Policy's form-action), so that origin must be exactly
// scheme://host[:port] of an http(s) URL, and nothing that could end the
// CSP directive or add a source.
func TestOriginOf(t *testing.T) {
	for raw, want := range map[string]string{
		"https://id.example/oauth2/authorize?x=1": "https://id.example",
		"http://127.0.0.1:8099/authorize":         "http://127.0.0.1:8099",
		"https://[::1]:8443/a":                    "https://[::1]:8443",
		"https://user@id.example/a":               "https://id.example", // an origin has no user
	} {
		if got, err := originOf(raw); err != nil || got != want {
			t.Errorf("originOf(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{"", "/authorize", "javascript:alert(1)", "ftp://id.example/a",
		"https://id.example; script-src *", "https://id.example%3B%20script-src%20*/a"} {
		if got, err := originOf(raw); err == nil {
			t.Errorf("originOf(%q) = %q, want an error", raw, got)
		}
	}
}
