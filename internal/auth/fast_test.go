package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"seckill/internal/seckill"
)

// signRaw signs header and payload (JSON text, as given) with HS256 and key.
func signRaw(header, payload string, key []byte) string {
	enc := base64.RawURLEncoding
	in := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(in))
	return in + "." + enc.EncodeToString(mac.Sum(nil))
}

// jwtOnly returns Tokens that verify every token with the jwt parser, on
// tok's clock: the reference the fast path must agree
// with.
func jwtOnly(tok *Tokens) *Tokens {
	ref := NewTokens(testSecret, testIssuer)
	ref.Now, ref.macs = tok.Now, nil
	return ref
}

// parseResult is what Parse answered, comparable across two Tokens.
func parseResult(tok *Tokens, token string) string {
	u, err := tok.Parse(token)
	if err != nil {
		return fmt.Sprintf("error %s: %s", seckill.ErrorCode(err), seckill.ErrorMessage(err))
	}
	return fmt.Sprintf("user %d admin=%v", u.ID, u.Admin)
}

const ourHeader = `{"alg":"HS256","typ":"JWT"}`

func TestIssuedHeader(t *testing.T) {
	tok, _ := newTestTokens(t)
	s, err := tok.Issue(1, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, issuedHeader+".") {
		t.Fatalf("Issue's header is not the one the fast path expects: %s", s)
	}
}

