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
	"strconv"
	"strings"
	"time"

	"seckill/internal/clientaddr"
	"seckill/internal/seckill"
)

// DevJWTSecret signs tokens in development when no secret is configured.
const DevJWTSecret = "seckill-development-secret-do-not-use-in-production"

// DevWebhookSecret signs payment webhooks in development when no secret is
// configured (seckill payments simulate uses it too).
const DevWebhookSecret = "seckill-development-webhook-secret"

// Config is every setting of seckill.
type Config struct {
	Env         string // "dev" or "prod"
	HTTPAddr    string
	DatabaseURL string
	JWTSecret   string
	JWTIssuer   string
	LogFormat   string // "json" or "text"
	LogLevel    slog.Level

	// Redis is exactly one topology: a single node (RedisURL), a Redis
	// Cluster (RedisClusterAddrs) or a master watched by Sentinel
	// (RedisSentinelAddrs and RedisSentinelMaster).
	RedisURL            string   // single node: redis:// or rediss://, with user, password and database
	RedisClusterAddrs   []string // cluster: seed nodes, host:port
	RedisSentinelAddrs  []string // sentinel: the sentinels, host:port
	RedisSentinelMaster string   // sentinel: the master's name
	// RedisUsername, RedisPassword and RedisTLS are for the cluster's
	// nodes or Sentinel's master and replicas (a single node takes them
	// from its URL); RedisSentinelPassword is the sentinels' own.
	RedisUsername         string
	RedisPassword         string
	RedisTLS              bool
	RedisSentinelPassword string

	DBMaxConns    int
	RedisPoolSize int
	// RedisTimeout bounds a Redis dial, read, write and pool wait: past it
	// a purchase is answered UNAVAILABLE.
	RedisTimeout time.Duration
	// RedisMinReplicas is how many replicas must acknowledge an admission
	// (WAIT) before it is answered ACCEPTED on Redis's word; 0 sends no
	// WAIT. RedisWaitTimeout bounds that WAIT: past it the admission is
	// persisted to Postgres at once, or released.
	RedisMinReplicas int
	RedisWaitTimeout time.Duration

	WorkerConcurrency int
	BatchSize         int
	PersistWriters    int

	ReconcileInterval time.Duration
	ReconcileAfter    time.Duration

	// UserRate and UserBurst are the limit on one user's purchase attempts
	// at one campaign, shared by every instance (in Redis) and applied in
	// each process's memory in front of it.
	UserRate  float64
	UserBurst int
	// AddressRate and AddressBurst are the limit on the purchase attempts
	// at one campaign from one client address (an IPv6 /64), shared by
	// every instance; 0: none.
	AddressRate  float64
	AddressBurst int
	// TrustedProxies are the proxies whose X-Forwarded-For entries are
	// believed when finding a client's address; none by default.
	TrustedProxies []netip.Prefix
	// ChallengeTTL is how long a challenge stays valid; ChallengeLead how
	// long before a sale opens challenges are handed out.
	ChallengeTTL  time.Duration
	ChallengeLead time.Duration

	// PayWindow is how long a buyer has to pay an order, unless its
	// campaign sets its own.
	PayWindow time.Duration
	// PaymentCurrency is the ISO 4217 code of every payment.
	PaymentCurrency string
	// PaymentWebhookSecret signs the payment provider's webhook calls;
	// empty: POST /webhooks/payments refuses every call.
	PaymentWebhookSecret string
	// PaymentRefundURL is the built-in provider's refund call (signed with
	// PaymentWebhookSecret); empty: refunds owed are not sent (they stay
	// REFUND_NEEDED, which alerts).
	PaymentRefundURL string
	// RefundConfirmWait is how long a refund sent waits for the provider's
	// confirmation before it is sent again; RefundMaxSends how many sends
	// it gets before it is REFUND_FAILED.
	RefundConfirmWait time.Duration
	RefundMaxSends    int
	// PaymentRefundTimeout bounds one refund call.
	PaymentRefundTimeout time.Duration

	MaxInFlight     int
	AllowedOrigins  []string
	Playground      bool
	ShutdownTimeout time.Duration

	AdminUser     string
	AdminPassword string

	PprofAddr string // empty: no profiling endpoint
	// MetricsAddr, when set, serves /metrics on its own listener (and not
	// on HTTPAddr), so that it need not face the internet.
	MetricsAddr string

	// Tracing is on when an OTLP endpoint is configured: traces go there
	// over OTLP/HTTP. The exporter reads its other OTEL_EXPORTER_OTLP_*
	// settings (headers, timeout, ...) itself, and the SDK reads
	// OTEL_TRACES_SAMPLER and OTEL_RESOURCE_ATTRIBUTES.
	OTLPEndpoint    string // the full traces URL; empty: tracing off (a no-op tracer)
	OTelServiceName string

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
	p := parser{getenv: getenv}
	c := &Config{
		Env:         p.str("SECKILL_ENV", "prod"),
		HTTPAddr:    p.str("SECKILL_HTTP_ADDR", ":8080"),
		DatabaseURL: p.str("SECKILL_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/seckill?sslmode=disable"),
		JWTSecret:   p.str("SECKILL_JWT_SECRET", ""),
		JWTIssuer:   p.str("SECKILL_JWT_ISSUER", "seckill"),

		DBMaxConns:       p.int("SECKILL_DB_MAX_CONNS", 20, 1, 1000),
		RedisPoolSize:    p.int("SECKILL_REDIS_POOL_SIZE", 0, 0, 10000),
		RedisTimeout:     p.duration("SECKILL_REDIS_TIMEOUT", 2*time.Second),
		RedisWaitTimeout: p.duration("SECKILL_REDIS_WAIT_TIMEOUT", 250*time.Millisecond),

		WorkerConcurrency: p.int("SECKILL_WORKER_CONCURRENCY", 64, 1, 10000),
		BatchSize:         p.int("SECKILL_BATCH_SIZE", 1000, 1, 10000),
		PersistWriters:    p.int("SECKILL_PERSIST_WRITERS", 2, 1, 64),

		ReconcileInterval: p.duration("SECKILL_RECONCILE_INTERVAL", 5*time.Second),
		ReconcileAfter:    p.duration("SECKILL_RECONCILE_AFTER", 30*time.Second),

		PayWindow:            p.duration("SECKILL_PAY_WINDOW", seckill.DefaultPayWindow),
		PaymentCurrency:      p.str("SECKILL_PAYMENT_CURRENCY", seckill.DefaultCurrency),
		PaymentWebhookSecret: p.str("SECKILL_PAYMENT_WEBHOOK_SECRET", ""),
		PaymentRefundURL:     p.str("SECKILL_PAYMENT_REFUND_URL", ""),
		RefundConfirmWait:    p.duration("SECKILL_REFUND_CONFIRM_WAIT", seckill.DefaultRefundConfirmWait),
		RefundMaxSends:       p.int("SECKILL_REFUND_MAX_SENDS", seckill.DefaultRefundMaxSends, 1, 100),
		PaymentRefundTimeout: p.duration("SECKILL_PAYMENT_REFUND_TIMEOUT", 10*time.Second),

		UserRate:  p.float("SECKILL_USER_RATE", 5),
		UserBurst: p.int("SECKILL_USER_BURST", 10, 1, 1000000),

		AddressRate:  p.float("SECKILL_ADDRESS_RATE", 100),
		AddressBurst: p.int("SECKILL_ADDRESS_BURST", 300, 1, 1000000),

		ChallengeTTL:  p.duration("SECKILL_CHALLENGE_TTL", 2*time.Minute),
		ChallengeLead: p.duration("SECKILL_CHALLENGE_LEAD", time.Minute),

		MaxInFlight:     p.int("SECKILL_MAX_IN_FLIGHT", 10000, 1, 1000000),
		ShutdownTimeout: p.duration("SECKILL_SHUTDOWN_TIMEOUT", 20*time.Second),

		PprofAddr:     p.str("SECKILL_PPROF_ADDR", ""),
		MetricsAddr:   p.str("SECKILL_METRICS_ADDR", ""),
		AdminUser:     p.str("SECKILL_ADMIN_USER", ""),
		AdminPassword: p.str("SECKILL_ADMIN_PASSWORD", ""),
	}
	if c.PayWindow < seckill.MinPayWindow || c.PayWindow > seckill.MaxPayWindow || c.PayWindow%time.Second != 0 {
		p.errf("SECKILL_PAY_WINDOW must be whole seconds between %s and %s, not %v", shortDuration(seckill.MinPayWindow), shortDuration(seckill.MaxPayWindow), c.PayWindow)
	}
	if c.PaymentRefundTimeout < 100*time.Millisecond || c.PaymentRefundTimeout > time.Minute {
		p.errf("SECKILL_PAYMENT_REFUND_TIMEOUT must be between 100ms and 1m, not %v", c.PaymentRefundTimeout)
	}
	if c.RefundConfirmWait < time.Second || c.RefundConfirmWait > 24*time.Hour {
		p.errf("SECKILL_REFUND_CONFIRM_WAIT must be between 1s and 24h, not %v", c.RefundConfirmWait)
	}
	if u := c.PaymentRefundURL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			p.errf("SECKILL_PAYMENT_REFUND_URL must be an http or https URL, not %q", u)
		}
	}
	if !seckill.ValidCurrency(c.PaymentCurrency) {
		p.errf("SECKILL_PAYMENT_CURRENCY must be three capital letters (ISO 4217), not %q", c.PaymentCurrency)
	}
	if c.Env != "dev" && c.Env != "prod" {
		p.errf("SECKILL_ENV must be dev or prod, not %q", c.Env)
	}
	defFormat := "json"
	if c.Dev() {
		defFormat = "text"
	}
	c.LogFormat = p.str("SECKILL_LOG_FORMAT", defFormat)
	if c.LogFormat != "json" && c.LogFormat != "text" {
		p.errf("SECKILL_LOG_FORMAT must be json or text, not %q", c.LogFormat)
	}
	if err := c.LogLevel.UnmarshalText([]byte(p.str("SECKILL_LOG_LEVEL", "info"))); err != nil {
		p.errf("SECKILL_LOG_LEVEL: %v", err)
	}
	c.Playground = p.bool("SECKILL_PLAYGROUND", c.Dev())
	if o := strings.TrimSpace(p.str("SECKILL_ALLOWED_ORIGINS", "")); o != "" {
		for _, s := range strings.Split(o, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.AllowedOrigins = append(c.AllowedOrigins, s)
			}
		}
	}
	if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		p.errf("SECKILL_DATABASE_URL must be a postgres:// URL")
	}
	p.redis(c)
	// A cluster or Sentinel has replicas to fail over to: an admission is
	// ACCEPTED once one of them holds it. A single node has none to wait
	// for. One replica survives the loss of one master; more than a
	// handful is a typo.
	minReplicas := 0
	if c.RedisTopology() != RedisSingle {
		minReplicas = 1
	}
	c.RedisMinReplicas = p.int("SECKILL_REDIS_MIN_REPLICAS", minReplicas, 0, 16)
	switch {
	case c.JWTSecret == "" && c.Dev():
		c.JWTSecret = DevJWTSecret
		c.Warnings = append(c.Warnings, "SECKILL_JWT_SECRET is not set: using the development secret; never do this in production")
	case c.JWTSecret == "":
		p.errf("SECKILL_JWT_SECRET is required (at least 32 characters) unless SECKILL_ENV=dev")
	case len(c.JWTSecret) < 32:
		p.errf("SECKILL_JWT_SECRET must be at least 32 characters")
	}
	switch {
	case c.PaymentWebhookSecret == "" && c.Dev():
		c.PaymentWebhookSecret = DevWebhookSecret
	case c.PaymentWebhookSecret == "":
		c.Warnings = append(c.Warnings, "SECKILL_PAYMENT_WEBHOOK_SECRET is not set: POST /webhooks/payments refuses every call, so no order can be paid")
	case len(c.PaymentWebhookSecret) < 16:
		p.errf("SECKILL_PAYMENT_WEBHOOK_SECRET must be at least 16 characters")
	}
	if c.ReconcileInterval <= 0 || c.ReconcileAfter <= 0 {
		p.errf("SECKILL_RECONCILE_INTERVAL and SECKILL_RECONCILE_AFTER must be positive")
	}
	if c.RedisTimeout <= 0 {
		p.errf("SECKILL_REDIS_TIMEOUT must be positive: without a bound a purchase may hang while Redis is away")
	}
	if c.RedisWaitTimeout <= 0 || c.RedisWaitTimeout > 5*time.Second {
		p.errf("SECKILL_REDIS_WAIT_TIMEOUT must be between 1ms and 5s: a buyer waits for it, and a fallback write to Postgres after it")
	}
	if c.UserRate < 0 {
		p.errf("SECKILL_USER_RATE must be 0 (no limit) or more")
	}
	if c.AddressRate < 0 {
		p.errf("SECKILL_ADDRESS_RATE must be 0 (no limit) or more")
	}
	// In development every client (the browser, seckill demo, the load
	// test) is this machine's loopback address: one shared address limit
	// would refuse the seed's experiment. Production keeps the default.
	if c.Dev() && p.getenv("SECKILL_ADDRESS_RATE") == "" {
		c.AddressRate = 0
	}
	if tp, err := clientaddr.ParseTrusted(p.str("SECKILL_TRUSTED_PROXIES", "")); err != nil {
		p.errf("SECKILL_TRUSTED_PROXIES: %v", err)
	} else {
		c.TrustedProxies = tp
	}
	if c.ChallengeTTL < time.Second || c.ChallengeTTL > time.Hour {
		p.errf("SECKILL_CHALLENGE_TTL must be between 1s and 1h")
	}
	if c.ChallengeLead < 0 || c.ChallengeLead > 24*time.Hour {
		p.errf("SECKILL_CHALLENGE_LEAD must be between 0 and 24h")
	}
	if c.PprofAddr != "" {
		host, _, err := net.SplitHostPort(c.PprofAddr)
		if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			p.errf("SECKILL_PPROF_ADDR must be a loopback address such as 127.0.0.1:6060, not %q", c.PprofAddr)
		}
	}
	c.OTLPEndpoint, c.OTelServiceName = p.otel()
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil || c.MetricsAddr == c.HTTPAddr {
			p.errf("SECKILL_METRICS_ADDR must be a host:port other than SECKILL_HTTP_ADDR, such as 10.0.0.5:9090 or 127.0.0.1:9090, not %q", c.MetricsAddr)
		}
	}
	if (c.AdminUser == "") != (c.AdminPassword == "") {
		p.errf("SECKILL_ADMIN_USER and SECKILL_ADMIN_PASSWORD go together")
	}
	if err := errors.Join(p.errs...); err != nil {
		return nil, fmt.Errorf("configuration:\n%w", err)
	}
	return c, nil
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

