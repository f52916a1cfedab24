// Package salepage serves the buyer's sale page, GET /sale/{voucherId}:
// one HTML for every campaign and every buyer (the page's script reads the
// voucher id from the path and asks for everything else),
// so a CDN may cache it, and a bundle built from the npm packages pinned in
// package-lock.json (make salepage) whose file names carry a hash of their
// content, so they are cached for a year. The bundle is build output, never
// committed; without it the page says how to build it. The page loads
// nothing from another site and runs under a Content-Security-Policy that
// allows only its own files. The host platform's app may embed it and hand
// it the buyer's token by postMessage; who may frame it is the policy's
// frame-ancestors (Deps.FrameAncestors).
//
// Beside the page, GET /sale/{voucherId}/campaign answers what every page
// load needs about the sale (title, prices, times, challenge kind, waiting
// room) and GET /sale/{voucherId}/stock what is left, which open pages
// poll: the same bytes for everyone, cached by a CDN for 2 s and by each
// process for SaleTTL, so that a stampede of page loads and polls costs
// the origin one domain read per voucher and second, not one per page.
// Only what is per buyer goes to the GraphQL API.
package salepage

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

//go:embed all:dist
var dist embed.FS

// NotBuilt is the answer while the bundle is missing.
const NotBuilt = "sale page assets not built: run make salepage\n"

// PageCache is how long a browser or CDN may keep the page: short, so a new
// build reaches buyers within a minute; the page holds nothing per user.
const PageCache = "public, max-age=60"

// AssetCache is for the content-hashed assets: a new build has new names.
const AssetCache = "public, max-age=31536000, immutable"

// contentPolicy lets the page load only its own script, stylesheet and
// worker (no inline script or style) and talk to its own origin only; the
// frame-ancestors that follow it say who may embed it.
const contentPolicy = "default-src 'self'; script-src 'self'; worker-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors "

