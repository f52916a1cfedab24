package salepage

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
)

// fakeVouchers holds campaigns by voucher id and counts the reads; a read
// waits for gate when it is set.
type fakeVouchers struct {
	mu       sync.Mutex
	vouchers map[int64]*seckill.Voucher
	fail     error
	gate     chan struct{}
	reads    atomic.Int64
}

func (f *fakeVouchers) Voucher(ctx context.Context, id int64) (*seckill.Voucher, error) {
	f.reads.Add(1)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	v, ok := f.vouchers[id]
	if !ok {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", id)
	}
	c := *v
	if v.Campaign != nil {
		cc := *v.Campaign
		c.Campaign = &cc
	}
	return &c, nil
}

func (f *fakeVouchers) setRemaining(id, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vouchers[id].Campaign.Remaining = n
}

func testDeps(v Vouchers) Deps {
	return Deps{Vouchers: v, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestStock checks GET /sale/{id}/stock: what it answers, the headers that
// let a CDN absorb it (public, 2 s, no cookie), 404 for a voucher without a
// campaign and for anything that is not an id, and one domain read per
// voucher and second, whatever the traffic: 300 requests at once share
// one read, and the ones after it within SaleTTL read nothing.
func TestStock(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	begin := clock.now.Add(-time.Minute)
	f := &fakeVouchers{vouchers: map[int64]*seckill.Voucher{
		42: {ID: 42, Campaign: &seckill.Campaign{VoucherID: 42, InitialStock: 100, Stock: 100, Remaining: 37, RemainingKnown: true,
			BeginTime: begin, EndTime: begin.Add(time.Hour)}},
		43: {ID: 43, Campaign: &seckill.Campaign{VoucherID: 43, InitialStock: 5, Stock: 5, Remaining: 0, RemainingKnown: true,
			BeginTime: begin, EndTime: begin.Add(time.Hour)}},
		7: {ID: 7}, // a voucher sold without a flash sale
	}}
	h := newHandler(fstest.MapFS{"dist/README.md": {Data: []byte("placeholder")}}, "/sale", testDeps(f), clock.Now)

	stock := func(path string) (int, Stock) {
		t.Helper()
		res, body := get(t, h, path)
		var s Stock
		if res.StatusCode == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &s); err != nil {
				t.Fatalf("GET %s: %v in %q", path, err, body)
			}
			if got := res.Header.Get("Cache-Control"); got != SaleCache {
				t.Errorf("GET %s: Cache-Control %q, want %q", path, got, SaleCache)
			}
			if got := res.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("GET %s: Content-Type %q", path, got)
			}
			if len(res.Header.Values("Set-Cookie")) > 0 {
				t.Errorf("GET %s sets a cookie", path)
			}
		}
		return res.StatusCode, s
	}

	for path, want := range map[string]Stock{
		"/sale/42/stock": {Stock: 100, Remaining: 37, Status: seckill.CampaignActive},
		"/sale/43/stock": {Stock: 5, Remaining: 0, Status: seckill.CampaignSoldOut},
	} {
		code, got := stock(path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", path, code)
		}
		// The campaign's rev rides along (TestRev).
		var c Campaign
		if _, body := get(t, h, strings.TrimSuffix(path, "stock")+"campaign"); json.Unmarshal([]byte(body), &c) != nil || got.Rev != c.Rev || c.Rev == "" {
			t.Errorf("GET %s: rev %q, the campaign's %q", path, got.Rev, c.Rev)
		}
		got.Rev = ""
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", path, diff)
		}
	}
	// No campaign, no voucher: 404, cached like an answer; not an id: 404
	// without a domain read.
	checkNotFound(t, h, f, "stock", "/sale/1e3/stock", "/sale/42%20/stock")

	// Within SaleTTL: no new read, the same answer, though the stock moved.
	f.reads.Store(0)
	f.setRemaining(42, 36)
	clock.Add(SaleTTL - time.Millisecond)
	for range 100 {
		if _, s := stock("/sale/42/stock"); s.Remaining != 37 {
			t.Fatalf("within SaleTTL: remaining %d, want the cached 37", s.Remaining)
		}
	}
	if n := f.reads.Load(); n != 0 {
		t.Errorf("100 requests within SaleTTL made %d domain reads, want 0", n)
	}

	// Past it, 300 requests at once: one read, and every one gets its answer.
	clock.Add(time.Millisecond)
	f.gate = make(chan struct{})
	var wg sync.WaitGroup
	got := make([]int64, 300)
	for i := range got {
		wg.Go(func() {
			rec := newRecorder(h, "/sale/42/stock")
			var s Stock
			_ = json.Unmarshal(rec, &s)
			got[i] = s.Remaining
		})
	}
	for f.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the others pile up behind the read
	close(f.gate)
	wg.Wait()
	if n := f.reads.Load(); n != 1 {
		t.Errorf("300 requests at once made %d domain reads, want 1", n)
	}
	for i, r := range got {
		if r != 36 {
			t.Fatalf("request %d: remaining %d, want 36", i, r)
		}
	}
	f.gate = nil

	// A failing store: 503, not cached by anyone downstream, and asked
	// once per SaleTTL too.
	clock.Add(SaleTTL)
	f.reads.Store(0)
	f.mu.Lock()
	f.fail = errors.New("postgres: connection refused")
	f.mu.Unlock()
	for range 50 {
		res, body := get(t, h, "/sale/42/stock")
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("Retry-After") != "1" {
			t.Fatalf("store down: %d %q %q %q", res.StatusCode, res.Header.Get("Cache-Control"), res.Header.Get("Retry-After"), body)
		}
	}
	if n := f.reads.Load(); n != 1 {
		t.Errorf("50 requests with the store down made %d reads, want 1", n)
	}
}

