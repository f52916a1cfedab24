// Package gqlclient is the small GraphQL client of the command-line tools
// (seckill demo, seckill-bench): it sends an operation and reads the
// answer, and leaves what to tell the person running the tool when it
// fails to the tool.
package gqlclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// Status, StatusCode and ContentType are the HTTP response's.
	Status      string `json:"-"`
	StatusCode  int    `json:"-"`
	ContentType string `json:"-"`
	// Body is the body as read, for messages.
	Body []byte `json:"-"`
	// NotJSON says why the body could not be decoded; nil when it could.
	NotJSON error `json:"-"`
}

// ErrRequest marks an operation whose request could not be built: the
// endpoint is not a URL, or the variables do not encode as JSON.
var ErrRequest = errors.New("gqlclient: cannot build the request")

// Post sends query with vars to endpoint through client, carrying token as
// a bearer token, and reads at most limit bytes of the answer. The error
// is ErrRequest (errors.Is) for a request that could not be built, else a
// request that got no answer or whose body broke off; any answer,
// including a body that is not JSON (NotJSON set), is an Answer.
func Post(ctx context.Context, client *http.Client, endpoint, token, query string, vars map[string]any, limit int64) (Answer, error) {
	body, err := json.Marshal(Request{Query: query, Variables: vars})
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %w", ErrRequest, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %w", ErrRequest, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, limit))
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Body: raw}
	if err := json.Unmarshal(raw, &a); err != nil {
		a = Answer{Body: raw, NotJSON: err}
	}
	a.Status, a.StatusCode, a.ContentType = res.Status, res.StatusCode, res.Header.Get("Content-Type")
	return a, nil
}
