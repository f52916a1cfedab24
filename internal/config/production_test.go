package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// prodEnv is a production environment that Load accepts, with m's
// variables added (an empty value removes one).
func prodEnv(m map[string]string) map[string]string {
	e := map[string]string{
		"SECKILL_JWT_SECRET":   strings.Repeat("j", 40),
		"SECKILL_METRICS_ADDR": "10.0.0.5:9090",
	}
	for k, v := range m {
		e[k] = v
	}
	return e
}

// TestLoadProduction runs every configuration production refuses, and the
// ones beside them it accepts, through Load: each refusal names its
// variable; development accepts them all.
func TestLoadProduction(t *testing.T) {
	const (
		https   = "https://idp.example/realms/shop"
		jwks    = "https://idp.example/realms/shop/certs"
		stripe  = "stripe"
		sk      = "sk_test_123"
		whsec   = "whsec_abc"
		builtin = "a-webhook-secret-of-our-own-0123"
	)
	provider := func(m map[string]string) map[string]string {
		m["SECKILL_AUTH_AUDIENCE"] = "seckill-api"
		return m
	}
	type tc struct {
		name string
		env  map[string]string
		want string // the refusal in production; empty: accepted
		// devWant is the refusal in development; empty: accepted.
		devWant string
	}
	var tests []tc
	// Every secret variable, with every secret the source publishes, among
	// the variables it goes with.
	with := map[string]map[string]string{
		"SECKILL_REDIS_PASSWORD":          {"SECKILL_REDIS_CLUSTER_ADDRS": "10.0.0.1:7000"},
		"SECKILL_REDIS_SENTINEL_PASSWORD": {"SECKILL_REDIS_SENTINEL_ADDRS": "10.0.0.1:26379", "SECKILL_REDIS_SENTINEL_MASTER": "seckill"},
		"SECKILL_EVENTS_WEBHOOK_SECRET":   {"SECKILL_EVENTS_WEBHOOK_URL": "https://platform.example/events"},
		"SECKILL_ADMIN_PASSWORD":          {"SECKILL_ADMIN_USER": "ops"},
		"SECKILL_AUTH_CLIENT_SECRET": provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_HS256": "false", "SECKILL_AUTH_ADMIN_CLAIM": "roles:admin",
			"SECKILL_AUTH_CLIENT_ID": "dashboard", "SECKILL_AUTH_REDIRECT_URL": "https://seckill.example/admin/login/sso/callback"}),
		"STRIPE_API_KEY":        {"SECKILL_PAYMENT_PROVIDER": stripe, "STRIPE_WEBHOOK_SECRET": whsec},
		"STRIPE_WEBHOOK_SECRET": {"SECKILL_PAYMENT_PROVIDER": stripe, "STRIPE_API_KEY": sk},
	}
	// Stripe's own shapes refuse these everywhere already.
	shape := map[string]string{
		"STRIPE_API_KEY":        "STRIPE_API_KEY must be a secret key",
		"STRIPE_WEBHOOK_SECRET": "STRIPE_WEBHOOK_SECRET must be the endpoint's signing secret",
	}
	for _, key := range secretVars() {
		for i, secret := range publishedSecrets {
			env := map[string]string{key: secret}
			for k, v := range with[key] {
				env[k] = v
			}
			tests = append(tests, tc{name: key + " published " + string(rune('a'+i)), env: env, want: key + " is a secret published in seckill's source", devWant: shape[key]})
		}
	}
	tests = append(tests,
		tc{name: "secret with blanks around", env: map[string]string{"SECKILL_JWT_SECRET": " " + DevJWTSecret + "\n"},
			want: "SECKILL_JWT_SECRET is a secret published"},
		// The identity provider's addresses.
		tc{name: "issuer over http", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": "http://idp.example/realms/shop", "SECKILL_AUTH_HS256": "false"}),
			want: `SECKILL_AUTH_ISSUER must be an https:// URL in production (http:// only on a loopback host: localhost, 127.0.0.1, ::1), not "http://idp.example/realms/shop"`},
		tc{name: "jwks over http", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_JWKS_URL": "http://idp.example/certs", "SECKILL_AUTH_HS256": "false"}),
			want: "SECKILL_AUTH_JWKS_URL must be an https:// URL in production"},
		tc{name: "jwks over http on a private address", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_JWKS_URL": "http://10.0.0.7:8080/certs", "SECKILL_AUTH_HS256": "false"}),
			want: "SECKILL_AUTH_JWKS_URL must be an https:// URL in production"},
		tc{name: "jwks over http on a mapped private address", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_JWKS_URL": "http://[::ffff:10.0.0.7]/certs", "SECKILL_AUTH_HS256": "false"}),
			want: "SECKILL_AUTH_JWKS_URL must be an https:// URL in production"},
		tc{name: "jwks over http on a name that starts like loopback", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_JWKS_URL": "http://localhost.attacker.example/certs", "SECKILL_AUTH_HS256": "false"}),
			want: "SECKILL_AUTH_JWKS_URL must be an https:// URL in production"},
		tc{name: "jwks over http on 127.0.0.1 as a name", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_JWKS_URL": "http://127.0.0.1.nip.io/certs", "SECKILL_AUTH_HS256": "false"}),
			want: "SECKILL_AUTH_JWKS_URL must be an https:// URL in production"},
		tc{name: "key set without an issuer", env: provider(map[string]string{"SECKILL_AUTH_JWKS_URL": jwks, "SECKILL_AUTH_HS256": "false"}),
			want: "SECKILL_AUTH_ISSUER is required beside SECKILL_AUTH_JWKS_URL in production"},
		tc{name: "hs256 unsaid beside a provider by discovery", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https}),
			want: "SECKILL_AUTH_HS256 must be set in production beside an identity provider: false to accept only the provider's tokens, or true"},
		tc{name: "hs256 unsaid beside a key set", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_JWKS_URL": jwks}),
			want: "SECKILL_AUTH_HS256 must be set in production"},
		// Stripe beside the built-in webhook: refused everywhere.
		tc{name: "stripe with the built-in webhook secret", env: map[string]string{"SECKILL_PAYMENT_PROVIDER": stripe, "STRIPE_API_KEY": sk, "STRIPE_WEBHOOK_SECRET": whsec,
			"SECKILL_PAYMENT_WEBHOOK_SECRET": builtin},
			want: "SECKILL_PAYMENT_WEBHOOK_SECRET is the built-in provider's webhook secret: with SECKILL_PAYMENT_PROVIDER=stripe", devWant: "SECKILL_PAYMENT_WEBHOOK_SECRET is the built-in provider's webhook secret"},

		// Accepted.
		tc{name: "own secrets", env: map[string]string{"SECKILL_PAYMENT_WEBHOOK_SECRET": builtin, "SECKILL_EVENTS_WEBHOOK_URL": "https://platform.example/events",
			"SECKILL_EVENTS_WEBHOOK_SECRET": strings.Repeat("e", 32), "SECKILL_ADMIN_USER": "ops", "SECKILL_ADMIN_PASSWORD": strings.Repeat("p", 20)}},
		tc{name: "provider only", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_HS256": "false"})},
		tc{name: "provider beside hs256 said", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_HS256": "true"})},
		tc{name: "key set with its issuer", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": https, "SECKILL_AUTH_JWKS_URL": jwks, "SECKILL_AUTH_HS256": "false"})},
		tc{name: "http on 127.0.0.1", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": "http://127.0.0.1:8099", "SECKILL_AUTH_JWKS_URL": "http://127.0.0.1:8099/jwks", "SECKILL_AUTH_HS256": "true"})},
		tc{name: "http on 127/8", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": "http://127.3.2.1", "SECKILL_AUTH_JWKS_URL": "http://127.3.2.1/jwks", "SECKILL_AUTH_HS256": "false"})},
		tc{name: "http on ::1", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": "http://[::1]:8099", "SECKILL_AUTH_JWKS_URL": "http://[::1]:8099/jwks", "SECKILL_AUTH_HS256": "false"})},
		tc{name: "http on localhost", env: provider(map[string]string{"SECKILL_AUTH_ISSUER": "http://LocalHost:8099", "SECKILL_AUTH_JWKS_URL": "http://localhost:8099/jwks", "SECKILL_AUTH_HS256": "false"})},
		tc{name: "stripe alone", env: map[string]string{"SECKILL_PAYMENT_PROVIDER": stripe, "STRIPE_API_KEY": sk, "STRIPE_WEBHOOK_SECRET": whsec}},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(env(prodEnv(tt.env)))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("production refused it: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), "\n  "+tt.want)):
				t.Errorf("production: error %v, want the line %q", err, tt.want)
			}
			dev := prodEnv(tt.env)
			dev["SECKILL_ENV"] = "dev"
			_, err = Load(env(dev))
			switch {
			case tt.devWant == "" && err != nil:
				t.Errorf("development refused it: %v", err)
			case tt.devWant != "" && (err == nil || !strings.Contains(err.Error(), "\n  "+tt.devWant)):
				t.Errorf("development: error %v, want the line %q", err, tt.devWant)
			}
		})
	}
}

// TestLoadProductionDefaults: what production and development decide
// around those refusals.
func TestLoadProductionDefaults(t *testing.T) {
	// Stripe gets no built-in webhook secret, not even development's.
	for _, mode := range []string{"dev", "prod"} {
		c, err := Load(env(prodEnv(map[string]string{"SECKILL_ENV": mode, "SECKILL_PAYMENT_PROVIDER": "stripe", "STRIPE_API_KEY": "sk_test_1", "STRIPE_WEBHOOK_SECRET": "whsec_1"})))
		if err != nil {
			t.Fatal(err)
		}
		if c.PaymentWebhookSecret != "" {
			t.Errorf("%s with Stripe: built-in webhook secret %q, want none", mode, c.PaymentWebhookSecret)
		}
		if slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "SECKILL_PAYMENT_WEBHOOK_SECRET") }) {
			t.Errorf("%s with Stripe: a warning about the built-in webhook: %q", mode, c.Warnings)
		}
	}
	if c := loadDev(t, map[string]string{}); c.PaymentWebhookSecret != DevWebhookSecret {
		t.Errorf("dev, built-in provider: webhook secret %q, want the development one", c.PaymentWebhookSecret)
	}
	// Development keeps HS256 on beside a provider unless told.
	c := loadDev(t, map[string]string{"SECKILL_AUTH_ISSUER": "http://idp.example", "SECKILL_AUTH_AUDIENCE": "api"})
	if !c.AuthHS256 {
		t.Error("dev: HS256 off beside a provider by default")
	}
	// Production says where /metrics went.
	c, err := Load(env(prodEnv(map[string]string{"SECKILL_METRICS_ADDR": ""})))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.HasPrefix(w, "SECKILL_METRICS_ADDR is not set") }) {
		t.Errorf("prod without SECKILL_METRICS_ADDR: no warning that /metrics is not served: %q", c.Warnings)
	}
}

