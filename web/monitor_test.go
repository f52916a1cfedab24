package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestMonitorLinksBack(t *testing.T) {
	monitor := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/admin/queues/static/js/main.js":
			w.Header().Set("Content-Type", "application/javascript; charset=utf-8")
			_, _ = io.WriteString(w, "const page = '</body>';")
		case "/admin/queues/api/queues":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"queues":[]}`)
		default: // the index page, as asynqmon renders it: no Content-Type
			_, _ = io.WriteString(w, "<!doctype html><html><head></head><body><div id=\"root\"></div></body></html>")
		}
	})
	h := withBackLink(monitor)
	get := func(path string) (*http.Response, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		res := w.Result()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	for _, p := range []string{"/admin/queues/", "/admin/queues/queues/orders"} {
		res, body := get(p)
		if !strings.Contains(body, `<a href="/admin" data-testid="back-to-dashboard"`) ||
			!strings.HasSuffix(body, "</a></body></html>") || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %s %q", p, res.Header.Get("Content-Type"), body)
		}
		if res.Header.Get("Content-Length") != "" && res.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Errorf("%s: Content-Length %s for %d bytes", p, res.Header.Get("Content-Length"), len(body))
		}
	}
	for _, p := range []string{"/admin/queues/static/js/main.js", "/admin/queues/api/queues"} {
		if _, body := get(p); strings.Contains(body, "back-to-dashboard") {
			t.Errorf("%s was changed: %q", p, body)
		}
	}
}
