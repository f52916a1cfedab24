package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"seckill/internal/seckill"
)

// Authenticate verifies an HS256 token of ours; it lets Tokens stand
// wherever a Verifier does (graph.TokenParser).
func (t *Tokens) Authenticate(_ context.Context, token string) (*seckill.User, error) {
	return t.Parse(token)
}

// Verifier accepts the tokens of every configured mode: HS256 tokens
// signed with our secret (Tokens) and an identity provider's (Provider).
// Each token goes to one of them by its header's alg, so neither sees the
// other's: an HS256 token never reaches the provider's keys, an RS256 one
// never our secret.
type Verifier struct {
	hs       *Tokens   // nil: HS256 tokens are refused
	provider *Provider // nil: provider tokens are refused
}

// NewVerifier returns a Verifier over the modes given (nil for a mode that
// is off); at least one is required.
func NewVerifier(hs *Tokens, provider *Provider) (*Verifier, error) {
	if hs == nil && provider == nil {
		return nil, errors.New("auth: verifier: neither HS256 tokens nor an identity provider")
	}
	return &Verifier{hs: hs, provider: provider}, nil
}

// Authenticate verifies token (without "Bearer ") and returns its user;
// see Tokens.Parse and Provider.Verify for what each accepts and the errors.
func (v *Verifier) Authenticate(ctx context.Context, token string) (*seckill.User, error) {
	if token == "" {
		return nil, seckill.Errorf(seckill.EUNAUTHENTICATED, "missing token")
	}
	// Compact tokens only (see compact), checked once here for both modes.
	if !compact(token) {
		return nil, invalidToken()
	}
	// Our own tokens' header, byte for byte, costs one comparison; a
	// provider's token seen before, a hash and a lookup. Only the others
	// need their header decoded.
	own := len(token) > len(issuedHeader) && token[:len(issuedHeader)] == issuedHeader && token[len(issuedHeader)] == '.'
	if !own && v.provider != nil {
		if u, ok := v.provider.cached(token); ok {
			return u, nil
		}
	}
	if !own {
		own = headerAlg(token) == "HS256"
	}
	switch {
	case own && v.hs != nil:
		return v.hs.parse(token)
	case !own && v.provider != nil && len(token) <= maxProviderTokenLength:
		return v.provider.verify(ctx, token)
	}
	return nil, invalidToken()
}

// headerAlg returns the alg of a JWS compact token's header, or "".
func headerAlg(token string) string {
	seg, _, ok := strings.Cut(token, ".")
	if !ok || len(seg) > 1024 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return ""
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(b, &h) != nil {
		return ""
	}
	return h.Alg
}
