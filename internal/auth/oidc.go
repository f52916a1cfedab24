package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"seckill/internal/seckill"
)

// ProviderAlgs are the signature algorithms accepted from an identity
// provider. Each fits one key type (RS256 an RSA key, ES256 a P-256 key,
// EdDSA an Ed25519 key) and go-jose verifies only with a key of that type:
// a token cannot choose another use for a key. "none" and the HMACs
// (HS256 with a public key as the secret) never reach a key.
var ProviderAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// Defaults for the zero fields of ProviderConfig.
const (
	DefaultLeeway          = 30 * time.Second
	DefaultMinRefetch      = 5 * time.Second
	DefaultKeyMaxAge       = 10 * time.Minute
	DefaultVerifiedSize    = 100_000
	DefaultSubjectSize     = 200_000
	maxProviderTokenLength = 16 << 10
)

// ProviderConfig says which identity provider's tokens to accept.
type ProviderConfig struct {
	// Issuer is the provider's issuer URL. Without JWKSURL, its discovery
	// document (<Issuer>/.well-known/openid-configuration) gives the key
	// set's URL; with JWKSURL, it is only compared with the "iss" claim,
	// and may be empty (then any iss is taken, and tells subjects apart).
	Issuer  string
	JWKSURL string
	// Audience must be among the token's "aud": the API's audience, for
	// access tokens, or the client id, for ID tokens.
	Audience string
	// AdminClaim, "claim:value", makes an admin of a token whose claim
	// (a string, or an array of strings, "a.b" for b inside object a) is
	// or holds value, e.g. "roles:seckill-admin". Empty: no provider
	// token is an admin.
	AdminClaim string
	// Leeway is the clock skew allowed on exp, nbf and iat. Default
	// DefaultLeeway.
	Leeway time.Duration
	// MinRefetch is the least time between two fetches of the key set
	// (an unknown kid asks for one). Default DefaultMinRefetch.
	MinRefetch time.Duration
	// KeyMaxAge is how long fetched keys (and tokens verified with them)
	// are trusted before the set is fetched again. Default
	// DefaultKeyMaxAge.
	KeyMaxAge time.Duration
	// VerifiedSize bounds the cache of verified tokens; SubjectSize the
	// cache of subjects' user ids. Defaults DefaultVerifiedSize and
	// DefaultSubjectSize.
	VerifiedSize int
	SubjectSize  int
	// HTTPClient fetches the discovery document and the keys; nil:
	// http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Provider verifies the tokens of one identity provider (OIDC) and maps
// their subjects to user ids. It is safe for concurrent use.
type Provider struct {
	cfg       ProviderConfig
	adminPath []string // AdminClaim's claim, split at dots
	adminWant string
	keys      *keySet
	verified  *verified
	subjects  *subjects
	discovery *oidc.Provider // nil with a JWKS URL
	sigChecks atomic.Int64   // signatures checked (tokens not answered from the cache)
	cacheHits atomic.Int64   // tokens answered from the cache
}

// ProviderStats are a Provider's counters since it was made, for metrics.
type ProviderStats struct {
	KeyFetches        int64 // fetches of the key set let through
	KeyFetchesLimited int64 // fetches the limiter refused (unknown kids within MinRefetch)
	SignatureChecks   int64 // tokens whose signature was checked
	CacheHits         int64 // tokens answered from the cache of verified tokens
	VerifiedTokens    int   // tokens in that cache now
	SubjectLookups    int64 // subjects looked up in the store (first sight in this process)
	SubjectBatches    int64 // the store calls those took
	KnownSubjects     int   // subjects in the subject cache now
}

// Stats returns p's counters.
func (p *Provider) Stats() ProviderStats {
	return ProviderStats{
		KeyFetches: p.keys.fetches.Load(), KeyFetchesLimited: p.keys.refused.Load(),
		SignatureChecks: p.sigChecks.Load(), CacheHits: p.cacheHits.Load(), VerifiedTokens: p.verified.c.Len(),
		SubjectLookups: p.subjects.lookups.Load(), SubjectBatches: p.subjects.batches.Load(), KnownSubjects: p.subjects.cache.Len(),
	}
}

// NewProvider returns a Provider for cfg whose subjects get their ids from
// store. Without cfg.JWKSURL it fetches the issuer's discovery document.
func NewProvider(ctx context.Context, cfg ProviderConfig, store SubjectStore) (*Provider, error) {
	if store == nil {
		return nil, errors.New("auth: provider: no subject store")
	}
	if cfg.Issuer == "" && cfg.JWKSURL == "" {
		return nil, errors.New("auth: provider: neither an issuer nor a JWKS URL")
	}
	if cfg.Audience == "" {
		return nil, errors.New("auth: provider: no audience")
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = DefaultLeeway
	}
	if cfg.MinRefetch == 0 {
		cfg.MinRefetch = DefaultMinRefetch
	}
	if cfg.KeyMaxAge == 0 {
		cfg.KeyMaxAge = DefaultKeyMaxAge
	}
	if cfg.VerifiedSize == 0 {
		cfg.VerifiedSize = DefaultVerifiedSize
	}
	if cfg.SubjectSize == 0 {
		cfg.SubjectSize = DefaultSubjectSize
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Provider{cfg: cfg}
	if cfg.AdminClaim != "" {
		claim, value, ok := strings.Cut(cfg.AdminClaim, ":")
		if !ok || claim == "" || value == "" {
			return nil, fmt.Errorf("auth: provider: admin claim %q is not claim:value", cfg.AdminClaim)
		}
		p.adminPath, p.adminWant = strings.Split(claim, "."), value
	}
	jwksURL := cfg.JWKSURL
	if jwksURL == "" {
		client := cfg.HTTPClient
		if client == nil {
			client = http.DefaultClient
		}
		d, err := oidc.NewProvider(oidc.ClientContext(ctx, client), cfg.Issuer)
		if err != nil {
			return nil, fmt.Errorf("auth: provider discovery: %w", err)
		}
		var meta struct {
			JWKSURL string `json:"jwks_uri"`
		}
		if err := d.Claims(&meta); err != nil || meta.JWKSURL == "" {
			return nil, fmt.Errorf("auth: provider discovery: %s names no jwks_uri", cfg.Issuer)
		}
		p.discovery, jwksURL = d, meta.JWKSURL
	}
	p.keys = newKeySet(jwksURL, cfg.HTTPClient, cfg.MinRefetch, cfg.KeyMaxAge, cfg.Now)
	var err error
	if p.verified, err = newVerified(cfg.VerifiedSize); err != nil {
		return nil, err
	}
	if p.subjects, err = newSubjects(store, cfg.SubjectSize); err != nil {
		return nil, err
	}
	return p, nil
}

// Discovery is the provider's discovery document (its endpoints, for the
// dashboard's sign-in), or nil when it was configured by a JWKS URL.
func (p *Provider) Discovery() *oidc.Provider { return p.discovery }

// Issuer is the configured issuer (may be empty with a JWKS URL).
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// providerClaims are the claims read from a provider's token.
type providerClaims struct {
	jwt.Claims
}

// Verify checks a provider's token (without "Bearer ") and returns its
// user. Only the compact serialization is taken (see compact). A token
// verified before, still within its exp, is answered from the cache
// without checking its signature again. Errors: EUNAUTHENTICATED for a
// token that is not acceptable ("token expired", "invalid token", or a
// message saying its subject or issuer is not acceptable, see
// checkSubject); EUNAVAILABLE when a new subject's id cannot be had.
func (p *Provider) Verify(ctx context.Context, token string) (*seckill.User, error) {
	if token == "" {
		return nil, seckill.Errorf(seckill.EUNAUTHENTICATED, "missing token")
	}
	if len(token) > maxProviderTokenLength {
		return nil, invalidToken()
	}
	// One spelling a token (compact.go), before its signature is checked
	// or it enters the cache.
	if !compact(token) {
		return nil, invalidToken()
	}
	return p.verify(ctx, token)
}

// verify is Verify of a compact token of at most maxProviderTokenLength.
func (p *Provider) verify(ctx context.Context, token string) (*seckill.User, error) {
	now := p.cfg.Now()
	h := tokenHash(token)
	if u, ok := p.verified.get(h, now); ok {
		p.cacheHits.Add(1)
		return &u, nil
	}
	// The header first: an algorithm outside ProviderAlgs (none, HS256,
	// ...) is refused before any key is looked at or fetched.
	jws, err := jose.ParseSignedCompact(token, ProviderAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, invalidToken()
	}
	p.sigChecks.Add(1)
	kid := jws.Signatures[0].Header.KeyID
	payload, err := p.keys.VerifySignature(ctx, token)
	if err != nil {
		// A kid the keys held do not name, while the key set cannot be
		// fetched again (the limiter, the provider down), may be a key
		// the provider has rotated in since the last fetch: retryable.
		// Not when that fetch came after the token was issued (providers
		// publish a key before they sign with it: a withdrawn key, or
		// nobody's), nor for a kid the set names whose token does not
		// verify: a bad token.
		if !p.keys.holds(kid) && keysUnfetched(err) && !p.keys.fetchedAfter(issuedAt(jws)) {
			return nil, seckill.Errorf(seckill.EUNAVAILABLE, "the sign-in keys are being refreshed; try again in a moment")
		}
		return nil, invalidToken()
	}
	written, ok := readWritten(payload)
	if !ok {
		return nil, invalidToken()
	}
	var c providerClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, invalidToken()
	}
	if c.Expiry == nil || c.Subject == "" {
		return nil, invalidToken()
	}
	err = c.ValidateWithLeeway(jwt.Expected{Issuer: p.cfg.Issuer, AnyAudience: jwt.Audience{p.cfg.Audience}, Time: now}, p.cfg.Leeway)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return nil, tokenExpired()
	case err != nil:
		return nil, invalidToken()
	}
	// A subject the store cannot hold is refused here, for good, rather
	// than failing its batch of lookups (and every other new subject in
	// it) with a retryable error.
	if err := checkWrittenSubject(written); err != nil {
		return nil, err
	}
	if err := checkSubject(c.Issuer, c.Subject); err != nil {
		return nil, err
	}
	admin, err := p.isAdmin(payload)
	if err != nil {
		return nil, invalidToken()
	}
	id, err := p.subjects.userID(ctx, c.Issuer, c.Subject)
	if err != nil {
		return nil, seckill.Errorf(seckill.EUNAVAILABLE, "sign-in is unavailable for a moment; try again")
	}
	u := seckill.User{ID: id, Admin: admin}
	// Good until its exp (with the leeway the check allows), but no longer
	// than the keys that verified it are trusted.
	until := c.Expiry.Time().Add(p.cfg.Leeway)
	if limit := now.Add(p.cfg.KeyMaxAge); limit.Before(until) {
		until = limit
	}
	p.verified.add(h, u, until)
	return &u, nil
}

