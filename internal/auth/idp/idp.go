// Package idp is a small OpenID Connect identity provider for tests and
// for seckill-bench: it serves a discovery document and a JWKS, signs
// tokens with keys it generates (RS256, ES256, EdDSA), rotates them, and
// counts the key set's fetches. It is not for production: it has no users
// and signs whatever it is asked to.
package idp

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Paths the IdP serves under its URL.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/jwks"
)

// Key is one signing key.
type Key struct {
	ID     string
	Alg    jose.SignatureAlgorithm
	Signer crypto.Signer
}

// NewKey generates a key for alg (RS256, ES256 or EdDSA).
func NewKey(id string, alg jose.SignatureAlgorithm) (*Key, error) {
	var s crypto.Signer
	var err error
	switch alg {
	case jose.RS256:
		s, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		s, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, s, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("idp: no key for %s", alg)
	}
	if err != nil {
		return nil, err
	}
	return &Key{ID: id, Alg: alg, Signer: s}, nil
}

// IdP is the provider. Its handler (Handler, or the server Start makes)
// serves the discovery document and the published keys; Sign signs with
// any key it holds, published or not.
type IdP struct {
	mu        sync.Mutex
	url       string
	published []*Key
	keys      map[string]*Key
	fetches   atomic.Int64
	down      atomic.Bool // the key set answers 503
	// Extra, when set before use, adds routes (the dashboard's code flow
	// tests add the authorization and token endpoints).
	Extra map[string]http.HandlerFunc
	srv   *httptest.Server
}

// New returns an IdP whose issuer is url (set it later with SetURL when
// the server's address is not known yet).
func New(url string) *IdP { return &IdP{url: url, keys: map[string]*Key{}} }

// Start serves a new IdP on a loopback port; Close stops it.
func Start() *IdP {
	p := New("")
	p.srv = httptest.NewServer(p)
	p.url = p.srv.URL
	return p
}

// Close stops the server Start started.
func (p *IdP) Close() {
	if p.srv != nil {
		p.srv.Close()
	}
}

// URL is the issuer.
func (p *IdP) URL() string { p.mu.Lock(); defer p.mu.Unlock(); return p.url }

// SetURL sets the issuer.
func (p *IdP) SetURL(u string) { p.mu.Lock(); p.url = u; p.mu.Unlock() }

// JWKSURL is the key set's URL.
func (p *IdP) JWKSURL() string { return p.URL() + JWKSPath }

// Fetches is how many times the key set was served.
func (p *IdP) Fetches() int64 { return p.fetches.Load() }

// Add holds k and publishes it.
func (p *IdP) Add(k *Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[k.ID] = k
	p.published = append(p.published, k)
}

// AddNew generates a key, holds it and publishes it.
func (p *IdP) AddNew(id string, alg jose.SignatureAlgorithm) (*Key, error) {
	k, err := NewKey(id, alg)
	if err != nil {
		return nil, err
	}
	p.Add(k)
	return k, nil
}

// Hold keeps k for signing without publishing it (a key the relying party
// must refuse).
func (p *IdP) Hold(k *Key) { p.mu.Lock(); p.keys[k.ID] = k; p.mu.Unlock() }

// SetDown makes the key set answer 503 (down) or serve again.
func (p *IdP) SetDown(down bool) { p.down.Store(down) }

// Withdraw stops publishing key id (it can still sign).
func (p *IdP) Withdraw(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, k := range p.published {
		if k.ID == id {
			p.published = append(p.published[:i], p.published[i+1:]...)
			return
		}
	}
}

// Claims are the claims of a token Sign makes; Extra adds any others.
type Claims struct {
	Subject  string
	Audience []string
	Issuer   string // default the IdP's URL
	Expiry   time.Time
	NotBefore,
	IssuedAt time.Time // zero: left out
	Extra map[string]any
}

// Sign returns a compact JWS of c signed with key kid, whose header names
// kid and the key's alg.
func (p *IdP) Sign(kid string, c Claims) (string, error) {
	p.mu.Lock()
	k := p.keys[kid]
	iss := p.url
	p.mu.Unlock()
	if k == nil {
		return "", fmt.Errorf("idp: no key %q", kid)
	}
	return SignWith(k, kid, k.Alg, claimsOf(c, iss))
}

// SignWith signs claims with k but states kid and alg in the header,
// whatever they are (tests of tokens that lie about their key).
func SignWith(k *Key, kid string, alg jose.SignatureAlgorithm, claims map[string]any) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: k.Signer, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

func claimsOf(c Claims, iss string) map[string]any {
	m := map[string]any{}
	for k, v := range c.Extra {
		m[k] = v
	}
	if c.Issuer != "" {
		iss = c.Issuer
	}
	m["iss"] = iss
	if c.Subject != "" {
		m["sub"] = c.Subject
	}
	if len(c.Audience) == 1 {
		m["aud"] = c.Audience[0]
	} else if len(c.Audience) > 1 {
		m["aud"] = c.Audience
	}
	for name, t := range map[string]time.Time{"exp": c.Expiry, "nbf": c.NotBefore, "iat": c.IssuedAt} {
		if !t.IsZero() {
			m[name] = t.Unix()
		}
	}
	return m
}

// ServeHTTP serves the discovery document, the key set and Extra's routes.
func (p *IdP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case DiscoveryPath:
		u := p.URL()
		writeJSON(w, map[string]any{
			"issuer":                                u,
			"jwks_uri":                              u + JWKSPath,
			"authorization_endpoint":                u + "/authorize",
			"token_endpoint":                        u + "/token",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256", "EdDSA"},
			"code_challenge_methods_supported":      []string{"S256"},
		})
	case JWKSPath:
		p.fetches.Add(1)
		if p.down.Load() {
			http.Error(w, "key set unavailable", http.StatusServiceUnavailable)
			return
		}
		p.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range p.published {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Signer.Public(), KeyID: k.ID, Algorithm: string(k.Alg), Use: "sig"})
		}
		p.mu.Unlock()
		writeJSON(w, set)
	default:
		if h := p.Extra[r.URL.Path]; h != nil {
			h(w, r)
			return
		}
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
