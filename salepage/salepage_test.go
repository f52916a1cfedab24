package salepage

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"seckill/internal/seckill"
)

func get(t *testing.T, h http.Handler, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

func TestNotBuilt(t *testing.T) {
	h := newHandler(fstest.MapFS{"dist/README.md": {Data: []byte("placeholder")}}, "/sale", testDeps(&fakeVouchers{}), time.Now)
	if res, body := get(t, h, "/sale/42"); res.StatusCode != http.StatusServiceUnavailable || body != NotBuilt {
		t.Errorf("without a bundle: %d %q, want 503 %q", res.StatusCode, body, NotBuilt)
	}
	if res, _ := get(t, h, "/sale/assets/sale-AAAA.js"); res.StatusCode != http.StatusNotFound {
		t.Errorf("asset without a bundle: %d", res.StatusCode)
	}
}

// TestBuilt checks what makes the page cacheable by a CDN: the same bytes
// for every campaign, no cookie, a short public max-age; and the
// content-hashed assets cached for a year.
func TestBuilt(t *testing.T) {
	h := newHandler(fstest.MapFS{
		"dist/README.md":            {Data: []byte("placeholder")},
		"dist/assets/.built":        {Data: nil}, // make's stamp: not served
		"dist/assets/sale-AB12.js":  {Data: []byte("console.log(1)")},
		"dist/assets/sale-CD34.css": {Data: []byte("body{}")},
		"dist/assets/pow-EF56.js":   {Data: []byte("onmessage=null")},
	}, "/sale", testDeps(&fakeVouchers{}), time.Now)

	res, first := get(t, h, "/sale/42")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("page: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if got := res.Header.Get("Cache-Control"); got != PageCache {
		t.Errorf("page Cache-Control %q, want %q", got, PageCache)
	}
	if res.Header.Get("Set-Cookie") != "" {
		t.Errorf("page sets a cookie")
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self';", "worker-src 'self';", "connect-src 'self';", "; frame-ancestors 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q allows something unsafe", csp)
	}
	if strings.Contains(first, "<script>") || strings.Contains(first, "<style") || strings.Contains(first, "style=") {
		t.Errorf("page has inline script or style:\n%s", first)
	}
	for _, want := range []string{`src="/sale/assets/sale-AB12.js"`, `href="/sale/assets/sale-CD34.css"`} {
		if !strings.Contains(first, want) {
			t.Errorf("page lacks %s:\n%s", want, first)
		}
	}
	if _, other := get(t, h, "/sale/7"); other != first {
		t.Errorf("the page differs between campaigns")
	}

	for path, ctype := range map[string]string{
		"/sale/assets/sale-AB12.js":  "text/javascript; charset=utf-8",
		"/sale/assets/sale-CD34.css": "text/css; charset=utf-8",
		"/sale/assets/pow-EF56.js":   "text/javascript; charset=utf-8",
	} {
		res, _ := get(t, h, path)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != ctype || res.Header.Get("Cache-Control") != AssetCache {
			t.Errorf("GET %s: %d %q %q", path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"))
		}
	}
	for _, path := range []string{"/sale/", "/sale/abc", "/sale/42/x", "/sale/assets/README.md", "/sale/assets/../README.md", "/sale/assets/sale-XX.js", "/sale/assets/.built"} {
		if res, _ := get(t, h, path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, res.StatusCode)
		}
	}
}

func TestTime(t *testing.T) {
	res, body := get(t, TimeHandler(), "/time")
	if res.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(body, `{"now":1`) {
		t.Errorf("/time: %q %q", res.Header.Get("Cache-Control"), body)
	}
}

// TestFrameAncestors: the host platform's origins named in Deps are the
// only ones besides none that may frame the page.
func TestFrameAncestors(t *testing.T) {
	fsys := fstest.MapFS{
		"dist/assets/sale-AB12.js":  {Data: []byte("console.log(1)")},
		"dist/assets/sale-CD34.css": {Data: []byte("body{}")},
	}
	for fa, want := range map[string]string{
		"":                                 "frame-ancestors 'self'",
		"'none'":                           "frame-ancestors 'none'",
		"'self' https://shop.example:8443": "frame-ancestors 'self' https://shop.example:8443",
	} {
		d := testDeps(&fakeVouchers{})
		d.FrameAncestors = fa
		res, _ := get(t, newHandler(fsys, "/sale", d, time.Now), "/sale/42")
		if csp := res.Header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "; "+want) || strings.Count(csp, "frame-ancestors") != 1 {
			t.Errorf("FrameAncestors %q: CSP %q, want it to end with %q", fa, csp, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a second directive in FrameAncestors was taken")
		}
	}()
	d := testDeps(&fakeVouchers{})
	d.FrameAncestors = "'self'; script-src *"
	newHandler(fsys, "/sale", d, time.Now)
}

// TestPaths checks the README's rule for /sale/{voucherId}: a positive
// int64 in canonical decimal (1 to 19 digits, no sign, no leading zero,
// no overflow) is an id, and everything else (with a trailing segment
// too) is 404 for the page, its campaign and its stock, without a read.
func TestPaths(t *testing.T) {
	const maxID = 9223372036854775807
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := &fakeVouchers{vouchers: map[int64]*seckill.Voucher{
		1: {ID: 1, Campaign: &seckill.Campaign{VoucherID: 1, InitialStock: 5, Stock: 5, Remaining: 5, RemainingKnown: true,
			BeginTime: clock, EndTime: clock.Add(time.Hour)}},
		maxID: {ID: maxID, Campaign: &seckill.Campaign{VoucherID: maxID, InitialStock: 5, Stock: 5, Remaining: 5, RemainingKnown: true,
			BeginTime: clock, EndTime: clock.Add(time.Hour)}},
	}}
	h := newHandler(fstest.MapFS{
		"dist/README.md":            {Data: []byte("placeholder")},
		"dist/assets/sale-AB12.js":  {Data: []byte("console.log(1)")},
		"dist/assets/sale-CD34.css": {Data: []byte("body{}")},
	}, "/sale", testDeps(f), func() time.Time { return clock })

	for _, tc := range []struct {
		id string
		// page is the page's status; data is the campaign's and the
		// stock's (an id without a campaign is 404 after its read).
		page, data int
	}{
		{"1", 200, 200},
		{"9223372036854775807", 200, 200},
		{"9223372036854775806", 200, 404}, // an id, no campaign
		{"0", 404, 404},
		{"00", 404, 404},
		{"-1", 404, 404},
		{"01", 404, 404},
		{"+1", 404, 404},
		{"1.0", 404, 404},
		{"1e3", 404, 404},
		{" 1", 404, 404},
		{"9223372036854775808", 404, 404},
		{"9999999999999999999", 404, 404},
		{"10000000000000000000", 404, 404},
		{"abc", 404, 404},
		{"", 404, 404},
		{"1/extra", 404, 404},
		{"1/", 404, 404},
		{"٣", 404, 404}, // an Arabic-Indic digit
	} {
		t.Run(tc.id, func(t *testing.T) {
			before := f.reads.Load()
			esc := strings.ReplaceAll(url.PathEscape(tc.id), "%2F", "/")
			if res, _ := get(t, h, "/sale/"+esc); res.StatusCode != tc.page {
				t.Errorf("GET /sale/%s: %d, want %d", tc.id, res.StatusCode, tc.page)
			}
			for _, tail := range []string{"/campaign", "/stock"} {
				if res, _ := get(t, h, "/sale/"+esc+tail); res.StatusCode != tc.data {
					t.Errorf("GET /sale/%s%s: %d, want %d", tc.id, tail, res.StatusCode, tc.data)
				}
			}
			if tc.data == 404 && tc.page == 404 && f.reads.Load() != before {
				t.Errorf("/sale/%s read the store", tc.id)
			}
		})
	}
}