func newRecorder(h http.Handler, path string) []byte {
	rw := &bodyWriter{hdr: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, "http://x"+path, nil)
	h.ServeHTTP(rw, req)
	return rw.body
}

// bodyWriter is a ResponseWriter for many goroutines' own requests.
type bodyWriter struct {
	hdr  http.Header
	body []byte
}

func (b *bodyWriter) Header() http.Header         { return b.hdr }
func (b *bodyWriter) WriteHeader(int)             {}
func (b *bodyWriter) Write(p []byte) (int, error) { b.body = append(b.body, p...); return len(p), nil }

// TestStockBounded checks that ids nobody sells cannot grow the cache
// without bound.
func TestStockBounded(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	s := newSales(&fakeVouchers{vouchers: map[int64]*seckill.Voucher{}}, slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Now)
	for id := int64(1); id <= maxSaleEntries+500; id++ {
		s.get(context.Background(), id)
	}
	if n := len(s.cache); n > maxSaleEntries {
		t.Errorf("%d entries, want at most %d", n, maxSaleEntries)
	}
	clock.Add(SaleTTL)
	s.get(context.Background(), maxSaleEntries+1000)
	if n := len(s.cache); n != 1 {
		t.Errorf("after SaleTTL and one more read: %d entries, want the expired ones gone", n)
	}
}

