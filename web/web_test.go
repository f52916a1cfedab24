package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
	"seckill/internal/seckill/seckilltest"
	"seckill/web"
)

type dash struct {
	h        *web.Handler
	svc      *fakeService
	sessions *fakeSessions
	live     *seckilltest.Live
	refunds  *fakeRefunds
	rooms    *fakeRooms
	monitor  atomic.Int64 // requests that reached the Asynq monitor
}

func newDash(t *testing.T, limits seckill.LoginLimits, opts ...func(*web.Config)) *dash {
	t.Helper()
	d := &dash{svc: newFakeService(), sessions: newFakeSessions(), live: &seckilltest.Live{}, refunds: &fakeRefunds{}, rooms: &fakeRooms{}}
	cfg := web.Config{
		Campaigns: d.svc, Orders: d.svc, Records: fakeRecords{d.svc}, Sessions: d.sessions, Live: d.live, Refunds: d.refunds,
		Rooms:   d.rooms,
		Limiter: web.NewMemoryLimiter(limits), LoginSlowDown: testSlowDown,
		Queues: fakeQueues{{Name: "orders"}},
		Monitor: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d.monitor.Add(1)
			_, _ = w.Write([]byte("asynqmon at " + r.URL.Path))
		}),
		Now: func() time.Time { return testNow },
	}
	for _, o := range opts {
		o(&cfg)
	}
	d.h = web.New(cfg)
	return d
}

var generous = seckill.LoginLimits{
	PerPair:    seckill.Limit{Burst: 1000, Every: time.Millisecond},
	PerAddress: seckill.Limit{Burst: 1000, Every: time.Millisecond},
	Failures:   seckill.Limit{Burst: 1000, Every: time.Millisecond},
}

// testSlowDown is how long a slowed sign-in waits in these tests.
const testSlowDown = 500 * time.Millisecond

// do sends a request as a browser on the same site would.
func (d *dash) do(method, target string, form url.Values, cookie *http.Cookie, hdr map[string]string) *http.Response {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, "http://dash.example"+target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		r.Header.Set("Origin", "http://dash.example")
	}
	for k, v := range hdr {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	if cookie != nil {
		r.AddCookie(cookie)
	}
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	return w.Result()
}

func sessionCookie(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == web.SessionCookie {
			return c
		}
	}
	return nil
}

func (d *dash) login(t *testing.T) *http.Cookie {
	t.Helper()
	res := d.do("POST", "/admin/login", url.Values{"user": {testAdmin}, "password": {testPassword}}, nil, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", res.Status)
	}
	c := sessionCookie(res)
	if c == nil || c.Value == "" {
		t.Fatal("login set no session cookie")
	}
	return c
}

