package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"seckill/internal/seckill"
)

// SignInConfig is the dashboard's client at the identity provider.
type SignInConfig struct {
	ClientID, ClientSecret string
	// RedirectURL is the dashboard's callback, registered at the provider
	// (https://<host>/admin/login/sso/callback).
	RedirectURL string
	// OperatorClaim, "claim:value", decides who is an operator (see
	// ProviderConfig.AdminClaim for the form); required.
	OperatorClaim string
}

// SignIn signs the dashboard's operators in through the identity provider:
// the authorization code flow with PKCE (S256), a nonce in the ID token,
// and the operator claim checked on it. It is safe for concurrent use.
type SignIn struct {
	oauth      oauth2.Config
	authOrigin string // the authorization endpoint's scheme://host[:port]
	verifier   *oidc.IDTokenVerifier
	client     *http.Client
	issuer     string
	claimPath  []string
	claimValue string
}

// Pending is what the browser keeps (in a cookie) between Begin and Finish:
// the state the provider returns, the nonce its ID token must carry, and
// the PKCE verifier only the dashboard ever sends.
type Pending struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"` // where to go once signed in
}

// Operator is who the provider says signed in.
type Operator struct {
	Issuer, Subject string
	// Name is for people: preferred_username, else email, else the subject.
	Name string
}

// NewSignIn returns the sign-in through p, which must have been configured
// by discovery (it gives the authorization and token endpoints). The ID
// token's signature is checked with p's key set (its refetch limit and
// key max age apply).
func NewSignIn(p *Provider, cfg SignInConfig) (*SignIn, error) {
	if p == nil || p.discovery == nil {
		return nil, errors.New("auth: operator sign-in needs a provider configured by its issuer (discovery)")
	}
	if cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("auth: operator sign-in needs a client id and a redirect URL")
	}
	claim, value, ok := strings.Cut(cfg.OperatorClaim, ":")
	if !ok || claim == "" || value == "" {
		return nil, fmt.Errorf("auth: operator claim %q is not claim:value", cfg.OperatorClaim)
	}
	endpoint := p.discovery.Endpoint()
	origin, err := originOf(endpoint.AuthURL)
	if err != nil {
		return nil, fmt.Errorf("auth: operator sign-in: the provider's authorization_endpoint: %w", err)
	}
	client := p.cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &SignIn{
		authOrigin: origin,
		oauth: oauth2.Config{
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL,
			Endpoint: endpoint, Scopes: []string{oidc.ScopeOpenID, "profile", "email"},
		},
		verifier: oidc.NewVerifier(p.cfg.Issuer, p.keys, &oidc.Config{
			ClientID: cfg.ClientID, SupportedSigningAlgs: algNames(), Now: p.cfg.Now,
		}),
		client:     client,
		issuer:     p.cfg.Issuer,
		claimPath:  strings.Split(claim, "."),
		claimValue: value,
	}, nil
}

func algNames() []string {
	out := make([]string, len(ProviderAlgs))
	for i, a := range ProviderAlgs {
		out[i] = string(a)
	}
	return out
}

// originOf returns the origin (scheme://host[:port]) of an http(s) URL, as
// a Content-Security-Policy source names it.
func originOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		strings.ContainsFunc(u.Host, func(r rune) bool { return !isHostRune(r) }) {
		return "", fmt.Errorf("%q is not an absolute http(s) URL", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

func isHostRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-:[]", r)
}

// AuthorizationOrigin is the origin of the provider's authorization
// endpoint, where Begin sends the browser: the sign-in page's form is
// answered with a redirect there, so its Content-Security-Policy must
// allow it (form-action).
func (s *SignIn) AuthorizationOrigin() string { return s.authOrigin }

// Begin starts a sign-in: the provider's authorization URL to send the
// browser to, and what the browser must keep until it comes back.
func (s *SignIn) Begin(next string) (string, Pending) {
	p := Pending{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), Next: next}
	u := s.oauth.AuthCodeURL(p.State, oauth2.S256ChallengeOption(p.Verifier), oidc.Nonce(p.Nonce))
	return u, p
}

// Finish completes a sign-in the provider sent back with code: it
// exchanges the code (with the PKCE verifier), verifies the ID token
// (issuer, audience the client id, expiry, signature, nonce) and requires
// the operator claim. EUNAUTHENTICATED when the provider or its token does
// not vouch for the browser; EFORBIDDEN for a user who is not an operator.
func (s *SignIn) Finish(ctx context.Context, code string, p Pending) (Operator, error) {
	if code == "" || p.Verifier == "" || p.Nonce == "" {
		return Operator{}, seckill.Errorf(seckill.EUNAUTHENTICATED, "sign-in incomplete; start again")
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.client)
	tok, err := s.oauth.Exchange(ctx, code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		return Operator{}, fmt.Errorf("%w: %w", seckill.Errorf(seckill.EUNAUTHENTICATED, "the identity provider refused the sign-in; start again"), err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Operator{}, seckill.Errorf(seckill.EUNAUTHENTICATED, "the identity provider sent no ID token")
	}
	if !compact(raw) { // go-oidc would take the JWS JSON forms too
		return Operator{}, seckill.Errorf(seckill.EUNAUTHENTICATED, "the identity provider's ID token does not verify")
	}
	idt, err := s.verifier.Verify(ctx, raw)
	if err != nil {
		return Operator{}, fmt.Errorf("%w: %w", seckill.Errorf(seckill.EUNAUTHENTICATED, "the identity provider's ID token does not verify"), err)
	}
	if idt.Nonce != p.Nonce {
		return Operator{}, seckill.Errorf(seckill.EUNAUTHENTICATED, "the ID token is not this sign-in's (nonce)")
	}
	var all map[string]any
	if err := idt.Claims(&all); err != nil {
		return Operator{}, seckill.Errorf(seckill.EUNAUTHENTICATED, "the ID token's claims do not decode")
	}
	if !ClaimHolds(all, s.claimPath, s.claimValue) {
		return Operator{}, seckill.Errorf(seckill.EFORBIDDEN, "you signed in, but you are not an operator of this dashboard")
	}
	name := idt.Subject
	for _, k := range []string{"preferred_username", "email"} {
		if v, ok := all[k].(string); ok && v != "" {
			name = v
			break
		}
	}
	return Operator{Issuer: idt.Issuer, Subject: idt.Subject, Name: name}, nil
}

// EncodePending and DecodePending carry Pending in a cookie's value.
func EncodePending(p Pending) string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodePending reads a cookie's value written by EncodePending.
func DecodePending(s string) (Pending, error) {
	var p Pending
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	return p, err
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