// TestCampaign checks GET /sale/{id}/campaign: what every page load needs,
// with the API's names, and times exact to the microsecond the store keeps
// (the countdown and the waiting room's turns run from beginTime), in UTC
// whatever zone the store read them in; null powBits and waitingRoom when
// there are none; 404 and the cache headers as for the stock; and one
// domain read per voucher and SaleTTL for the campaign and the stock
// together.
func TestCampaign(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	shanghai := time.FixedZone("CST", 8*3600)
	begin := time.Date(2026, 12, 1, 20, 0, 5, 123456000, shanghai) // 12:00:05.123456Z
	f := &fakeVouchers{vouchers: map[int64]*seckill.Voucher{
		42: {ID: 42, Title: "100 off 200", SubTitle: "today only", PayValue: 10000, ActualValue: 20000,
			Campaign: &seckill.Campaign{VoucherID: 42, InitialStock: 100, Stock: 100, Remaining: 100, RemainingKnown: true,
				BeginTime: begin, EndTime: begin.Add(time.Hour + 500*time.Millisecond), Challenge: seckill.ChallengePoW, PoWBits: 18,
				Room: seckill.WaitingRoom{OpensBefore: 30 * time.Second, AdmitPerSecond: 500, PassFor: time.Minute}}},
		43: {ID: 43, Title: "Plain", PayValue: 100, ActualValue: 100,
			Campaign: &seckill.Campaign{VoucherID: 43, InitialStock: 5, Stock: 3, BeginTime: clock.now.Add(-time.Minute),
				EndTime: clock.now.Add(time.Hour)}},
		7: {ID: 7},
	}}
	h := newHandler(fstest.MapFS{"dist/README.md": {Data: []byte("placeholder")}}, "/sale", testDeps(f), clock.Now)

	for path, want := range map[string]string{
		"/sale/42/campaign": `{"title":"100 off 200","subTitle":"today only","payValue":10000,"actualValue":20000,"currency":"CNY","minorDigits":2,` +
			`"stock":100,"remaining":100,"status":"SCHEDULED","beginTime":"2026-12-01T12:00:05.123456Z",` +
			`"endTime":"2026-12-01T13:00:05.623456Z","challenge":"PROOF_OF_WORK","powBits":18,` +
			`"waitingRoom":{"opensAt":"2026-12-01T11:59:35.123456Z","admitPerSecond":500,"passSeconds":60},"rev":"cfd11b1ccaeaa113"}` + "\n",
		"/sale/43/campaign": `{"title":"Plain","subTitle":"","payValue":100,"actualValue":100,"currency":"CNY","minorDigits":2,` +
			`"stock":5,"remaining":3,"status":"ACTIVE","beginTime":"2026-12-01T11:59:00Z",` +
			`"endTime":"2026-12-01T13:00:00Z","challenge":"NONE","powBits":null,"waitingRoom":null,"rev":"970ca4cd43708b2f"}` + "\n",
	} {
		res, body := get(t, h, path)
		if res.StatusCode != http.StatusOK || res.Header.Get("Cache-Control") != SaleCache ||
			res.Header.Get("Content-Type") != "application/json" || len(res.Header.Values("Set-Cookie")) > 0 {
			t.Errorf("GET %s: %d, Cache-Control %q, Content-Type %q, Set-Cookie %q", path, res.StatusCode,
				res.Header.Get("Cache-Control"), res.Header.Get("Content-Type"), res.Header.Values("Set-Cookie"))
		}
		if diff := cmp.Diff(want, body); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", path, diff)
		}
	}
	// The times parse back to the same instants.
	var c Campaign
	_, body := get(t, h, "/sale/42/campaign")
	if err := json.Unmarshal([]byte(body), &c); err != nil || !c.BeginTime.Equal(begin) || !c.WaitingRoom.OpensAt.Equal(begin.Add(-30*time.Second)) {
		t.Errorf("beginTime %v, opensAt %v (%v), want %v and 30 s before", c.BeginTime, c.WaitingRoom, err, begin)
	}
	checkNotFound(t, h, f, "campaign", "/sale/42/campaigns", "/sale/42/stock/campaign")

	// The campaign and the stock share one read: 300 page loads and polls
	// at once past SaleTTL read once, and within it not at all.
	clock.Add(SaleTTL)
	f.reads.Store(0)
	f.gate = make(chan struct{})
	var wg sync.WaitGroup
	got := make([][]byte, 300)
	for i := range got {
		path := "/sale/42/campaign"
		if i%2 == 1 {
			path = "/sale/42/stock"
		}
		wg.Go(func() { got[i] = newRecorder(h, path) })
	}
	for f.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(f.gate)
	wg.Wait()
	f.gate = nil
	for range 100 {
		get(t, h, "/sale/42/campaign")
		get(t, h, "/sale/42/stock")
	}
	if n := f.reads.Load(); n != 1 {
		t.Errorf("300 requests at once and 200 after, campaign and stock, made %d domain reads, want 1", n)
	}
	for i, b := range got {
		var c Campaign
		if err := json.Unmarshal(b, &c); err != nil || c.Stock != 100 || (i%2 == 0) != (c.Title != "") {
			t.Fatalf("request %d: %q (%v)", i, b, err)
		}
	}

	// A failing store: 503 no-store, Retry-After, as for the stock.
	clock.Add(SaleTTL)
	f.mu.Lock()
	f.fail = errors.New("postgres: connection refused")
	f.mu.Unlock()
	if res, _ := get(t, h, "/sale/42/campaign"); res.StatusCode != http.StatusServiceUnavailable ||
		res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("Retry-After") != "1" {
		t.Errorf("store down: %d %q %q", res.StatusCode, res.Header.Get("Cache-Control"), res.Header.Get("Retry-After"))
	}
}

