package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill/internal/seckill"
)

// The fast path verifies the one token shape Issue produces without the jwt
// package's reflection-based JSON decoding: every request verifies its
// token, so verification is on the purchase path (BenchmarkParse measures
// the two).
//
// It is a strict subset of the full verification, never a replacement
// (both see only the compact tokens Parse lets through, see compact):
//
//   - It runs only when the header segment is, byte for byte, the header we
//     issue ({"alg":"HS256","typ":"JWT"}). Any other header, including every
//     other alg, goes to the jwt parser, which accepts HS256 only.
//   - It checks the HMAC-SHA256 of "header.payload" in constant time before
//     reading the payload. The signature is decoded as the jwt parser
//     decodes it and the signing input is the same, so a mismatch here is a
//     mismatch there: the token is refused at once.
//   - It reads only a flat object of the keys Issue writes (role, iss, sub,
//     exp, iat), each at most once, strings without escapes and exp/iat as
//     plain integers, with no whitespace. A payload outside that shape is
//     handed to the jwt parser, whose answer stands.
//   - It then applies the same checks as the full path: iss equal to the
//     issuer, exp present and in the future, sub a positive decimal id, role
//     "user" or "admin".
//
// So it accepts a token only if the full verification would, and refuses
// one only if the full verification would (with the same message).

// issuedHeader is the base64url header segment of every token Issue signs.
var issuedHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// maxFastToken bounds the tokens the fast path reads (and so the scratch
// buffers its pool keeps); Issue's are about 200 bytes.
const maxFastToken = 512

// fastResult is what the fast path decided.
type fastResult int

const (
	fastUnsure   fastResult = iota // not the issued shape: ask the jwt parser
	fastAccepted                   // verified
	fastRefused                    // refused; err says why
)

// macPool hands out HMAC-SHA256 states keyed with one secret, with scratch
// space, so a verification neither builds an HMAC (two SHA-256 states and
// the padded key) nor allocates buffers per token.
type macPool struct{ p sync.Pool }

type verifier struct {
	mac     hash.Hash
	in      []byte // the signing input, "header.payload"
	sig     [sha256.Size + 3]byte
	payload [384]byte
}

func newMACPool(secret []byte) *macPool {
	key := append([]byte(nil), secret...)
	return &macPool{p: sync.Pool{New: func() any {
		return &verifier{mac: hmac.New(sha256.New, key), in: make([]byte, 0, 512)}
	}}}
}

// parseFast verifies token on the fast path. On fastAccepted it returns the
// user; on fastRefused an EUNAUTHENTICATED error.
func (t *Tokens) parseFast(token string, now time.Time) (seckill.User, fastResult, error) {
	if t.macs == nil || t.issuer == "" || len(token) > maxFastToken {
		return seckill.User{}, fastUnsure, nil
	}
	if len(token) <= len(issuedHeader) || token[:len(issuedHeader)] != issuedHeader || token[len(issuedHeader)] != '.' {
		return seckill.User{}, fastUnsure, nil
	}
	dot := strings.LastIndexByte(token, '.')
	if dot <= len(issuedHeader) || strings.IndexByte(token[len(issuedHeader)+1:dot], '.') >= 0 {
		return seckill.User{}, fastUnsure, nil
	}
	v := t.macs.p.Get().(*verifier)
	defer t.macs.p.Put(v)

	// The signature, decoded as the jwt parser does (RawURLEncoding), then
	// compared in constant time with the HMAC of the same signing input.
	v.in = append(v.in[:0], token[dot+1:]...)
	if base64.RawURLEncoding.DecodedLen(len(v.in)) > len(v.sig) {
		return seckill.User{}, fastRefused, invalidToken()
	}
	n, err := base64.RawURLEncoding.Decode(v.sig[:], v.in)
	if err != nil {
		return seckill.User{}, fastRefused, invalidToken()
	}
	v.in = append(v.in[:0], token[:dot]...)
	v.mac.Reset()
	v.mac.Write(v.in)
	var sum [sha256.Size]byte
	v.mac.Sum(sum[:0])
	if !hmac.Equal(sum[:], v.sig[:n]) {
		return seckill.User{}, fastRefused, invalidToken()
	}

	// Signed with our secret: read the claims.
	payloadText := v.in[len(issuedHeader)+1:]
	if base64.RawURLEncoding.DecodedLen(len(payloadText)) > len(v.payload) {
		return seckill.User{}, fastUnsure, nil
	}
	n, err = base64.RawURLEncoding.Decode(v.payload[:], payloadText)
	if err != nil {
		return seckill.User{}, fastUnsure, nil
	}
	c, ok := readIssuedClaims(v.payload[:n])
	if !ok {
		return seckill.User{}, fastUnsure, nil
	}
	// In the jwt validator's order: exp, then iss, then ours.
	if !c.hasExp {
		return seckill.User{}, fastRefused, invalidToken()
	}
	if !now.Before(time.Unix(c.exp, 0)) {
		return seckill.User{}, fastRefused, tokenExpired()
	}
	if string(c.iss) != t.issuer {
		return seckill.User{}, fastRefused, invalidToken()
	}
	id, err := strconv.ParseInt(string(c.sub), 10, 64)
	if err != nil || id <= 0 || seckill.IsExternalUserID(id) {
		return seckill.User{}, fastRefused, invalidToken()
	}
	switch string(c.role) {
	case RoleUser:
		return seckill.User{ID: id}, fastAccepted, nil
	case RoleAdmin:
		return seckill.User{ID: id, Admin: true}, fastAccepted, nil
	}
	return seckill.User{}, fastRefused, invalidToken()
}