// DefaultFrameAncestors lets only pages of the sale page's own origin
// frame it.
const DefaultFrameAncestors = "'self'"

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>seckill</title>
<link rel="stylesheet" href="{{.Prefix}}/assets/{{.CSS}}">
<script defer src="{{.Prefix}}/assets/{{.JS}}"></script>
</head>
<body>
<main>
<section id="campaign" hidden>
<h1 id="title"></h1>
<p class="sub" id="subtitle"></p>
<dl>
<dt data-i18n="price">Price</dt><dd><span class="price" id="price"></span> <span id="worth"></span></dd>
<dt data-i18n="left">Left</dt><dd id="left" data-testid="left"></dd>
<dt data-i18n="window">On sale</dt><dd id="window"></dd>
</dl>
</section>
<div id="countdown" data-testid="countdown" role="timer" aria-live="off"></div>
<p id="skew" data-testid="skew"></p>
<section id="room" class="card" hidden data-testid="room" aria-labelledby="room-title">
<p><strong id="room-title" data-i18n="room">Waiting room</strong></p>
<p id="room-state" data-testid="room-state" aria-live="polite"></p>
<p id="room-position" class="position" data-testid="room-position" aria-live="polite" aria-atomic="true"></p>
<p id="room-wait" data-testid="room-wait"></p>
<p id="room-joined" class="note" data-testid="room-joined"></p>
</section>
<form id="quiz" class="card" hidden data-testid="quiz">
<p><strong data-i18n="quiz">Answer to buy</strong></p>
<p id="quiz-question" data-testid="quiz-question"></p>
<div id="quiz-choices"></div>
<input id="quiz-text" type="text" autocomplete="off" aria-labelledby="quiz-question" hidden>
<p><button type="submit">OK</button></p>
</form>
<progress id="pow" hidden data-testid="pow"></progress>
<p id="challenge-note" class="note" data-testid="challenge-note" aria-live="polite"></p>
<button id="buy" type="button" disabled data-testid="buy">Buy now</button>
<div id="message" data-testid="message" role="status" aria-live="polite">Loading the sale…</div>
<section id="order" class="card" hidden data-testid="order">
<p><span data-i18n="order">Order</span> <code id="order-id" data-testid="order-id"></code></p>
<p id="order-status" data-testid="order-status"></p>
<p id="order-payby" class="note"></p>
<p class="note"><code id="payment-id" data-testid="payment-id"></code></p>
<div class="actions">
<button id="pay" type="button" hidden data-testid="pay">Pay</button>
<button id="cancel" type="button" hidden data-testid="cancel">Cancel order</button>
</div>
</section>
</main>
<noscript>This page needs JavaScript.</noscript>
</body>
</html>
`))

// asset is one embedded file of the bundle.
type asset struct {
	body        []byte
	contentType string
}

// Built reports whether the bundle was embedded: without it the page
// answers NotBuilt.
func Built() bool {
	_, _, ok := entries(dist)
	return ok
}

// entries finds the page's script and stylesheet (sale-<hash>.js, .css).
func entries(fsys fs.FS) (js, css string, ok bool) {
	names, _ := fs.Glob(fsys, "dist/assets/sale-*.js")
	if len(names) == 1 {
		js = path.Base(names[0])
	}
	names, _ = fs.Glob(fsys, "dist/assets/sale-*.css")
	if len(names) == 1 {
		css = path.Base(names[0])
	}
	return js, css, js != "" && css != ""
}

// Deps are what the sale page needs: Vouchers and Logger are required.
// FrameAncestors is the page's CSP frame-ancestors source list, as
// config validated it ('self', 'none', origins); empty is
// DefaultFrameAncestors.
type Deps struct {
	Vouchers       Vouchers
	Logger         *slog.Logger
	FrameAncestors string
	// Currency is the payments' currency, in which prices are shown;
	// empty: seckill.DefaultCurrency.
	Currency string
}

// Handler serves the page at prefix+"/{voucherId}", its campaign at
// prefix+"/{voucherId}/campaign", its stock at prefix+"/{voucherId}/stock"
// and the bundle under prefix+"/assets/";
// mount it for prefix+"/". It panics without its Deps: a wiring mistake.
func Handler(prefix string, d Deps) http.Handler {
	return newHandler(dist, prefix, d, time.Now)
}

func newHandler(fsys fs.FS, prefix string, d Deps, now func() time.Time) http.Handler {
	if d.Vouchers == nil || d.Logger == nil {
		panic("salepage: Handler needs Vouchers and Logger")
	}
	sale := newSales(d.Vouchers, d.Logger, now)
	if d.Currency != "" {
		sale.currency = d.Currency
	}
	if d.FrameAncestors == "" {
		d.FrameAncestors = DefaultFrameAncestors
	}
	if strings.ContainsAny(d.FrameAncestors, ";,\r\n") {
		panic("salepage: FrameAncestors is one directive's sources: " + d.FrameAncestors)
	}
	policy := contentPolicy + d.FrameAncestors
	js, css, built := entries(fsys)
	assets := map[string]*asset{}
	var html []byte
	if built {
		files, _ := fs.ReadDir(fsys, "dist/assets")
		for _, f := range files {
			var ctype string
			switch path.Ext(f.Name()) {
			case ".js":
				ctype = "text/javascript; charset=utf-8"
			case ".css":
				ctype = "text/css; charset=utf-8"
			default:
				continue
			}
			b, err := fs.ReadFile(fsys, "dist/assets/"+f.Name())
			if err != nil {
				panic("salepage: " + err.Error())
			}
			assets[f.Name()] = &asset{body: b, contentType: ctype}
		}
		var buf bytes.Buffer
		if err := page.Execute(&buf, map[string]string{"Prefix": prefix, "JS": js, "CSS": css}); err != nil {
			panic("salepage: page template: " + err.Error())
		}
		html = buf.Bytes()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "same-origin")
		rest, ok := strings.CutPrefix(r.URL.Path, prefix+"/")
		switch {
		case !ok:
			http.NotFound(w, r)
		case strings.HasPrefix(rest, "assets/"):
			a := assets[strings.TrimPrefix(rest, "assets/")]
			if a == nil {
				http.NotFound(w, r)
				return
			}
			hdr.Set("Content-Type", a.contentType)
			hdr.Set("Cache-Control", AssetCache)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
		case isID(rest):
			if !built {
				hdr.Set("Content-Type", "text/plain; charset=utf-8")
				hdr.Set("Cache-Control", "no-store")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(NotBuilt))
				return
			}
			hdr.Set("Content-Security-Policy", policy)
			hdr.Set("Cache-Control", PageCache)
			hdr.Set("Content-Type", "text/html; charset=utf-8")
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(html))
		case strings.HasSuffix(rest, "/stock") && isID(strings.TrimSuffix(rest, "/stock")):
			sale.serve(w, r, strings.TrimSuffix(rest, "/stock"), func(a answers) answer { return a.stock })
		case strings.HasSuffix(rest, "/campaign") && isID(strings.TrimSuffix(rest, "/campaign")):
			sale.serve(w, r, strings.TrimSuffix(rest, "/campaign"), func(a answers) answer { return a.campaign })
		default:
			http.NotFound(w, r)
		}
	})
}

// parseID reads a voucher id as the README spells it: a positive int64
// in canonical decimal, 1 to 19 digits without a sign or a leading zero,
// so each voucher has one path (one CDN cache entry) and no spelling of
// 0, a negative or an overflowing number gets the page.
func parseID(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}

// isID reports whether s is a voucher id (parseID).
func isID(s string) bool {
	_, ok := parseID(s)
	return ok
}

// TimeHandler answers the server's clock, {"now": Unix milliseconds},
// never cached: the page measures its offset from it.
func TimeHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		now := time.Now().UnixMilli()
		_, _ = w.Write([]byte(`{"now":` + strconv.FormatInt(now, 10) + "}\n"))
	})
}
