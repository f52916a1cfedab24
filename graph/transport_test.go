package graph

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestGraphQLOverHTTP holds the POST and GET transports to the
// GraphQL-over-HTTP spec: the status and media type of each class of
// answer, for each Accept, and no "data" entry on a request error.
func TestGraphQLOverHTTP(t *testing.T) {
	e := newTestEnv(t, Options{})
	const (
		asJSON = "application/json"
		asGQL  = "application/graphql-response+json"
	)
	type answer struct {
		status int
		data   bool // has a "data" entry
	}
	tests := []struct {
		name string
		body string
		// the answers with Accept: application/json and with
		// application/graphql-response+json
		json, gql answer
	}{
		{"parse error", `{"query":"{"}`, answer{200, false}, answer{400, false}},
		{"validation error", `{"query":"{ nope }"}`, answer{200, false}, answer{400, false}},
		{"variable coercion error", `{"query":"query($id: ID!){ voucher(id: $id) { id } }","variables":{"id":null}}`, answer{200, false}, answer{400, false}},
		{"variable of the wrong type", `{"query":"query($n: Int){ vouchers(first: $n) { id } }","variables":{"n":true}}`, answer{200, false}, answer{400, false}},
		{"unknown operation", `{"query":"query A { __typename }","operationName":"B"}`, answer{200, false}, answer{400, false}},
		{"introspection off", `{"query":"{ __schema { queryType { name } } }"}`, answer{200, false}, answer{400, false}},
		{"no query", `{}`, answer{400, false}, answer{400, false}},
		{"empty query", `{"query":""}`, answer{400, false}, answer{400, false}},
		{"query not a string", `{"query":1}`, answer{400, false}, answer{400, false}},
		{"variables not an object", `{"query":"{ __typename }","variables":"x"}`, answer{400, false}, answer{400, false}},
		{"not JSON", `{"query":`, answer{400, false}, answer{400, false}},
		{"JSON array", `[]`, answer{400, false}, answer{400, false}},
		{"data after the object", `{"query":"{ __typename }"} {}`, answer{400, false}, answer{400, false}},
		{"executed", `{"query":"{ __typename }"}`, answer{200, true}, answer{200, true}},
		{"field error", `{"query":"{ voucher(id: \"abc\") { id } }"}`, answer{200, true}, answer{200, true}},
	}
	for _, tc := range tests {
		for _, accept := range []string{asJSON, asGQL} {
			want := tc.json
			if accept == asGQL {
				want = tc.gql
			}
			t.Run(tc.name+" "+accept, func(t *testing.T) {
				req, err := http.NewRequest(http.MethodPost, e.srv.URL, strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", accept)
				checkAnswer(t, req, want.status, accept, want.data)
			})
		}
	}

	t.Run("media types", func(t *testing.T) {
		for accept, want := range map[string]string{
			"":                                    asJSON,
			"*/*":                                 asJSON,
			"application/*":                       asJSON,
			"text/html":                           asGQL,
			asGQL + ", " + asJSON:                 asGQL,
			asJSON + ", " + asGQL:                 asJSON,
			"text/html, " + asGQL + ";q=0.9, */*": asGQL,
		} {
			req, err := http.NewRequest(http.MethodPost, e.srv.URL, strings.NewReader(`{"query":"{"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if accept != "" {
				req.Header.Set("Accept", accept)
			}
			status := http.StatusOK
			if want == asGQL {
				status = http.StatusBadRequest
			}
			checkAnswer(t, req, status, want, false)
		}
	})

	t.Run("GET", func(t *testing.T) {
		get := func(query, accept string) *http.Request {
			req, err := http.NewRequest(http.MethodGet, e.srv.URL+"?"+url.Values{"query": {query}}.Encode(), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", accept)
			return req
		}
		checkAnswer(t, get("{ __typename }", asGQL), http.StatusOK, asGQL, true)
		checkAnswer(t, get("{ nope }", asJSON), http.StatusOK, asJSON, false)
		checkAnswer(t, get("{ nope }", asGQL), http.StatusBadRequest, asGQL, false)
		res := checkAnswer(t, get(`mutation { seckill(voucherId: "1") { outcome } }`, asJSON), http.StatusMethodNotAllowed, asJSON, false)
		if res.Header.Get("Allow") != http.MethodPost {
			t.Errorf("mutation over GET: Allow %q, want POST", res.Header.Get("Allow"))
		}
		req, err := http.NewRequest(http.MethodGet, e.srv.URL+"?query=%7B__typename%7D&variables=%5B%5D", nil)
		if err != nil {
			t.Fatal(err)
		}
		checkAnswer(t, req, http.StatusBadRequest, asJSON, false)
	})
}

// checkAnswer sends req and checks the status, the media type, that the
// body is a GraphQL response with errors unless it has data, and whether
// it has a "data" entry.
func checkAnswer(t *testing.T, req *http.Request, status int, media string, data bool) *http.Response {
	t.Helper()
	res, raw := roundTrip(t, req)
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, raw)
	}
	_, hasData := body["data"]
	_, hasErrors := body["errors"]
	if res.StatusCode != status || res.Header.Get("Content-Type") != media || hasData != data || !hasData && !hasErrors {
		t.Errorf("%s %s (Accept %q): status %d, %s, data entry %v; want %d, %s, %v: %s", req.Method, req.URL.RawQuery,
			req.Header.Get("Accept"), res.StatusCode, res.Header.Get("Content-Type"), hasData, status, media, data, raw)
	}
	return res
}
