// Package gqlclient is the small GraphQL client of the command-line tools
// (seckill demo, seckill-bench): it builds an operation's request and reads
// the answer, and leaves sending it, and what to tell the person running
// the tool when it fails, to the tool.
package gqlclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// Request is the body of a GraphQL POST.
type Request struct {
	Query     string         `json:"query"`
	Variables map[string]any `json:"variables,omitempty"`
}

// Error is one entry of a GraphQL answer's errors.
type Error struct {
	Message    string `json:"message"`
	Extensions struct {
		Code  string `json:"code"`
		Field string `json:"field"`
	} `json:"extensions"`
}

// Answer is a GraphQL answer. Data and Errors are both nil when the body
// was JSON without either.
type Answer struct {
	Data   json.RawMessage `json:"data"`
	Errors []Error         `json:"errors"`
	// Body is the body as read, for messages.
	Body []byte `json:"-"`
	// NotJSON says why the body could not be decoded; nil when it could.
	NotJSON error `json:"-"`
}

// NewRequest returns the POST of query with vars to endpoint, carrying
// token as a bearer token.
func NewRequest(ctx context.Context, endpoint, token, query string, vars map[string]any) (*http.Request, error) {
	body, err := json.Marshal(Request{Query: query, Variables: vars})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	return req, nil
}

// ReadAnswer reads at most limit bytes of res's body and decodes them. The
// error is a failure to read; a body that is not JSON is an Answer with
// NotJSON set.
func ReadAnswer(res *http.Response, limit int64) (Answer, error) {
	raw, err := io.ReadAll(io.LimitReader(res.Body, limit))
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Body: raw}
	if err := json.Unmarshal(raw, &a); err != nil {
		a = Answer{Body: raw, NotJSON: err}
	}
	return a, nil
}