func doc(t *testing.T, res *http.Response) *goquery.Document {
	t.Helper()
	defer res.Body.Close()
	d, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Every dashboard URL, the Asynq monitor's included.
var pages = []string{
	"/admin", "/admin/", "/admin/campaigns/new", "/admin/campaigns/1", "/admin/campaigns/1/edit",
	"/admin/campaigns/1/live", "/admin/live/campaigns", "/admin/jobs", "/admin/jobs/live",
	"/admin/queues", "/admin/queues/", "/admin/queues/api/queues", "/admin/queues/queues/orders", "/admin/no-such-page",
}

var actions = []string{
	"/admin/campaigns", "/admin/campaigns/1/edit", "/admin/campaigns/1/pause", "/admin/campaigns/1/resume",
	"/admin/campaigns/1/end", "/admin/campaigns/1/stock", "/admin/queues/api/queues/orders:pause",
}

func TestNoSessionNoDashboard(t *testing.T) {
	d := newDash(t, generous)
	d.svc.add("sale", testNow.Add(time.Hour), testNow.Add(2*time.Hour))
	for _, tt := range []struct {
		name string
		hdr  map[string]string
		c    *http.Cookie
	}{
		{"no session", nil, nil},
		{"unknown session", nil, &http.Cookie{Name: web.SessionCookie, Value: "forged"}},
		// API tokens, even an admin's, open nothing here.
		{"bearer token", map[string]string{"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.admin.token"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range pages {
				res := d.do("GET", p, nil, tt.c, tt.hdr)
				loc := res.Header.Get("Location")
				if res.StatusCode != http.StatusSeeOther || loc != "/admin/login?next="+url.QueryEscape(p) {
					t.Errorf("GET %s: %s, Location %q; want a redirect to sign in", p, res.Status, loc)
				}
			}
			for _, p := range actions {
				res := d.do("POST", p, url.Values{"stock": {"5"}}, tt.c, tt.hdr)
				if res.StatusCode != http.StatusUnauthorized {
					t.Errorf("POST %s: %s, want 401", p, res.Status)
				}
			}
		})
	}
	if n := d.monitor.Load(); n != 0 {
		t.Errorf("the Asynq monitor served %d requests without a session", n)
	}
	if calls := d.svc.called(); len(calls) != 0 {
		t.Errorf("actions ran without a session: %v", calls)
	}
}

func TestSignedInPages(t *testing.T) {
	d := newDash(t, generous)
	v := d.svc.add("sale", testNow.Add(time.Hour), testNow.Add(2*time.Hour))
	d.live.Set(v.ID, seckill.LiveCounts{Remaining: 7, Queued: 1, Known: true})
	c := d.login(t)
	for _, p := range pages {
		res := d.do("GET", p, nil, c, nil)
		want := http.StatusOK
		switch p {
		case "/admin/queues":
			want = http.StatusSeeOther
		case "/admin/no-such-page":
			want = http.StatusNotFound
		}
		if res.StatusCode != want {
			t.Errorf("GET %s: %s, want %d", p, res.Status, want)
		}
		if strings.HasPrefix(p, "/admin/queues/") {
			continue
		}
		if csp := res.Header.Get("Content-Security-Policy"); want == http.StatusOK && !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
		if res.Header.Get("X-Frame-Options") != "DENY" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: headers %v", p, res.Header)
		}
	}
	if n := d.monitor.Load(); n != 3 {
		t.Errorf("the monitor served %d requests, want 3", n)
	}
	// The monitor sees the full path: asynqmon's RootPath is /admin/queues.
	res := d.do("GET", "/admin/queues/queues/orders", nil, c, nil)
	if body := doc(t, res).Text(); body != "asynqmon at /admin/queues/queues/orders" {
		t.Errorf("monitor body %q", body)
	}

	page := doc(t, d.do("GET", "/admin", nil, c, nil))
	row := page.Find(`[data-testid="campaign-row"][data-voucher-id="1"]`)
	if got := strings.TrimSpace(row.Find(`[data-testid="remaining"]`).Text()); got != "7" {
		t.Errorf("remaining %q", got)
	}
	if got := page.Find(`[data-testid="whoami"]`).Text(); got != testAdmin {
		t.Errorf("whoami %q", got)
	}
	// The fragment the page polls is the same table.
	frag := doc(t, d.do("GET", "/admin/live/campaigns", nil, c, nil))
	if frag.Find(`[data-testid="campaign-row"]`).Length() != 1 || frag.Find("html body header").Length() != 0 {
		t.Error("the live fragment is not the bare table")
	}
}

