package auth

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"seckill/internal/seckill"
)

// TestProviderUnstorableSubjects: a provider-signed token whose subject or
// issuer auth_subject cannot hold (a NUL, text that is not UTF-8, more than
// 1024 characters) is refused as UNAUTHENTICATED with a message that says
// so, never UNAVAILABLE, and never reaches the store; the longest and the
// unusual subjects it can hold are taken.
func TestProviderUnstorableSubjects(t *testing.T) {
	e := newProviderEnv(t, nil, jose.ES256)
	k, err := e.idp.AddNew("raw", jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	// A provider configured by its key set alone takes any iss.
	anyIss, err := NewProvider(t.Context(), ProviderConfig{JWKSURL: e.idp.JWKSURL(), Audience: testAudience, Now: e.clock.now}, e.subjects)
	if err != nil {
		t.Fatal(err)
	}
	exp := e.clock.now().Unix() + 3600
	token := func(iss, sub string) string { // sub and iss as written in JSON
		return signPayload(t, k, fmt.Sprintf(`{"iss":%s,"aud":%q,"sub":%s,"exp":%d}`, iss, testAudience, sub, exp))
	}
	iss := fmt.Sprintf("%q", e.idp.URL())
	const subjectMsg, issuerMsg = "the token's subject (sub) is not acceptable: it ", "the token's issuer (iss) is not acceptable: it "
	for _, tc := range []struct {
		name     string
		provider *Provider
		token    string
		message  string
	}{
		{"sub with a NUL", e.provider, token(iss, `"alice\u0000"`), subjectMsg + "holds a NUL character"},
		{"sub a NUL", e.provider, token(iss, `"\u0000"`), subjectMsg + "holds a NUL character"},
		{"sub not UTF-8", e.provider, token(iss, "\"al\xffice\""), subjectMsg + "is not UTF-8"},
		{"sub a lone high surrogate", e.provider, token(iss, `"alice\ud800"`), subjectMsg + "is not UTF-8"},
		{"sub a lone low surrogate", e.provider, token(iss, `"\udc00alice"`), subjectMsg + "is not UTF-8"},
		{"sub surrogates reversed", e.provider, token(iss, `"\ude00\ud83d"`), subjectMsg + "is not UTF-8"},
		{"sub of 1025 characters", e.provider, token(iss, `"`+strings.Repeat("é", 1025)+`"`), subjectMsg + "is longer than 1024 characters"},
		{"iss with a NUL", anyIss, token(`"https://idp.example\u0000"`, `"alice"`), issuerMsg + "holds a NUL character"},
		{"iss not UTF-8", anyIss, token("\"https://idp.example/\xc3\"", `"alice"`), issuerMsg + "is not UTF-8"},
		{"iss of 1025 characters", anyIss, token(`"https://`+strings.Repeat("i", 1017)+`"`, `"alice"`), issuerMsg + "is longer than 1024 characters"},
		{"sub empty", e.provider, token(iss, `""`), "invalid token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := tc.provider.Verify(t.Context(), tc.token)
			if err == nil {
				t.Fatalf("accepted as %+v", u)
			}
			if seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED || seckill.ErrorMessage(err) != tc.message {
				t.Errorf("%v, want UNAUTHENTICATED %q", err, tc.message)
			}
		})
	}
	if n := e.subjects.calls.Load(); n != 0 {
		t.Errorf("the store was asked for %d unstorable subjects", n)
	}
	for name, sub := range map[string]string{
		"1024 two-byte characters": `"` + strings.Repeat("é", 1024) + `"`,
		"a surrogate pair":         `"alice\ud83d\ude00"`,
		"U+FFFD itself":            `"alice\ufffd"`,
		"U+FFFD written":           "\"alice\uFFFD\"",
		"escapes":                  `"a\"b\\c\/d\n\u00e9"`,
	} {
		if _, err := e.provider.Verify(t.Context(), token(iss, sub)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := anyIss.Verify(t.Context(), token(`"https://`+strings.Repeat("é", 1016)+`"`, `"alice"`)); err != nil {
		t.Errorf("an issuer of 1024 characters: %v", err)
	}
	// The lookup itself refuses one too, whoever calls it.
	if _, err := e.provider.subjects.userID(context.Background(), "", "a\x00"); seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED {
		t.Errorf("userID of a NUL subject: %v, want UNAUTHENTICATED", err)
	}
}
