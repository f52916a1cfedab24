package auth

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"seckill/internal/auth/idp"
	"seckill/internal/seckill"
)

func TestCompact(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	h, p := enc([]byte(`{"alg":"HS256"}`)), enc([]byte(`{"sub":"1"}`))
	for _, tc := range []struct {
		token string
		want  bool
	}{
		{h + "." + p + "." + enc([]byte("s")), true},   // "cw": 4 unused bits, zero
		{h + "." + p + "." + enc([]byte("si")), true},  // "c2k": 2 unused bits, zero
		{h + "." + p + "." + enc([]byte("sig")), true}, // "c2ln": none unused
		{h + "." + p + "." + "cx", false},              // "s" again, the unused bits set
		{h + "." + p + "." + "c2l", false},             // "si" again, the unused bits set
		{h + "." + p + "." + "c2lnA", false},           // a length no bytes encode to
		{h + "." + p + "." + enc([]byte("s")) + "==", false},
		{h + "." + p + ".", false},
		{h + ".." + enc([]byte("s")), false},
		{"." + p + "." + enc([]byte("s")), false},
		{h + "." + p, false},
		{h + "." + p + "." + enc([]byte("s")) + ".", false},
		{h + "." + p + "." + enc([]byte("sig")) + "." + enc([]byte("sig")), false},
		{h + "\n." + p + "." + enc([]byte("sig")), false},
		{h + "." + p[:4] + "\r\n" + p[4:] + "." + enc([]byte("sig")), false},
		{" " + h + "." + p + "." + enc([]byte("sig")), false},
		{h + "." + p + "." + enc([]byte("sig")) + " ", false},
		{h + "." + p + "." + "c2l+", false}, // standard base64, not url
		{h + "." + p + "." + "c2l/", false},
		{`{"payload":"` + p + `","protected":"` + h + `","signature":"c2ln"}`, false},
		{"", false},
	} {
		if got := compact(tc.token); got != tc.want {
			t.Errorf("compact(%q) = %v, want %v", tc.token, got, tc.want)
		}
	}
	for _, other := range []string{"cx", "c2l"} { // what the refusals above are about
		if b, err := base64.RawURLEncoding.DecodeString(other); err != nil || (string(b) != "s" && string(b) != "si") {
			t.Errorf("%s decodes to %q, %v: not a second spelling", other, b, err)
		}
	}
}

