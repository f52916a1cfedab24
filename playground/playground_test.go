package playground

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func get(t *testing.T, h http.Handler, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNotBuilt(t *testing.T) {
	h := newHandler(fstest.MapFS{"dist/README.md": {Data: []byte("placeholder")}}, "/playground", "/graphql")
	res := get(t, h, "/playground", nil)
	if got := body(t, res); res.StatusCode != http.StatusServiceUnavailable || got != NotBuilt {
		t.Errorf("without a bundle: %d %q, want 503 %q", res.StatusCode, got, NotBuilt)
	}
	if res := get(t, h, "/playground/assets/playground.js", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("asset without a bundle: %d", res.StatusCode)
	}
}

func TestBuilt(t *testing.T) {
	h := newHandler(fstest.MapFS{
		"dist/README.md":                {Data: []byte("placeholder")},
		"dist/assets/playground.js":     {Data: []byte("console.log(1)")},
		"dist/assets/playground.css":    {Data: []byte("body{}")},
		"dist/assets/playground.js.map": {Data: []byte("{}")},
	}, "/playground", `/graphql?a="b"`)

	for _, path := range []string{"/playground", "/playground/"} {
		res := get(t, h, path, nil)
		page := body(t, res)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("GET %s: %d %q", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
		csp := res.Header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self';", "style-src 'self';", "connect-src 'self';", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("CSP %q allows something unsafe", csp)
		}
		// No inline script or style: the CSP would block it.
		if strings.Contains(page, "<script>") || strings.Contains(page, "style=") || strings.Contains(page, "<style") {
			t.Errorf("page has inline script or style:\n%s", page)
		}
		if !strings.Contains(page, `data-endpoint="/graphql?a=&#34;b&#34;"`) {
			t.Errorf("endpoint not (escaped) in the page:\n%s", page)
		}
		if !strings.Contains(page, `src="/playground/assets/playground.js?v=`) || !strings.Contains(page, `href="/playground/assets/playground.css?v=`) {
			t.Errorf("page does not load its bundle:\n%s", page)
		}
	}

	res := get(t, h, "/playground/assets/playground.js", nil)
	if got := body(t, res); res.StatusCode != http.StatusOK || got != "console.log(1)" ||
		res.Header.Get("Content-Type") != "text/javascript; charset=utf-8" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("script: %d %q %v", res.StatusCode, got, res.Header)
	}
	etag := res.Header.Get("ETag")
	if res := get(t, h, "/playground/assets/playground.js", map[string]string{"If-None-Match": etag}); res.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation with %s: %d, want 304", etag, res.StatusCode)
	}
	if res := get(t, h, "/playground/assets/playground.css", nil); res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/css; charset=utf-8" {
		t.Errorf("stylesheet: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, path := range []string{"/playground/assets/playground.js.map", "/playground/README.md", "/playground/assets/../README.md", "/playground/x"} {
		if res := get(t, h, path, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, res.StatusCode)
		}
	}
}
