package graph

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Limits of what a request may be and how it may come: size, method, transport.

func TestLimits(t *testing.T) {
	e := newTestEnv(t, Options{})

	t.Run("complexity", func(t *testing.T) {
		var q strings.Builder
		q.WriteString("{")
		for i := range 30 {
			fmt.Fprintf(&q, " v%d: vouchers { id title payValue actualValue seckill { stock remaining sold status } }", i)
		}
		q.WriteString(" }")
		_, resp, raw := e.post(t, "", q.String(), nil)
		if err := onlyError(t, resp, raw); err.code() != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Errorf("code = %q: %s", err.code(), raw)
		}
	})

	t.Run("deep introspection", func(t *testing.T) {
		ie := newTestEnv(t, Options{Introspection: true})
		q := `{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }`
		status, resp, raw := ie.post(t, "", q, nil)
		if err := onlyError(t, resp, raw); status != http.StatusOK || err.code() != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("status %d: %s", status, raw)
		}
	})

	t.Run("depth", func(t *testing.T) {
		de := newTestEnv(t, Options{MaxDepth: 2})
		status, resp, raw := de.post(t, "", `query { vouchers { seckill { status } } }`, nil)
		err := onlyError(t, resp, raw)
		if status != http.StatusOK || err.code() != "GRAPHQL_VALIDATION_FAILED" ||
			!strings.Contains(err.Message, "depth 3") {
			t.Errorf("status %d: %s", status, raw)
		}
		// Fragments count where they are spread.
		status, _, raw = de.post(t, "", `query { ...Q } fragment Q on Query { vouchers { ...V } } fragment V on Voucher { seckill { status } }`, nil)
		if status != http.StatusOK {
			t.Errorf("through fragments: status %d: %s", status, raw)
		}
		status, resp, raw = de.post(t, "", `query { vouchers { id seckill { __typename } } }`, nil)
		if status == http.StatusOK && len(resp.Errors) == 0 {
			t.Errorf("depth 3 passed a limit of 2: %s", raw)
		}
		status, resp, raw = de.post(t, "", `query { vouchers { id title } }`, nil)
		if status != http.StatusOK || len(resp.Errors) != 0 {
			t.Errorf("depth 2: status %d: %s", status, raw)
		}
	})

	t.Run("introspection off", func(t *testing.T) {
		status, resp, raw := e.post(t, "", `{ __schema { queryType { name } } }`, nil)
		if err := onlyError(t, resp, raw); status != http.StatusOK || err.code() != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("status %d: %s", status, raw)
		}
		status, resp, raw = e.post(t, "", `{ __typename }`, nil)
		if status != http.StatusOK || len(resp.Errors) != 0 {
			t.Errorf("__typename: status %d: %s", status, raw)
		}
	})

	t.Run("introspection on", func(t *testing.T) {
		ie := newTestEnv(t, Options{Introspection: true})
		status, resp, raw := ie.post(t, "", introspectionQuery, nil)
		if status != http.StatusOK || len(resp.Errors) != 0 {
			t.Fatalf("GraphiQL's introspection query: status %d: %.500s", status, raw)
		}
		if !strings.Contains(raw, "AddSeckillVoucherInput") || !strings.Contains(raw, "Units on sale") {
			t.Errorf("the schema or its descriptions are missing: %.300s", raw)
		}
	})

	t.Run("parse error", func(t *testing.T) {
		status, resp, raw := e.post(t, "", `{ vouchers { id `, nil)
		if err := onlyError(t, resp, raw); status != http.StatusOK || err.code() != "GRAPHQL_PARSE_FAILED" {
			t.Errorf("status %d: %s", status, raw)
		}
	})
}

func TestBodyLimit(t *testing.T) {
	e := newTestEnv(t, Options{})
	big := `{"query":"{ vouchers { id } }` + strings.Repeat(" ", DefaultMaxBodyBytes) + `"}`
	check := func(t *testing.T, req *http.Request) {
		t.Helper()
		status, resp, raw := send(t, req)
		if status != http.StatusRequestEntityTooLarge {
			t.Errorf("status = %d, want 413", status)
		}
		if err := onlyError(t, resp, raw); err.code() != "PAYLOAD_TOO_LARGE" {
			t.Errorf("code = %q", err.code())
		}
	}

	t.Run("with length", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL, strings.NewReader(big))
		req.Header.Set("Content-Type", "application/json")
		check(t, req)
	})
	t.Run("chunked", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL, struct{ *strings.Reader }{strings.NewReader(big)})
		req.Header.Set("Content-Type", "application/json")
		if req.ContentLength != 0 {
			t.Fatal("the request has a length")
		}
		req.ContentLength = -1
		check(t, req)
	})
	t.Run("chunked small", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL, struct{ *strings.Reader }{strings.NewReader(`{"query":"{ vouchers { id } }"}`)})
		req.Header.Set("Content-Type", "application/json")
		req.ContentLength = -1
		status, resp, raw := send(t, req)
		if status != http.StatusOK || len(resp.Errors) != 0 {
			t.Errorf("status %d: %s", status, raw)
		}
	})
	t.Run("just under", func(t *testing.T) {
		body := `{"query":"{ vouchers { id } }` + strings.Repeat(" ", DefaultMaxBodyBytes-40) + `"}`
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		status, resp, raw := send(t, req)
		if status != http.StatusOK || len(resp.Errors) != 0 {
			t.Errorf("status %d: %.200s", status, raw)
		}
	})
	t.Run("GET", func(t *testing.T) {
		q := "{ vouchers { id } }" + strings.Repeat(" ", DefaultMaxBodyBytes)
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"?query="+url.QueryEscape(q), nil)
		check(t, req)
	})
}

func TestGET(t *testing.T) {
	e := newTestEnv(t, Options{})
	get := func(query string) (int, gqlResponse, string) {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"?query="+url.QueryEscape(query), nil)
		req.Header.Set("Authorization", "Bearer "+e.token(t, 1, true))
		return send(t, req)
	}
	status, resp, raw := get(`{ vouchers { id } }`)
	if status != http.StatusOK || len(resp.Errors) != 0 {
		t.Errorf("query: status %d: %s", status, raw)
	}
	in := validVoucherInput()
	status, _, raw = get(fmt.Sprintf(`mutation { addSeckillVoucher(input: {shopId: "1", title: "t", payValue: 1, actualValue: 1, stock: 1, beginTime: %q, endTime: %q}) { id } }`,
		in["beginTime"], in["endTime"]))
	if status == http.StatusOK {
		t.Errorf("mutation over GET: status %d: %s", status, raw)
	}
	if n := e.store.count(); n != 0 {
		t.Errorf("a GET created %d vouchers", n)
	}
}

func TestNoFormTransports(t *testing.T) {
	e := newTestEnv(t, Options{})
	resp, err := http.PostForm(e.srv.URL, url.Values{"query": {`{ vouchers { id } }`}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("form POST: status %d, want 400", resp.StatusCode)
	}
}