// redis reads the Redis topology: exactly one of SECKILL_REDIS_URL,
// SECKILL_REDIS_CLUSTER_ADDRS and SECKILL_REDIS_SENTINEL_ADDRS (the URL's
// default applies when neither of the others is set).
func (p *parser) redis(c *Config) {
	rawURL := p.getenv("SECKILL_REDIS_URL")
	c.RedisClusterAddrs = p.addrs("SECKILL_REDIS_CLUSTER_ADDRS")
	c.RedisSentinelAddrs = p.addrs("SECKILL_REDIS_SENTINEL_ADDRS")
	c.RedisSentinelMaster = p.getenv("SECKILL_REDIS_SENTINEL_MASTER")
	c.RedisUsername = p.getenv("SECKILL_REDIS_USERNAME")
	c.RedisPassword = p.getenv("SECKILL_REDIS_PASSWORD")
	c.RedisSentinelPassword = p.getenv("SECKILL_REDIS_SENTINEL_PASSWORD")
	c.RedisTLS = p.bool("SECKILL_REDIS_TLS", false)

	set := 0
	for _, v := range []string{rawURL, p.getenv("SECKILL_REDIS_CLUSTER_ADDRS"), p.getenv("SECKILL_REDIS_SENTINEL_ADDRS")} {
		if v != "" {
			set++
		}
	}
	if set > 1 {
		p.errf("set only one of SECKILL_REDIS_URL (single node), SECKILL_REDIS_CLUSTER_ADDRS (cluster) and SECKILL_REDIS_SENTINEL_ADDRS (sentinel)")
	}
	if (len(c.RedisSentinelAddrs) > 0) != (c.RedisSentinelMaster != "") {
		p.errf("SECKILL_REDIS_SENTINEL_ADDRS and SECKILL_REDIS_SENTINEL_MASTER go together")
	}
	if c.RedisSentinelPassword != "" && len(c.RedisSentinelAddrs) == 0 {
		p.errf("SECKILL_REDIS_SENTINEL_PASSWORD is for SECKILL_REDIS_SENTINEL_ADDRS, which is not set")
	}
	if set > 0 && rawURL == "" {
		return
	}
	c.RedisURL = cmp.Or(rawURL, "redis://127.0.0.1:6379/0")
	if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		p.errf("SECKILL_REDIS_URL must be a redis:// or rediss:// URL")
	}
	for _, key := range []string{"SECKILL_REDIS_USERNAME", "SECKILL_REDIS_PASSWORD", "SECKILL_REDIS_TLS"} {
		if p.getenv(key) != "" {
			p.errf("%s is for a cluster or Sentinel; a single node takes it from SECKILL_REDIS_URL (redis://user:password@host:port/0, rediss:// for TLS)", key)
		}
	}
}