// secretVarAssignment and secretGoAssignment find a literal value given to a secret variable: in a
// shell, a Makefile, a Dockerfile, Markdown or Go (VAR=value, "VAR": "value",
// YAML's VAR: value) or a Go identifier that names a secret or a password
// (DevJWTSecret = "...", Secret: "...").
var (
	secretVarAssignment = regexp.MustCompile(`(["'\x60]?)\b((?:SECKILL|STRIPE)_[A-Z0-9_]*(?:SECRET|PASSWORD|_KEY))\b["']?(\s*\??:?=\s*|\s*:\s*)`)
	secretGoAssignment  = regexp.MustCompile(`\b\w*(?:Secret|Password|secret|password)\w*\s*(?:=|:=|:)\s*"([^"\\]*)"`)
)

// literalValue is the value a line gives after VAR= or VAR:, or "" when it
// is not a literal (a variable, a placeholder, an expression).
func literalValue(open, rest string, colon, yaml bool) string {
	if rest == "" {
		return ""
	}
	if open != "" && !colon { // "VAR=value": the string that holds VAR= ends the value
		rest, _, _ = strings.Cut(rest, open)
		rest = strings.TrimSpace(rest)
		if rest == "" || strings.ContainsAny(rest[:1], "$<{(") || strings.Contains(rest, "…") {
			return ""
		}
		return rest
	}
	if q := rest[0]; q == '"' || q == '\'' || q == '`' {
		v, _, ok := strings.Cut(rest[1:], string(q))
		if !ok {
			return ""
		}
		rest = v
	} else {
		if colon && !yaml { // prose: "SECKILL_X: the secret of ..."
			return ""
		}
		fields := strings.FieldsFunc(rest, func(r rune) bool { return strings.ContainsRune(" \t`\"',;)|", r) })
		if len(fields) == 0 {
			return ""
		}
		rest = fields[0]
	}
	rest = strings.TrimSpace(rest)
	if rest == "" || strings.ContainsAny(rest[:1], "$<{(…") || strings.Contains(rest, "…") || strings.Contains(rest, "...") {
		return ""
	}
	return rest
}