// fastCases are tokens signed with the right secret (unless said
// otherwise) that the fast path must judge exactly like the jwt parser.
func fastCases(t *testing.T) []struct{ name, token string } {
	t.Helper()
	exp, iat := epoch.Add(time.Hour).Unix(), epoch.Unix()
	payload := func(f string, args ...any) string { return fmt.Sprintf(f, args...) }
	std := func(role, iss, sub string) string {
		return payload(`{"role":%q,"iss":%q,"sub":%q,"exp":%d,"iat":%d}`, role, iss, sub, exp, iat)
	}
	tok, _ := newTestTokens(t)
	issued, _ := tok.Issue(77, false, time.Hour)
	issuedAdmin, _ := tok.Issue(78, true, time.Hour)
	cases := []struct{ name, token string }{
		{"issued", issued},
		{"issued admin", issuedAdmin},
		{"standard", signRaw(ourHeader, std("user", testIssuer, "5"), testSecret)},
		{"no iat", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d}`, testIssuer, exp), testSecret)},
		{"other key order", signRaw(ourHeader, payload(`{"exp":%d,"sub":"5","iss":%q,"role":"admin"}`, exp, testIssuer), testSecret)},
		// Refused on the fast path.
		{"tampered signature", issued[:len(issued)-3] + "abc"},
		{"signature cut", issued[:len(issued)-5]},
		{"signature not base64", issued[:len(issued)-3] + "*&^"},
		{"signature too long", issued + "AAAAAAAAAAAA"},
		{"no signature", issued[:strings.LastIndexByte(issued, '.')+1]},
		{"other secret", signRaw(ourHeader, std("user", testIssuer, "5"), []byte("another secret, just as long...."))},
		{"payload swapped", issued[:strings.IndexByte(issued, '.')+1] + strings.Split(issuedAdmin, ".")[1] + issued[strings.LastIndexByte(issued, '.'):]},
		{"expired", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d}`, testIssuer, epoch.Add(-time.Second).Unix()), testSecret)},
		{"expires now", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d}`, testIssuer, epoch.Unix()), testSecret)},
		{"exp zero", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":0}`, testIssuer), testSecret)},
		{"no exp", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","iat":%d}`, testIssuer, iat), testSecret)},
		{"other issuer", signRaw(ourHeader, std("user", "evil", "5"), testSecret)},
		{"issuer prefix", signRaw(ourHeader, std("user", testIssuer+"x", "5"), testSecret)},
		{"no issuer", signRaw(ourHeader, payload(`{"role":"user","sub":"5","exp":%d}`, exp), testSecret)},
		{"empty issuer", signRaw(ourHeader, std("user", "", "5"), testSecret)},
		{"sub zero", signRaw(ourHeader, std("user", testIssuer, "0"), testSecret)},
		{"sub negative", signRaw(ourHeader, std("user", testIssuer, "-3"), testSecret)},
		{"sub plus", signRaw(ourHeader, std("user", testIssuer, "+3"), testSecret)},
		{"sub alpha", signRaw(ourHeader, std("user", testIssuer, "alice"), testSecret)},
		{"sub overflow", signRaw(ourHeader, std("user", testIssuer, "99999999999999999999"), testSecret)},
		{"no sub", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"exp":%d}`, testIssuer, exp), testSecret)},
		{"role root", signRaw(ourHeader, std("root", testIssuer, "5"), testSecret)},
		{"role Admin", signRaw(ourHeader, std("Admin", testIssuer, "5"), testSecret)},
		{"no role", signRaw(ourHeader, payload(`{"iss":%q,"sub":"5","exp":%d}`, testIssuer, exp), testSecret)},
		// Outside the issued shape: the jwt parser decides.
		{"alg none", signRaw(`{"alg":"none","typ":"JWT"}`, std("admin", testIssuer, "5"), testSecret)},
		{"alg HS512 header", signRaw(`{"alg":"HS512","typ":"JWT"}`, std("admin", testIssuer, "5"), testSecret)},
		{"header without typ", signRaw(`{"alg":"HS256"}`, std("user", testIssuer, "5"), testSecret)},
		{"header other order", signRaw(`{"typ":"JWT","alg":"HS256"}`, std("user", testIssuer, "5"), testSecret)},
		{"four segments", issued + ".x"},
		{"whitespace", signRaw(ourHeader, payload(`{ "role":"user","iss":%q,"sub":"5","exp":%d}`, testIssuer, exp), testSecret)},
		{"escaped role", signRaw(ourHeader, payload(`{"role":"us\u0065r","iss":%q,"sub":"5","exp":%d}`, testIssuer, exp), testSecret)},
		{"escaped admin", signRaw(ourHeader, payload(`{"role":"\u0061dmin","iss":%q,"sub":"5","exp":%d}`, testIssuer, exp), testSecret)},
		{"duplicate role", signRaw(ourHeader, payload(`{"role":"user","role":"admin","iss":%q,"sub":"5","exp":%d}`, testIssuer, exp), testSecret)},
		{"duplicate exp", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d,"exp":1}`, testIssuer, exp), testSecret)},
		{"upper-case key", signRaw(ourHeader, payload(`{"ROLE":"admin","role":"user","iss":%q,"sub":"5","exp":%d}`, testIssuer, exp), testSecret)},
		{"nbf in the future", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d,"nbf":%d}`, testIssuer, exp, exp-60), testSecret)},
		{"nbf in the past", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d,"nbf":%d}`, testIssuer, exp, iat-60), testSecret)},
		{"aud", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d,"aud":"x"}`, testIssuer, exp), testSecret)},
		{"exp float", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d.5}`, testIssuer, exp), testSecret)},
		{"exp exponent", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":1e12}`, testIssuer), testSecret)},
		{"exp string", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":"%d"}`, testIssuer, exp), testSecret)},
		{"exp null", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":null}`, testIssuer), testSecret)},
		{"exp leading zero", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":0%d}`, testIssuer, exp), testSecret)},
		{"exp huge", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":99999999999999999999}`, testIssuer), testSecret)},
		{"sub number", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":5,"exp":%d}`, testIssuer, exp), testSecret)},
		{"trailing comma", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d,}`, testIssuer, exp), testSecret)},
		{"not an object", signRaw(ourHeader, `["role","user"]`, testSecret)},
		{"empty object", signRaw(ourHeader, `{}`, testSecret)},
		{"not json", signRaw(ourHeader, `role=user`, testSecret)},
		{"empty payload", signRaw(ourHeader, ``, testSecret)},
		{"long payload", signRaw(ourHeader, payload(`{"role":"user","iss":%q,"sub":"5","exp":%d,"x":%q}`, testIssuer, exp, strings.Repeat("y", 500)), testSecret)},
		{"garbage", "not.a.token"},
		{"header only", issuedHeader},
		{"header dot", issuedHeader + "."},
	}
	return cases
}

// TestParseFastAgrees checks that, token by token, Parse answers exactly
// what the jwt parser alone answers: the fast path never accepts a token
// the full verification refuses, nor refuses one it accepts, nor changes a
// message.
func TestParseFastAgrees(t *testing.T) {
	tok, _ := newTestTokens(t)
	ref := jwtOnly(tok)
	for _, tc := range fastCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			want, got := parseResult(ref, tc.token), parseResult(tok, tc.token)
			if got != want {
				t.Errorf("Parse = %q, the jwt parser = %q", got, want)
			}
		})
	}
}

// TestParseFastTaken checks which tokens the fast path decides itself, so
// that it cannot silently stop working.
func TestParseFastTaken(t *testing.T) {
	tok, _ := newTestTokens(t)
	decided := map[string]fastResult{
		"issued": fastAccepted, "issued admin": fastAccepted, "standard": fastAccepted,
		"no iat": fastAccepted, "other key order": fastAccepted,
		"tampered signature": fastRefused, "other secret": fastRefused, "payload swapped": fastRefused,
		"expired": fastRefused, "expires now": fastRefused, "no exp": fastRefused,
		"other issuer": fastRefused, "sub zero": fastRefused, "role root": fastRefused,
		"alg none": fastUnsure, "alg HS512 header": fastUnsure, "header without typ": fastUnsure,
		"whitespace": fastUnsure, "escaped admin": fastUnsure, "duplicate role": fastUnsure,
		"upper-case key": fastUnsure, "nbf in the future": fastUnsure, "exp float": fastUnsure,
		"four segments": fastUnsure, "long payload": fastUnsure,
	}
	for _, tc := range fastCases(t) {
		want, ok := decided[tc.name]
		if !ok {
			continue
		}
		if _, got, _ := tok.parseFast(tc.token, epoch); got != want {
			t.Errorf("%s: parseFast = %d, want %d", tc.name, got, want)
		}
	}
}

// FuzzParseFastAgrees mutates tokens and checks the fast path against the
// jwt parser (go test -fuzz FuzzParseFastAgrees ./internal/auth).
func FuzzParseFastAgrees(f *testing.F) {
	tok := NewTokens(testSecret, testIssuer)
	tok.Now = func() time.Time { return epoch }
	ref := jwtOnly(tok)
	for _, s := range []string{
		signRaw(ourHeader, fmt.Sprintf(`{"role":"user","iss":%q,"sub":"5","exp":%d}`, testIssuer, epoch.Add(time.Hour).Unix()), testSecret),
		signRaw(ourHeader, fmt.Sprintf(`{"role":"admin","iss":%q,"sub":"1","exp":%d,"iat":1}`, testIssuer, epoch.Unix()), testSecret),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		if got, want := parseResult(tok, token), parseResult(ref, token); got != want {
			t.Errorf("Parse(%q) = %q, the jwt parser = %q", token, got, want)
		}
	})
}

// FuzzReadIssuedClaims checks, on payloads signed with the right secret,
// that the fast path and the jwt parser agree whatever the claims say.
func FuzzReadIssuedClaims(f *testing.F) {
	tok := NewTokens(testSecret, testIssuer)
	tok.Now = func() time.Time { return epoch }
	ref := jwtOnly(tok)
	exp := epoch.Add(time.Hour).Unix()
	f.Add(fmt.Sprintf(`{"role":"user","iss":%q,"sub":"5","exp":%d}`, testIssuer, exp))
	f.Add(fmt.Sprintf(`{"role":"admin","iss":%q,"sub":"12","exp":%d,"iat":%d}`, testIssuer, exp, epoch.Unix()))
	f.Add(fmt.Sprintf(`{"exp":%d,"role":"user","iss":%q,"sub":"7"}`, exp, testIssuer))
	f.Fuzz(func(t *testing.T, payload string) {
		token := signRaw(ourHeader, payload, testSecret)
		if got, want := parseResult(tok, token), parseResult(ref, token); got != want {
			t.Errorf("payload %q: Parse = %q, the jwt parser = %q", payload, got, want)
		}
	})
}

// TestParseFastWrongAlgKey checks the classic confusion: a token whose
// header claims HS256 but was signed with another algorithm's key material
// is refused.
func TestParseFastWrongAlgKey(t *testing.T) {
	tok, _ := newTestTokens(t)
	good := sign(t, jwt.SigningMethodHS384, testSecret, jwt.MapClaims{"role": "user", "iss": testIssuer, "sub": "5", "exp": epoch.Add(time.Hour).Unix()})
	parts := strings.Split(good, ".")
	forged := issuedHeader + "." + parts[1] + "." + parts[2] // HS384 signature under an HS256 header
	if got := parseResult(tok, forged); got != "error UNAUTHENTICATED: invalid token" {
		t.Fatalf("Parse = %s", got)
	}
}
