package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"seckill/internal/auth"
	"seckill/internal/config"
	"seckill/internal/obs"
	"seckill/internal/seckill"
	"seckill/internal/store/storetest"
	"seckill/internal/testenv"
)

// testEnv is a running seckill: real Postgres (a fresh database), real Redis
// (this package's database, emptied first), the HTTP API on a test server,
// and optionally the workers.
type testEnv struct {
	t      *testing.T
	app    *App
	srv    *httptest.Server
	url    string // the API's base URL
	ctx    context.Context
	worker func() // starts the workers; stopped at cleanup
	logs   *testenv.LogBuffer
	dsn    string // the database
	opts   []envOption
}

type envOption func(m map[string]string)

func newTestEnv(t *testing.T, dsn string, opts ...envOption) *testEnv {
	t.Helper()
	if dsn == "" {
		dsn = storetest.NewDSN(t)
	}
	return startTestEnv(t, dsn, true, opts...)
}

// peer starts another seckill process on e's database and Redis (another
// instance of a deployment), with e's options and then opts; it leaves
// Redis as it is.
func (e *testEnv) peer(opts ...envOption) *testEnv {
	e.t.Helper()
	return startTestEnv(e.t, e.dsn, false, append(slices.Clone(e.opts), opts...)...)
}

func startTestEnv(t *testing.T, dsn string, flush bool, opts ...envOption) *testEnv {
	t.Helper()
	vars := testenv.ServerVars(dsn, testenv.RedisURL(t, testenv.OwnedDB(testenv.RedisDBApp)))
	vars["SECKILL_RECONCILE_INTERVAL"] = "200ms"
	vars["SECKILL_RECONCILE_AFTER"] = "1s"
	for _, o := range opts {
		o(vars)
	}
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.LogBuffer{}
	logger := slog.New(obs.NewLogHandler(slog.NewTextHandler(io.MultiWriter(testWriter{t}, logs), &slog.HandlerOptions{Level: cfg.LogLevel})))
	a, srv := testenv.StartServer(t, func(ctx context.Context) (*App, error) {
		a, err := New(ctx, cfg, logger)
		if err != nil {
			return nil, err
		}
		if flush {
			if err := testenv.FlushRedis(ctx, a.Redis); err != nil {
				a.Close()
				return nil, err
			}
		}
		if err := a.Admitter.Start(ctx); err != nil {
			a.Close()
			return nil, err
		}
		return a, nil
	})
	return &testEnv{t: t, app: a, srv: srv.HTTP, url: srv.URL, ctx: srv.Ctx, worker: srv.StartWorker, logs: logs, dsn: dsn, opts: opts}
}