func TestCrossSitePostsRefused(t *testing.T) {
	d := newDash(t, generous)
	d.svc.add("sale", testNow.Add(-time.Hour), testNow.Add(time.Hour))
	c := d.login(t)
	crossSite := []map[string]string{
		{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "same-site", "Origin": "https://evil.dash.example"},
		{"Sec-Fetch-Site": "", "Origin": "https://evil.example"}, // an older browser
	}
	for _, hdr := range crossSite {
		for _, p := range append(actions, "/admin/login", "/admin/logout") {
			res := d.do("POST", p, url.Values{"stock": {"5"}, "user": {testAdmin}, "password": {testPassword}}, c, hdr)
			if res.StatusCode != http.StatusForbidden {
				t.Errorf("cross-site POST %s with %v: %s, want 403", p, hdr, res.Status)
			}
		}
	}
	if calls := d.svc.called(); len(calls) != 0 {
		t.Errorf("cross-site posts ran actions: %v", calls)
	}
	if n := d.monitor.Load(); n != 0 {
		t.Errorf("cross-site posts reached the monitor %d times", n)
	}
	if _, err := d.sessions.AdminBySession(context.Background(), c.Value); err != nil {
		t.Error("a cross-site logout ended the session")
	}
	// The same POST from the dashboard itself goes through.
	if res := d.do("POST", "/admin/campaigns/1/pause", nil, c, nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("same-origin pause: %s", res.Status)
	}
	// GET never changes anything.
	if res := d.do("GET", "/admin/campaigns/1/pause", nil, c, nil); res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET pause: %s", res.Status)
	}
	if diff := cmp.Diff([]string{"pause"}, d.svc.called()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestLogin(t *testing.T) {
	d := newDash(t, generous)

	page := doc(t, d.do("GET", "/admin/login?next=/admin/jobs", nil, nil, nil))
	if v, _ := page.Find(`input[name="next"]`).Attr("value"); v != "/admin/jobs" {
		t.Errorf("next %q", v)
	}

	res := d.do("POST", "/admin/login", url.Values{"user": {testAdmin}, "password": {"wrong"}}, nil, nil)
	if res.StatusCode != http.StatusUnauthorized || sessionCookie(res) != nil {
		t.Errorf("wrong password: %s, cookie %v", res.Status, sessionCookie(res))
	}
	if msg := doc(t, res).Find(`[data-testid="login-error"]`).Text(); msg != "Wrong user name or password." {
		t.Errorf("error %q", msg)
	}

	res = d.do("POST", "/admin/login", url.Values{"user": {testAdmin}, "password": {testPassword}, "next": {"/admin/jobs"}}, nil, nil)
	c := sessionCookie(res)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/jobs" || c == nil {
		t.Fatalf("login: %s to %q, cookie %v", res.Status, res.Header.Get("Location"), c)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/admin" || c.Secure || c.MaxAge <= 0 || c.MaxAge > int(web.DefaultSessionTTL.Seconds()) {
		t.Errorf("cookie %+v", c)
	}

	// Behind TLS the cookie is Secure; a new sign-in ends the old session.
	res = d.do("POST", "/admin/login", url.Values{"user": {testAdmin}, "password": {testPassword}}, c,
		map[string]string{"X-Forwarded-Proto": "https", "Origin": "https://dash.example"})
	c2 := sessionCookie(res)
	if res.StatusCode != http.StatusSeeOther || c2 == nil || !c2.Secure || c2.Value == c.Value {
		t.Fatalf("second login: %s, cookie %+v", res.Status, c2)
	}
	if _, err := d.sessions.AdminBySession(context.Background(), c.Value); err == nil {
		t.Error("signing in again kept the old session")
	}

	// Signed in, the login page sends the operator on.
	if res := d.do("GET", "/admin/login", nil, c2, nil); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin" {
		t.Errorf("login page when signed in: %s to %q", res.Status, res.Header.Get("Location"))
	}

	// next never leads off the dashboard.
	for _, next := range []string{"//evil.example/admin", "https://evil.example/admin", "/elsewhere", `/\evil.example`, "/admin/login", "/admin/live/campaigns", "javascript:alert(1)"} {
		res := d.do("POST", "/admin/login", url.Values{"user": {testAdmin}, "password": {testPassword}, "next": {next}}, nil, nil)
		if loc := res.Header.Get("Location"); loc != "/admin" {
			t.Errorf("next %q: redirect to %q", next, loc)
		}
	}
}

func TestLogoutRevokesSession(t *testing.T) {
	d := newDash(t, generous)
	c := d.login(t)
	if res := d.do("GET", "/admin", nil, c, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("signed in: %s", res.Status)
	}
	res := d.do("POST", "/admin/logout", nil, c, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/login" {
		t.Errorf("logout: %s to %q", res.Status, res.Header.Get("Location"))
	}
	if cleared := sessionCookie(res); cleared == nil || cleared.MaxAge >= 0 {
		t.Errorf("logout left the cookie: %+v", cleared)
	}
	// The old cookie, replayed, opens nothing: the session is gone.
	if res := d.do("GET", "/admin", nil, c, nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout: %s", res.Status)
	}
}

