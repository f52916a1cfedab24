package graph

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// testEnv is the real domain (its catalog, purchases, challenges and the
// order's life) over in-memory fakes behind the real handler on a real HTTP
// server.
type testEnv struct {
	svc     *seckill.Purchases
	store   *memStore
	adm     *memAdmitter
	queue   *memQueue
	bus     *memBus
	tokens  *auth.Tokens
	handler http.Handler
	srv     *httptest.Server
	logs    *testenv.LogBuffer
}

func newTestEnv(tb testing.TB, opts Options) *testEnv {
	tb.Helper()
	e := &testEnv{
		store:  newMemStore(),
		adm:    newMemAdmitter(),
		queue:  &memQueue{},
		bus:    newMemBus(),
		tokens: auth.NewTokens([]byte("graph-test-secret-graph-test-secret"), "seckill-test"),
		logs:   &testenv.LogBuffer{},
	}
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d, purchases := newDomain(tb, e, logger)
	e.svc = purchases
	if opts.Logger == nil {
		opts.Logger = logger
	}
	e.handler = NewHandler(d, e.tokens, opts)
	e.srv = httptest.NewServer(e.handler)
	tb.Cleanup(e.srv.Close)
	return e
}

// token issues a token for a user; admins get the admin role.
func (e *testEnv) token(tb testing.TB, userID int64, admin bool) string {
	tb.Helper()
	s, err := e.tokens.Issue(userID, admin, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// gqlResponse is a GraphQL response as a client reads it.
type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

func (e gqlError) code() string  { s, _ := e.Extensions["code"].(string); return s }
func (e gqlError) field() string { s, _ := e.Extensions["field"].(string); return s }

// post sends one operation over real HTTP and returns the status, the
// decoded response and the raw body.
func (e *testEnv) post(tb testing.TB, token, query string, vars map[string]any) (int, gqlResponse, string) {
	tb.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		tb.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.srv.URL, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return send(tb, req)
}

// send sends req and returns the status, the decoded response and the raw
// body.
func send(tb testing.TB, req *http.Request) (int, gqlResponse, string) {
	tb.Helper()
	resp, raw := roundTrip(tb, req)
	var out gqlResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		tb.Fatalf("status %d, body is not JSON: %v\n%s", resp.StatusCode, err, raw)
	}
	return resp.StatusCode, out, string(raw)
}

// roundTrip sends req and returns the response, whose body it has read and
// closed, and the body.
func roundTrip(tb testing.TB, req *http.Request) (*http.Response, []byte) {
	tb.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, raw
}

// onlyError returns the single error of a response, failing otherwise.
func onlyError(tb testing.TB, r gqlResponse, raw string) gqlError {
	tb.Helper()
	if len(r.Errors) != 1 {
		tb.Fatalf("want exactly one error, got %d: %s", len(r.Errors), raw)
	}
	return r.Errors[0]
}

const addVoucherMutation = `mutation Add($input: AddSeckillVoucherInput!) {
  addSeckillVoucher(input: $input) {
    id shopId title subTitle rules payValue actualValue type
    seckill { stock remaining sold beginTime endTime status }
  }
}`

// validVoucherInput returns an input that passes validation, for a sale
// that is open now.
func validVoucherInput() map[string]any {
	now := time.Now().UTC()
	return map[string]any{
		"shopId":      "7",
		"title":       "Half-price hot pot",
		"subTitle":    "weekdays only",
		"rules":       "one per table",
		"payValue":    5000,
		"actualValue": 10000,
		"stock":       3,
		"beginTime":   now.Add(-time.Minute).Format(time.RFC3339),
		"endTime":     now.Add(time.Hour).Format(time.RFC3339),
	}
}

// addVoucher creates an open campaign as an admin and returns its id.
func (e *testEnv) addVoucher(tb testing.TB, input map[string]any) string {
	tb.Helper()
	status, resp, raw := e.post(tb, e.token(tb, 1, true), addVoucherMutation, map[string]any{"input": input})
	if status != http.StatusOK || len(resp.Errors) != 0 {
		tb.Fatalf("addSeckillVoucher: status %d: %s", status, raw)
	}
	var data struct {
		AddSeckillVoucher struct{ ID string }
	}
	if err := json.Unmarshal(resp.Data, &data); err != nil {
		tb.Fatal(err)
	}
	return data.AddSeckillVoucher.ID
}

// newDomain builds the domain's parts over e's fakes.
func newDomain(tb testing.TB, e *testEnv, logger *slog.Logger) (Domain, *seckill.Purchases) {
	tb.Helper()
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	now := time.Now
	challenger := seckill.NewChallenger([]byte("graph-test-challenges"), time.Minute, time.Minute)
	challenges, err := seckill.NewChallenges(e.store, challenger, now)
	must(err)
	catalog, err := seckill.NewCatalog(seckill.CatalogDeps{Store: e.store, Auditor: e.store, Admission: e.adm,
		Admitter: e.adm, Challenges: challenges, Logger: logger, Now: now})
	must(err)
	purchases, err := seckill.NewPurchases(seckill.PurchaseDeps{Orders: e.store, Campaigns: e.store, Admitter: e.adm,
		Outbox: e.adm, Rebuilder: e.adm, Queue: e.queue, Bus: e.bus, Limiter: seckill.NoLimit{}, Challenger: challenger,
		Logger: logger, Now: now})
	must(err)
	refunds, err := seckill.NewRefunds(noLife{}, seckill.NoPaymentProvider{}, noLife{}, e.store, logger,
		seckill.RefundConfig{ConfirmWait: time.Minute, MaxSends: 1})
	must(err)
	life, err := seckill.NewLife(seckill.LifeDeps{Store: noLife{}, Returner: noLife{}, Orders: purchases, Bus: e.bus,
		Refunds: refunds, Opener: seckill.NoPaymentOpener{}, Auditor: e.store, Logger: logger})
	must(err)
	return Domain{Catalog: catalog, Purchases: purchases, Challenges: challenges, Life: life}, purchases
}

// noLife stands for the order's life and refunds, which these tests do not
// reach (internal/app's do, on Postgres): it has no orders to change.
type noLife struct {
	seckill.OrderLife
	seckill.RefundStore
	seckill.UnitReturner
	seckill.RefundQueue
}
