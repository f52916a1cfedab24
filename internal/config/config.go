// Package config builds the one Config from SECKILL_* environment variables
// and validates it at start. It is the only package that reads the
// environment.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	envlib "github.com/caarlos0/env/v11" // env is the tests' helper

	"seckill/internal/clientaddr"
	"seckill/internal/seckill"
)

// DevJWTSecret signs tokens in development when no secret is configured.
const DevJWTSecret = "seckill-development-secret-do-not-use-in-production"

// DevWebhookSecret signs payment webhooks in development when no secret is
// configured (seckill payments simulate uses it too).
const DevWebhookSecret = "seckill-development-webhook-secret"

// Config is every setting of seckill. Each tag names the variable a field
// is read from and its default; Load decides the defaults that depend on
// another variable or that the domain owns, and validates every field.
type Config struct {
	Env         string     `env:"SECKILL_ENV" envDefault:"prod"` // "dev" or "prod"
	HTTPAddr    string     `env:"SECKILL_HTTP_ADDR" envDefault:":8080"`
	DatabaseURL string     `env:"SECKILL_DATABASE_URL" envDefault:"postgres://postgres@127.0.0.1:5432/seckill?sslmode=disable"`
	JWTSecret   string     `env:"SECKILL_JWT_SECRET"` // required, but DevJWTSecret in dev
	JWTIssuer   string     `env:"SECKILL_JWT_ISSUER" envDefault:"seckill"`
	LogFormat   string     `env:"SECKILL_LOG_FORMAT"` // "json" or "text"; text in dev, json otherwise
	LogLevel    slog.Level `env:"SECKILL_LOG_LEVEL" envDefault:"info"`

	// Redis is exactly one topology: a single node (RedisURL), a Redis
	// Cluster (RedisClusterAddrs) or a master watched by Sentinel
	// (RedisSentinelAddrs and RedisSentinelMaster). RedisURL is empty on
	// the other two.
	RedisURL            string   `env:"SECKILL_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0"` // single node: redis:// or rediss://, with user, password and database
	RedisClusterAddrs   []string `env:"SECKILL_REDIS_CLUSTER_ADDRS"`                             // cluster: seed nodes, host:port
	RedisSentinelAddrs  []string `env:"SECKILL_REDIS_SENTINEL_ADDRS"`                            // sentinel: the sentinels, host:port
	RedisSentinelMaster string   `env:"SECKILL_REDIS_SENTINEL_MASTER"`                           // sentinel: the master's name
	// RedisUsername, RedisPassword and RedisTLS are for the cluster's
	// nodes or Sentinel's master and replicas (a single node takes them
	// from its URL); RedisSentinelPassword is the sentinels' own.
	RedisUsername         string `env:"SECKILL_REDIS_USERNAME"`
	RedisPassword         string `env:"SECKILL_REDIS_PASSWORD"`
	RedisTLS              bool   `env:"SECKILL_REDIS_TLS"`
	RedisSentinelPassword string `env:"SECKILL_REDIS_SENTINEL_PASSWORD"`

	DBMaxConns    int `env:"SECKILL_DB_MAX_CONNS" envDefault:"20"`
	RedisPoolSize int `env:"SECKILL_REDIS_POOL_SIZE"` // 0: go-redis's default
	// RedisTimeout bounds a Redis dial, read, write and pool wait: past it
	// a purchase is answered UNAVAILABLE.
	RedisTimeout time.Duration `env:"SECKILL_REDIS_TIMEOUT" envDefault:"2s"`
	// RedisMinReplicas is how many replicas must acknowledge an admission
	// (WAIT) before it is answered ACCEPTED on Redis's word; 0 sends no
	// WAIT. RedisWaitTimeout bounds that WAIT: past it the admission is
	// persisted to Postgres at once, or released.
	RedisMinReplicas int           `env:"SECKILL_REDIS_MIN_REPLICAS"` // 1 on a cluster or Sentinel, 0 on a single node
	RedisWaitTimeout time.Duration `env:"SECKILL_REDIS_WAIT_TIMEOUT" envDefault:"250ms"`

	WorkerConcurrency int `env:"SECKILL_WORKER_CONCURRENCY" envDefault:"64"`
	// QueueInterval is how long an idle worker waits between two looks at
	// the Asynq queue (Asynq sleeps from half of it to one and a half
	// times it when the queue is empty; a busy worker never waits).
	QueueInterval  time.Duration `env:"SECKILL_QUEUE_INTERVAL" envDefault:"250ms"`
	BatchSize      int           `env:"SECKILL_BATCH_SIZE" envDefault:"1000"`
	PersistWriters int           `env:"SECKILL_PERSIST_WRITERS" envDefault:"2"`
	// ExpiryWriters is how many expiry transactions a worker process runs
	// at once (each holds one Postgres connection: the share of the pool
	// an expiry storm may take), ExpiryBatch how many orders each closes,
	// ExpiryInterval how often a process looks for orders due. One writer
	// keeps pace with a storm of 200,000 (its orders come due as fast as
	// they sold) and leaves the other cores to a sale beside it; two took
	// both cores of a 2-core machine at once.
	ExpiryWriters  int           `env:"SECKILL_EXPIRY_WRITERS" envDefault:"1"`
	ExpiryBatch    int           `env:"SECKILL_EXPIRY_BATCH" envDefault:"1000"`
	ExpiryInterval time.Duration `env:"SECKILL_EXPIRY_INTERVAL" envDefault:"1s"`

	ReconcileInterval time.Duration `env:"SECKILL_RECONCILE_INTERVAL" envDefault:"5s"`
	ReconcileAfter    time.Duration `env:"SECKILL_RECONCILE_AFTER" envDefault:"30s"`

	// UserRate and UserBurst are the limit on one user's purchase attempts
	// at one campaign, shared by every instance (in Redis) and applied in
	// each process's memory in front of it.
	UserRate  float64 `env:"SECKILL_USER_RATE" envDefault:"5"`
	UserBurst int     `env:"SECKILL_USER_BURST" envDefault:"10"`
	// AddressRate and AddressBurst are the limit on the purchase attempts
	// at one campaign from one client address (an IPv6 /64), shared by
	// every instance; 0: none.
	AddressRate  float64 `env:"SECKILL_ADDRESS_RATE" envDefault:"100"` // 0 in dev unless set
	AddressBurst int     `env:"SECKILL_ADDRESS_BURST" envDefault:"300"`
	// TrustedProxies are the proxies whose X-Forwarded-For entries are
	// believed when finding a client's address; none by default.
	TrustedProxies []netip.Prefix `env:"SECKILL_TRUSTED_PROXIES"`
	// ChallengeTTL is how long a challenge stays valid; ChallengeLead how
	// long before a sale opens challenges are handed out.
	ChallengeTTL  time.Duration `env:"SECKILL_CHALLENGE_TTL" envDefault:"2m"`
	ChallengeLead time.Duration `env:"SECKILL_CHALLENGE_LEAD" envDefault:"1m"`

	// PayWindow is how long a buyer has to pay an order, unless its
	// campaign sets its own.
	PayWindow time.Duration `env:"SECKILL_PAY_WINDOW"` // seckill.DefaultPayWindow
	// PaymentProvider names the payment provider: PaymentBuiltin (our own
	// signed webhook and refund call) or PaymentStripe.
	PaymentProvider string `env:"SECKILL_PAYMENT_PROVIDER" envDefault:"builtin"`
	// StripeAPIKey (sk_… or a restricted rk_…) and StripeWebhookSecret
	// (the webhook endpoint's signing secret, whsec_…) are required with
	// PaymentStripe; StripeAPIBase points the client at another API (tests:
	// stripe-mock), empty meaning Stripe's.
	StripeAPIKey        string `env:"STRIPE_API_KEY"`
	StripeWebhookSecret string `env:"STRIPE_WEBHOOK_SECRET"`
	StripeAPIBase       string `env:"STRIPE_API_BASE"`
	// PaymentCurrency is the ISO 4217 code of every payment.
	PaymentCurrency string `env:"SECKILL_PAYMENT_CURRENCY"` // seckill.DefaultCurrency
	// PaymentWebhookSecret signs the payment provider's webhook calls;
	// empty: POST /webhooks/payments refuses every call.
	PaymentWebhookSecret string `env:"SECKILL_PAYMENT_WEBHOOK_SECRET"` // DevWebhookSecret in dev
	// PaymentRefundURL is the built-in provider's refund call (signed with
	// PaymentWebhookSecret); empty: refunds owed are not sent (they stay
	// REFUND_NEEDED, which alerts).
	PaymentRefundURL string `env:"SECKILL_PAYMENT_REFUND_URL"`
	// RefundConfirmWait is how long a refund sent waits for the provider's
	// confirmation before it is sent again; RefundMaxSends how many sends
	// it gets before it is REFUND_FAILED.
	RefundConfirmWait time.Duration `env:"SECKILL_REFUND_CONFIRM_WAIT"` // seckill.DefaultRefundConfirmWait
	RefundMaxSends    int           `env:"SECKILL_REFUND_MAX_SENDS"`    // seckill.DefaultRefundMaxSends
	// PaymentRefundTimeout bounds one refund call.
	PaymentRefundTimeout time.Duration `env:"SECKILL_PAYMENT_REFUND_TIMEOUT" envDefault:"10s"`

	// EventsWebhookURL is the platform's endpoint for order events
	// (docs/events.md), signed with EventsWebhookSecret; empty: none from
	// the environment (the dashboard may add others).
	EventsWebhookURL    string `env:"SECKILL_EVENTS_WEBHOOK_URL"`
	EventsWebhookSecret string `env:"SECKILL_EVENTS_WEBHOOK_SECRET"`
	// EventsAllowNets are the CIDRs (comma-separated) an endpoint may
	// reach in production although they are internal (loopback, private,
	// link-local); see EventsPolicy.
	EventsAllowNets string `env:"SECKILL_EVENTS_ALLOW_NETS"`
	// EventsBatch is how many events an endpoint takes a round,
	// EventsConcurrency how many requests are in flight per endpoint,
	// EventsTimeout bounds one request, EventsMaxAttempts attempts before
	// an event is dead, EventsMaxBackoff the longest wait between two
	// attempts of one event, EventsProbeBackoff between two probes of an
	// endpoint that answers nothing well, EventsInterval how often an idle
	// worker looks for events, EventsRetention how long delivered events
	// are kept (for redelivery of a range of them; 0: deleted once
	// delivered, the cheapest, and the outbox holds only what is not
	// delivered yet).
	EventsBatch        int           `env:"SECKILL_EVENTS_BATCH" envDefault:"500"`
	EventsConcurrency  int           `env:"SECKILL_EVENTS_CONCURRENCY" envDefault:"32"`
	EventsTimeout      time.Duration `env:"SECKILL_EVENTS_TIMEOUT" envDefault:"5s"`
	EventsMaxAttempts  int           `env:"SECKILL_EVENTS_MAX_ATTEMPTS" envDefault:"25"`
	EventsMaxBackoff   time.Duration `env:"SECKILL_EVENTS_MAX_BACKOFF" envDefault:"10m"`
	EventsProbeBackoff time.Duration `env:"SECKILL_EVENTS_PROBE_BACKOFF" envDefault:"30s"`
	EventsInterval     time.Duration `env:"SECKILL_EVENTS_INTERVAL" envDefault:"200ms"`
	EventsRetention    time.Duration `env:"SECKILL_EVENTS_RETENTION" envDefault:"0s"`

	MaxInFlight     int           `env:"SECKILL_MAX_IN_FLIGHT" envDefault:"10000"`
	AllowedOrigins  []string      `env:"SECKILL_ALLOWED_ORIGINS"`
	Playground      bool          `env:"SECKILL_PLAYGROUND"` // true in dev
	ShutdownTimeout time.Duration `env:"SECKILL_SHUTDOWN_TIMEOUT" envDefault:"20s"`
	// SaleFrameAncestors is who may frame the sale page (its
	// Content-Security-Policy frame-ancestors): 'self', 'none', or origins
	// (and 'self') separated by spaces, such as "'self' https://shop.example".
	SaleFrameAncestors string `env:"SECKILL_SALE_FRAME_ANCESTORS" envDefault:"'self'"`

	// An identity provider's tokens (OIDC) are accepted when AuthIssuer or
	// AuthJWKSURL is set: with AuthIssuer alone its discovery document
	// gives the keys' URL; with AuthJWKSURL, AuthIssuer (if set) is only
	// compared with each token's iss. AuthAudience must be among a
	// token's aud; AuthAdminClaim ("claim:value", e.g.
	// roles:seckill-admin) makes an admin.
	AuthIssuer     string `env:"SECKILL_AUTH_ISSUER"`
	AuthJWKSURL    string `env:"SECKILL_AUTH_JWKS_URL"`
	AuthAudience   string `env:"SECKILL_AUTH_AUDIENCE"`
	AuthAdminClaim string `env:"SECKILL_AUTH_ADMIN_CLAIM"`
	// AuthLeeway is the clock skew allowed on exp, nbf and iat;
	// AuthMinRefetch the least time between two fetches of the key set
	// (an unknown kid asks for one); AuthKeyMaxAge how long fetched keys,
	// and the tokens verified with them, are trusted.
	AuthLeeway     time.Duration `env:"SECKILL_AUTH_LEEWAY" envDefault:"30s"`
	AuthMinRefetch time.Duration `env:"SECKILL_AUTH_MIN_REFETCH" envDefault:"5s"`
	AuthKeyMaxAge  time.Duration `env:"SECKILL_AUTH_KEY_MAX_AGE" envDefault:"10m"`
	// AuthCacheSize bounds the verified provider tokens each process
	// keeps (one signature check per token per process);
	// AuthSubjectCacheSize the subjects whose user ids it keeps.
	AuthCacheSize        int `env:"SECKILL_AUTH_CACHE_SIZE" envDefault:"100000"`
	AuthSubjectCacheSize int `env:"SECKILL_AUTH_SUBJECT_CACHE_SIZE" envDefault:"200000"`
	// AuthHS256 accepts the HS256 tokens signed with JWTSecret (seckill
	// token, platforms that mint tokens for us); false refuses them, and
	// needs a provider.
	AuthHS256 bool `env:"SECKILL_AUTH_HS256" envDefault:"true"`
	// AuthClientID, when set, lets operators sign in to the dashboard
	// through the provider (SECKILL_AUTH_ISSUER: discovery gives the
	// endpoints): the authorization code flow with PKCE, back at
	// AuthRedirectURL (https://<host>/admin/login/sso/callback, as
	// registered at the provider). AuthOperatorClaim ("claim:value";
	// default AuthAdminClaim) decides who is an operator.
	AuthClientID      string `env:"SECKILL_AUTH_CLIENT_ID"`
	AuthClientSecret  string `env:"SECKILL_AUTH_CLIENT_SECRET"`
	AuthRedirectURL   string `env:"SECKILL_AUTH_REDIRECT_URL"`
	AuthOperatorClaim string `env:"SECKILL_AUTH_OPERATOR_CLAIM"`

	AdminUser     string `env:"SECKILL_ADMIN_USER"`
	AdminPassword string `env:"SECKILL_ADMIN_PASSWORD"`

	PprofAddr string `env:"SECKILL_PPROF_ADDR"` // empty: no profiling endpoint
	// MetricsAddr, when set, serves /metrics on its own listener (and not
	// on HTTPAddr), so that it need not face the internet.
	MetricsAddr string `env:"SECKILL_METRICS_ADDR"`

	// Tracing is on when an OTLP endpoint is configured: traces go there
	// over OTLP/HTTP. The exporter reads its other OTEL_EXPORTER_OTLP_*
	// settings (headers, timeout, ...) itself, and the SDK reads
	// OTEL_TRACES_SAMPLER and OTEL_RESOURCE_ATTRIBUTES.
	OTLPEndpoint    string // the full traces URL; empty: tracing off (a no-op tracer)
	OTelServiceName string `env:"OTEL_SERVICE_NAME" envDefault:"seckill"`

	// Warnings are non-fatal remarks to log once at start.
	Warnings []string
}