// attemptLogin posts the sign-in form from the client address ip.
func (d *dash) attemptLogin(user, password, ip string) *http.Response {
	r := httptest.NewRequest("POST", "http://dash.example/admin/login",
		strings.NewReader(url.Values{"user": {user}, "password": {password}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.RemoteAddr = ip + ":4000"
	w := httptest.NewRecorder()
	d.h.ServeHTTP(w, r)
	return w.Result()
}

var tightLogin = seckill.LoginLimits{
	PerPair:    seckill.Limit{Burst: 3, Every: time.Hour},
	PerAddress: seckill.Limit{Burst: 5, Every: time.Hour},
	Failures:   seckill.Limit{Burst: 2, Every: time.Hour},
}

func TestLoginRateLimit(t *testing.T) {
	d := newDash(t, tightLogin)
	const guesser, operator = "192.0.2.1", "198.51.100.7"
	for i := range 2 {
		if res := d.attemptLogin(testAdmin, "guess", guesser); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %s", i+1, res.Status)
		}
	}
	// The name's failures are spent: the guesser, who failed on it, is
	// refused, whatever the case of the name and even with the right
	// password.
	res := d.attemptLogin(strings.ToUpper(testAdmin), testPassword, guesser)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || sessionCookie(res) != nil {
		t.Errorf("3rd attempt from the guesser: %s, Retry-After %q", res.Status, res.Header.Get("Retry-After"))
	}
	if msg := doc(t, res).Find(`[data-testid="login-error"]`).Text(); !strings.Contains(msg, "Too many sign-in attempts") {
		t.Errorf("message %q", msg)
	}
	// The operator, from another address, is not locked out: the name's
	// failures are over budget, so the attempt is slowed, not refused.
	start := time.Now()
	res = d.attemptLogin(testAdmin, testPassword, operator)
	if res.StatusCode != http.StatusSeeOther || sessionCookie(res) == nil {
		t.Fatalf("operator from another address: %s", res.Status)
	}
	if took := time.Since(start); took < testSlowDown {
		t.Errorf("operator's attempt took %v; want it slowed by %v while the name is under attack", took, testSlowDown)
	}
	// One address guessing many names runs out of its own budget (the
	// refused attempt did not spend it).
	for i, user := range []string{"u1", "u2", "u3"} {
		if res := d.attemptLogin(user, "guess", guesser); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("name %d from the guesser: %s", i, res.Status)
		}
	}
	if res := d.attemptLogin("u4", "guess", guesser); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("6th attempt from the guesser: %s", res.Status)
	}
	// A fresh name from a fresh address is neither refused nor slowed.
	start = time.Now()
	if res := d.attemptLogin("u4", "guess", "203.0.113.9"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("fresh name and address: %s", res.Status)
	}
	if took := time.Since(start); took >= testSlowDown {
		t.Errorf("fresh name took %v: slowed without a reason", took)
	}
}

// TestLoginGuessersConcurrently: hundreds of guesses at once from one
// address get at most the pair's budget through (fewer when the name's
// failures run out first: the address has failed on it, so it is refused
// from then on); the operator, from another address, still signs in.
func TestLoginGuessersConcurrently(t *testing.T) {
	d := newDash(t, tightLogin)
	const guesses = 300
	var wrong, refused, other atomic.Int64
	var wg sync.WaitGroup
	for range guesses {
		wg.Go(func() {
			switch d.attemptLogin(testAdmin, "guess", "192.0.2.1").StatusCode {
			case http.StatusUnauthorized:
				wrong.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	wg.Wait()
	least := int64(min(tightLogin.PerPair.Burst, tightLogin.Failures.Burst))
	if wrong.Load() < least || wrong.Load() > int64(tightLogin.PerPair.Burst) || refused.Load() != guesses-wrong.Load() || other.Load() != 0 {
		t.Errorf("checked %d, refused %d, other %d; want %d to %d checked", wrong.Load(), refused.Load(), other.Load(), least, tightLogin.PerPair.Burst)
	}
	if res := d.attemptLogin(testAdmin, testPassword, "198.51.100.7"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("operator after the guessers: %s", res.Status)
	}
}

// TestLoginManyAddresses: guessers at one name from many addresses each
// get a first guess; once the name's failures are spent, an address that
// has failed on it is refused (429 with Retry-After) until they refill,
// while the operator, from an address that has not failed, signs in
// (slowed), and another name is untouched.
func TestLoginManyAddresses(t *testing.T) {
	d := newDash(t, tightLogin)
	addr := func(i int) string { return "203.0.113." + strconv.Itoa(10+i) }
	const n = 6
	for i := range n {
		if res := d.attemptLogin(testAdmin, "guess", addr(i)); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("first guess from %s: %s", addr(i), res.Status)
		}
	}
	for i := range n {
		res := d.attemptLogin(testAdmin, "guess"+strconv.Itoa(i), addr(i))
		secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
		if res.StatusCode != http.StatusTooManyRequests || err != nil || secs <= 0 || secs > int(tightLogin.Failures.Every/time.Second) {
			t.Errorf("second guess from %s: %s, Retry-After %q", addr(i), res.Status, res.Header.Get("Retry-After"))
		}
	}
	start := time.Now()
	res := d.attemptLogin(testAdmin, testPassword, "198.51.100.7")
	if res.StatusCode != http.StatusSeeOther || sessionCookie(res) == nil {
		t.Fatalf("operator from an address that has not failed: %s", res.Status)
	}
	if took := time.Since(start); took < testSlowDown {
		t.Errorf("operator's attempt took %v; want it slowed by %v while the name is under attack", took, testSlowDown)
	}
	if res := d.attemptLogin("bob", "guess", addr(0)); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("another name from a guesser's address: %s", res.Status)
	}
}

// TestLoginSuccessIsFree: signing in again and again from one address
// spends only the address's budget, which bounds the password checks; the
// pair's budget is spent by wrong passwords only.
func TestLoginSuccessIsFree(t *testing.T) {
	d := newDash(t, tightLogin)
	const operator = "198.51.100.7"
	for i := range tightLogin.PerAddress.Burst {
		if res := d.attemptLogin(testAdmin, testPassword, operator); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in %d: %s", i+1, res.Status)
		}
	}
	if res := d.attemptLogin(testAdmin, testPassword, operator); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("sign-in %d, over the address's budget: %s", tightLogin.PerAddress.Burst+1, res.Status)
	}
}