// testWriter sends logs to the test's log, so they show only on failure.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func (e *testEnv) token(userID int64, admin bool) string {
	e.t.Helper()
	tok, err := e.app.Tokens.Issue(userID, admin, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

func (r *gqlResponse) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// gql posts a GraphQL request through the real HTTP handler.
func (e *testEnv) gql(client *http.Client, token, query string, vars map[string]any, data any) (*gqlResponse, error) {
	return postGQL(client, e.url, token, query, vars, data)
}

// postGQL posts a GraphQL request to the server at base (with token, when
// set; on client, or http.DefaultClient) and decodes its data into data.
func postGQL(client *http.Client, base, token, query string, vars map[string]any, data any) (*gqlResponse, error) {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	var out gqlResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("status %d, body %q: %w", res.StatusCode, raw, err)
	}
	if data != nil && len(out.Data) > 0 && string(out.Data) != "null" {
		if err := json.Unmarshal(out.Data, data); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// createCampaign adds a campaign that is on sale now through GraphQL.
func (e *testEnv) createCampaign(stock int) int64 {
	e.t.Helper()
	var data struct {
		AddSeckillVoucher struct{ ID string } `json:"addSeckillVoucher"`
	}
	in := map[string]any{"in": map[string]any{
		"shopId": "1", "title": "100 off 200", "payValue": 100, "actualValue": 200, "stock": stock,
		"beginTime": time.Now().Add(-time.Minute).Format(time.RFC3339),
		"endTime":   time.Now().Add(time.Hour).Format(time.RFC3339),
	}}
	const create = `mutation($in: AddSeckillVoucherInput!) { addSeckillVoucher(input: $in) { id } }`
	res, err := e.gql(nil, e.token(1, true), create, in, &data)
	// UNAVAILABLE is the client's to try again: a warm that waits for a
	// replica (SECKILL_REDIS_MIN_REPLICAS) can run out of its 200 ms
	// beside a loaded make test.
	for try := 0; err == nil && res.code() == seckill.EUNAVAILABLE && try < 5; try++ {
		time.Sleep(300 * time.Millisecond)
		res, err = e.gql(nil, e.token(1, true), create, in, &data)
	}
	if err != nil || len(res.Errors) > 0 {
		e.t.Fatalf("addSeckillVoucher: %v %+v", err, res)
	}
	id, err := strconv.ParseInt(data.AddSeckillVoucher.ID, 10, 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

type purchase struct {
	Outcome string  `json:"outcome"`
	OrderID *string `json:"orderId"`
}

func (e *testEnv) buy(client *http.Client, token string, voucherID int64) (purchase, error) {
	return buyAt(client, e.url, token, voucherID)
}

// buyAt buys a unit of voucherID from the server at base.
func buyAt(client *http.Client, base, token string, voucherID int64) (purchase, error) {
	var data struct {
		Seckill purchase `json:"seckill"`
	}
	res, err := postGQL(client, base, token, `mutation($v: ID!) { seckill(voucherId: $v) { outcome orderId message } }`,
		map[string]any{"v": strconv.FormatInt(voucherID, 10)}, &data)
	if err != nil {
		return purchase{}, err
	}
	if len(res.Errors) > 0 {
		return purchase{}, fmt.Errorf("seckill: %s (%s)", res.Errors[0].Message, res.code())
	}
	return data.Seckill, nil
}

// rows counts the orders Postgres holds for a voucher.
func (e *testEnv) rows(voucherID int64) int {
	e.t.Helper()
	n, err := e.app.DB.NewSelect().Table("voucher_order").Where("voucher_id = ?", voucherID).Count(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *testEnv) pgStock(voucherID int64) int64 {
	e.t.Helper()
	var stock int64
	if err := e.app.DB.NewSelect().Table("seckill_campaign").Column("stock").Where("voucher_id = ?", voucherID).Scan(e.ctx, &stock); err != nil {
		e.t.Fatal(err)
	}
	return stock
}

func (e *testEnv) remaining(voucherID int64) int64 {
	e.t.Helper()
	m, err := e.app.Admitter.Remaining(e.ctx, []int64{voucherID})
	if err != nil {
		e.t.Fatal(err)
	}
	r, ok := m[voucherID]
	if !ok {
		e.t.Fatalf("Redis does not hold campaign %d", voucherID)
	}
	return r
}

// eventually polls cond until it holds or the timeout passes.
// reconciler runs e's reconciler loop, as serve does, until the test ends:
// it requeues an admission whose enqueue failed.
func (e *testEnv) reconciler() {
	ctx, stop := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { e.app.RunReconciler(ctx) })
	e.t.Cleanup(func() { stop(); wg.Wait() })
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	eventuallyWhy(t, timeout, what, func() string {
		if cond() {
			return ""
		}
		return "not yet"
	})
}

// eventuallyWhy is eventually for a condition that says why it does not
// hold yet ("" once it does): a timeout reports the last reason.
func eventuallyWhy(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func asUser(ctx context.Context, id int64, admin bool) context.Context {
	return seckill.NewContextWithUser(ctx, &seckill.User{ID: id, Admin: admin})
}

// forgedToken is a well-formed token signed with another secret.
func forgedToken(t *testing.T) string {
	t.Helper()
	tok, err := auth.NewTokens([]byte("another-secret-another-secret-another"), "seckill").Issue(1, true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
