package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"seckill/internal/bench/benchtest"
	"seckill/internal/bench/compare"
	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
)

// TestRunAgainstFake runs a whole burst against the fake server, verified
// through GraphQL only (no Postgres, no Redis).
func TestRunAgainstFake(t *testing.T) {
	f := benchtest.NewFakeServer(t, 0)
	var progress bytes.Buffer
	res, err := Run(t.Context(), Config{URL: f.URL, Users: 100, Stock: 20, JWTSecret: benchtest.Secret, JWTIssuer: "seckill", Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if !r.OK || r.Accepted != 20 || r.Answered != 100 || r.Persistence.Source != report.SourceGraphQL || r.Persistence.Rows != 20 || !r.Persistence.Complete {
		t.Errorf("report: %+v %+v", r, r.Persistence)
	}
	if !strings.Contains(progress.String(), "seckill  [####################] 100%") {
		t.Errorf("progress: %q", progress.String())
	}
}

func TestRunErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/graphql"
	ln.Close()

	notGraphQL := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<html>404 page not found</html>")
	}))
	defer notGraphQL.Close()
	fake := benchtest.NewFakeServer(t, 0)

	for _, tc := range []struct {
		name   string
		url    string
		secret string
		want   string
	}{
		{"server down", down, benchtest.Secret, "cannot reach " + down + ": connection refused; is `seckill serve` running?"},
		{"wrong URL", notGraphQL.URL + "/x", benchtest.Secret, "answered 404 Not Found with \"<html>404 page not found</html>\" (text/html): not a GraphQL endpoint"},
		{"wrong secret", fake.URL, "another-secret-that-is-long-enough-0123456789", "rejected the bench's tokens (invalid token): the bench signs them with SECKILL_JWT_SECRET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := Run(ctx, Config{URL: tc.url, JWTSecret: tc.secret, JWTIssuer: "seckill"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Compare: []string{"fast"}}, `unknown target "fast" (want sync, ceiling, ceiling-process, fsync, wait, limit or base)`},
		{Config{Stock: -1}, "--stock"},
		{Config{Rate: 0.5, Duration: time.Second}, "less than one request"},
		{Config{Users: maxUsers + 1}, "--users"},
		{Config{TokenAlgs: []string{"ps256"}}, `--token-alg: unknown algorithm "ps256"`},
		{Config{TokenAlgs: []string{"rs256", "rs256"}}, "--token-alg: rs256 twice"},
		{Config{TokenAlgs: []string{"hs256", "es256"}, VoucherID: 3}, "omit --voucher"},
		{Config{TokenAlgs: []string{"es256"}, Compare: []string{CompareBase}}, "not with --expiry-storm or --compare base"},
		{Config{Room: RoomConfig{Rate: 5}}, "go with --waiting-room"},
		{Config{Room: RoomConfig{On: true}, VoucherID: 3}, "omit --voucher"},
		{Config{Room: RoomConfig{On: true}, Rate: 100}, "omit --rate, --duration and --attempts"},
		{Config{Room: RoomConfig{On: true}, Compare: []string{CompareSync}}, "omit --compare"},
		{Config{Room: RoomConfig{On: true, Pass: 5 * time.Second}}, "--room-pass"},
		{Config{Room: RoomConfig{On: true, Opens: time.Second}}, "at least 2s"},
		{Config{Room: RoomConfig{On: true, Opens: 1500 * time.Millisecond}}, "whole seconds"},
		{Config{Rounds: 21, Compare: []string{CompareBase}}, "--rounds must be between 1 and 20"},
		{Config{Rounds: 3}, "--rounds goes with --compare base, or with --compare ceiling and ceiling-process alone"},
		{Config{Rounds: 3, Compare: []string{CompareCeiling, CompareSync}}, "--rounds goes with --compare base, or with --compare ceiling and ceiling-process alone"},
		{Config{Rounds: 3, Compare: []string{CompareCeiling}, VoucherID: 3}, "omit --voucher"},
		{Config{Rounds: 3, Compare: []string{CompareCeiling}, TokenAlgs: []string{TokenES256}}, "--token-alg"},
	} {
		if _, err := tc.cfg.spec(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
	c := Config{Rate: 1000, Stock: 100_000}
	s, err := c.spec()
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != load.ModeOpen || s.Duration != DefaultDuration || s.Users != 10_000 || s.MaxInFlight != DefaultMaxInFlight {
		t.Errorf("open defaults: %+v", s)
	}
	c = Config{}
	if s, _ = c.spec(); s.Mode != load.ModeBurst || s.Users != 1000 || s.Concurrency != 1000 || s.Attempts != 1 || c.URL != DefaultURL ||
		len(c.TokenAlgs) != 1 || c.TokenAlgs[0] != TokenHS256 || c.IdPAddr != DefaultIdPAddr || c.IdPAudience != DefaultIdPAudience {
		t.Errorf("burst defaults: %+v", s)
	}
	c = Config{Users: 900, Room: RoomConfig{On: true}, Concurrency: 10}
	if s, err = c.spec(); err != nil || c.Room.Rate != 300 || c.Room.Opens != DefaultRoomOpens || s.Concurrency != 900 {
		t.Errorf("waiting room defaults: %+v %+v %v", c.Room, s, err)
	}
}

func TestStormValidation(t *testing.T) {
	ok := Config{DatabaseURL: "postgres://x", RedisURL: "redis://x", Pay: PayConfig{WebhookSecret: "s"}}
	with := func(f func(c *Config)) Config {
		c := ok
		f(&c)
		return c
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{with(func(c *Config) { c.Storm = StormConfig{Kind: "refund", Units: 10} }), `unknown storm "refund"`},
		{with(func(c *Config) { c.Storm = StormConfig{Kind: StormCancel, Units: maxStormUnits + 1} }), "--cancel-storm must be between 1 and"},
		{with(func(c *Config) { c.Storm = StormConfig{Kind: StormCancel, Units: 10, Closers: maxStormClosers + 1} }), "--storm-callers"},
		{with(func(c *Config) { c.Storm = StormConfig{Units: 10, Closers: 8} }), "omit it with --expiry-storm"},
		{with(func(c *Config) { c.Storm, c.Pay.Window = StormConfig{Kind: StormPayment, Units: 10}, 5*time.Second }), "omit --pay-window"},
		{with(func(c *Config) { c.Storm, c.Pay.WebhookSecret = StormConfig{Kind: StormPayment, Units: 10}, "" }), "no webhook secret"},
		{with(func(c *Config) { c.Storm, c.Compare = StormConfig{Kind: StormCancel, Units: 10}, []string{CompareSync} }), "--cancel-storm runs against the server at --url only"},
		{with(func(c *Config) { c.Storm, c.RedisURL = StormConfig{Kind: StormPayment, Units: 10}, "" }), "--payment-storm reads the server's Postgres and Redis"},
		{with(func(c *Config) { c.Storm, c.Pay.Ratio = StormConfig{Kind: StormCancel, Units: 10}, 0.5 }), "omit --pay-ratio"},
	} {
		if err := tc.cfg.validateStorm(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg.Storm, err, tc.want)
		}
	}
	c := with(func(c *Config) { c.Storm = StormConfig{Kind: StormPayment, Units: 10} })
	if err := c.validateStorm(); err != nil {
		t.Fatal(err)
	}
	want := StormConfig{Kind: StormPayment, Units: 10, Window: time.Hour, Callers: DefaultStormCallers, ProbeDuration: DefaultProbeDuration,
		ProbeCallers: DefaultProbeCallers, ProbeUsers: DefaultProbeUsers, Closers: DefaultStormClosers, Timeout: DefaultStormTimeout(10)}
	if c.Storm != want || c.Pay.WebhookSecret != "s" || c.Pay.On {
		t.Errorf("payment storm defaults: %+v, pay %+v", c.Storm, c.Pay)
	}
	c = with(func(c *Config) { c.Storm = StormConfig{Units: 4000} })
	if err := c.validateStorm(); err != nil || c.Storm.Kind != StormExpiry || c.Storm.Window != 12*time.Second || c.Storm.Closers != 0 {
		t.Errorf("expiry storm defaults: %+v %v", c.Storm, err)
	}
}

// TestInterrupt checks that a cancelled run stops sending at once and still
// reports what it saw.
func TestInterrupt(t *testing.T) {
	f := benchtest.NewFakeServer(t, 20*time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Interrupt once the load is under way (setting up takes a while on a
	// busy machine), as Ctrl-C would.
	interrupted := make(chan time.Time, 1)
	go func() {
		for f.Purchases.Load() < 20 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		interrupted <- time.Now()
		cancel()
	}()
	res, err := Run(ctx, Config{URL: f.URL, Rate: 200, Duration: 10 * time.Second, Stock: 50, JWTSecret: benchtest.Secret, JWTIssuer: "seckill"})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(<-interrupted); took > 5*time.Second {
		t.Errorf("the run ended %v after the interrupt", took)
	}
	if !res.Interrupted || !res.Runs[0].Interrupted {
		t.Error("result not marked interrupted")
	}
	if s := res.Runs[0].Sent; s == 0 || s >= 2000 {
		t.Errorf("sent %d requests before the interrupt", s)
	}
}

// TestPayNeedsPostgres checks that a paying run that cannot read the
// server's Postgres stops before the load: it could not tell units resold
// from units oversold.
func TestPayNeedsPostgres(t *testing.T) {
	f := benchtest.NewFakeServer(t, 0)
	_, err := Run(t.Context(), Config{URL: f.URL, Users: 10, Stock: 5, JWTSecret: benchtest.Secret, JWTIssuer: "seckill",
		Pay: PayConfig{On: true, Ratio: 0.5, WebhookSecret: "webhook-secret-0123456789"}})
	if err == nil || !strings.Contains(err.Error(), "cannot verify payments without the server's Postgres") {
		t.Errorf("error %v", err)
	}
	if n := f.Purchases.Load(); n != 0 {
		t.Errorf("%d purchases sent", n)
	}
}

// TestServeCeilingRefusesBadSettings: `seckill-bench serve-ceiling` says
// what is wrong with its flags or environment and serves nothing.
func TestServeCeilingRefusesBadSettings(t *testing.T) {
	env := map[string]string{"SECKILL_JWT_SECRET": benchtest.Secret, "SECKILL_REDIS_URL": "redis://127.0.0.1:1/0"}
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--until", "tomorrow"}, env, "--until"},
		{[]string{"--until", until}, map[string]string{}, "needs SECKILL_JWT_SECRET"},
		{[]string{"--until", until}, env, "not reachable"},
	} {
		err := ServeCeiling(t.Context(), tc.args, func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestCeilingProcessThatExits: a ceiling process that ends before it
// answers fails the start at once, with what it printed.
func TestCeilingProcessThatExits(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := compare.StartCeilingProcess(ctx, "false", t.TempDir(), "redis://127.0.0.1:1/0", 0, 10, time.Now().Add(time.Hour), benchtest.Secret, "seckill")
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("error %v, want the process's exit", err)
	}
}