func TestCreateCampaignForm(t *testing.T) {
	d := newDash(t, generous)
	c := d.login(t)
	form := url.Values{
		"title": {"  "}, "subTitle": {""}, "rules": {""}, "shopId": {"1"}, "stock": {"100"},
		"payValue": {"100"}, "actualValue": {"200"},
		"beginTime": {testNow.Add(time.Hour).Format(time.RFC3339)}, "endTime": {testNow.Add(2 * time.Hour).Format(time.RFC3339)},
	}
	for _, tt := range []struct {
		field, value, msg string
	}{
		// The messages are the domain's, in the labels the form shows.
		{"title", "  ", "“Title” is required"},
		{"stock", "0", "“Stock” must be between 1 and 10000000"},
		{"stock", "many", "“Stock” must be a whole number"},
		{"shopId", "x", "“Shop id” must be a whole number"},
		{"shopId", "0", "“Shop id” must be a positive integer"},
		{"actualValue", "50", "“Worth” must be at least “Pays”"},
		{"endTime", testNow.Add(-time.Hour).Format(time.RFC3339), "“Ends” must be after “Begins”"},
		{"beginTime", "yesterday", "“Begins” must be a date and time"},
		{"brake", "-1", "“Brake” must be between 0 (none) and 1000000 admissions a second"},
		{"brake", "fast", "“Brake” must be a whole number"},
		{"shards", "65", "“Stock shards” must be between 1 and 64"},
		{"shards", "many", "“Stock shards” must be a whole number"},
		{"challenge", "CAPTCHA", "“Challenge” must be NONE, QUIZ or PROOF_OF_WORK"},
		{"powBits", "40", "“Proof of work: zero bits” must be between 1 and 32"},
		{"powBits", "0", "“Proof of work: zero bits” must be between 1 and 32"},
		{"quiz", "", "QUIZ needs at least one question"},
		{"quiz", "What is 2 + 2?", "line 1: write the question, then | and each accepted answer"},
		{"quiz", "What is 2 + 2? | *4 | 5 | 22", "question 1 offers 3 choices: give 4 to 10, or none for a free answer"},
		{"quiz", "What is 2 + 2? | *4 | *four | 5 | 22", "question 1 accepts 2 of its 4 choices: at most a quarter, so that a guess is right at most one time in four"},
	} {
		t.Run(tt.field+"="+tt.value, func(t *testing.T) {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			f.Set("title", "Sale")
			// The bits count for a proof of work, the questions for a quiz.
			switch tt.field {
			case "powBits":
				f.Set("challenge", "PROOF_OF_WORK")
			case "quiz":
				f.Set("challenge", "QUIZ")
			}
			f.Set(tt.field, tt.value)
			res := d.do("POST", "/admin/campaigns", f, c, nil)
			if res.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("status %s", res.Status)
			}
			page := doc(t, res)
			if got := page.Find(`[data-testid="error-` + tt.field + `"]`).Text(); got != tt.msg {
				t.Errorf("error next to %s: %q, want %q", tt.field, got, tt.msg)
			}
			if got := page.Find(`[data-testid="input-stock"]`).AttrOr("value", ""); got != f.Get("stock") {
				t.Errorf("the form forgot stock: %q", got)
			}
		})
	}

	// Every invalid field at once, each beside its field, and a summary;
	// nothing is created.
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("stock", "0")
	bad.Set("actualValue", "50")
	bad.Set("shopId", "x")
	bad.Set("endTime", testNow.Add(-time.Hour).Format(time.RFC3339))
	res := d.do("POST", "/admin/campaigns", bad, c, nil)
	page := doc(t, res)
	got := map[string]string{}
	page.Find(`[data-testid^="error-"]`).Each(func(_ int, s *goquery.Selection) {
		if msg := strings.TrimSpace(s.Text()); msg != "" {
			got[strings.TrimPrefix(s.AttrOr("data-testid", ""), "error-")] = msg
		}
	})
	want := map[string]string{
		"title": "“Title” is required", "stock": "“Stock” must be between 1 and 10000000",
		"shopId": "“Shop id” must be a whole number", "actualValue": "“Worth” must be at least “Pays”",
		"endTime": "“Ends” must be after “Begins”",
	}
	if res.StatusCode != http.StatusUnprocessableEntity || !cmp.Equal(want, got) {
		t.Errorf("%s; errors (-want +got):\n%s", res.Status, cmp.Diff(want, got))
	}
	if sum := strings.Join(strings.Fields(page.Find(`[data-testid="form-error"] [data-summary-text]`).Text()), " "); sum != "Check 5 fields: Title, Ends, Shop id, Stock, Worth." {
		t.Errorf("summary %q", sum)
	}
	if len(d.svc.called()) != 0 {
		t.Errorf("the service was called: %v", d.svc.called())
	}

	// Without the script, the visible datetime-local value is read as UTC.
	f := url.Values{"title": {"Sale"}, "shopId": {"1"}, "stock": {"100"}, "payValue": {"100"}, "actualValue": {"200"},
		"beginTime": {""}, "beginTimeLocal": {"2026-12-01T11:00"}, "endTime": {""}, "endTimeLocal": {"2026-12-01T12:30"}}
	res = d.do("POST", "/admin/campaigns", f, c, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/campaigns/1?done=create" {
		t.Fatalf("create: %s to %q", res.Status, res.Header.Get("Location"))
	}
	v, _ := d.svc.Voucher(context.Background(), 1)
	if !v.Campaign.BeginTime.Equal(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("begin %v", v.Campaign.BeginTime)
	}
	page = doc(t, d.do("GET", "/admin/campaigns/1?done=create", nil, c, nil))
	if page.Find(`[data-testid="notice"]`).Length() != 1 {
		t.Error("no notice after creating")
	}

	// The challenge and brake are set at creation; the questions of a quiz
	// count only for a quiz.
	for _, tt := range []struct {
		challenge, powBits, quiz, brake string
		want                            string // the campaign page's challenge
	}{
		{"QUIZ", "9", "What is 2 + 2? | 4 | four\n\nCapital of France? | Paris\n", "50", "quiz (2 questions, one at random per buyer)"},
		{"QUIZ", "", "Capital of France? | Lyon | *Paris | Nice | Lille\n", "", "quiz (1 questions, one at random per buyer)"},
		{"PROOF_OF_WORK", "", "ignored", "", "proof of work, 20 zero bits"},
		{"PROOF_OF_WORK", "12", "", "0", "proof of work, 12 zero bits"},
	} {
		f.Set("challenge", tt.challenge)
		f.Set("powBits", tt.powBits)
		f.Set("quiz", tt.quiz)
		f.Set("brake", tt.brake)
		res = d.do("POST", "/admin/campaigns", f, c, nil)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("create with %s: %s", tt.challenge, res.Status)
		}
		page = doc(t, d.do("GET", res.Header.Get("Location"), nil, c, nil))
		if got := strings.Join(strings.Fields(page.Find(`[data-testid="guard-challenge"]`).Text()), " "); got != tt.want {
			t.Errorf("created with %s: the page says %q, want %q", tt.challenge, got, tt.want)
		}
		wantBrake := "none"
		if tt.brake == "50" {
			wantBrake = "at most 50 admissions a second"
		}
		if got := strings.Join(strings.Fields(page.Find(`[data-testid="guard-brake"]`).Text()), " "); got != wantBrake {
			t.Errorf("created with brake %q: the page says %q", tt.brake, got)
		}
	}
}

func TestStatic(t *testing.T) {
	d := newDash(t, generous)
	for _, p := range []string{"/admin/static/app.css", "/admin/static/app.js"} {
		res := d.do("GET", p, nil, nil, nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", p, res.Status)
		}
	}
	if res := d.do("GET", "/admin/static/static.go", nil, nil, nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET static.go: %s", res.Status)
	}
}
