package web

import (
	"net/http"
	"strings"

	"seckill/web/static"
)

// staticHandler serves the embedded stylesheet and script. A URL carrying
// the current version may be cached for good; the version changes with the
// files.
func staticHandler() http.Handler {
	files := http.StripPrefix("/admin/static/", http.FileServerFS(static.FS))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/admin/static/")
		if name != "app.css" && name != "app.js" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("v") == static.Version {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
