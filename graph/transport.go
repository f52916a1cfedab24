package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// GraphQL over HTTP.
//
// The POST and GET transports answer as the GraphQL-over-HTTP spec
// (graphql.github.io/graphql-over-http) says, which the graphql-http
// package's audit checks (graph/audit, run by make test):
//
//   - The response's media type follows Accept: application/json when it
//     is absent or names application/json (or */*, application/*) first;
//     application/graphql-response+json when it names that first, or
//     nothing we serve.
//   - A request that is not a GraphQL request (a body that is not a JSON
//     object, a parameter of the wrong type, no query) is 400, whichever
//     the media type.
//   - A request error (the document does not parse or validate, a
//     variable does not coerce, a limit of limits.go is exceeded) has no
//     "data" entry: 200 with application/json, 400 with
//     application/graphql-response+json.
//   - A mutation over GET is 405 with "Allow: POST".
//   - Anything that executed (errors of fields included) is 200.
//
// gqlgen's own transports answer a request error 422 with
// application/json and write "data": null with it; their requests and
// answers are otherwise the same, and the purchase fast path (purchase.go),
// which only ever answers executed requests with application/json, agrees
// with these.

const (
	mediaJSON            = "application/json"
	mediaGraphQLResponse = "application/graphql-response+json"
)

// responseMediaType chooses the response's media type from an Accept
// header: the first type in it that we serve, in the order written.
func responseMediaType(accept string) string {
	if accept == "" {
		return mediaJSON
	}
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case mediaGraphQLResponse:
			return mediaGraphQLResponse
		case mediaJSON, "application/*", "*/*":
			return mediaJSON
		}
	}
	return mediaGraphQLResponse
}

// httpPOST is the POST transport: a JSON body
// {"query", "operationName", "variables", "extensions"}.
type httpPOST struct{}

var _ graphql.Transport = httpPOST{}

func (httpPOST) Supports(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Upgrade") != "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == mediaJSON
}

func (httpPOST) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	media := responseMediaType(r.Header.Get("Accept"))
	w.Header().Set("Content-Type", media)
	start := graphql.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeNotGraphQL(w, http.StatusBadRequest, "could not read the request body")
		return
	}
	var params graphql.RawParams
	if decodeStrict(body, &params) != nil {
		writeNotGraphQL(w, http.StatusBadRequest, "the body must be a JSON object with a string query and, optionally, "+
			"a string operationName and objects variables and extensions")
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	execute(w, r, exec, media, &params, false)
}

// httpGET is the GET transport: the parameters in the query string, the
// variables and extensions as JSON. It runs queries only.
type httpGET struct{}

var _ graphql.Transport = httpGET{}

func (httpGET) Supports(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get("Upgrade") == ""
}

func (httpGET) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	media := responseMediaType(r.Header.Get("Accept"))
	w.Header().Set("Content-Type", media)
	start := graphql.Now()
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeNotGraphQL(w, http.StatusBadRequest, "the query string does not parse")
		return
	}
	params := graphql.RawParams{
		Query:         q.Get("query"),
		OperationName: q.Get("operationName"),
		Headers:       r.Header,
	}
	if v := q.Get("variables"); v != "" {
		if decodeStrict([]byte(v), &params.Variables) != nil {
			writeNotGraphQL(w, http.StatusBadRequest, "variables must be a JSON object")
			return
		}
	}
	if v := q.Get("extensions"); v != "" {
		if decodeStrict([]byte(v), &params.Extensions) != nil {
			writeNotGraphQL(w, http.StatusBadRequest, "extensions must be a JSON object")
			return
		}
	}
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	execute(w, r, exec, media, &params, true)
}

// execute answers a decoded request; queryOnly refuses mutations and
// subscriptions (GET).
func execute(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor, media string, params *graphql.RawParams, queryOnly bool) {
	if params.Query == "" {
		writeNotGraphQL(w, http.StatusBadRequest, "the request has no query")
		return
	}
	ctx := r.Context()
	opCtx, errs := exec.CreateOperationContext(ctx, params)
	if errs != nil {
		resp := exec.DispatchError(graphql.WithOperationContext(ctx, opCtx), errs)
		status := http.StatusOK
		if media == mediaGraphQLResponse {
			status = http.StatusBadRequest
		}
		w.WriteHeader(status)
		writeResponse(w, requestErrors{Errors: resp.Errors, Extensions: resp.Extensions})
		return
	}
	if queryOnly && opCtx.Operation.Operation != ast.Query {
		w.Header().Set("Allow", http.MethodPost)
		writeNotGraphQL(w, http.StatusMethodNotAllowed, "GET requests only allow query operations: send a "+
			string(opCtx.Operation.Operation)+" with POST")
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, opCtx)
	writeResponse(w, responses(ctx))
}

// requestErrors is the answer to a request that did not execute: errors,
// and no "data" entry at all (graphql.Response always writes one).
type requestErrors struct {
	Errors     gqlerror.List  `json:"errors"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// writeNotGraphQL answers a request that is not a GraphQL request (or not
// one this method runs) with one error, in the media type already chosen.
func writeNotGraphQL(w http.ResponseWriter, status int, message string) {
	w.WriteHeader(status)
	writeResponse(w, requestErrors{Errors: gqlerror.List{{Message: message}}})
}

func writeResponse(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("graph: marshal a response: " + err.Error())
	}
	_, _ = w.Write(b)
}

var errTrailingData = errors.New("data after the JSON value")

// decodeStrict decodes the JSON value b into v, numbers as json.Number (as
// gqlgen's transports do: gqlparser and the scalars tell an integer from a
// fraction by its spelling), refusing anything after the value.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailingData
	}
	return nil
}