// issuedClaims are the claims Issue writes.
type issuedClaims struct {
	role, iss, sub []byte // slices of the payload
	exp            int64
	hasExp         bool
}

// readIssuedClaims reads a payload of exactly the shape Issue writes: a flat
// JSON object, no whitespace, keys among role, iss, sub, exp and iat, each
// at most once; string values without escapes or control characters,
// exp and iat unsigned integers of at most 15 digits. ok is false for
// anything else, which the caller hands to the full parser.
func readIssuedClaims(p []byte) (c issuedClaims, ok bool) {
	if len(p) < 2 || p[0] != '{' || p[len(p)-1] != '}' {
		return c, false
	}
	p = p[1 : len(p)-1]
	var seen uint8
	for len(p) > 0 {
		key, rest, ok := readString(p)
		if !ok || len(rest) == 0 || rest[0] != ':' {
			return c, false
		}
		p = rest[1:]
		var bit uint8
		switch string(key) {
		case "role":
			bit = 1
		case "iss":
			bit = 2
		case "sub":
			bit = 4
		case "exp":
			bit = 8
		case "iat":
			bit = 16
		default:
			return c, false
		}
		if seen&bit != 0 {
			return c, false // a duplicate: json would keep the last one
		}
		seen |= bit
		switch bit {
		case 1, 2, 4:
			var s []byte
			if s, p, ok = readString(p); !ok {
				return c, false
			}
			switch string(key) {
			case "role":
				c.role = s
			case "iss":
				c.iss = s
			case "sub":
				c.sub = s
			}
		case 8, 16:
			var v int64
			if v, p, ok = readUint(p); !ok {
				return c, false
			}
			if bit == 8 {
				c.exp, c.hasExp = v, true
			}
		}
		if len(p) > 0 {
			if p[0] != ',' || len(p) == 1 {
				return c, false
			}
			p = p[1:]
		}
	}
	return c, true
}

// readString reads a JSON string without escapes from the start of p.
func readString(p []byte) (s, rest []byte, ok bool) {
	if len(p) == 0 || p[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(p); i++ {
		switch b := p[i]; {
		case b == '"':
			return p[1:i], p[i+1:], true
		case b == '\\' || b < 0x20 || b >= 0x7f:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// readUint reads an unsigned decimal integer (no sign, no leading zero, no
// fraction or exponent, at most 15 digits) from the start of p.
func readUint(p []byte) (v int64, rest []byte, ok bool) {
	i := 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if i == 0 || i > 15 || (i > 1 && p[0] == '0') {
		return 0, nil, false
	}
	if i < len(p) && p[i] != ',' {
		return 0, nil, false // a fraction, an exponent or garbage
	}
	v, err := strconv.ParseInt(string(p[:i]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return v, p[i:], true
}