// respell returns token with the last character of its signature changed
// in its unused bits only: base64url decoding (not strict) reads the same
// signature from it. ok is false when the signature has no unused bits.
func respell(token string) (string, bool) {
	sig := token[strings.LastIndexByte(token, '.')+1:]
	var mask byte
	switch len(sig) % 4 {
	case 2:
		mask = 0x0f
	case 3:
		mask = 0x03
	default:
		return "", false
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	other := alphabet[last|int(mask)]
	return token[:len(token)-1] + string(other), true
}

// TestParseStrict: our HS256 tokens, both on the fast path and through the
// jwt parser (a header in another shape), are refused with a date that is
// not a JSON number or a second spelling of their signature, and the
// original token is accepted.
func TestParseStrict(t *testing.T) {
	tok, _ := newTestTokens(t)
	v, err := NewVerifier(tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp, iat := epoch.Add(time.Hour).Unix(), epoch.Unix()
	claims := func(extra string) string {
		return fmt.Sprintf(`{"role":"user","iss":%q,"sub":"5"%s}`, testIssuer, extra)
	}
	issued, err := tok.Issue(5, false, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, header := range []string{ourHeader, `{"typ":"JWT","alg":"HS256"}`} {
		good := signRaw(header, claims(fmt.Sprintf(`,"exp":%d,"iat":%d`, exp, iat)), testSecret)
		tokens := []string{good}
		if header == ourHeader {
			tokens = append(tokens, issued)
		}
		for _, s := range tokens {
			if u, err := v.Authenticate(t.Context(), s); err != nil || u.ID != 5 {
				t.Fatalf("%s: the baseline token: %+v, %v", header, u, err)
			}
			other, ok := respell(s)
			if !ok {
				t.Fatalf("an HS256 signature has unused bits: %s", s)
			}
			if b1, _ := base64.RawURLEncoding.DecodeString(s[strings.LastIndexByte(s, '.')+1:]); true {
				b2, err := base64.RawURLEncoding.DecodeString(other[strings.LastIndexByte(other, '.')+1:])
				if err != nil || string(b1) != string(b2) {
					t.Fatalf("respell changed the signature: %v", err)
				}
			}
			refused(t, v, header+": signature respelled", other, "invalid token")
		}
		for name, payload := range map[string]string{
			"exp a string":        claims(`,"exp":"9999999999"`),
			"exp a string, valid": claims(fmt.Sprintf(`,"exp":"%d"`, exp)),
			"exp null":            claims(`,"exp":null`),
			"exp an object":       claims(`,"exp":{"n":9999999999}`),
			"nbf a string":        claims(fmt.Sprintf(`,"exp":%d,"nbf":"%d"`, exp, iat)),
			"nbf null":            claims(fmt.Sprintf(`,"exp":%d,"nbf":null`, exp)),
			"iat a string":        claims(fmt.Sprintf(`,"exp":%d,"iat":"%d"`, exp, iat)),
			"iat a bool":          claims(fmt.Sprintf(`,"exp":%d,"iat":true`, exp)),
		} {
			refused(t, v, header+": "+name, signRaw(header, payload, testSecret), "invalid token")
		}
	}
}

// refused checks that v refuses token as UNAUTHENTICATED with message.
func refused(t *testing.T, v *Verifier, name, token, message string) {
	t.Helper()
	u, err := v.Authenticate(t.Context(), token)
	switch {
	case err == nil:
		t.Errorf("%s: accepted as %+v", name, u)
	case seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED || seckill.ErrorMessage(err) != message:
		t.Errorf("%s: %v, want UNAUTHENTICATED %q", name, err, message)
	}
}

// jwsJSON returns a compact token in the JWS JSON serializations: general,
// flattened, and flattened again in other whitespace.
func jwsJSON(token string) map[string]string {
	p := strings.Split(token, ".")
	return map[string]string{
		"general":           fmt.Sprintf(`{"payload":%q,"signatures":[{"protected":%q,"signature":%q}]}`, p[1], p[0], p[2]),
		"flattened":         fmt.Sprintf(`{"payload":%q,"protected":%q,"signature":%q}`, p[1], p[0], p[2]),
		"flattened, spaced": fmt.Sprintf(`{ "payload": %q, "protected": %q, "signature": %q }`, p[1], p[0], p[2]),
	}
}

// TestProviderCompactOnly: a valid provider token in another spelling (the
// JWS JSON serializations, its signature respelled in the unused bits, a
// line break) is refused before its signature is checked or it enters the
// cache of verified tokens, through the Verifier and Provider.Verify; the
// token itself is accepted.
func TestProviderCompactOnly(t *testing.T) {
	e := newProviderEnv(t, nil, jose.RS256, jose.ES256, jose.EdDSA)
	k, err := e.idp.AddNew("raw", jose.ES256) // for payloads signed as written
	if err != nil {
		t.Fatal(err)
	}
	hs, _ := newTestTokens(t)
	v, err := NewVerifier(hs, e.provider)
	if err != nil {
		t.Fatal(err)
	}
	for _, kid := range []string{"k0-RS256", "k1-ES256", "k2-EdDSA"} {
		good := e.sign(t, kid, e.claims("alice"))
		if _, err := e.provider.Verify(t.Context(), good); err != nil {
			t.Fatalf("%s: the token itself: %v", kid, err)
		}
		spellings := jwsJSON(good)
		if other, ok := respell(good); ok {
			spellings["signature respelled"] = other
		}
		dot := strings.IndexByte(good, '.')
		spellings["a line break in the payload"] = good[:dot+5] + "\n" + good[dot+5:]
		spellings["padded"] = good + strings.Repeat("=", (4-len(good[strings.LastIndexByte(good, '.')+1:])%4)%4)
		before := e.provider.Stats()
		for name, s := range spellings {
			if s == good {
				continue // a signature that needs no padding
			}
			refused(t, v, kid+": "+name, s, "invalid token")
			if _, err := e.provider.Verify(t.Context(), s); seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED {
				t.Errorf("%s: %s: Provider.Verify: %v, want UNAUTHENTICATED", kid, name, err)
			}
		}
		after := e.provider.Stats()
		if after.SignatureChecks != before.SignatureChecks || after.VerifiedTokens != before.VerifiedTokens {
			t.Errorf("%s: other spellings checked %d signatures and cached %d tokens, want none",
				kid, after.SignatureChecks-before.SignatureChecks, after.VerifiedTokens-before.VerifiedTokens)
		}
	}
	// The provider's dates are numbers too.
	now := e.clock.now().Unix()
	base := fmt.Sprintf(`"iss":%q,"aud":%q,"sub":"alice"`, e.idp.URL(), testAudience)
	if _, err := e.provider.Verify(t.Context(), signPayload(t, k, fmt.Sprintf(`{%s,"exp":%d}`, base, now+3600))); err != nil {
		t.Fatalf("a raw-signed token: %v", err)
	}
	for name, payload := range map[string]string{
		"exp a string": fmt.Sprintf(`{%s,"exp":"%d"}`, base, now+3600),
		"nbf a string": fmt.Sprintf(`{%s,"exp":%d,"nbf":"%d"}`, base, now+3600, now),
		"iat null":     fmt.Sprintf(`{%s,"exp":%d,"iat":null}`, base, now+3600),
	} {
		refused(t, v, name, signPayload(t, k, payload), "invalid token")
	}
}

// signPayload signs payload, as written, with k (a compact JWS whose
// header names k's id and alg).
func signPayload(tb testing.TB, k *idp.Key, payload string) string {
	tb.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: jose.JSONWebKey{Key: k.Signer, KeyID: k.ID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		tb.Fatal(err)
	}
	jws, err := signer.Sign([]byte(payload))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// FuzzCompact checks compact against its definition: three segments, each
// the base64url encoding of what it decodes to, and not empty
// (go test -fuzz FuzzCompact ./internal/auth).
func FuzzCompact(f *testing.F) {
	for _, s := range []string{"eyJh.eyJz.c2ln", "eyJh.eyJz.cw", "eyJh.eyJz.cx", "a.b.c", "eyJh.eyJz.c2\nln", "eyJh..c2ln", "eyJh.eyJz.c2ln=", "{}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		parts := strings.Split(token, ".")
		want := len(parts) == 3
		for _, p := range parts {
			b, err := base64.RawURLEncoding.DecodeString(p)
			want = want && err == nil && len(b) > 0 && base64.RawURLEncoding.EncodeToString(b) == p
		}
		if got := compact(token); got != want {
			t.Errorf("compact(%q) = %v, want %v", token, got, want)
		}
	})
}
