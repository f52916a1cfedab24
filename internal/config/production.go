package config

import (
	"net/netip"
	"net/url"
	"reflect"
	"slices"
	"strings"
)

// publishedSecrets are the secret values that stand in seckill's public
// source: the development defaults and the load test's own. Anyone can
// sign with them, so production refuses each of them in every secret
// variable. TestPublishedSecretsListed scans the source for literal
// secrets and fails on one missing here.
var publishedSecrets = []string{
	DevJWTSecret,
	DevWebhookSecret,
	"bench-test-secret-that-is-long-enough-0123456789", // internal/bench/benchtest
}

// secretVars are the variables of Config that hold a secret: every one
// whose name says SECRET or PASSWORD, and Stripe's API key.
func secretVars() []string {
	var keys []string
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("env"), ",")
		if strings.Contains(key, "SECRET") || strings.Contains(key, "PASSWORD") || key == "STRIPE_API_KEY" {
			keys = append(keys, key)
		}
	}
	return keys
}

// production refuses what is safe only in development: a published secret,
// an identity provider reached over plain http or trusted for any issuer,
// HS256 beside a provider unless asked for. Development keeps them.
func (l *loader) production(c *Config) {
	if c.Dev() {
		return
	}
	for _, key := range secretVars() {
		if slices.Contains(publishedSecrets, strings.TrimSpace(l.getenv(key))) {
			l.errf("%s is a secret published in seckill's source (a development or test one): anyone can sign with it; set a secret of your own, such as openssl rand -base64 48 makes, or SECKILL_ENV=dev", key)
		}
	}
	for _, key := range []string{"SECKILL_AUTH_ISSUER", "SECKILL_AUTH_JWKS_URL"} {
		v := l.getenv(key)
		// A value that is no http(s) URL at all was refused by auth.
		if isHTTPURL(v) && !SecureURL(v) {
			l.errf("%s must be an https:// URL in production (http:// only on a loopback host: localhost, 127.0.0.1, ::1), not %q: keys or a discovery document fetched over plain http can be swapped on the way", key, v)
		}
	}
	if c.AuthJWKSURL != "" && c.AuthIssuer == "" {
		l.errf("SECKILL_AUTH_ISSUER is required beside SECKILL_AUTH_JWKS_URL in production: without it a token signed by the key set is accepted whatever its issuer (iss), another tenant's of a shared provider too")
	}
	if c.AuthProvider() && !l.set("SECKILL_AUTH_HS256") {
		l.errf("SECKILL_AUTH_HS256 must be set in production beside an identity provider: false to accept only the provider's tokens, or true to keep accepting HS256 tokens signed with SECKILL_JWT_SECRET (whoever holds it can sign any user's or an admin's)")
	}
	if c.MetricsAddr == "" {
		c.Warnings = append(c.Warnings, "SECKILL_METRICS_ADDR is not set: production serves /metrics only on an address of its own (such as 10.0.0.5:9090), never on SECKILL_HTTP_ADDR, so no metrics are served")
	}
}

// SecureURL reports whether rawURL is https, or http to a loopback host
// (this machine: nothing on the way to swap what it answers): how
// production fetches an identity provider's documents and keys.
func SecureURL(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	if u.Scheme == "https" {
		return true
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}