// TestRev: the campaign's rev changes with what an operator changes (the
// window, the texts, the challenge, the room) and not with what changes by
// itself (remaining, the status as time passes), so that a page reads the
// campaign again only after an edit.
func TestRev(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	base := func() *seckill.Voucher {
		return &seckill.Voucher{ID: 9, Title: "Sale", PayValue: 100, ActualValue: 500,
			Campaign: &seckill.Campaign{VoucherID: 9, InitialStock: 10, Stock: 10, Remaining: 10, RemainingKnown: true,
				BeginTime: now.Add(time.Minute), EndTime: now.Add(time.Hour)}}
	}
	rev := func(edit func(v *seckill.Voucher), at time.Time) string {
		v := base()
		edit(v)
		return toCampaign(v, "CNY", at).Rev
	}
	same := func(*seckill.Voucher) {}
	r := rev(same, now)
	for name, edit := range map[string]func(v *seckill.Voucher){
		"begin":     func(v *seckill.Voucher) { v.Campaign.BeginTime = v.Campaign.BeginTime.Add(time.Second) },
		"end":       func(v *seckill.Voucher) { v.Campaign.EndTime = now.Add(30 * time.Minute) },
		"title":     func(v *seckill.Voucher) { v.Title = "Sale!" },
		"challenge": func(v *seckill.Voucher) { v.Campaign.Challenge = seckill.ChallengeQuiz },
		"room": func(v *seckill.Voucher) {
			v.Campaign.Room = seckill.WaitingRoom{OpensBefore: 30 * time.Second, AdmitPerSecond: 100, PassFor: time.Minute}
		},
	} {
		if rev(edit, now) == r {
			t.Errorf("a change of the %s keeps rev %s", name, r)
		}
	}
	for name, edit := range map[string]func(v *seckill.Voucher){
		"remaining": func(v *seckill.Voucher) { v.Campaign.Remaining = 3 },
		"stock":     func(v *seckill.Voucher) { v.Campaign.InitialStock, v.Campaign.Stock = 20, 20 },
	} {
		if rev(edit, now) != r {
			t.Errorf("a change of %s changes rev", name)
		}
	}
	if rev(same, now.Add(2*time.Minute)) != r {
		t.Error("the campaign's start (status SCHEDULED to ACTIVE) changes rev")
	}
}

// checkNotFound asks for GET /sale/{id}/<what> of a voucher without a
// campaign (7) and of none (8): 404, cached like an answer; then of paths
// that name no id (and extra): 404 without a domain read.
func checkNotFound(t *testing.T, h http.Handler, f *fakeVouchers, what string, extra ...string) {
	t.Helper()
	for _, path := range []string{"/sale/7/" + what, "/sale/8/" + what} {
		res, _ := get(t, h, path)
		if res.StatusCode != http.StatusNotFound || res.Header.Get("Cache-Control") != SaleCache {
			t.Errorf("GET %s: %d %q, want 404 %q", path, res.StatusCode, res.Header.Get("Cache-Control"), SaleCache)
		}
	}
	before := f.reads.Load()
	for _, id := range []string{"0", "-1", "abc", "", "9999999999999999999", "12345678901234567890", "+42"} {
		extra = append(extra, "/sale/"+id+"/"+what)
	}
	extra = append(extra, "/sale/42/"+what+"/", "/sale/"+what, "/sale/42/"+what+"/x", "/sale/42/x/"+what)
	for _, path := range extra {
		if res, _ := get(t, h, path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, res.StatusCode)
		}
	}
	if n := f.reads.Load() - before; n != 0 {
		t.Errorf("bad ids made %d domain reads", n)
	}
}