// Dev reports whether this is a development setup.
func (c *Config) Dev() bool { return c.Env == "dev" }

// Load reads the environment through getenv (os.Getenv when nil) and returns
// the validated Config, or an error naming every bad variable.
func Load(getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	// The domain owns these defaults: Config's tags name none for them.
	c := &Config{
		PayWindow:         seckill.DefaultPayWindow,
		PaymentCurrency:   seckill.DefaultCurrency,
		RefundConfirmWait: seckill.DefaultRefundConfirmWait,
		RefundMaxSends:    seckill.DefaultRefundMaxSends,
	}
	l, err := parse(c, getenv)
	if err != nil {
		return nil, err
	}

	// Defaults that depend on another variable.
	if c.Dev() {
		c.LogFormat = cmp.Or(c.LogFormat, "text")
	}
	c.LogFormat = cmp.Or(c.LogFormat, "json")
	if !l.set("SECKILL_PLAYGROUND") {
		c.Playground = c.Dev()
	}
	// In development every client (the browser, seckill demo, the load
	// test) is this machine's loopback address: one shared address limit
	// would refuse the seed's experiment. Production keeps the default.
	if c.Dev() && !l.set("SECKILL_ADDRESS_RATE") {
		c.AddressRate = 0
	}
	l.redis(c)
	// A cluster or Sentinel has replicas to fail over to: an admission is
	// ACCEPTED once one of them holds it. A single node has none to wait
	// for.
	if c.RedisTopology() != RedisSingle && !l.set("SECKILL_REDIS_MIN_REPLICAS") {
		c.RedisMinReplicas = 1
	}
	c.OTLPEndpoint = l.otel()

	// Integers are bounded: a value outside is refused, never clamped.
	l.intIn("SECKILL_DB_MAX_CONNS", c.DBMaxConns, 1, 1000)
	l.intIn("SECKILL_REDIS_POOL_SIZE", c.RedisPoolSize, 0, 10000)
	l.intIn("SECKILL_REDIS_MIN_REPLICAS", c.RedisMinReplicas, 0, 16) // one survives the loss of a master; more than a handful is a typo
	l.intIn("SECKILL_WORKER_CONCURRENCY", c.WorkerConcurrency, 1, 10000)
	l.intIn("SECKILL_BATCH_SIZE", c.BatchSize, 1, 10000)
	l.intIn("SECKILL_PERSIST_WRITERS", c.PersistWriters, 1, 64)
	l.intIn("SECKILL_EXPIRY_WRITERS", c.ExpiryWriters, 1, 64)
	l.intIn("SECKILL_EXPIRY_BATCH", c.ExpiryBatch, 1, 10000)
	// Compared only when both are good, so that one mistake is one message.
	poolKnown := !l.failed["SECKILL_DB_MAX_CONNS"] && c.DBMaxConns >= 1 && c.DBMaxConns <= 1000
	l.check("SECKILL_EXPIRY_WRITERS", !poolKnown || c.ExpiryWriters < c.DBMaxConns,
		"must be less than SECKILL_DB_MAX_CONNS (%d): persistence needs connections during an expiry storm, not %d", c.DBMaxConns, c.ExpiryWriters)
	l.check("SECKILL_QUEUE_INTERVAL", c.QueueInterval >= 10*time.Millisecond && c.QueueInterval <= 10*time.Second,
		"must be between 10ms and 10s, not %v", c.QueueInterval)
	l.check("SECKILL_EXPIRY_INTERVAL", c.ExpiryInterval >= 10*time.Millisecond && c.ExpiryInterval <= time.Minute,
		"must be between 10ms and 1m, not %v", c.ExpiryInterval)
	l.intIn("SECKILL_REFUND_MAX_SENDS", c.RefundMaxSends, 1, 100)
	l.intIn("SECKILL_USER_BURST", c.UserBurst, 1, 1000000)
	l.intIn("SECKILL_ADDRESS_BURST", c.AddressBurst, 1, 1000000)
	l.intIn("SECKILL_MAX_IN_FLIGHT", c.MaxInFlight, 1, 1000000)

	l.check("SECKILL_ENV", c.Env == "dev" || c.Env == "prod", "must be dev or prod, not %q", c.Env)
	l.check("SECKILL_LOG_FORMAT", c.LogFormat == "json" || c.LogFormat == "text", "must be json or text, not %q", c.LogFormat)
	l.check("SECKILL_DATABASE_URL", hasScheme(c.DatabaseURL, "postgres", "postgresql"), "must be a postgres:// URL")
	switch {
	case c.JWTSecret == "" && c.Dev():
		c.JWTSecret = DevJWTSecret
		c.Warnings = append(c.Warnings, "SECKILL_JWT_SECRET is not set: using the development secret; never do this in production")
	case c.JWTSecret == "":
		l.errf("SECKILL_JWT_SECRET is required (at least 32 characters) unless SECKILL_ENV=dev")
	case len(c.JWTSecret) < 32:
		l.errf("SECKILL_JWT_SECRET must be at least 32 characters")
	}

	l.check("SECKILL_REDIS_TIMEOUT", c.RedisTimeout > 0, "must be positive: without a bound a purchase may hang while Redis is away")
	l.check("SECKILL_REDIS_WAIT_TIMEOUT", c.RedisWaitTimeout > 0 && c.RedisWaitTimeout <= 5*time.Second,
		"must be between 1ms and 5s: a buyer waits for it, and a fallback write to Postgres after it")
	if (c.ReconcileInterval <= 0 && !l.failed["SECKILL_RECONCILE_INTERVAL"]) || (c.ReconcileAfter <= 0 && !l.failed["SECKILL_RECONCILE_AFTER"]) {
		l.errf("SECKILL_RECONCILE_INTERVAL and SECKILL_RECONCILE_AFTER must be positive")
	}

	l.check("SECKILL_USER_RATE", c.UserRate >= 0, "must be 0 (no limit) or more")
	l.check("SECKILL_ADDRESS_RATE", c.AddressRate >= 0, "must be 0 (no limit) or more")
	l.check("SECKILL_CHALLENGE_TTL", c.ChallengeTTL >= time.Second && c.ChallengeTTL <= time.Hour, "must be between 1s and 1h")
	l.check("SECKILL_CHALLENGE_LEAD", c.ChallengeLead >= 0 && c.ChallengeLead <= 24*time.Hour, "must be between 0 and 24h")

	l.check("SECKILL_PAY_WINDOW", seckill.ValidPayWindow(c.PayWindow),
		"must be whole seconds between %s and %s, not %v", shortDuration(seckill.MinPayWindow), shortDuration(seckill.MaxPayWindow), c.PayWindow)
	l.check("SECKILL_PAYMENT_CURRENCY", seckill.ValidCurrency(c.PaymentCurrency),
		"must be three capital letters (ISO 4217), not %q", c.PaymentCurrency)
	switch {
	case c.PaymentProvider == PaymentStripe:
		// Only Stripe's signed events confirm payments: the built-in webhook
		// is not served, and paymentProvider refuses its secret.
	case c.PaymentWebhookSecret == "" && c.Dev():
		c.PaymentWebhookSecret = DevWebhookSecret
	case c.PaymentWebhookSecret == "":
		c.Warnings = append(c.Warnings, "SECKILL_PAYMENT_WEBHOOK_SECRET is not set: POST /webhooks/payments refuses every call, so no order can be paid")
	case len(c.PaymentWebhookSecret) < 16:
		l.errf("SECKILL_PAYMENT_WEBHOOK_SECRET must be at least 16 characters")
	}
	l.paymentProvider(c)
	l.check("SECKILL_PAYMENT_REFUND_URL", c.PaymentRefundURL == "" || isHTTPURL(c.PaymentRefundURL),
		"must be an http or https URL, not %q", c.PaymentRefundURL)
	l.check("SECKILL_PAYMENT_REFUND_TIMEOUT", c.PaymentRefundTimeout >= 100*time.Millisecond && c.PaymentRefundTimeout <= time.Minute,
		"must be between 100ms and 1m, not %v", c.PaymentRefundTimeout)
	l.check("SECKILL_REFUND_CONFIRM_WAIT", c.RefundConfirmWait >= time.Second && c.RefundConfirmWait <= 24*time.Hour,
		"must be between 1s and 24h, not %v", c.RefundConfirmWait)
	l.events(c)
	if c.EventsWebhookURL != "" && len(c.EventsWebhookSecret) < seckill.MinSecretLen {
		l.errf("SECKILL_EVENTS_WEBHOOK_SECRET must be at least %d characters when SECKILL_EVENTS_WEBHOOK_URL is set", seckill.MinSecretLen)
	}
	l.intIn("SECKILL_EVENTS_BATCH", c.EventsBatch, 1, 10000)
	l.intIn("SECKILL_EVENTS_CONCURRENCY", c.EventsConcurrency, 1, 1024)
	l.intIn("SECKILL_EVENTS_MAX_ATTEMPTS", c.EventsMaxAttempts, 1, 1000)
	l.check("SECKILL_EVENTS_TIMEOUT", c.EventsTimeout >= 10*time.Millisecond && c.EventsTimeout <= time.Minute,
		"must be between 10ms and 1m, not %v", c.EventsTimeout)
	l.check("SECKILL_EVENTS_MAX_BACKOFF", c.EventsMaxBackoff >= time.Second && c.EventsMaxBackoff <= 24*time.Hour,
		"must be between 1s and 24h, not %v", c.EventsMaxBackoff)
	l.check("SECKILL_EVENTS_PROBE_BACKOFF", c.EventsProbeBackoff >= time.Second && c.EventsProbeBackoff <= time.Hour,
		"must be between 1s and 1h, not %v", c.EventsProbeBackoff)
	l.check("SECKILL_EVENTS_INTERVAL", c.EventsInterval >= 10*time.Millisecond && c.EventsInterval <= time.Minute,
		"must be between 10ms and 1m, not %v", c.EventsInterval)
	l.check("SECKILL_EVENTS_RETENTION", c.EventsRetention >= 0 && c.EventsRetention <= 90*24*time.Hour,
		"must be between 0 (delete once delivered) and 2160h, not %v", c.EventsRetention)

	if fa, err := frameAncestors(c.SaleFrameAncestors); err != nil {
		l.errf("SECKILL_SALE_FRAME_ANCESTORS must be 'self', 'none' or origins separated by spaces, such as 'self' https://shop.example, not %q: %v",
			c.SaleFrameAncestors, err)
	} else {
		c.SaleFrameAncestors = fa
	}
	l.check("SECKILL_PPROF_ADDR", c.PprofAddr == "" || isLoopback(c.PprofAddr),
		"must be a loopback address such as 127.0.0.1:6060, not %q", c.PprofAddr)
	_, _, err = net.SplitHostPort(c.MetricsAddr)
	l.check("SECKILL_METRICS_ADDR", c.MetricsAddr == "" || (err == nil && c.MetricsAddr != c.HTTPAddr),
		"must be a host:port other than SECKILL_HTTP_ADDR, such as 10.0.0.5:9090 or 127.0.0.1:9090, not %q", c.MetricsAddr)
	l.auth(c)
	if (c.AdminUser == "") != (c.AdminPassword == "") {
		l.errf("SECKILL_ADMIN_USER and SECKILL_ADMIN_PASSWORD go together")
	}
	l.production(c)
	if err := l.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// AuthProvider reports whether an identity provider's tokens are accepted.
func (c *Config) AuthProvider() bool { return c.AuthIssuer != "" || c.AuthJWKSURL != "" }

// auth checks the identity provider's settings.
func (l *loader) auth(c *Config) {
	l.check("SECKILL_AUTH_ISSUER", c.AuthIssuer == "" || isHTTPURL(c.AuthIssuer),
		"must be the provider's issuer, an https:// URL such as https://idp.example.com/realms/shop, not %q", c.AuthIssuer)
	l.check("SECKILL_AUTH_JWKS_URL", c.AuthJWKSURL == "" || isHTTPURL(c.AuthJWKSURL),
		"must be an https:// URL of a JSON Web Key Set, not %q", c.AuthJWKSURL)
	l.check("SECKILL_AUTH_LEEWAY", c.AuthLeeway >= 0 && c.AuthLeeway <= 5*time.Minute, "must be between 0 and 5m, not %v", c.AuthLeeway)
	l.check("SECKILL_AUTH_MIN_REFETCH", c.AuthMinRefetch >= time.Second && c.AuthMinRefetch <= 5*time.Minute,
		"must be between 1s and 5m, not %v: it bounds how often anyone can make seckill fetch the key set", c.AuthMinRefetch)
	l.check("SECKILL_AUTH_KEY_MAX_AGE", c.AuthKeyMaxAge >= time.Minute && c.AuthKeyMaxAge <= 24*time.Hour,
		"must be between 1m and 24h, not %v: a key the provider withdraws is trusted this long", c.AuthKeyMaxAge)
	l.intIn("SECKILL_AUTH_CACHE_SIZE", c.AuthCacheSize, 1, 10_000_000)
	l.intIn("SECKILL_AUTH_SUBJECT_CACHE_SIZE", c.AuthSubjectCacheSize, 1, 10_000_000)
	l.operatorSignIn(c)
	if !c.AuthProvider() {
		for _, key := range []string{"SECKILL_AUTH_AUDIENCE", "SECKILL_AUTH_ADMIN_CLAIM"} {
			if l.set(key) {
				l.errf("%s is for an identity provider: set SECKILL_AUTH_ISSUER or SECKILL_AUTH_JWKS_URL too", key)
			}
		}
		l.check("SECKILL_AUTH_HS256", c.AuthHS256, "can be false only with an identity provider (SECKILL_AUTH_ISSUER or SECKILL_AUTH_JWKS_URL): no token would be accepted")
		return
	}
	l.check("SECKILL_AUTH_AUDIENCE", c.AuthAudience != "",
		"is required with an identity provider: the audience its access tokens carry for this API (aud), or the client id for ID tokens")
	claim, value, ok := strings.Cut(c.AuthAdminClaim, ":")
	l.check("SECKILL_AUTH_ADMIN_CLAIM", c.AuthAdminClaim == "" || (ok && claim != "" && value != ""),
		"must be claim:value, such as roles:seckill-admin or realm_access.roles:seckill-admin, not %q", c.AuthAdminClaim)
	if c.AuthAdminClaim == "" {
		c.Warnings = append(c.Warnings, "SECKILL_AUTH_ADMIN_CLAIM is not set: no identity provider token is an admin's")
	}
}

// OperatorSignInPath is the dashboard's callback path, which
// SECKILL_AUTH_REDIRECT_URL must end with.
const OperatorSignInPath = "/admin/login/sso/callback"

// Payment providers, as SECKILL_PAYMENT_PROVIDER names them.
const (
	PaymentBuiltin = "builtin"
	PaymentStripe  = "stripe"
)

// paymentProvider checks the payment provider's settings: each provider's
// variables only with that provider, Stripe's keys in their shapes.
func (l *loader) paymentProvider(c *Config) {
	switch c.PaymentProvider {
	case PaymentBuiltin:
		for _, key := range []string{"STRIPE_API_KEY", "STRIPE_WEBHOOK_SECRET", "STRIPE_API_BASE"} {
			if l.set(key) {
				l.errf("%s is for Stripe: set SECKILL_PAYMENT_PROVIDER=stripe too", key)
			}
		}
	case PaymentStripe:
		l.check("SECKILL_PAYMENT_REFUND_URL", c.PaymentRefundURL == "",
			"is the built-in provider's refund call: with SECKILL_PAYMENT_PROVIDER=stripe refunds go through Stripe's API; unset it")
		l.check("SECKILL_PAYMENT_WEBHOOK_SECRET", c.PaymentWebhookSecret == "",
			"is the built-in provider's webhook secret: with SECKILL_PAYMENT_PROVIDER=stripe only Stripe's signed events (STRIPE_WEBHOOK_SECRET) mark an order paid, and POST /webhooks/payments is not served; unset it")
		switch {
		case c.StripeAPIKey == "":
			l.errf("STRIPE_API_KEY is required with SECKILL_PAYMENT_PROVIDER=stripe (a secret key, sk_…, or a restricted one, rk_…)")
		case !strings.HasPrefix(c.StripeAPIKey, "sk_") && !strings.HasPrefix(c.StripeAPIKey, "rk_"):
			l.errf("STRIPE_API_KEY must be a secret key (sk_…) or a restricted key (rk_…), not a publishable one")
		}
		switch {
		case c.StripeWebhookSecret == "":
			l.errf("STRIPE_WEBHOOK_SECRET is required with SECKILL_PAYMENT_PROVIDER=stripe: the signing secret of the endpoint for POST /webhooks/stripe (whsec_…)")
		case !strings.HasPrefix(c.StripeWebhookSecret, "whsec_"):
			l.errf("STRIPE_WEBHOOK_SECRET must be the endpoint's signing secret, whsec_…")
		}
		l.check("STRIPE_API_BASE", c.StripeAPIBase == "" || isHTTPURL(c.StripeAPIBase),
			"must be an http or https URL (such as stripe-mock's), not %q", c.StripeAPIBase)
	default:
		l.errf("SECKILL_PAYMENT_PROVIDER must be %s or %s, not %q", PaymentBuiltin, PaymentStripe, c.PaymentProvider)
	}
}

// operatorSignIn checks the dashboard's sign-in through the provider.
func (l *loader) operatorSignIn(c *Config) {
	if c.AuthClientID == "" {
		for _, key := range []string{"SECKILL_AUTH_CLIENT_SECRET", "SECKILL_AUTH_REDIRECT_URL", "SECKILL_AUTH_OPERATOR_CLAIM"} {
			if l.set(key) {
				l.errf("%s is for the dashboard's sign-in through the identity provider: set SECKILL_AUTH_CLIENT_ID too", key)
			}
		}
		return
	}
	l.check("SECKILL_AUTH_CLIENT_ID", c.AuthIssuer != "" && c.AuthJWKSURL == "",
		"needs SECKILL_AUTH_ISSUER without SECKILL_AUTH_JWKS_URL: the sign-in takes the provider's endpoints from its discovery document")
	u, err := url.Parse(c.AuthRedirectURL)
	l.check("SECKILL_AUTH_REDIRECT_URL", err == nil && isHTTPURL(c.AuthRedirectURL) && u.Path == OperatorSignInPath,
		"must be the dashboard's callback as registered at the provider, https://<host>%s, not %q", OperatorSignInPath, c.AuthRedirectURL)
	c.AuthOperatorClaim = cmp.Or(c.AuthOperatorClaim, c.AuthAdminClaim)
	claim, value, ok := strings.Cut(c.AuthOperatorClaim, ":")
	l.check("SECKILL_AUTH_OPERATOR_CLAIM", ok && claim != "" && value != "",
		"must be claim:value, such as groups:seckill-operators (default SECKILL_AUTH_ADMIN_CLAIM, which is not set either), not %q", c.AuthOperatorClaim)
}

// Redis topologies, as Config.RedisTopology names them.
const (
	RedisSingle   = "single"
	RedisCluster  = "cluster"
	RedisSentinel = "sentinel"
)

// RedisTopology says which of the three Redis topologies is configured.
func (c *Config) RedisTopology() string {
	switch {
	case len(c.RedisClusterAddrs) > 0:
		return RedisCluster
	case len(c.RedisSentinelAddrs) > 0:
		return RedisSentinel
	}
	return RedisSingle
}

// redis checks the Redis topology: exactly one of SECKILL_REDIS_URL,
// SECKILL_REDIS_CLUSTER_ADDRS and SECKILL_REDIS_SENTINEL_ADDRS (the URL's
// default applies when neither of the others is set).
func (l *loader) redis(c *Config) {
	c.RedisClusterAddrs = l.addrs("SECKILL_REDIS_CLUSTER_ADDRS", c.RedisClusterAddrs)
	c.RedisSentinelAddrs = l.addrs("SECKILL_REDIS_SENTINEL_ADDRS", c.RedisSentinelAddrs)
	set := 0
	for _, key := range []string{"SECKILL_REDIS_URL", "SECKILL_REDIS_CLUSTER_ADDRS", "SECKILL_REDIS_SENTINEL_ADDRS"} {
		if l.set(key) {
			set++
		}
	}
	if set > 1 {
		l.errf("set only one of SECKILL_REDIS_URL (single node), SECKILL_REDIS_CLUSTER_ADDRS (cluster) and SECKILL_REDIS_SENTINEL_ADDRS (sentinel)")
	}
	if (len(c.RedisSentinelAddrs) > 0) != (c.RedisSentinelMaster != "") {
		l.errf("SECKILL_REDIS_SENTINEL_ADDRS and SECKILL_REDIS_SENTINEL_MASTER go together")
	}
	if c.RedisSentinelPassword != "" && len(c.RedisSentinelAddrs) == 0 {
		l.errf("SECKILL_REDIS_SENTINEL_PASSWORD is for SECKILL_REDIS_SENTINEL_ADDRS, which is not set")
	}
	if set > 0 && !l.set("SECKILL_REDIS_URL") {
		c.RedisURL = "" // another topology: the URL's default does not apply
		return
	}
	l.check("SECKILL_REDIS_URL", hasScheme(c.RedisURL, "redis", "rediss"), "must be a redis:// or rediss:// URL")
	for _, key := range []string{"SECKILL_REDIS_USERNAME", "SECKILL_REDIS_PASSWORD", "SECKILL_REDIS_TLS"} {
		if l.set(key) {
			l.errf("%s is for a cluster or Sentinel; a single node takes it from SECKILL_REDIS_URL (redis://user:password@host:port/0, rediss:// for TLS)", key)
		}
	}
}

// addrs refuses each item of a list that is not a host:port address, and
// returns the others.
func (l *loader) addrs(key string, addrs []string) []string {
	var out []string
	for _, s := range addrs {
		host, port, err := net.SplitHostPort(s)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			l.errf("%s must be host:port addresses separated by commas, such as 10.0.0.1:7000,10.0.0.2:7000; %q is not one", key, s)
			continue
		}
		out = append(out, s)
	}
	return out
}

