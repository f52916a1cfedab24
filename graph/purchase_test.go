package graph

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"seckill/graph/generated"
	"seckill/graph/model"
	"seckill/internal/seckill"
)

// purchaseCase is one request sent to both handlers.
type purchaseCase struct {
	name        string
	body        string // raw request body; {{V}} becomes the voucher id
	token       string // "user", "user2", "admin", "bad" or "" (anonymous)
	contentType string // default application/json
	accept      string
	method      string // default POST
	fast        bool   // whether the fast path must answer it
}

const buyDoc = `mutation Buy($voucherId: ID!) { seckill(voucherId: $voucherId) { outcome orderId } }`

func purchaseCorpus() []purchaseCase {
	q := func(query, vars string) string {
		b := `{"query":` + quote(query)
		if vars != "" {
			b += `,"variables":` + vars
		}
		return b + "}"
	}
	v := `{"voucherId":"{{V}}"}`
	return []purchaseCase{
		// What buyers send: answered by the fast path.
		{name: "bench document", body: q(buyDoc, v), token: "user", fast: true},
		{name: "the same user again", body: q(buyDoc, v), token: "user", fast: true},
		{name: "anonymous operation, every field", body: q(`mutation($v: ID!){seckill(voucherId:$v){outcome orderId message retryAfter __typename}}`, `{"v":"{{V}}"}`), token: "user2", fast: true},
		{name: "retryAfter alone, aliased", body: q(`mutation($v: ID!){seckill(voucherId:$v){wait: retryAfter}}`, `{"v":"{{V}}"}`), token: "user2", fast: true},
		{name: "aliases", body: q(`mutation { buy: seckill(voucherId: "{{V}}") { o: outcome id: orderId m: message t: __typename } }`, ""), token: "user3", fast: true},
		{name: "literal id, variables null", body: `{"query":` + quote(`mutation { seckill(voucherId: "{{V}}") { outcome message } }`) + `,"variables":null}`, token: "user4", fast: true},
		{name: "operation name given", body: `{"query":` + quote(buyDoc) + `,"operationName":"Buy","variables":` + v + `}`, token: "user5", fast: true},
		{name: "extensions null", body: `{"query":` + quote(buyDoc) + `,"variables":` + v + `,"extensions":null}`, token: "user6", fast: true},
		{name: "content type with charset", body: q(buyDoc, v), token: "user7", contentType: "application/json; charset=utf-8", fast: true},
		{name: "accept json", body: q(buyDoc, v), token: "user8", accept: "application/json", fast: true},
		{name: "sold out", body: q(buyDoc, v), token: "user9", fast: true},
		{name: "order id in a string with escapes", body: q(buyDoc, `{"voucherId":"\u0031"}`), token: "user10", fast: true},
		{name: "keys in another case", body: `{"Query":` + quote(buyDoc) + `,"Variables":` + v + `}`, token: "user", fast: true},
		// Errors the resolver or the service report: still the fast path.
		{name: "anonymous", body: q(buyDoc, v), fast: true},
		{name: "admin is a user too", body: q(buyDoc, v), token: "admin", fast: true},
		{name: "not a number", body: q(buyDoc, `{"voucherId":"abc"}`), token: "user", fast: true},
		{name: "zero", body: q(buyDoc, `{"voucherId":"0"}`), token: "user", fast: true},
		{name: "negative", body: q(buyDoc, `{"voucherId":"-1"}`), token: "user", fast: true},
		{name: "too large", body: q(buyDoc, `{"voucherId":"99999999999999999999"}`), token: "user", fast: true},
		{name: "unknown voucher", body: q(buyDoc, `{"voucherId":"4242"}`), token: "user", fast: true},
		{name: "html in the id", body: q(buyDoc, `{"voucherId":"<b>&amp;</b>"}`), token: "user", fast: true},
		// Everything else goes to gqlgen.
		{name: "bad token", body: q(buyDoc, v), token: "bad"},
		{name: "id as a number", body: q(buyDoc, `{"voucherId":{{V}}}`), token: "user"},
		{name: "id null", body: q(buyDoc, `{"voucherId":null}`), token: "user"},
		{name: "id missing", body: q(buyDoc, `{}`), token: "user"},
		{name: "no variables", body: q(buyDoc, ""), token: "user"},
		{name: "extra variable", body: q(buyDoc, `{"voucherId":"{{V}}","x":1}`), token: "user"},
		{name: "id is a list", body: q(buyDoc, `{"voucherId":["{{V}}"]}`), token: "user"},
		{name: "literal int", body: q(`mutation { seckill(voucherId: {{V}}) { outcome } }`, ""), token: "user"},
		{name: "literal with variables sent", body: q(`mutation { seckill(voucherId: "{{V}}") { outcome } }`, v), token: "user"},
		{name: "nullable variable", body: q(`mutation($v: ID){seckill(voucherId:$v){outcome}}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "default value", body: q(`mutation($v: ID! = "1"){seckill(voucherId:$v){outcome}}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "wrong operation name", body: `{"query":` + quote(buyDoc) + `,"operationName":"Sell","variables":` + v + `}`, token: "user"},
		{name: "two operations", body: `{"query":` + quote(buyDoc+` mutation Other($voucherId: ID!) { seckill(voucherId: $voucherId) { outcome } }`) + `,"operationName":"Buy","variables":` + v + `}`, token: "user"},
		{name: "include directive", body: q(`mutation($v: ID!){seckill(voucherId:$v){outcome orderId @include(if: true)}}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "skip on the field", body: q(`mutation($v: ID!){seckill(voucherId:$v) @skip(if: false) {outcome}}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "inline fragment", body: q(`mutation($v: ID!){seckill(voucherId:$v){... on SeckillResult { outcome }}}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "named fragment", body: q(`mutation($v: ID!){seckill(voucherId:$v){...R}} fragment R on SeckillResult { outcome }`, `{"v":"{{V}}"}`), token: "user"},
		{name: "same key twice", body: q(`mutation($v: ID!){seckill(voucherId:$v){outcome outcome}}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "two root fields", body: q(`mutation($v: ID!){a: seckill(voucherId:$v){outcome} b: seckill(voucherId:$v){outcome}}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "unknown field", body: q(`mutation($v: ID!){seckill(voucherId:$v){outcome price}}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "no selection", body: q(`mutation($v: ID!){seckill(voucherId:$v)}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "syntax error", body: q(`mutation($v: ID!){seckill(voucherId:$v){outcome}`, `{"v":"{{V}}"}`), token: "user"},
		{name: "a query", body: q(`query { vouchers { id } }`, ""), token: "user"},
		{name: "a query that mentions seckill", body: q(`query { vouchers { id seckill { stock } } }`, ""), token: "user"},
		{name: "empty query", body: q(``, ""), token: "user"},
		{name: "persisted query extension", body: `{"query":` + quote(buyDoc) + `,"variables":` + v + `,"extensions":{"persistedQuery":{"version":1,"sha256Hash":"00"}}}`, token: "user"},
		{name: "malformed JSON", body: `{"query":`, token: "user"},
		{name: "trailing data", body: q(buyDoc, v) + ` {}`, token: "user"},
		{name: "query not a string", body: `{"query":1}`, token: "user"},
		{name: "accept graphql-response", body: q(buyDoc, v), token: "user", accept: "application/graphql-response+json"},
		{name: "accept html", body: q(buyDoc, v), token: "user", accept: "text/html"},
		{name: "text/plain", body: q(buyDoc, v), token: "user", contentType: "text/plain"},
		{name: "GET", method: http.MethodGet, token: "user"},
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// answer is what a client can see of a response.
type answer struct {
	status int
	header string
	body   string
}

func (a answer) String() string { return fmt.Sprintf("%d %s\n%s", a.status, a.header, a.body) }

func sendCase(t *testing.T, url string, tokens map[string]string, c purchaseCase, voucher string) answer {
	t.Helper()
	method := cmp.Or(c.method, http.MethodPost)
	body := strings.ReplaceAll(c.body, "{{V}}", voucher)
	if method == http.MethodGet {
		url += "?query=" + strings.ReplaceAll("mutation{seckill(voucherId:\"V\"){outcome}}", "V", voucher)
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", cmp.Or(c.contentType, "application/json"))
	if c.accept != "" {
		req.Header.Set("Accept", c.accept)
	}
	if tok := tokens[c.token]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, raw := roundTrip(t, req)
	h := resp.Header.Clone()
	h.Del("Date")
	var hb bytes.Buffer
	_ = h.Write(&hb)
	return answer{status: resp.StatusCode, header: hb.String(), body: string(raw)}
}

// twinEnvs are two identical services, one behind the fast path and one
// behind gqlgen alone, fed the same requests in the same order.
type twinEnvs struct {
	fast, generic *testEnv
	fastHits      atomic.Int64
	tokens        map[string]string
}

func newTwinEnvs(t *testing.T) *twinEnvs {
	tw := &twinEnvs{}
	tw.fast = newTestEnv(t, Options{onFastPath: func() { tw.fastHits.Add(1) }})
	tw.generic = newTestEnv(t, Options{genericOnly: true})
	tw.tokens = map[string]string{"admin": tw.fast.token(t, 1, true), "bad": "not-a-token"}
	for i := range 11 {
		name := "user"
		if i > 0 {
			name = fmt.Sprintf("user%d", i+1)
		}
		tw.tokens[name] = tw.fast.token(t, int64(100+i), false)
	}
	return tw
}

// TestPurchaseFastPathAgrees sends every request of the corpus to a
// handler with the fast path and to one without, over two services in the
// same state, and requires the same status, headers and bytes, and the
// same internal-error logging; it also checks which path answered.
func TestPurchaseFastPathAgrees(t *testing.T) {
	tw := newTwinEnvs(t)
	input := validVoucherInput()
	input["stock"] = 8
	vf, vg := tw.fast.addVoucher(t, input), tw.generic.addVoucher(t, input)
	if vf != vg {
		t.Fatalf("the twins gave different voucher ids: %s and %s", vf, vg)
	}
	for _, c := range purchaseCorpus() {
		t.Run(c.name, func(t *testing.T) {
			before := tw.fastHits.Load()
			logsF, logsG := tw.fast.logs.CountLines("internal error"), tw.generic.logs.CountLines("internal error")
			got := sendCase(t, tw.fast.srv.URL, tw.tokens, c, vf)
			want := sendCase(t, tw.generic.srv.URL, tw.tokens, c, vg)
			if got != want {
				t.Errorf("fast path answered\n%v\ngqlgen answered\n%v", got, want)
			}
			if fast := tw.fastHits.Load() > before; fast != c.fast {
				t.Errorf("answered by the fast path: %v, want %v (%s)", fast, c.fast, got.body)
			}
			if f, g := tw.fast.logs.CountLines("internal error")-logsF, tw.generic.logs.CountLines("internal error")-logsG; f != g {
				t.Errorf("internal errors logged: %d by the fast path, %d by gqlgen", f, g)
			}
		})
	}
}

// TestPurchaseFastPathFailures compares the answers to a service that
// fails: internal errors (logged once, never shown), a panic, domain
// errors and a resolver that returns nothing.
func TestPurchaseFastPathFailures(t *testing.T) {
	tw := newTwinEnvs(t)
	input := validVoucherInput()
	vf, vg := tw.fast.addVoucher(t, input), tw.generic.addVoucher(t, input)
	for _, mode := range []string{"internal", "panic", "not found", "conflict", "unknown outcome"} {
		t.Run(mode, func(t *testing.T) {
			for _, e := range []*testEnv{tw.fast, tw.generic} {
				e.adm.setFailure(mode)
			}
			c := purchaseCase{body: `{"query":` + quote(buyDoc) + `,"variables":{"voucherId":"{{V}}"}}`, token: "user"}
			before := tw.fastHits.Load()
			logsF, logsG := tw.fast.logs.CountLines("level=ERROR"), tw.generic.logs.CountLines("level=ERROR")
			got, want := sendCase(t, tw.fast.srv.URL, tw.tokens, c, vf), sendCase(t, tw.generic.srv.URL, tw.tokens, c, vg)
			if got != want {
				t.Errorf("fast path answered\n%v\ngqlgen answered\n%v", got, want)
			}
			if tw.fastHits.Load() == before {
				t.Error("the fast path did not answer")
			}
			if strings.Contains(got.body, "secret") {
				t.Errorf("an internal detail reached the client: %s", got.body)
			}
			f, g := tw.fast.logs.CountLines("level=ERROR")-logsF, tw.generic.logs.CountLines("level=ERROR")-logsG
			if f != g {
				t.Errorf("errors logged: %d by the fast path, %d by gqlgen", f, g)
			}
		})
	}
}

// A purchase refused with a wait (after a wrong answer to the challenge)
// carries retryAfter, in whole seconds rounded up, the same bytes from both
// paths.
func TestPurchaseFastPathRetryAfter(t *testing.T) {
	tw := newTwinEnvs(t)
	input := validVoucherInput()
	vf, vg := tw.fast.addVoucher(t, input), tw.generic.addVoucher(t, input)
	for _, e := range []*testEnv{tw.fast, tw.generic} {
		e.adm.setFailure("waiting")
	}
	c := purchaseCase{body: `{"query":` + quote(`mutation($v: ID!){seckill(voucherId:$v){outcome retryAfter orderId}}`) +
		`,"variables":{"v":"{{V}}"}}`, token: "user"}
	before := tw.fastHits.Load()
	got, want := sendCase(t, tw.fast.srv.URL, tw.tokens, c, vf), sendCase(t, tw.generic.srv.URL, tw.tokens, c, vg)
	if got != want {
		t.Errorf("fast path answered\n%v\ngqlgen answered\n%v", got, want)
	}
	if tw.fastHits.Load() == before {
		t.Error("the fast path did not answer")
	}
	if wantBody := `{"data":{"seckill":{"outcome":"RATE_LIMITED","retryAfter":2,"orderId":null}}}`; got.body != wantBody {
		t.Errorf("body %s, want %s", got.body, wantBody)
	}
}

// TestPurchaseFastPathConcurrent buys from many goroutines through the fast
// path: exactly stock acceptances, one per user, and every answer well
// formed.
func TestPurchaseFastPathConcurrent(t *testing.T) {
	e := newTestEnv(t, Options{})
	input := validVoucherInput()
	input["stock"] = 50
	v := e.addVoucher(t, input)
	const users = 300
	var accepted, soldOut atomic.Int64
	var wg sync.WaitGroup
	for u := range users {
		tok := e.token(t, int64(1000+u), false)
		wg.Go(func() {
			for range 2 {
				_, resp, raw := e.post(t, tok, buyDoc, map[string]any{"voucherId": v})
				switch {
				case len(resp.Errors) != 0:
					t.Errorf("errors: %s", raw)
				case strings.Contains(string(resp.Data), `"ACCEPTED"`):
					accepted.Add(1)
				case strings.Contains(string(resp.Data), `"SOLD_OUT"`), strings.Contains(string(resp.Data), `"ALREADY_PURCHASED"`):
					soldOut.Add(1)
				default:
					t.Errorf("unexpected answer: %s", raw)
				}
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 50 || accepted.Load()+soldOut.Load() != 2*users {
		t.Fatalf("accepted %d, refused %d; want 50 and %d", accepted.Load(), soldOut.Load(), 2*users-50)
	}
}

// setFailure makes Admit fail in one of the ways TestPurchaseFastPathFailures
// compares.
func (a *memAdmitter) setFailure(mode string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failMode = mode
}

func (a *memAdmitter) failure() (seckill.Outcome, error, bool) {
	switch a.failMode {
	case "internal":
		return "", errors.New("redis: dial 10.0.0.7:6379: secret password rejected"), true
	case "panic":
		panic("admission: secret state corrupted")
	case "not found":
		return "", seckill.Errorf(seckill.ENOTFOUND, "voucher not found"), true
	case "conflict":
		return "", seckill.Errorf(seckill.ECONFLICT, "try <again> & later"), true
	case "unknown outcome":
		return seckill.Outcome("TELEPORTED"), nil, true
	}
	return "", nil, false
}

// BenchmarkPurchaseHandler measures the GraphQL edge of a purchase (the
// handler, the resolver and the domain service over in-memory fakes) with
// the fast path and with gqlgen alone. One user buys again and again, so
// every answer after the first is ALREADY_PURCHASED.
func BenchmarkPurchaseHandler(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"fast", Options{}},
		{"gqlgen", Options{genericOnly: true}},
		// With the hook tracing and metrics use, doing nothing.
		{"fast observed", Options{AroundOperations: func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
			return next(ctx)
		}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := newTestEnv(b, bc.opts)
			v := e.addVoucher(b, validVoucherInput())
			body := []byte(`{"query":` + quote(buyDoc) + `,"variables":{"voucherId":"` + v + `"}}`)
			auth := "Bearer " + e.token(b, 7, false)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", auth)
					w := httptest.NewRecorder()
					e.handler.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		})
	}
}

// TestNeedsEscaping checks the shortcut execute takes around json.Marshal:
// whenever needsEscaping says no, the bytes are what json.Marshal writes.
func TestNeedsEscaping(t *testing.T) {
	for _, s := range []string{"plain", "é 中文 😀", "a<b", "a>b", "a&b", "line\u2028sep", "para\u2029sep", "\u20ac euro", "quote \\\" end", "tab\\t"} {
		data := []byte(`{"seckill":{"message":"` + s + `"}}`)
		want, err := json.Marshal(&graphql.Response{Data: data})
		if err != nil {
			t.Fatal(err)
		}
		got := `{"data":` + string(data) + `}`
		if needs := needsEscaping(data); !needs && got != string(want) {
			t.Errorf("%q: needsEscaping says no, but json.Marshal writes %s", s, want)
		} else if needs && got == string(want) && !strings.ContainsAny(s, "<>&\u20ac") {
			t.Errorf("%q: needsEscaping says yes for nothing to escape", s)
		}
	}
}

// TestPurchaseFastPathOddBodies compares the two paths on bodies the fast
// path cannot read whole: one that fails mid-read and one longer than its
// Content-Length. Both go to gqlgen, which must meet the same bytes and
// the same error it would have met alone.
func TestPurchaseFastPathOddBodies(t *testing.T) {
	tw := newTwinEnvs(t)
	body := `{"query":` + quote(buyDoc) + `,"variables":{"voucherId":"1"}}`
	for _, c := range []struct {
		name string
		req  func() *http.Request
	}{
		{"read fails", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader(body[:20]), errReader{errors.New("connection reset")}))
			r.ContentLength = int64(len(body))
			return r
		}},
		{"longer than Content-Length", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body+`   `))
			r.ContentLength = int64(len(body))
			return r
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			serve := func(h http.Handler) answer {
				req := c.req()
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tw.tokens["user"])
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				var hb bytes.Buffer
				_ = w.Header().Write(&hb)
				return answer{status: w.Code, header: hb.String(), body: w.Body.String()}
			}
			before := tw.fastHits.Load()
			got, want := serve(tw.fast.handler), serve(tw.generic.handler)
			if got != want {
				t.Errorf("fast path answered\n%v\ngqlgen answered\n%v", got, want)
			}
			if tw.fastHits.Load() != before {
				t.Error("the fast path answered a body it could not read whole")
			}
		})
	}
}

// TestPurchaseFastPathNoResult: a resolver that returns neither a result
// nor an error gets the answer gqlgen gives to a null non-null field.
func TestPurchaseFastPathNoResult(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	opts := Options{Logger: log}.withDefaults()
	schema := generated.NewExecutableSchema(generated.Config{Resolvers: nilRoot{&Resolver{}}})
	gql := handler.New(schema)
	gql.AddTransport(transport.POST{})
	gql.SetRecoverFunc(recoverFunc(log))
	gql.SetErrorPresenter(presentError(log))
	p := newPurchasePath(schema, &Resolver{}, opts, gql)
	p.resolve = func(ctx context.Context, id string) (*model.SeckillResult, error) {
		return nilMutation{}.Seckill(ctx, id, nil, nil)
	}
	served := false
	p.onServe = func() { served = true }

	body := `{"query":` + quote(buyDoc) + `,"variables":{"voucherId":"1"}}`
	answer := func(h http.Handler) string {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Body.String()
	}
	got, want := answer(p), answer(gql)
	if !served {
		t.Fatal("the fast path did not answer")
	}
	if got != want || !strings.Contains(got, `"data":null`) {
		t.Fatalf("fast path answered\n%s\ngqlgen answered\n%s", got, want)
	}
}

// nilRoot resolves Mutation.seckill to nothing at all.
type nilRoot struct{ *Resolver }

func (r nilRoot) Mutation() generated.MutationResolver { return nilMutation{} }

type nilMutation struct{ generated.MutationResolver }

func (nilMutation) Seckill(context.Context, string, *model.ChallengeAnswer, *string) (*model.SeckillResult, error) {
	return nil, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestClientGoneStopsWork: when a client hangs up, the request's context
// ends, and so does the work done for it, on both paths.
func TestClientGoneStopsWork(t *testing.T) {
	for _, opts := range []Options{{}, {genericOnly: true}} {
		e := newTestEnv(t, opts)
		voucher := e.addVoucher(t, validVoucherInput())
		block := make(chan error)
		e.adm.mu.Lock()
		e.adm.block = block
		e.adm.mu.Unlock()

		ctx, cancel := context.WithCancel(t.Context())
		body, _ := json.Marshal(map[string]any{"query": buyDoc, "variables": map[string]any{"voucherId": voucher}})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.token(t, 3, false))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case <-block: // the purchase is under way
		case <-time.After(10 * time.Second):
			t.Fatal("the purchase never reached admission")
		}
		cancel()
		select {
		case err := <-block:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("genericOnly=%v: admission ended with %v", opts.genericOnly, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("genericOnly=%v: admission goes on after the client went away", opts.genericOnly)
		}
		<-done
	}
}
