package idp

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// CodeFlow makes the IdP an authorization server for one client: the
// authorization code flow with PKCE (S256 only), at /authorize and /token.
// /authorize signs in Subject at once and redirects back with a code (with
// LoginPage set, it answers a page whose "Continue" link goes back instead,
// as a provider's sign-in page does: the browser's way back then starts on
// the provider's site); /token checks the client, the redirect URI and the PKCE
// verifier before it issues an ID token (signed with key KeyID, carrying
// the request's nonce and Claims).
type CodeFlow struct {
	ClientID, ClientSecret string
	KeyID                  string
	LoginPage              bool
	mu                     sync.Mutex
	subject                string
	claims                 map[string]any
	codes                  map[string]grant
	exchanges              int
}

// Exchanged is how many codes /token has redeemed.
func (cf *CodeFlow) Exchanged() int { cf.mu.Lock(); defer cf.mu.Unlock(); return cf.exchanges }

type grant struct {
	challenge, nonce, redirect, subject string
	claims                              map[string]any
}

// SignInAs sets who /authorize signs in next, with their extra claims.
func (cf *CodeFlow) SignInAs(subject string, claims map[string]any) {
	cf.mu.Lock()
	cf.subject, cf.claims = subject, claims
	cf.mu.Unlock()
}

// EnableCodeFlow serves cf's endpoints. Call it before the IdP serves.
func (p *IdP) EnableCodeFlow(cf *CodeFlow) {
	cf.codes = map[string]grant{}
	if p.Extra == nil {
		p.Extra = map[string]http.HandlerFunc{}
	}
	p.Extra["/authorize"] = func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		redirect := q.Get("redirect_uri")
		if q.Get("response_type") != "code" || q.Get("client_id") != cf.ClientID || redirect == "" ||
			q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		code := random()
		cf.mu.Lock()
		cf.codes[code] = grant{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirect: redirect, subject: cf.subject, claims: cf.claims}
		cf.mu.Unlock()
		u, err := url.Parse(redirect)
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
		v := u.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		u.RawQuery = v.Encode()
		if cf.LoginPage {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>Test provider</title><a id="continue" href="%s">Continue</a>`, html.EscapeString(u.String()))
			return
		}
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	p.Extra["/token"] = func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
		}
		if r.Method != http.MethodPost || id != cf.ClientID || secret != cf.ClientSecret || r.PostFormValue("grant_type") != "authorization_code" {
			tokenError(w, "invalid_client")
			return
		}
		cf.mu.Lock()
		g, found := cf.codes[r.PostFormValue("code")]
		delete(cf.codes, r.PostFormValue("code")) // once
		cf.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		if !found || g.redirect != r.PostFormValue("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			tokenError(w, "invalid_grant")
			return
		}
		now := time.Now()
		extra := map[string]any{"nonce": g.nonce}
		for k, v := range g.claims {
			extra[k] = v
		}
		idToken, err := p.Sign(cf.KeyID, Claims{Subject: g.subject, Audience: []string{cf.ClientID}, IssuedAt: now, Expiry: now.Add(5 * time.Minute), Extra: extra})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		cf.mu.Lock()
		cf.exchanges++
		cf.mu.Unlock()
		writeJSON(w, map[string]any{"access_token": random(), "token_type": "Bearer", "expires_in": 300, "id_token": idToken})
	}
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte(`{"error":"` + code + `"}`))
}

func random() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