// TestPublishedSecretsListed scans seckill's source (everything but the
// tests and build output) for literal values of secret variables: each must
// be in publishedSecrets, so that production refuses it. A secret added to
// the source later fails here until it is listed.
func TestPublishedSecretsListed(t *testing.T) {
	root := filepath.Join("..", "..")
	texts := []string{".go", ".md", ".yml", ".yaml", ".sh", ".env", ".json", ".toml", ".ts", ".tsx", ".js", ".html", ".templ", ".graphqls", ".sql", ".lua"}
	found := map[string][]string{}
	scanned := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "dist" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		base := name
		if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, "_templ.go") {
			return nil
		}
		// The configuration doc's generator keys its notes by variable:
		// its strings describe a setting, they are no value of one.
		if filepath.ToSlash(path) == "../../scripts/configdoc/main.go" {
			return nil
		}
		if !slices.Contains(texts, filepath.Ext(name)) && base != "Makefile" && base != "Dockerfile" && !strings.Contains(filepath.ToSlash(path), "/scripts/") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned++
		yaml := strings.HasSuffix(name, ".yml") || strings.HasSuffix(name, ".yaml")
		for i, line := range strings.Split(string(b), "\n") {
			where := filepath.ToSlash(path)[len("../../"):] + ":" + itoa(i+1)
			for _, m := range secretVarAssignment.FindAllStringSubmatchIndex(line, -1) {
				open, key, sep := line[m[2]:m[3]], line[m[4]:m[5]], strings.TrimSpace(line[m[6]:m[7]])
				if v := literalValue(open, line[m[1]:], sep == ":", yaml); v != "" {
					found[v] = append(found[v], where+" "+key)
				}
			}
			if strings.HasSuffix(name, ".go") {
				for _, m := range secretGoAssignment.FindAllStringSubmatch(line, -1) {
					if v := strings.TrimSpace(m[1]); v != "" {
						found[v] = append(found[v], where)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("only %d files scanned: is the walk at the repository's root?", scanned)
	}
	for v, where := range found {
		if !slices.Contains(publishedSecrets, v) {
			t.Errorf("the secret %q stands in the source (%s) but not in publishedSecrets: production would start with it", v, strings.Join(where, ", "))
		}
	}
	for _, s := range publishedSecrets {
		if _, ok := found[s]; !ok {
			t.Errorf("publishedSecrets lists %q, which the scan did not find: is the scan blind to it?", s)
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
