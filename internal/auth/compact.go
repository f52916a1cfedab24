package auth

import "encoding/json"

// Every token, ours and the identity provider's, has one spelling. The
// jwt and go-jose parsers each take more: go-jose the JWS JSON
// serializations (general and flattened, in any whitespace), both a
// base64url segment whose last character differs in its unused bits, and
// Go's base64 skips CR and LF anywhere. Each spelling of a valid token
// would be a fresh signature check and a fresh entry in the cache of
// verified tokens, so a token is refused unless it is compact, before any
// of that (compact); and its dates must be JSON numbers, as the
// provider's parser requires and ours did not (readWritten).

// b64url maps each base64url character to its value and every other
// byte to 0xff.
var b64url = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

// compact reports whether token is a JWS in the compact serialization,
// header.payload.signature, each segment non-empty canonical base64url:
// only the base64url alphabet (no padding, no whitespace), a length a
// decoding can have, and zero unused bits in the last character (the one
// spelling base64url encoding gives).
func compact(token string) bool {
	start, dots := 0, 0
	for i := 0; i < len(token); i++ {
		c := token[i]
		if c == '.' {
			if dots++; dots > 2 || !canonicalSegment(token[start:i]) {
				return false
			}
			start = i + 1
			continue
		}
		if b64url[c] == 0xff {
			return false
		}
	}
	return dots == 2 && canonicalSegment(token[start:])
}

// canonicalSegment reports whether seg, of base64url characters, is what
// encoding some non-empty bytes gives.
func canonicalSegment(seg string) bool {
	if len(seg) == 0 {
		return false
	}
	last := b64url[seg[len(seg)-1]]
	switch len(seg) % 4 {
	case 1:
		return false // no byte string encodes to this length
	case 2:
		return last&0x0f == 0 // one byte: 4 bits of the last character unused
	case 3:
		return last&0x03 == 0 // two bytes: 2 unused
	}
	return true
}

// writtenClaims are the claims a token's validity and its user rest on,
// as the payload writes them.
type writtenClaims struct {
	Iss json.RawMessage `json:"iss"`
	Sub json.RawMessage `json:"sub"`
	Exp json.RawMessage `json:"exp"`
	Nbf json.RawMessage `json:"nbf"`
	Iat json.RawMessage `json:"iat"`
}

// readWritten reads payload's claims as written; ok is false unless it is
// a JSON object whose exp, nbf and iat, where present, are JSON numbers
// (NumericDate, RFC 7519): never "exp":"9999999999", which the jwt package
// takes, nor null.
func readWritten(payload []byte) (c writtenClaims, ok bool) {
	if json.Unmarshal(payload, &c) != nil {
		return c, false
	}
	return c, numberOrAbsent(c.Exp) && numberOrAbsent(c.Nbf) && numberOrAbsent(c.Iat)
}

// numberOrAbsent: raw is a valid JSON value (json.Unmarshal checked it),
// so it is a number exactly when it starts with a digit or a minus.
func numberOrAbsent(raw json.RawMessage) bool {
	return raw == nil || raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')
}
