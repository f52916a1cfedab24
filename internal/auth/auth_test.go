package auth

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
)

var (
	testSecret = []byte("0123456789abcdef0123456789abcdef")
	testIssuer = "seckill-test"
	epoch      = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

// newTestTokens returns Tokens on a clock the test moves.
func newTestTokens(tb testing.TB) (*Tokens, *time.Time) {
	tb.Helper()
	now := epoch
	tok := NewTokens(testSecret, testIssuer)
	tok.Now = func() time.Time { return now }
	return tok, &now
}

func sign(tb testing.TB, method jwt.SigningMethod, key any, c jwt.Claims) string {
	tb.Helper()
	s, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestIssueParse(t *testing.T) {
	tok, _ := newTestTokens(t)
	for _, tc := range []struct {
		id    int64
		admin bool
	}{{1, false}, {42, true}, {1 << 40, false}} {
		s, err := tok.Issue(tc.id, tc.admin, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tok.Parse(s)
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if diff := cmp.Diff(&seckill.User{ID: tc.id, Admin: tc.admin}, got); diff != "" {
			t.Errorf("user (-want +got):\n%s", diff)
		}
	}
}

func TestIssueClaims(t *testing.T) {
	tok, _ := newTestTokens(t)
	s, err := tok.Issue(7, true, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(s, c); err != nil {
		t.Fatal(err)
	}
	want := jwt.MapClaims{
		"sub": "7", "role": "admin", "iss": testIssuer,
		"iat": float64(epoch.Unix()), "exp": float64(epoch.Add(time.Minute).Unix()),
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
}

func TestIssueRejects(t *testing.T) {
	tok, _ := newTestTokens(t)
	if _, err := tok.Issue(0, false, time.Hour); err == nil {
		t.Error("Issue(0) succeeded")
	}
	if _, err := tok.Issue(seckill.FirstExternalUserID, false, time.Hour); err == nil {
		t.Error("Issue(seckill.FirstExternalUserID) succeeded: an HS256 token would speak for an identity provider's subject")
	}
	if _, err := tok.Issue(1, false, 0); err == nil {
		t.Error("Issue with ttl 0 succeeded")
	}
}

func TestParseRejects(t *testing.T) {
	tok, _ := newTestTokens(t)
	valid := func(mut func(*claims)) claims {
		c := claims{Role: RoleUser, RegisteredClaims: jwt.RegisteredClaims{
			Subject: "5", Issuer: testIssuer,
			IssuedAt:  jwt.NewNumericDate(epoch),
			ExpiresAt: jwt.NewNumericDate(epoch.Add(time.Hour)),
		}}
		if mut != nil {
			mut(&c)
		}
		return c
	}
	good := sign(t, jwt.SigningMethodHS256, testSecret, valid(nil))
	if _, err := tok.Parse(good); err != nil {
		t.Fatalf("the baseline token is rejected: %v", err)
	}
	noneToken := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid(nil))
	tests := []struct {
		name, token, message string
	}{
		{"empty", "", "missing token"},
		{"garbage", "not.a.token", "invalid token"},
		{"tampered", good[:len(good)-2] + "xx", "invalid token"},
		{"other secret", sign(t, jwt.SigningMethodHS256, []byte("another secret, just as long...."), valid(nil)), "invalid token"},
		{"alg none", noneToken, "invalid token"},
		{"alg HS512", sign(t, jwt.SigningMethodHS512, testSecret, valid(nil)), "invalid token"},
		{"other issuer", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.Issuer = "evil" })), "invalid token"},
		{"no issuer", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.Issuer = "" })), "invalid token"},
		{"expired", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.ExpiresAt = jwt.NewNumericDate(epoch.Add(-time.Second)) })), "token expired"},
		{"no exp", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.ExpiresAt = nil })), "invalid token"},
		{"not yet valid", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.NotBefore = jwt.NewNumericDate(epoch.Add(time.Minute)) })), "invalid token"},
		{"sub not numeric", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.Subject = "alice" })), "invalid token"},
		{"sub zero", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.Subject = "0" })), "invalid token"},
		{"sub negative", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.Subject = "-3" })), "invalid token"},
		{"sub in the providers' range", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.Subject = "4611686018427387904" })), "invalid token"},
		{"sub missing", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.Subject = "" })), "invalid token"},
		{"unknown role", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.Role = "root" })), "invalid token"},
		{"no role", sign(t, jwt.SigningMethodHS256, testSecret, valid(func(c *claims) { c.Role = "" })), "invalid token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := tok.Parse(tc.token)
			if err == nil {
				t.Fatalf("Parse succeeded with %+v", u)
			}
			if got := seckill.ErrorCode(err); got != seckill.EUNAUTHENTICATED {
				t.Errorf("code = %q, want %q", got, seckill.EUNAUTHENTICATED)
			}
			if got := seckill.ErrorMessage(err); got != tc.message {
				t.Errorf("message = %q, want %q", got, tc.message)
			}
		})
	}
}

// TestParseExpires checks that a token works until the second it expires.
func TestParseExpires(t *testing.T) {
	tok, now := newTestTokens(t)
	s, err := tok.Issue(9, false, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	*now = now.Add(59 * time.Second)
	if _, err := tok.Parse(s); err != nil {
		t.Fatalf("a token within its lifetime: %v", err)
	}
	*now = now.Add(time.Second)
	if _, err := tok.Parse(s); seckill.ErrorMessage(err) != "token expired" {
		t.Fatalf("an expired token: err = %v", err)
	}
}

func BenchmarkParse(b *testing.B) {
	for _, variant := range []string{"jwt", "fast"} {
		tok := NewTokens(testSecret, testIssuer)
		if variant == "jwt" {
			tok.macs = nil
		}
		// Many distinct tokens, as many users send them.
		tokens := make([]string, 1000)
		for i := range tokens {
			s, err := tok.Issue(int64(i+1), false, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			tokens[i] = s
		}
		b.Run(variant, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := tok.Parse(tokens[i%len(tokens)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(variant+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := tok.Parse(tokens[i%len(tokens)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}
