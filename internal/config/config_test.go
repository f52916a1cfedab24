package config

import (
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// loadDev loads m in development mode, failing t on an error.
func loadDev(t *testing.T, m map[string]string) *Config {
	t.Helper()
	m["SECKILL_ENV"] = "dev"
	c, err := Load(env(m))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoadDefaultsDev(t *testing.T) {
	c, err := Load(env(map[string]string{"SECKILL_ENV": "dev"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.JWTSecret != DevJWTSecret || c.LogFormat != "text" || !c.Playground {
		t.Fatalf("unexpected dev defaults: %+v", c)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "development secret") {
		t.Fatalf("want a warning about the development secret, got %q", c.Warnings)
	}
	if c.RedisMinReplicas != 0 || c.RedisWaitTimeout != 250*time.Millisecond {
		t.Fatalf("single node: want no WAIT by default (0 replicas, 250ms timeout), got %d, %s", c.RedisMinReplicas, c.RedisWaitTimeout)
	}
	if c.DatabaseURL != "postgres://postgres@127.0.0.1:5432/seckill?sslmode=disable" || c.RedisURL != "redis://127.0.0.1:6379/0" {
		t.Fatalf("unexpected URLs: %s %s", c.DatabaseURL, c.RedisURL)
	}
	if c.AddressRate != 0 {
		t.Fatalf("dev: want no address limit by default (every client is 127.0.0.1), got %v", c.AddressRate)
	}
	c, err = Load(env(map[string]string{"SECKILL_ENV": "dev", "SECKILL_ADDRESS_RATE": "7"}))
	if err != nil || c.AddressRate != 7 {
		t.Fatalf("dev with SECKILL_ADDRESS_RATE=7: %v, %v", c, err)
	}
}

func TestLoadRedisTopologies(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		want  string
		check func(c *Config) bool
	}{
		{"single by default", map[string]string{}, RedisSingle, func(c *Config) bool {
			return c.RedisURL == "redis://127.0.0.1:6379/0" && c.RedisMinReplicas == 0
		}},
		{"single with a replica to wait for", map[string]string{"SECKILL_REDIS_MIN_REPLICAS": "1"}, RedisSingle, func(c *Config) bool {
			return c.RedisMinReplicas == 1
		}},
		{"cluster without WAIT", map[string]string{"SECKILL_REDIS_CLUSTER_ADDRS": "a:7000", "SECKILL_REDIS_MIN_REPLICAS": "0"}, RedisCluster, func(c *Config) bool {
			return c.RedisMinReplicas == 0
		}},
		{"cluster", map[string]string{"SECKILL_REDIS_CLUSTER_ADDRS": " 10.0.0.1:7000, 10.0.0.2:7000,", "SECKILL_REDIS_PASSWORD": "pw", "SECKILL_REDIS_TLS": "true"}, RedisCluster,
			func(c *Config) bool {
				return c.RedisURL == "" && strings.Join(c.RedisClusterAddrs, " ") == "10.0.0.1:7000 10.0.0.2:7000" && c.RedisPassword == "pw" && c.RedisTLS &&
					c.RedisMinReplicas == 1
			}},
		{"sentinel", map[string]string{"SECKILL_REDIS_SENTINEL_ADDRS": "[::1]:26379", "SECKILL_REDIS_SENTINEL_MASTER": "seckill", "SECKILL_REDIS_SENTINEL_PASSWORD": "s"}, RedisSentinel,
			func(c *Config) bool {
				return c.RedisURL == "" && c.RedisSentinelAddrs[0] == "[::1]:26379" && c.RedisSentinelMaster == "seckill" && c.RedisSentinelPassword == "s" &&
					c.RedisMinReplicas == 1
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadDev(t, tt.env)
			if got := c.RedisTopology(); got != tt.want || !tt.check(c) {
				t.Fatalf("topology %s, config %+v; want %s", got, c, tt.want)
			}
		})
	}
}

func TestLoadAuthProvider(t *testing.T) {
	c := loadDev(t, map[string]string{})
	if c.AuthProvider() || !c.AuthHS256 || c.AuthLeeway != 30*time.Second || c.AuthMinRefetch != 5*time.Second ||
		c.AuthKeyMaxAge != 10*time.Minute || c.AuthCacheSize != 100000 || c.AuthSubjectCacheSize != 200000 {
		t.Fatalf("auth defaults: %+v", c)
	}
	c = loadDev(t, map[string]string{"SECKILL_AUTH_ISSUER": "https://idp.example/realms/shop", "SECKILL_AUTH_AUDIENCE": "seckill-api",
		"SECKILL_AUTH_ADMIN_CLAIM": "realm_access.roles:seckill-admin", "SECKILL_AUTH_HS256": "false"})
	if !c.AuthProvider() || c.AuthHS256 || c.AuthAudience != "seckill-api" || c.AuthAdminClaim != "realm_access.roles:seckill-admin" {
		t.Fatalf("provider by discovery: %+v", c)
	}
	c = loadDev(t, map[string]string{"SECKILL_AUTH_JWKS_URL": "https://idp.example/keys", "SECKILL_AUTH_AUDIENCE": "seckill-api"})
	if !c.AuthProvider() || c.AuthIssuer != "" || !c.AuthHS256 {
		t.Fatalf("provider by JWKS URL: %+v", c)
	}
	c = loadDev(t, map[string]string{"SECKILL_AUTH_ISSUER": "https://idp.example", "SECKILL_AUTH_AUDIENCE": "api", "SECKILL_AUTH_ADMIN_CLAIM": "roles:admin",
		"SECKILL_AUTH_CLIENT_ID": "dash", "SECKILL_AUTH_REDIRECT_URL": "https://s.example/admin/login/sso/callback"})
	if c.AuthOperatorClaim != "roles:admin" {
		t.Errorf("operator claim %q, want the admin claim by default", c.AuthOperatorClaim)
	}
	c = loadDev(t, map[string]string{"SECKILL_AUTH_JWKS_URL": "https://idp.example/keys", "SECKILL_AUTH_AUDIENCE": "seckill-api"})
	if !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "SECKILL_AUTH_ADMIN_CLAIM is not set") }) {
		t.Errorf("no warning that no provider token is an admin's: %q", c.Warnings)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"secret required in prod", map[string]string{}, "SECKILL_JWT_SECRET is required"},
		{"short secret", map[string]string{"SECKILL_JWT_SECRET": "short"}, "at least 32"},
		{"bad env", map[string]string{"SECKILL_ENV": "staging"}, "SECKILL_ENV must be dev or prod"},
		{"bad int", map[string]string{"SECKILL_ENV": "dev", "SECKILL_DB_MAX_CONNS": "lots"}, "SECKILL_DB_MAX_CONNS must be an integer"},
		{"int out of range", map[string]string{"SECKILL_ENV": "dev", "SECKILL_WORKER_CONCURRENCY": "0"}, "SECKILL_WORKER_CONCURRENCY must be an integer from 1"},
		{"expiry takes the pool", map[string]string{"SECKILL_ENV": "dev", "SECKILL_DB_MAX_CONNS": "4", "SECKILL_EXPIRY_WRITERS": "4"}, "SECKILL_EXPIRY_WRITERS must be less than SECKILL_DB_MAX_CONNS (4)"},
		{"expiry batch", map[string]string{"SECKILL_ENV": "dev", "SECKILL_EXPIRY_BATCH": "0"}, "SECKILL_EXPIRY_BATCH must be an integer from 1"},
		{"expiry interval", map[string]string{"SECKILL_ENV": "dev", "SECKILL_EXPIRY_INTERVAL": "1ms"}, "SECKILL_EXPIRY_INTERVAL must be between 10ms and 1m"},
		{"queue interval", map[string]string{"SECKILL_ENV": "dev", "SECKILL_QUEUE_INTERVAL": "1m"}, "SECKILL_QUEUE_INTERVAL must be between 10ms and 10s"},
		{"bad duration", map[string]string{"SECKILL_ENV": "dev", "SECKILL_RECONCILE_AFTER": "soon"}, "SECKILL_RECONCILE_AFTER must be a duration"},
		{"no redis timeout", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_TIMEOUT": "0s"}, "SECKILL_REDIS_TIMEOUT must be positive"},
		{"negative min replicas", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_MIN_REPLICAS": "-1"}, "SECKILL_REDIS_MIN_REPLICAS must be an integer from 0"},
		{"no wait timeout", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_WAIT_TIMEOUT": "0s"}, "SECKILL_REDIS_WAIT_TIMEOUT must be between"},
		{"long wait timeout", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_WAIT_TIMEOUT": "1m"}, "SECKILL_REDIS_WAIT_TIMEOUT must be between"},
		{"bad db url", map[string]string{"SECKILL_ENV": "dev", "SECKILL_DATABASE_URL": "mysql://x"}, "SECKILL_DATABASE_URL must be a postgres"},
		{"bad redis url", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_URL": "http://x"}, "SECKILL_REDIS_URL must be a redis"},
		{"two topologies", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_URL": "redis://x:6379/0", "SECKILL_REDIS_CLUSTER_ADDRS": "a:7000"}, "set only one of SECKILL_REDIS_URL"},
		{"cluster and sentinel", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_CLUSTER_ADDRS": "a:7000", "SECKILL_REDIS_SENTINEL_ADDRS": "b:26379", "SECKILL_REDIS_SENTINEL_MASTER": "m"}, "set only one of"},
		{"cluster address without port", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_CLUSTER_ADDRS": "a:7000,b"}, `"b" is not one`},
		{"sentinel without master", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_SENTINEL_ADDRS": "b:26379"}, "SECKILL_REDIS_SENTINEL_MASTER go together"},
		{"master without sentinels", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_SENTINEL_MASTER": "m"}, "SECKILL_REDIS_SENTINEL_MASTER go together"},
		{"password beside a URL", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_PASSWORD": "pw"}, "SECKILL_REDIS_PASSWORD is for a cluster or Sentinel"},
		{"bad tls flag", map[string]string{"SECKILL_ENV": "dev", "SECKILL_REDIS_CLUSTER_ADDRS": "a:7000", "SECKILL_REDIS_TLS": "maybe"}, "SECKILL_REDIS_TLS must be true or false"},
		{"issuer not a URL", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_ISSUER": "idp.example", "SECKILL_AUTH_AUDIENCE": "api"}, "SECKILL_AUTH_ISSUER must be the provider's issuer"},
		{"jwks not a URL", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_JWKS_URL": "keys.json", "SECKILL_AUTH_AUDIENCE": "api"}, "SECKILL_AUTH_JWKS_URL must be an https:// URL"},
		{"provider without audience", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_ISSUER": "https://idp.example"}, "SECKILL_AUTH_AUDIENCE is required with an identity provider"},
		{"audience without provider", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_AUDIENCE": "api"}, "SECKILL_AUTH_AUDIENCE is for an identity provider"},
		{"admin claim without provider", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_ADMIN_CLAIM": "roles:admin"}, "SECKILL_AUTH_ADMIN_CLAIM is for an identity provider"},
		{"admin claim without value", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_ISSUER": "https://idp.example", "SECKILL_AUTH_AUDIENCE": "api", "SECKILL_AUTH_ADMIN_CLAIM": "roles"}, "SECKILL_AUTH_ADMIN_CLAIM must be claim:value"},
		{"no token mode", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_HS256": "false"}, "SECKILL_AUTH_HS256 can be false only with an identity provider"},
		{"client secret alone", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_CLIENT_SECRET": "s"}, "SECKILL_AUTH_CLIENT_SECRET is for the dashboard's sign-in"},
		{"sign-in without discovery", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_JWKS_URL": "https://idp.example/keys", "SECKILL_AUTH_AUDIENCE": "api",
			"SECKILL_AUTH_CLIENT_ID": "dash", "SECKILL_AUTH_REDIRECT_URL": "https://s.example/admin/login/sso/callback", "SECKILL_AUTH_OPERATOR_CLAIM": "groups:ops"}, "SECKILL_AUTH_CLIENT_ID needs SECKILL_AUTH_ISSUER"},
		{"sign-in redirect", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_ISSUER": "https://idp.example", "SECKILL_AUTH_AUDIENCE": "api",
			"SECKILL_AUTH_CLIENT_ID": "dash", "SECKILL_AUTH_REDIRECT_URL": "https://s.example/callback", "SECKILL_AUTH_OPERATOR_CLAIM": "groups:ops"}, "SECKILL_AUTH_REDIRECT_URL must be the dashboard's callback"},
		{"sign-in without operator claim", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_ISSUER": "https://idp.example", "SECKILL_AUTH_AUDIENCE": "api",
			"SECKILL_AUTH_CLIENT_ID": "dash", "SECKILL_AUTH_REDIRECT_URL": "https://s.example/admin/login/sso/callback"}, "SECKILL_AUTH_OPERATOR_CLAIM must be claim:value"},
		{"leeway", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_LEEWAY": "1h"}, "SECKILL_AUTH_LEEWAY must be between 0 and 5m"},
		{"refetch", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_MIN_REFETCH": "10ms"}, "SECKILL_AUTH_MIN_REFETCH must be between 1s and 5m"},
		{"key max age", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_KEY_MAX_AGE": "1s"}, "SECKILL_AUTH_KEY_MAX_AGE must be between 1m and 24h"},
		{"cache size", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_CACHE_SIZE": "0"}, "SECKILL_AUTH_CACHE_SIZE must be an integer from 1"},
		{"subject cache size", map[string]string{"SECKILL_ENV": "dev", "SECKILL_AUTH_SUBJECT_CACHE_SIZE": "many"}, "SECKILL_AUTH_SUBJECT_CACHE_SIZE must be an integer from 1"},
		{"public pprof", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PPROF_ADDR": ":6060"}, "SECKILL_PPROF_ADDR must be a loopback"},
		{"metrics address", map[string]string{"SECKILL_ENV": "dev", "SECKILL_METRICS_ADDR": "9090"}, "SECKILL_METRICS_ADDR must be a host:port"},
		{"metrics on the API's address", map[string]string{"SECKILL_ENV": "dev", "SECKILL_METRICS_ADDR": ":8080"}, "other than SECKILL_HTTP_ADDR"},
		{"pay window too short", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAY_WINDOW": "500ms"}, "SECKILL_PAY_WINDOW must be whole seconds"},
		{"pay window too long", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAY_WINDOW": "25h"}, "SECKILL_PAY_WINDOW must be whole seconds"},
		{"bad currency", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAYMENT_CURRENCY": "yuan"}, "SECKILL_PAYMENT_CURRENCY must be three capital letters"},
		{"short webhook secret", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAYMENT_WEBHOOK_SECRET": "short"}, "at least 16"},
		{"unknown payment provider", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAYMENT_PROVIDER": "paypal"}, "SECKILL_PAYMENT_PROVIDER must be builtin or stripe"},
		{"stripe without a key", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAYMENT_PROVIDER": "stripe", "STRIPE_WEBHOOK_SECRET": "whsec_x"}, "STRIPE_API_KEY is required"},
		{"stripe publishable key", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAYMENT_PROVIDER": "stripe", "STRIPE_API_KEY": "pk_test_x", "STRIPE_WEBHOOK_SECRET": "whsec_x"}, "STRIPE_API_KEY must be a secret key"},
		{"stripe without a webhook secret", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAYMENT_PROVIDER": "stripe", "STRIPE_API_KEY": "sk_test_x"}, "STRIPE_WEBHOOK_SECRET is required"},
		{"stripe webhook secret shape", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAYMENT_PROVIDER": "stripe", "STRIPE_API_KEY": "sk_test_x", "STRIPE_WEBHOOK_SECRET": "secret"}, "STRIPE_WEBHOOK_SECRET must be the endpoint's signing secret"},
		{"stripe api base", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAYMENT_PROVIDER": "stripe", "STRIPE_API_KEY": "sk_test_x", "STRIPE_WEBHOOK_SECRET": "whsec_x", "STRIPE_API_BASE": "localhost:12111"}, "STRIPE_API_BASE must be an http"},
		{"stripe and the built-in refund call", map[string]string{"SECKILL_ENV": "dev", "SECKILL_PAYMENT_PROVIDER": "stripe", "STRIPE_API_KEY": "sk_test_x", "STRIPE_WEBHOOK_SECRET": "whsec_x", "SECKILL_PAYMENT_REFUND_URL": "http://localhost:8090/refunds"}, "SECKILL_PAYMENT_REFUND_URL is the built-in provider's"},
		{"stripe key without stripe", map[string]string{"SECKILL_ENV": "dev", "STRIPE_API_KEY": "sk_test_x"}, "STRIPE_API_KEY is for Stripe"},
		{"admin pair", map[string]string{"SECKILL_ENV": "dev", "SECKILL_ADMIN_USER": "root"}, "go together"},
		{"bad log level", map[string]string{"SECKILL_ENV": "dev", "SECKILL_LOG_LEVEL": "loud"}, "SECKILL_LOG_LEVEL"},
		{"otlp endpoint not a url", map[string]string{"SECKILL_ENV": "dev", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT must be an http"},
		{"otlp grpc", map[string]string{"SECKILL_ENV": "dev", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(env(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load() error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	_, err := Load(env(map[string]string{"SECKILL_DB_MAX_CONNS": "x", "SECKILL_RECONCILE_AFTER": "y"}))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"SECKILL_JWT_SECRET", "SECKILL_DB_MAX_CONNS", "SECKILL_RECONCILE_AFTER"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
}

func TestLoadProd(t *testing.T) {
	c, err := Load(env(map[string]string{
		"SECKILL_JWT_SECRET":      strings.Repeat("s", 32),
		"SECKILL_PERSIST_WRITERS": "4",
		"SECKILL_ALLOWED_ORIGINS": "https://shop.example, https://admin.example",

		"SECKILL_PAYMENT_WEBHOOK_SECRET": "a-webhook-secret-of-the-provider",
		"SECKILL_METRICS_ADDR":           "10.0.0.5:9090",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Dev() || c.LogFormat != "json" || c.Playground || c.PersistWriters != 4 || len(c.Warnings) != 0 {
		t.Fatalf("unexpected prod config: %+v", c)
	}
	if len(c.AllowedOrigins) != 2 || c.AllowedOrigins[1] != "https://admin.example" {
		t.Fatalf("origins = %q", c.AllowedOrigins)
	}
	if c.AddressRate != 100 || c.AddressBurst != 300 {
		t.Fatalf("prod address limit = %v/%d, want 100/300", c.AddressRate, c.AddressBurst)
	}
}

func TestLoadTracing(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		endpoint    string
		serviceName string
	}{
		{"off by default", map[string]string{}, "", "seckill"},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "http://127.0.0.1:4318/v1/traces", "seckill"},
		{"endpoint with a path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example/base/"}, "https://otel.example/base/v1/traces", "seckill"},
		{"traces endpoint wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b:4318/v1/traces"}, "https://b:4318/v1/traces", "seckill"},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, "", "seckill"},
		{"service name", map[string]string{"OTEL_SERVICE_NAME": "shop-seckill"}, "", "shop-seckill"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := loadDev(t, tt.env)
			if c.OTLPEndpoint != tt.endpoint || c.OTelServiceName != tt.serviceName {
				t.Fatalf("endpoint %q service %q, want %q %q", c.OTLPEndpoint, c.OTelServiceName, tt.endpoint, tt.serviceName)
			}
		})
	}
}

// TestLoadUnparsableValues sets each variable Config names to a value of
// the wrong type: the error names the variable and says what it expects,
// in our words rather than the library's.
func TestLoadUnparsableValues(t *testing.T) {
	want := map[reflect.Type]string{
		reflect.TypeFor[int]():            "must be an integer from",
		reflect.TypeFor[float64]():        "must be a number",
		reflect.TypeFor[bool]():           "must be true or false",
		reflect.TypeFor[time.Duration]():  "must be a duration such as 5s",
		reflect.TypeFor[slog.Level]():     `level string "not-a-value"`,
		reflect.TypeFor[[]netip.Prefix](): `"not-a-value" is not an IP address`,
	}
	typ := reflect.TypeFor[Config]()
	tested := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if key == "" || f.Type == reflect.TypeFor[string]() || f.Type == reflect.TypeFor[[]string]() {
			continue
		}
		w, ok := want[f.Type]
		if !ok {
			t.Errorf("%s: no test for a bad value of type %s", key, f.Type)
			continue
		}
		tested++
		t.Run(key, func(t *testing.T) {
			m := map[string]string{"SECKILL_ENV": "dev", key: "not-a-value"}
			if key == "SECKILL_REDIS_TLS" { // not for a single node
				m["SECKILL_REDIS_CLUSTER_ADDRS"] = "a:7000"
			}
			_, err := Load(env(m))
			if err == nil {
				t.Fatal("want an error")
			}
			msg := err.Error()
			if lines := strings.Count(msg, key); lines != 1 {
				t.Errorf("want one message naming %s, got %d:\n%s", key, lines, msg)
			}
			if !strings.Contains(msg, key+" "+w) && !strings.Contains(msg, key+": ") {
				t.Errorf("error does not say what %s expects (%q):\n%s", key, w, msg)
			}
			if !strings.Contains(msg, w) || strings.Contains(msg, "parse error") || strings.Contains(msg, "env:") {
				t.Errorf("want %q and none of the library's words:\n%s", w, msg)
			}
		})
	}
	if tested < 20 {
		t.Fatalf("only %d variables tested: are Config's tags read?", tested)
	}
}

func TestLoadMessages(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SECKILL_DB_MAX_CONNS": "lots"}, `SECKILL_DB_MAX_CONNS must be an integer from 1 to 1000, not "lots"`},
		{map[string]string{"SECKILL_BATCH_SIZE": "10001"}, `SECKILL_BATCH_SIZE must be an integer from 1 to 10000, not "10001"`},
		{map[string]string{"SECKILL_PAY_WINDOW": "25h"}, "SECKILL_PAY_WINDOW must be whole seconds between 1s and 24h, not 25h0m0s"},
		{map[string]string{"SECKILL_RECONCILE_AFTER": "soon"}, `SECKILL_RECONCILE_AFTER must be a duration such as 5s or 250ms, not "soon"`},
		{map[string]string{"SECKILL_USER_RATE": "fast"}, `SECKILL_USER_RATE must be a number, not "fast"`},
		{map[string]string{"SECKILL_TRUSTED_PROXIES": "10.0.0.0/8, proxy"}, `SECKILL_TRUSTED_PROXIES: "proxy" is not an IP address or CIDR prefix`},
	}
	for _, tt := range tests {
		tt.env["SECKILL_ENV"] = "dev"
		_, err := Load(env(tt.env))
		if err == nil || !strings.Contains(err.Error(), "\n  "+tt.want) {
			t.Errorf("Load(%v) error = %v, want the line %q", tt.env, err, tt.want)
		}
	}
}

// TestLoadBadValueReportedOnce: a value that does not parse is one
// problem, not also a failed range check on what was left in its field.
func TestLoadBadValueReportedOnce(t *testing.T) {
	_, err := Load(env(map[string]string{"SECKILL_ENV": "dev", "SECKILL_RECONCILE_INTERVAL": "x", "SECKILL_PAY_WINDOW": "y", "SECKILL_REDIS_TIMEOUT": "z"}))
	if err == nil {
		t.Fatal("want an error")
	}
	if got := strings.Count(err.Error(), "\n"); got != 3 {
		t.Fatalf("want a heading and three problems, got:\n%v", err)
	}
}

func TestLoadDefaultsFromTheDomain(t *testing.T) {
	c := loadDev(t, map[string]string{})
	got := []any{c.PayWindow, c.PaymentCurrency, c.RefundConfirmWait, c.RefundMaxSends}
	want := []any{seckill.DefaultPayWindow, seckill.DefaultCurrency, seckill.DefaultRefundConfirmWait, seckill.DefaultRefundMaxSends}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("defaults (-want +got):\n%s", diff)
	}
	c = loadDev(t, map[string]string{"SECKILL_PAY_WINDOW": seckill.MaxPayWindow.String(), "SECKILL_PAYMENT_CURRENCY": "JPY"})
	if c.PayWindow != seckill.MaxPayWindow || c.PaymentCurrency != "JPY" {
		t.Fatalf("pay window %v, currency %s", c.PayWindow, c.PaymentCurrency)
	}
}

// TestLoadReadsOnlyGetenv: the variables come from the getenv given, not
// from the process's environment; nil means the process's environment.
func TestLoadReadsOnlyGetenv(t *testing.T) {
	t.Setenv("SECKILL_ENV", "dev")
	t.Setenv("SECKILL_HTTP_ADDR", ":9999")
	t.Setenv("SECKILL_REDIS_CLUSTER_ADDRS", "a:7000")
	t.Setenv("SECKILL_REDIS_URL", "") // make test's own, or the shell's
	t.Setenv("SECKILL_REDIS_SENTINEL_ADDRS", "")
	c := loadDev(t, map[string]string{})
	if c.HTTPAddr != ":8080" || c.RedisTopology() != RedisSingle {
		t.Fatalf("read the process's environment: %s, %s", c.HTTPAddr, c.RedisTopology())
	}
	c, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":9999" || c.RedisTopology() != RedisCluster {
		t.Fatalf("Load(nil) did not read the process's environment: %s, %s", c.HTTPAddr, c.RedisTopology())
	}
}

func TestLoadStripe(t *testing.T) {
	c := loadDev(t, map[string]string{"SECKILL_PAYMENT_PROVIDER": "stripe", "STRIPE_API_KEY": "sk_test_123",
		"STRIPE_WEBHOOK_SECRET": "whsec_abc", "STRIPE_API_BASE": "http://127.0.0.1:12111"})
	got := []string{c.PaymentProvider, c.StripeAPIKey, c.StripeWebhookSecret, c.StripeAPIBase}
	want := []string{PaymentStripe, "sk_test_123", "whsec_abc", "http://127.0.0.1:12111"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stripe settings (-want +got):\n%s", diff)
	}
	if c := loadDev(t, map[string]string{}); c.PaymentProvider != PaymentBuiltin {
		t.Errorf("default provider = %q, want %q", c.PaymentProvider, PaymentBuiltin)
	}
}

// TestLoadSaleFrameAncestors: who may frame the sale page, 'self' by
// default; a list of origins and keywords, normalised; anything else
// (paths, wildcards, bare schemes, another directive) refused.
func TestLoadSaleFrameAncestors(t *testing.T) {
	if c := loadDev(t, map[string]string{}); c.SaleFrameAncestors != "'self'" {
		t.Errorf("default %q, want 'self'", c.SaleFrameAncestors)
	}
	for v, want := range map[string]string{
		"'none'":               "'none'",
		"'SELF'":               "'self'",
		"https://shop.example": "https://shop.example",
		"  'self'   https://Shop.Example:8443  http://*.app.example ":   "'self' https://shop.example:8443 http://*.app.example",
		"http://127.0.0.1:3000 http://[::1]:3000 https://[2001:db8::1]": "http://127.0.0.1:3000 http://[::1]:3000 https://[2001:db8::1]",
	} {
		c := loadDev(t, map[string]string{"SECKILL_SALE_FRAME_ANCESTORS": v})
		if c.SaleFrameAncestors != want {
			t.Errorf("%q: got %q, want %q", v, c.SaleFrameAncestors, want)
		}
	}
	for _, v := range []string{
		"*", "https:", "https://*", "self", "'unsafe-inline'", "'none' 'self'", "https://shop.example/", "https://shop.example/path",
		"https://shop.example; script-src *", "https://shop.example,https://b.example", "ftp://shop.example", "https://shop.example:",
		"https://shop.example:0", "https://shop.example:99999", "https://user@shop.example", "https://shop.example?x", "https://-shop.example",
		"https://shop..example", "https://[::1", "https://[::1]x", "https://[127.0.0.1]", "https://::1", "https://shop.example#f",
		"https://*.", "https://a.*.example", "'self'\thttps://ok.example\x00",
	} {
		_, err := Load(env(map[string]string{"SECKILL_ENV": "dev", "SECKILL_SALE_FRAME_ANCESTORS": v}))
		if err == nil || !strings.Contains(err.Error(), "SECKILL_SALE_FRAME_ANCESTORS") {
			t.Errorf("%q: error %v, want one about SECKILL_SALE_FRAME_ANCESTORS", v, err)
		}
	}
}
