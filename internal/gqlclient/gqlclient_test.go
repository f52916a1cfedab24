package gqlclient_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/gqlclient"
)

// TestRoundTrip sends an operation to a server that echoes what it got and
// reads the answers a tool must tell apart.
func TestRoundTrip(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			got, _ := json.Marshal(map[string]string{
				"method": r.Method, "type": r.Header.Get("Content-Type"),
				"auth": r.Header.Get("Authorization"), "body": string(body),
			})
			w.Write([]byte(`{"data":` + string(got) + `,"errors":[{"message":"m","extensions":{"code":"C","field":"f"}}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	do := func(path string, vars map[string]any) gqlclient.Answer {
		t.Helper()
		a, err := gqlclient.Post(t.Context(), http.DefaultClient, srv.URL+path, "tok", "query { x }", vars, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	a := do("/echo", map[string]any{"id": "7"})
	if a.NotJSON != nil {
		t.Fatalf("NotJSON = %v", a.NotJSON)
	}
	var got map[string]string
	if err := json.Unmarshal(a.Data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"method": "POST", "type": "application/json", "auth": "Bearer tok",
		"body": `{"query":"query { x }","variables":{"id":"7"}}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if len(a.Errors) != 1 || a.Errors[0].Message != "m" || a.Errors[0].Extensions.Code != "C" || a.Errors[0].Extensions.Field != "f" {
		t.Errorf("errors = %+v", a.Errors)
	}

	// No variables: none sent.
	if err := json.Unmarshal(do("/echo", nil).Data, &got); err != nil || got["body"] != `{"query":"query { x }"}` {
		t.Errorf("body without variables = %q, %v", got["body"], err)
	}

	if a.Status != "200 OK" || a.StatusCode != http.StatusOK || a.ContentType == "" {
		t.Errorf("status %q %d, content type %q", a.Status, a.StatusCode, a.ContentType)
	}

	a = do("/missing", nil)
	if a.NotJSON == nil || a.Data != nil || a.Errors != nil || string(a.Body) != "404 page not found\n" {
		t.Errorf("not JSON: %+v", a)
	}
	if a.StatusCode != http.StatusNotFound || a.Status != "404 Not Found" {
		t.Errorf("not found: status %q %d", a.Status, a.StatusCode)
	}
}

// TestPostFails tells a request that cannot be built from one that got no
// answer.
func TestPostFails(t *testing.T) {
	post := func(endpoint string, vars map[string]any) error {
		_, err := gqlclient.Post(t.Context(), http.DefaultClient, endpoint, "tok", "query { x }", vars, 1<<20)
		return err
	}
	for name, err := range map[string]error{
		"bad endpoint":  post("http://bad host/graphql", nil),
		"bad variables": post("http://127.0.0.1:1/graphql", map[string]any{"f": func() {}}),
	} {
		if !errors.Is(err, gqlclient.ErrRequest) {
			t.Errorf("%s: err = %v, want ErrRequest", name, err)
		}
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	endpoint := srv.URL + "/graphql"
	srv.Close()
	if err := post(endpoint, nil); err == nil || errors.Is(err, gqlclient.ErrRequest) {
		t.Errorf("closed server: err = %v, want a failure to reach it", err)
	}
}
