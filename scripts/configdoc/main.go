// Command configdoc writes docs/configuration.md, the reference of every
// setting, from the Config struct of internal/config, so that the reference
// cannot drift from the code: the variable and its default come from the
// field's env and envDefault tags and from what config.Load makes of an
// empty environment (the defaults Load decides), the meaning from the
// field's doc and line comments, the range from the checks Load makes
// (intIn, check and errf calls that name the variable). What the code
// cannot say (a caveat, a default that depends on the topology) is in
// notes, keyed by variable; a note for a variable Config no longer has is
// an error, so that notes go when their setting goes.
//
// `make generate` runs it; TestConfigurationIsCurrent fails when the
// committed file is stale.
//
// Usage: go run ./scripts/configdoc [-root .] [-o docs/configuration.md]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"seckill/internal/config"
)

func main() {
	root := flag.String("root", ".", "the module's root")
	out := flag.String("o", "docs/configuration.md", "the file to write, relative to -root; - for stdout")
	flag.Parse()
	b, err := render(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
	if *out == "-" {
		os.Stdout.Write(b)
		return
	}
	if err := os.WriteFile(filepath.Join(*root, *out), b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

// setting is one row of the reference.
type setting struct {
	env     string
	field   string
	doc     string // the field's doc comment, or its group's for the first field of a group
	line    string // the field's line comment
	sameAs  string // the first variable of the group whose doc this field shares
	def     string
	ranges  []string
	section string
}

// sections order the reference by what an operator decides; a variable
// goes to the first section one of whose prefixes it starts with, a new
// one matching none to "Other settings".
var sections = []struct {
	title, intro string
	prefixes     []string
}{
	{"The process", "", []string{"SECKILL_ENV", "SECKILL_HTTP_ADDR", "SECKILL_METRICS_ADDR", "SECKILL_PPROF_ADDR", "SECKILL_LOG_", "SECKILL_SHUTDOWN_", "SECKILL_MAX_IN_FLIGHT", "SECKILL_ALLOWED_ORIGINS", "SECKILL_PLAYGROUND", "SECKILL_SALE_", "SECKILL_ADMIN_"}},
	{"Postgres", "", []string{"SECKILL_DATABASE_", "SECKILL_DB_"}},
	{"Redis", "Set exactly one topology: `SECKILL_REDIS_URL`, `SECKILL_REDIS_CLUSTER_ADDRS` or `SECKILL_REDIS_SENTINEL_ADDRS` ([operations.md](operations.md#topologies)).", []string{"SECKILL_REDIS_"}},
	{"Workers", "", []string{"SECKILL_WORKER_", "SECKILL_QUEUE_", "SECKILL_BATCH_", "SECKILL_PERSIST_", "SECKILL_EXPIRY_", "SECKILL_RECONCILE_"}},
	{"Purchases: limits and challenges", "", []string{"SECKILL_USER_", "SECKILL_ADDRESS_", "SECKILL_TRUSTED_", "SECKILL_CHALLENGE_"}},
	{"Authentication", "Our HS256 tokens and an identity provider's ([api.md](api.md#authentication)).", []string{"SECKILL_JWT_", "SECKILL_AUTH_"}},
	{"Payments", "", []string{"SECKILL_PAY_", "SECKILL_PAYMENT_", "SECKILL_REFUND_", "STRIPE_"}},
	{"Order events", "", []string{"SECKILL_EVENTS_"}},
	{"Tracing", "", []string{"OTEL_"}},
}

// notes say what the struct cannot: a default that depends on another
// setting, a caveat an operator must know. Keyed by variable.
var notes = map[string]string{
	"SECKILL_ENV":                   "`dev` allows the development secrets, text logs and the playground; `make` sets it. `prod` refuses an unsafe configuration ([what start refuses](operations.md#before-production-what-start-refuses)).",
	"SECKILL_HTTP_ADDR":             "The listen address of the API, the dashboard, health and, in development without `SECKILL_METRICS_ADDR`, metrics.",
	"SECKILL_DATABASE_URL":          "Postgres, the source of truth.",
	"SECKILL_JWT_SECRET":            "The HS256 signing key of our tokens and the key the challenge and waiting-room tokens derive from. Required in production, and not a secret published in seckill's source.",
	"SECKILL_JWT_ISSUER":            "The `iss` claim of our tokens.",
	"SECKILL_LOG_FORMAT":            "Structured logs (slog).",
	"SECKILL_LOG_LEVEL":             "The Redis client's own lines (a pool that cannot dial) come at `WARN` with `component=go-redis`, one of a kind every 10 s at most, the ones held back counted in `repeated`.",
	"SECKILL_REDIS_URL":             "Run it with `appendonly yes`, `appendfsync always` in production ([design.md](design.md#what-accepted-promises)).",
	"SECKILL_REDIS_POOL_SIZE":       "go-redis's default is 10 connections per CPU, per Redis server.",
	"SECKILL_DB_MAX_CONNS":          "The Postgres pool: max open = max idle. Persistence prepares its statements once on each connection: a pooler between seckill and Postgres must keep prepared statements (PgBouncer in transaction mode: 1.21 or later, with `max_prepared_statements`).",
	"SECKILL_WORKER_CONCURRENCY":    "Asynq tasks a worker process runs at once.",
	"SECKILL_QUEUE_INTERVAL":        "`serve` persists its own purchases without the queue; an API-only process's (`serve --worker=false`) first batch after a quiet spell waits up to one and a half times this for a worker. Each look is a script call in Redis.",
	"SECKILL_BATCH_SIZE":            "Most admissions in one queue task and in one Postgres transaction.",
	"SECKILL_PERSIST_WRITERS":       "Postgres transactions a worker process runs at once to persist admissions; admissions arriving meanwhile join the next batch.",
	"SECKILL_EXPIRY_INTERVAL":       "An order expires within about one interval of its `payBy`.",
	"SECKILL_RECONCILE_INTERVAL":    "How often the reconciler (in every `serve` and `worker`) looks for admissions still pending and campaigns to restore.",
	"SECKILL_RECONCILE_AFTER":       "Age, from the admission, after which a pending admission is enqueued again; plus 30 s, the reconciler writes it to Postgres itself. Raise it if your workers are expected to lag that far.",
	"SECKILL_ADDRESS_RATE":          "Generous on purpose: one address is often many people ([api.md](api.md#client-address)).",
	"SECKILL_USER_RATE":             "0: no limit ([api.md](api.md#challenges-and-limits)).",
	"SECKILL_AUTH_AUDIENCE":         "Required with an identity provider.",
	"SECKILL_AUTH_JWKS_URL":         "Production needs `SECKILL_AUTH_ISSUER` beside it, and both over https:// (http:// only on a loopback host).",
	"SECKILL_AUTH_HS256":            "Production needs it set explicitly beside an identity provider ([what start refuses](operations.md#before-production-what-start-refuses)).",
	"SECKILL_AUTH_ADMIN_CLAIM":      "The claim may be a string or an array of strings; `a.b` for `b` inside `a`: `roles:seckill-admin`, `realm_access.roles:seckill-admin`, `groups:ops`. Unset, no provider token is an admin's.",
	"SECKILL_AUTH_CLIENT_SECRET":    "The dashboard's client secret at the provider.",
	"SECKILL_AUTH_REDIRECT_URL":     "Required with a client id.",
	"SECKILL_PAYMENT_PROVIDER":      "See [payments.md](payments.md#stripe).",
	"STRIPE_API_KEY":                "A restricted key needs PaymentIntents and Refunds write, PaymentIntents read.",
	"STRIPE_WEBHOOK_SECRET":         "The secret of the endpoint `https://<host>/webhooks/stripe`.",
	"SECKILL_PAYMENT_REFUND_URL":    "`make run` points it at its development provider (`seckill payments provider`).",
	"SECKILL_EVENTS_WEBHOOK_URL":    "An http or https URL without user or password; in production not an internal address unless `SECKILL_EVENTS_ALLOW_NETS` lists it ([events.md](events.md#where-an-endpoint-may-point)). An instance without it leaves the endpoint as it is; only an operator removes it. With no endpoint enabled (here or on the dashboard), no event is written.",
	"SECKILL_EVENTS_ALLOW_NETS":     "Such as `10.20.0.0/16,fd12::/64`: each written as its network, IPv4 ranges as IPv4. Empty: in production no endpoint reaches an internal address ([events.md](events.md#where-an-endpoint-may-point)); development checks none.",
	"SECKILL_EVENTS_WEBHOOK_SECRET": "At least 16 characters when the URL is set.",
	"SECKILL_MAX_IN_FLIGHT":         "HTTP requests served at once; beyond it a request is answered 503 at once.",
	"SECKILL_ALLOWED_ORIGINS":       "Comma-separated origin patterns allowed to open WebSockets; none: the same origin only.",
	"SECKILL_PLAYGROUND":            "Serve GraphiQL at `/playground`.",
	"SECKILL_SHUTDOWN_TIMEOUT":      "On SIGINT or SIGTERM the HTTP server drains and subscriptions end, then the workers get this long to finish; unfinished tasks go back to the queue.",
	"SECKILL_ADMIN_USER":            "Development: create (or reset) this dashboard operator at start. `make run` sets `admin` with a password made once per checkout (`.run/admin-password`).",
	"SECKILL_ADMIN_PASSWORD":        "Its password (at least 12 characters).",
	"SECKILL_TRUSTED_PROXIES":       "Comma-separated addresses and CIDR prefixes, such as `10.0.0.0/8, 192.0.2.7`; none: the TCP peer is the client.",
	"SECKILL_METRICS_ADDR":          "Required in production to serve /metrics at all: production never serves it on `SECKILL_HTTP_ADDR`. In `worker` too; such as `10.0.0.5:9090`.",
	"SECKILL_PPROF_ADDR":            "Serves `net/http/pprof`, such as `127.0.0.1:6060`.",
	"OTEL_SERVICE_NAME":             "`service.name` of the traces.",
}

// extras are variables Config has no tag for: Load reads them itself
// (OTEL_*), or the OpenTelemetry SDK does.
var extras = []setting{
	{env: "OTEL_EXPORTER_OTLP_ENDPOINT", def: "none", section: "Tracing",
		doc: "Send traces over OTLP/HTTP to this collector, such as `http://127.0.0.1:4318` (`/v1/traces` is appended); unset, tracing is off and costs nothing."},
	{env: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", def: "none", section: "Tracing",
		doc: "The full traces URL instead; wins over `OTEL_EXPORTER_OTLP_ENDPOINT`."},
	{env: "OTEL_EXPORTER_OTLP_PROTOCOL", def: "`http/protobuf`", section: "Tracing", ranges: []string{"`http/protobuf` only"},
		doc: "The exporter's protocol (also `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`)."},
	{env: "OTEL_SDK_DISABLED", def: "`false`", section: "Tracing", doc: "`true` turns tracing off even with an endpoint."},
	{env: "other `OTEL_*`", def: "the SDK's", section: "Tracing",
		doc: "Read by the OpenTelemetry SDK itself: `OTEL_EXPORTER_OTLP_HEADERS`, `…_TIMEOUT`, `…_CERTIFICATE`, `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`) and `OTEL_TRACES_SAMPLER_ARG`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SPAN_LINK_COUNT_LIMIT`."},
}

// baseEnv is the least environment config.Load accepts in production: its
// defaults are read from the Config it returns. Add a value here when Load
// comes to require one.
var baseEnv = map[string]string{
	"SECKILL_JWT_SECRET": strings.Repeat("x", 32),
}

func render(root string) ([]byte, error) {
	src := filepath.Join(root, "internal", "config", "config.go")
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, src, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	settings, err := fields(file)
	if err != nil {
		return nil, err
	}
	for key := range notes {
		if !slices.ContainsFunc(settings, func(s setting) bool { return s.env == key }) {
			return nil, fmt.Errorf("scripts/configdoc: a note for %s, which Config does not read: delete it", key)
		}
	}
	byField := map[string]string{}
	for _, s := range settings {
		byField[s.field] = s.env
	}
	ranges := constraints(file)
	prod, dev, err := defaults()
	if err != nil {
		return nil, err
	}
	for i := range settings {
		s := &settings[i]
		s.ranges = ranges[s.env]
		if _, given := baseEnv[s.env]; given {
			s.def = "none"
		} else {
			p, d := prod.FieldByName(s.field), dev.FieldByName(s.field)
			s.def = value(p)
			if dv := value(d); dv != s.def && s.env != "SECKILL_ENV" {
				s.def += " (" + dv + " in dev)"
			}
		}
		s.section = sectionOf(s.env)
		s.doc = names(s.doc, byField)
		s.line = names(lineComment(s.line), byField)
	}
	settings = append(settings, extras...)

	var b bytes.Buffer
	b.WriteString(`# Configuration

<!-- Generated by scripts/configdoc from internal/config's Config: its tags, its field comments
and config.Load's checks. Do not edit: change the field's comment (or the notes in
scripts/configdoc) and run ` + "`make generate`" + `. -->

Every setting is an environment variable. Each is validated at start: a bad value stops the
process with a message that names the variable, and every bad variable is named at once.
Defaults are production's (` + "`SECKILL_ENV=prod`" + `, what a shell without ` + "`make`" + ` gets);
where development's differ, they follow in brackets. The test variables (` + "`SECKILL_TEST_*`" + `)
are in [testing.md](testing.md).
`)
	for _, sec := range append(sections, struct {
		title, intro string
		prefixes     []string
	}{"Other settings", "", nil}) {
		var rows []setting
		for _, s := range settings {
			if s.section == sec.title {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n", sec.title)
		if sec.intro != "" {
			b.WriteString(sec.intro + "\n\n")
		}
		b.WriteString("| variable | default | range | meaning |\n| --- | --- | --- | --- |\n")
		for _, s := range rows {
			name := s.env
			if !strings.Contains(name, "`") {
				name = "`" + name + "`"
			}
			meaning := s.doc
			if s.sameAs != "" {
				meaning = "See `" + s.sameAs + "`."
			}
			meaning = join(meaning, s.line, notes[s.env])
			rng := strings.Join(s.ranges, "; ")
			if rng == "" {
				rng = "—"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, cell(s.def), cell(rng), cell(meaning))
		}
	}
	return b.Bytes(), nil
}

// fields reads Config's fields that have an env tag, in order, with their
// comments.
func fields(file *ast.File) ([]setting, error) {
	var st *ast.StructType
	ast.Inspect(file, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "Config" {
			st, _ = ts.Type.(*ast.StructType)
			return false
		}
		return st == nil
	})
	if st == nil {
		return nil, fmt.Errorf("no Config struct")
	}
	var out []setting
	// groupDoc is the last doc comment, groupFirst the first variable it
	// describes: a field without a doc of its own shares it when it names
	// the field (RedisUsername, RedisPassword and RedisTLS are ...).
	groupDoc, groupFirst := "", ""
	for _, f := range st.Fields.List {
		if f.Doc != nil {
			groupDoc, groupFirst = text(f.Doc), ""
		}
		if f.Tag == nil || len(f.Names) != 1 {
			continue
		}
		tag, _ := strconv.Unquote(f.Tag.Value)
		env, _, _ := strings.Cut(reflect.StructTag(tag).Get("env"), ",")
		if env == "" {
			continue
		}
		s := setting{env: env, field: f.Names[0].Name}
		if f.Comment != nil {
			s.line = text(f.Comment)
		}
		switch {
		case f.Doc != nil || (groupFirst == "" && mentions(groupDoc, s.field)):
			s.doc, groupFirst = groupDoc, env
		case mentions(groupDoc, s.field):
			s.sameAs = groupFirst
		}
		out = append(out, s)
	}
	return out, nil
}

// constraints gathers, per variable, what Load requires of it: the bounds
// of its intIn calls and the words of its check and errf calls whose text
// does not depend on the value.
func constraints(file *ast.File) map[string][]string {
	out := map[string][]string{}
	add := func(key, s string) {
		s = strings.TrimSpace(s)
		for _, p := range []string{"must be ", "is "} {
			s = strings.TrimPrefix(s, p)
		}
		s = variableWord.ReplaceAllString(s, "`$0`")
		if s != "" && !slices.Contains(out[key], s) {
			out[key] = append(out[key], s)
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		str := func(i int) (string, bool) {
			if i >= len(call.Args) {
				return "", false
			}
			lit, ok := call.Args[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(lit.Value)
			return s, err == nil
		}
		switch sel.Sel.Name {
		case "intIn":
			key, ok := str(0)
			if ok && len(call.Args) == 4 {
				lo, hi := exprText(call.Args[2]), exprText(call.Args[3])
				if lo != "" && hi != "" {
					add(key, lo+" to "+hi)
				}
			}
		case "check":
			key, ok1 := str(0)
			format, ok2 := str(2)
			if ok1 && ok2 {
				format, _, _ = strings.Cut(format, ", not %")
				if !strings.Contains(format, "%") {
					add(key, format)
				}
			}
		case "errf":
			format, ok := str(0)
			key, rest, _ := strings.Cut(format, " ")
			if ok && isVariable(key) {
				rest, _, _ = strings.Cut(rest, ", not %")
				if !strings.Contains(rest, "%") && !strings.Contains(rest, "SECKILL_") && !strings.Contains(rest, "STRIPE_") {
					add(key, rest)
				}
			}
		}
		return true
	})
	return out
}

var (
	variableName = regexp.MustCompile(`^(SECKILL|STRIPE|OTEL)_[A-Z0-9_]+$`)
	variableWord = regexp.MustCompile(`\b(SECKILL|STRIPE|OTEL)_[A-Z0-9_]+\b`)
)

func isVariable(s string) bool { return variableName.MatchString(s) }

// exprText writes a bound: an integer literal, with its underscores.
func exprText(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		return ""
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(lit.Value, "_", ""), 0, 64)
	if err != nil {
		return ""
	}
	return thousands(n)
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) <= 4 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// defaults are the Configs that Load makes of an empty production
// environment and of a development one.
func defaults() (prod, dev reflect.Value, err error) {
	load := func(env string) (reflect.Value, error) {
		c, err := config.Load(func(key string) string {
			if key == "SECKILL_ENV" {
				return env
			}
			return baseEnv[key]
		})
		if err != nil {
			return reflect.Value{}, fmt.Errorf("config.Load refuses the base environment (add what it needs to baseEnv in scripts/configdoc): %w", err)
		}
		return reflect.ValueOf(c).Elem(), nil
	}
	if prod, err = load("prod"); err != nil {
		return
	}
	dev, err = load("dev")
	return
}

// value writes a default as an operator would set it.
func value(v reflect.Value) string {
	if !v.IsValid() {
		return "—"
	}
	switch x := v.Interface().(type) {
	case time.Duration:
		return "`" + duration(x) + "`"
	case slog.Level:
		return "`" + strings.ToLower(x.String()) + "`"
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return "none"
		}
		return "`" + v.String() + "`"
	case reflect.Slice:
		if v.Len() == 0 {
			return "none"
		}
	}
	return "`" + fmt.Sprint(v.Interface()) + "`"
}

// duration writes d without its zero units: 15m, not 15m0s.
func duration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// lineComment drops a field's line comment that only says what the
// default column shows (a default Load decides: "text in dev",
// "seckill.DefaultPayWindow").
func lineComment(c string) string {
	if strings.Contains(c, " in dev") || strings.HasPrefix(c, "seckill.") {
		return ""
	}
	return c
}

func sectionOf(env string) string {
	for _, sec := range sections {
		for _, p := range sec.prefixes {
			if strings.HasPrefix(env, p) {
				return sec.title
			}
		}
	}
	return "Other settings"
}

// names replaces the Go names of Config's fields in a comment with the
// variables an operator sets.
func names(s string, byField map[string]string) string {
	if s == "" {
		return s
	}
	return fieldName.ReplaceAllStringFunc(s, func(w string) string {
		if env, ok := byField[w]; ok {
			return "`" + env + "`"
		}
		if v, ok := goWords[w]; ok {
			return v
		}
		return w
	})
}

// goWords are the Go names the comments use for values an operator writes.
var goWords = map[string]string{
	"PaymentBuiltin": "`" + config.PaymentBuiltin + "`",
	"PaymentStripe":  "`" + config.PaymentStripe + "`",
	"DevJWTSecret":   "the development secret",
}

var fieldName = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]+\b`)

func mentions(doc, field string) bool {
	return doc != "" && regexp.MustCompile(`\b`+field+`\b`).MatchString(doc)
}

// text is a comment as one paragraph.
func text(g *ast.CommentGroup) string {
	return strings.Join(strings.Fields(g.Text()), " ")
}

func join(parts ...string) string {
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if r := p[0]; r >= 'a' && r <= 'z' {
			p = strings.ToUpper(p[:1]) + p[1:]
		}
		if !strings.HasSuffix(p, ".") && !strings.HasSuffix(p, ")") {
			p += "."
		}
		out = append(out, p)
	}
	return strings.Join(out, " ")
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
