// Package playground serves GraphiQL from the binary: the page, and a bundle
// of GraphiQL, React, graphql and graphql-ws built from the npm packages
// pinned in package-lock.json (make playground). The bundle is build output,
// never committed; without it the page says how to build it. Nothing is
// loaded from another site, so the playground works offline, and the page
// runs under a Content-Security-Policy that allows only its own files.
package playground

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

//go:embed all:dist
var dist embed.FS

// NotBuilt is the answer while the bundle is missing.
const NotBuilt = "playground assets not built: run make playground\n"

// contentPolicy lets the page load only its own script and stylesheet (no
// inline script or style), the fonts GraphiQL's stylesheet inlines as data:
// URLs, and talk to its own origin only (HTTP and WebSocket).
const contentPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; " +
	"frame-ancestors 'none'"

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>seckill GraphQL playground</title>
<link rel="stylesheet" href="{{.Prefix}}/assets/playground.css?v={{.CSS}}">
<script defer src="{{.Prefix}}/assets/playground.js?v={{.JS}}"></script>
</head>
<body>
<div id="graphiql" data-endpoint="{{.Endpoint}}">Loading the playground…</div>
<noscript>The playground needs JavaScript.</noscript>
</body>
</html>
`))

// assetTypes names the files of the bundle, with their Content-Type.
var assetTypes = map[string]string{
	"playground.js":  "text/javascript; charset=utf-8",
	"playground.css": "text/css; charset=utf-8",
}

// asset is one embedded file with the ETag it is served under.
type asset struct {
	body        []byte
	etag        string
	contentType string
}

// Built reports whether the bundle was embedded: without it the page
// answers NotBuilt.
func Built() bool {
	for name := range assetTypes {
		if _, err := fs.Stat(dist, "dist/assets/"+name); err != nil {
			return false
		}
	}
	return true
}

// Handler serves the playground for the GraphQL endpoint at path endpoint:
// the page at prefix (e.g. "/playground") and the bundle under
// prefix+"/assets/". Mount it for both prefix and prefix+"/".
func Handler(prefix, endpoint string) http.Handler {
	return newHandler(dist, prefix, endpoint)
}

func newHandler(fsys fs.FS, prefix, endpoint string) http.Handler {
	assets := map[string]*asset{}
	for name, ctype := range assetTypes {
		b, err := fs.ReadFile(fsys, "dist/assets/"+name)
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		assets[name] = &asset{body: b, etag: hex.EncodeToString(sum[:8]), contentType: ctype}
	}
	built := len(assets) == len(assetTypes)
	var html []byte
	if built {
		var buf bytes.Buffer
		err := page.Execute(&buf, map[string]string{
			"Prefix": prefix, "Endpoint": endpoint,
			"JS": assets["playground.js"].etag, "CSS": assets["playground.css"].etag,
		})
		if err != nil {
			panic("playground: page template: " + err.Error())
		}
		html = buf.Bytes()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Referrer-Policy", "same-origin")
		rest := strings.TrimPrefix(r.URL.Path, prefix)
		switch {
		case rest == "" || rest == "/":
			if !built {
				hdr.Set("Content-Type", "text/plain; charset=utf-8")
				hdr.Set("Cache-Control", "no-store")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(NotBuilt))
				return
			}
			hdr.Set("Content-Security-Policy", contentPolicy)
			hdr.Set("Cache-Control", "no-store")
			hdr.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(html)
		case strings.HasPrefix(rest, "/assets/"):
			a := assets[strings.TrimPrefix(rest, "/assets/")]
			if a == nil {
				http.NotFound(w, r)
				return
			}
			hdr.Set("Content-Type", a.contentType)
			hdr.Set("ETag", `"`+a.etag+`"`)
			hdr.Set("Cache-Control", "no-cache")
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
		default:
			http.NotFound(w, r)
		}
	})
}