// addrs reads a comma-separated list of host:port addresses.
func (p *parser) addrs(key string) []string {
	var out []string
	for _, s := range strings.Split(p.getenv(key), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		host, port, err := net.SplitHostPort(s)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			p.errf("%s must be host:port addresses separated by commas, such as 10.0.0.1:7000,10.0.0.2:7000; %q is not one", key, s)
			continue
		}
		out = append(out, s)
	}
	return out
}

// otel reads OpenTelemetry's standard variables that decide whether seckill
// traces and under which service name.
func (p *parser) otel() (endpoint, service string) {
	service = p.str("OTEL_SERVICE_NAME", "seckill")
	if disabled, _ := strconv.ParseBool(p.getenv("OTEL_SDK_DISABLED")); disabled {
		return "", service
	}
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := p.getenv(key); v != "" && v != "http/protobuf" {
			p.errf("%s must be http/protobuf (seckill exports traces over OTLP/HTTP), not %q", key, v)
		}
	}
	// The traces endpoint is the full URL; the general one is a base URL
	// that the traces path is appended to, as the OTLP specification says.
	for _, key := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		v := p.getenv(key)
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.errf("%s must be an http:// or https:// URL such as http://127.0.0.1:4318, not %q", key, v)
		}
		if key == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			v = strings.TrimSuffix(v, "/") + "/v1/traces"
		}
		return v, service
	}
	return "", service
}

type parser struct {
	getenv func(string) string
	errs   []error
}

func (p *parser) errf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("  "+format, args...))
}

func (p *parser) str(key, def string) string {
	if v := p.getenv(key); v != "" {
		return v
	}
	return def
}

func (p *parser) int(key string, def, lo, hi int) int {
	v := p.getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		p.errf("%s must be an integer from %d to %d, not %q", key, lo, hi, v)
		return def
	}
	return n
}

func (p *parser) float(key string, def float64) float64 {
	v := p.getenv(key)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		p.errf("%s must be a number, not %q", key, v)
		return def
	}
	return f
}

func (p *parser) bool(key string, def bool) bool {
	v := p.getenv(key)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.errf("%s must be true or false, not %q", key, v)
		return def
	}
	return b
}

func (p *parser) duration(key string, def time.Duration) time.Duration {
	v := p.getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		p.errf("%s must be a duration such as 5s or 250ms, not %q", key, v)
		return def
	}
	return d
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
