package web

import (
	"bytes"
	"net/http"
	"strconv"
)

// backLink is put in every page of the Asynq monitor: asynqmon has no
// option for a link of ours, and its pages are its own single-page app.
const backLink = `<a href="/admin" data-testid="back-to-dashboard" style="position:fixed;right:16px;bottom:16px;` +
	`z-index:2147483647;padding:8px 14px;border-radius:8px;background:#141a24;color:#fff;` +
	`font:600 14px/1.2 system-ui,sans-serif;text-decoration:none;box-shadow:0 2px 8px rgba(0,0,0,.3)">` +
	`&larr; seckill dashboard</a>`

// withBackLink adds backLink to the HTML pages the monitor serves, before
// </body>. The monitor's API and its script and style files (which carry
// their Content-Type) pass through untouched.
func withBackLink(monitor http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			monitor.ServeHTTP(w, r)
			return
		}
		bw := &pageWriter{ResponseWriter: w, status: http.StatusOK}
		monitor.ServeHTTP(bw, r)
		bw.finish()
	})
}

// pageWriter holds back a response that has no Content-Type of its own
// (asynqmon renders its index page so), to add the link when it is HTML.
type pageWriter struct {
	http.ResponseWriter
	status  int
	decided bool
	hold    bool
	buf     bytes.Buffer
}

func (p *pageWriter) decide() {
	if !p.decided {
		p.decided = true
		p.hold = p.Header().Get("Content-Type") == ""
	}
}

func (p *pageWriter) WriteHeader(status int) {
	p.decide()
	if p.hold {
		p.status = status
		return
	}
	p.ResponseWriter.WriteHeader(status)
}

func (p *pageWriter) Write(b []byte) (int, error) {
	p.decide()
	if p.hold {
		return p.buf.Write(b)
	}
	return p.ResponseWriter.Write(b)
}

func (p *pageWriter) finish() {
	if !p.hold {
		return
	}
	body := p.buf.Bytes()
	ct := http.DetectContentType(body)
	if i := bytes.LastIndex(body, []byte("</body>")); i >= 0 && bytes.HasPrefix([]byte(ct), []byte("text/html")) {
		body = append(body[:i:i], append([]byte(backLink), body[i:]...)...)
	}
	h := p.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	p.ResponseWriter.WriteHeader(p.status)
	_, _ = p.ResponseWriter.Write(body)
}
