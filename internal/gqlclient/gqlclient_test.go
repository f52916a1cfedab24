package gqlclient_test

import (
	"context"
	"encoding/json"
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
		req, err := gqlclient.NewRequest(context.Background(), srv.URL+path, "tok", "query { x }", vars)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		a, err := gqlclient.ReadAnswer(res, 1<<20)
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

	a = do("/missing", nil)
	if a.NotJSON == nil || a.Data != nil || a.Errors != nil || string(a.Body) != "404 page not found\n" {
		t.Errorf("not JSON: %+v", a)
	}
}