// issuedAt is the iat claim of a token not yet verified, or the zero time
// without one. It only picks between two refusals of a token that did not
// verify, so its sender gains nothing by lying.
func issuedAt(jws *jose.JSONWebSignature) time.Time {
	var c struct {
		IssuedAt *jwt.NumericDate `json:"iat"`
	}
	if json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c) != nil || c.IssuedAt == nil {
		return time.Time{}
	}
	return c.IssuedAt.Time()
}

// keysUnfetched reports whether a verification failed because the key set
// could not be fetched again (the limiter refused the fetch, or the provider
// did not answer it), not because no key it holds verified the token.
// go-oidc wraps every failed fetch as "fetching keys %w"
// (TestProviderKeysUnreachable fails should that change).
func keysUnfetched(err error) bool {
	return errors.Is(err, errRefetchLimited) || strings.HasPrefix(err.Error(), "fetching keys")
}

// cached returns the user of a compact token verified before and still
// good, if it is one: the answer Verify would give, without its work.
func (p *Provider) cached(token string) (*seckill.User, bool) {
	if len(token) > maxProviderTokenLength {
		return nil, false
	}
	u, ok := p.verified.get(tokenHash(token), p.cfg.Now())
	if ok {
		p.cacheHits.Add(1)
	}
	return &u, ok
}

// isAdmin reports whether the payload's admin claim holds the admin value.
func (p *Provider) isAdmin(payload []byte) (bool, error) {
	if p.adminPath == nil {
		return false, nil
	}
	var all map[string]any
	if err := json.Unmarshal(payload, &all); err != nil {
		return false, err
	}
	return ClaimHolds(all, p.adminPath, p.adminWant), nil
}

// ClaimHolds reports whether the claim at path (object keys, outermost
// first) is want, or an array holding want.
func ClaimHolds(claims map[string]any, path []string, want string) bool {
	var v any = claims
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[k]; !ok {
			return false
		}
	}
	switch v := v.(type) {
	case string:
		return v == want
	case []any:
		for _, item := range v {
			if s, ok := item.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}