// otel reads OpenTelemetry's standard variables that decide whether seckill
// traces, and returns the traces endpoint (empty: tracing off).
func (l *loader) otel() string {
	if disabled, _ := strconv.ParseBool(l.getenv("OTEL_SDK_DISABLED")); disabled {
		return ""
	}
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := l.getenv(key); v != "" && v != "http/protobuf" {
			l.errf("%s must be http/protobuf (seckill exports traces over OTLP/HTTP), not %q", key, v)
		}
	}
	// The traces endpoint is the full URL; the general one is a base URL
	// that the traces path is appended to, as the OTLP specification says.
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		v := l.getenv(key)
		if v == "" {
			continue
		}
		if !isHTTPURL(v) {
			l.errf("%s must be an http:// or https:// URL such as http://127.0.0.1:4318, not %q", key, v)
		}
		if key == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			v = strings.TrimSuffix(v, "/") + "/v1/traces"
		}
		return v
	}
	return ""
}

// loader collects every problem with the environment, so that one start
// reports them all.
type loader struct {
	getenv func(string) string
	// failed holds the variables that did not parse as their type: they
	// are reported once, and not checked further.
	failed map[string]bool
	// badInts holds the integer variables that did not parse, reported by
	// intIn together with their bounds.
	badInts map[string]bool
	errs    []error
}

// parse fills c from Config's env tags through getenv, turning each value
// the library cannot parse into a message that names its variable. It
// fails only on a mistake in the tags.
func parse(c *Config, getenv func(string) string) (*loader, error) {
	l := &loader{getenv: getenv, failed: map[string]bool{}, badInts: map[string]bool{}}
	// The library reads a map: give it every variable Config names. It
	// must not be nil, or the library reads the process's environment.
	fields, err := envlib.GetFieldParamsWithOptions(c, envlib.Options{Environment: map[string]string{}})
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	environ := make(map[string]string, len(fields))
	for _, f := range fields {
		if v := getenv(f.Key); v != "" {
			environ[f.Key] = v
		}
	}
	err = envlib.ParseWithOptions(c, envlib.Options{
		Environment: environ,
		FuncMap: map[reflect.Type]envlib.ParserFunc{
			reflect.TypeFor[[]string]():       func(v string) (any, error) { return list(v), nil },
			reflect.TypeFor[[]netip.Prefix](): func(v string) (any, error) { return clientaddr.ParseTrusted(v) },
		},
	})
	var agg envlib.AggregateError
	if err != nil && !errors.As(err, &agg) {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	for _, err := range agg.Errors {
		var pe envlib.ParseError
		if !errors.As(err, &pe) {
			return nil, fmt.Errorf("configuration: %w", err)
		}
		f, _ := reflect.TypeFor[Config]().FieldByName(pe.Name)
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		v := environ[key]
		l.failed[key] = true
		switch {
		case pe.Type == reflect.TypeFor[time.Duration]():
			l.errf("%s must be a duration such as 5s or 250ms, not %q", key, v)
		case pe.Type == reflect.TypeFor[int]():
			l.badInts[key] = true
		case pe.Type == reflect.TypeFor[float64]():
			l.errf("%s must be a number, not %q", key, v)
		case pe.Type == reflect.TypeFor[bool]():
			l.errf("%s must be true or false, not %q", key, v)
		default: // slog.Level, the trusted proxies: their own parser's words
			l.errf("%s: %v", key, pe.Err)
		}
	}
	return l, nil
}

// set reports whether the variable key is set (to something not empty).
func (l *loader) set(key string) bool { return l.getenv(key) != "" }

// intIn refuses an integer variable that did not parse or lies outside
// lo..hi.
func (l *loader) intIn(key string, n, lo, hi int) {
	if l.badInts[key] || (!l.failed[key] && (n < lo || n > hi)) {
		l.errf("%s must be an integer from %d to %d, not %q", key, lo, hi, l.getenv(key))
	}
	delete(l.badInts, key)
}

// check refuses key's value unless ok, with a message that begins with
// key; a value that did not parse was reported already.
func (l *loader) check(key string, ok bool, format string, args ...any) {
	if !ok && !l.failed[key] {
		l.errf(key+" "+format, args...)
	}
}

func (l *loader) errf(format string, args ...any) {
	l.errs = append(l.errs, fmt.Errorf("  "+format, args...))
}

// err returns every problem found, or nil.
func (l *loader) err() error {
	for key := range l.badInts { // an integer that Load forgot to bound
		l.errf("%s must be an integer, not %q", key, l.getenv(key))
	}
	if err := errors.Join(l.errs...); err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	return nil
}

// list splits a comma-separated list, dropping blanks around and between
// its items.
func list(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func hasScheme(rawURL string, schemes ...string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && slices.Contains(schemes, u.Scheme)
}

func isHTTPURL(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && (host == "localhost" || (ip != nil && ip.IsLoopback()))
}

// shortDuration writes d as an operator would type it: 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// frameAncestors checks a CSP frame-ancestors source list and answers it
// with single spaces: 'self', 'none' (alone), or origins, scheme://host
// with an optional port and nothing after it, the host optionally
// starting with "*." (any subdomain). Nothing else gets into the header:
// no path, no bare scheme or wildcard (which would let any site frame the
// page), no separator that would start another directive.
func frameAncestors(v string) (string, error) {
	srcs := strings.Fields(v)
	if len(srcs) == 0 {
		return "", errors.New("it is empty")
	}
	for i, src := range srcs {
		switch strings.ToLower(src) {
		case "'self'":
			srcs[i] = "'self'"
			continue
		case "'none'":
			if len(srcs) > 1 {
				return "", errors.New("'none' goes alone")
			}
			srcs[i] = "'none'"
			continue
		}
		if !isFrameOrigin(src) {
			return "", fmt.Errorf("%q is none of them (an origin is http:// or https:// and a host, maybe with *. before it and a port after it; no path)", src)
		}
		srcs[i] = strings.ToLower(src)
	}
	return strings.Join(srcs, " "), nil
}

// isFrameOrigin reports whether src is an http(s) origin, its host a DNS
// name (optionally "*." and a name) or an IP address.
func isFrameOrigin(src string) bool {
	scheme, rest, ok := strings.Cut(strings.ToLower(src), "://")
	if !ok || (scheme != "https" && scheme != "http") {
		return false
	}
	host, port, bracketed := rest, "", false
	if h, after, ok := strings.Cut(strings.TrimPrefix(rest, "["), "]"); ok && strings.HasPrefix(rest, "[") {
		host, bracketed = h, true
		if after != "" {
			p, ok := strings.CutPrefix(after, ":")
			if !ok || p == "" {
				return false
			}
			port = p
		}
	} else if h, p, ok := strings.Cut(rest, ":"); ok {
		host, port = h, p
		if port == "" {
			return false
		}
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return false
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Zone() == "" && a.Is6() == bracketed
	} else if bracketed {
		return false
	}
	host = strings.TrimPrefix(host, "*.")
	if host == "" || len(host) > 253 {
		return false
	}
	for _, l := range strings.Split(host, ".") {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
