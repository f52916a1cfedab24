package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
	"seckill/web"
)

func TestGuardForm(t *testing.T) {
	d := newDash(t, generous, func(c *web.Config) { c.AddressRate, c.AddressBurst = 100, 300 })
	d.svc.add("running", testNow.Add(-time.Hour), testNow.Add(time.Hour))
	d.svc.add("scheduled", testNow.Add(time.Hour), testNow.Add(2*time.Hour))
	c := d.login(t)

	// Before the start: the challenge can be set, with a quiz.
	res := d.do("POST", "/admin/campaigns/2/guard", url.Values{"challenge": {"QUIZ"},
		"quiz":  {"What is 2 + 2? | 4 | four\n\nCapital of France? | Paris\n"},
		"brake": {"50"}}, c, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/admin/campaigns/2?done=guard" {
		t.Fatalf("set a quiz: %s to %q", res.Status, res.Header.Get("Location"))
	}
	want := []seckill.QuizQuestion{
		{Question: "What is 2 + 2?", Answers: []string{"4", "four"}},
		{Question: "Capital of France?", Answers: []string{"Paris"}},
	}
	if diff := cmp.Diff(want, d.svc.quiz[2]); diff != "" {
		t.Errorf("quiz (-want +got):\n%s", diff)
	}
	page := doc(t, d.do("GET", "/admin/campaigns/2", nil, c, nil))
	if got := strings.Join(strings.Fields(page.Find(`[data-testid="guard-challenge"]`).Text()), " "); got != "quiz (2 questions, one at random per buyer)" {
		t.Errorf("challenge shown as %q", got)
	}
	if got := strings.Join(strings.Fields(page.Find(`[data-testid="guard-brake"]`).Text()), " "); got != "at most 50 admissions a second" {
		t.Errorf("brake shown as %q", got)
	}
	if got := page.Find(`[data-testid="guard-input-quiz"]`).Text(); got != "What is 2 + 2? | 4 | four\nCapital of France? | Paris\n" {
		t.Errorf("quiz re-shown as %q", got)
	}
	if got := page.Find(`[data-testid="guard-user-limit"]`).Text(); got == "" {
		t.Error("the shared per-user limit is not shown")
	}
	if got := page.Find(`[data-testid="guard-address-limit"]`).Text(); got != "100 attempts a second per client address (IPv6: per /64), bursts of 300 (every instance together)" {
		t.Errorf("the shared per-address limit shown as %q", got)
	}

	// A question with choices: the starred ones are accepted.
	res = d.do("POST", "/admin/campaigns/2/guard", url.Values{"challenge": {"QUIZ"},
		"quiz": {"Capital of France? | Lyon | *Paris | Nice | Lille\nWhat is 2 + 2? | 4 | four\n"}}, c, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("set a quiz with choices: %s", res.Status)
	}
	want = []seckill.QuizQuestion{
		{Question: "Capital of France?", Answers: []string{"Paris"}, Choices: []string{"Lyon", "Paris", "Nice", "Lille"}},
		{Question: "What is 2 + 2?", Answers: []string{"4", "four"}},
	}
	if diff := cmp.Diff(want, d.svc.quiz[2]); diff != "" {
		t.Errorf("quiz with choices (-want +got):\n%s", diff)
	}
	page = doc(t, d.do("GET", "/admin/campaigns/2", nil, c, nil))
	if got := page.Find(`[data-testid="guard-input-quiz"]`).Text(); got != "Capital of France? | Lyon | *Paris | Nice | Lille\nWhat is 2 + 2? | 4 | four\n" {
		t.Errorf("quiz with choices re-shown as %q", got)
	}

	// Refusals stay on the form, which keeps what was typed.
	for _, bad := range []url.Values{
		{"challenge": {"QUIZ"}, "quiz": {"a question without answers"}},
		{"challenge": {"QUIZ"}, "quiz": {"Three choices? | *a | b | c"}},
		{"challenge": {"QUIZ"}, "quiz": {"Half right? | *a | *b | c | d"}},
		{"challenge": {"QUIZ"}, "quiz": {""}},
		{"challenge": {"PROOF_OF_WORK"}, "powBits": {"40"}},
		{"challenge": {"PROOF_OF_WORK"}, "powBits": {"0"}},
		{"challenge": {"PROOF_OF_WORK"}, "powBits": {"ten"}},
		{"challenge": {"CAPTCHA"}},
		{"challenge": {"NONE"}, "brake": {"-1"}},
	} {
		res := d.do("POST", "/admin/campaigns/2/guard", bad, c, nil)
		p := doc(t, res)
		if res.StatusCode != http.StatusUnprocessableEntity || p.Find(`[data-testid="guard-error"]`).Text() == "" {
			t.Errorf("%v: %s, error %q", bad, res.Status, p.Find(`[data-testid="guard-error"]`).Text())
		}
		if q := bad.Get("quiz"); q != "" && p.Find(`[data-testid="guard-input-quiz"]`).Text() != q {
			t.Errorf("%v: the form lost the quiz", bad)
		}
	}

	// An empty difficulty is the default; what the field holds counts only
	// for a proof of work.
	for _, tt := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"challenge": {"PROOF_OF_WORK"}, "powBits": {""}}, "proof of work, 20 zero bits"},
		{url.Values{"challenge": {"PROOF_OF_WORK"}, "powBits": {"6"}}, "proof of work, 6 zero bits"},
		{url.Values{"challenge": {"NONE"}, "powBits": {"0"}}, "none"},
	} {
		if res := d.do("POST", "/admin/campaigns/2/guard", tt.form, c, nil); res.StatusCode != http.StatusSeeOther {
			t.Errorf("%v: %s", tt.form, res.Status)
		}
		page := doc(t, d.do("GET", "/admin/campaigns/2", nil, c, nil))
		if got := strings.Join(strings.Fields(page.Find(`[data-testid="guard-challenge"]`).Text()), " "); got != tt.want {
			t.Errorf("%v: challenge shown as %q, want %q", tt.form, got, tt.want)
		}
	}

	// After the start the challenge is fixed: the form offers only the brake.
	page = doc(t, d.do("GET", "/admin/campaigns/1", nil, c, nil))
	if page.Find(`[data-testid="guard-input-challenge"]`).Length() != 0 || page.Find(`[data-testid="guard-input-brake"]`).Length() != 1 {
		t.Error("a running campaign's form should offer the brake only")
	}
}

type fakeHistory []web.Sample

func (h fakeHistory) Samples(int64, time.Time) []web.Sample { return h }

// The funnel chart sums the outcomes by layer, with the arrivals on top.
func TestFunnelChart(t *testing.T) {
	rate := func(o seckill.Outcome, v float64) web.OutcomeRate { return web.OutcomeRate{Outcome: o, PerSecond: v} }
	h := fakeHistory{
		{At: testNow.Add(-2 * time.Second), Outcomes: []web.OutcomeRate{rate(seckill.OutcomeAccepted, 1), rate(seckill.OutcomeLocalLimit, 0),
			rate(seckill.OutcomeChallengeRequired, 0), rate(seckill.OutcomeChallengeWrong, 0), rate(seckill.OutcomeChallengeUsed, 0)}},
		{At: testNow.Add(-time.Second), Outcomes: []web.OutcomeRate{rate(seckill.OutcomeAccepted, 2), rate(seckill.OutcomeLocalLimit, 30),
			rate(seckill.OutcomeChallengeRequired, 5), rate(seckill.OutcomeChallengeWrong, 3), rate(seckill.OutcomeChallengeUsed, 4), rate(seckill.OutcomeSoldOutMark, 12),
			rate(seckill.OutcomePassRequired, 6), rate(seckill.OutcomePassExpired, 2)}},
	}
	d := newDash(t, generous, func(c *web.Config) { c.History = h })
	d.svc.add("running", testNow.Add(-time.Hour), testNow.Add(time.Hour))
	c := d.login(t)
	page := doc(t, d.do("GET", "/admin/campaigns/1", nil, c, nil))
	var parts []string
	page.Find(`[data-testid="chart-funnel"] .legend span`).Each(func(_ int, s *goquery.Selection) {
		parts = append(parts, strings.Join(strings.Fields(s.Text()), " "))
	})
	legend := strings.Join(parts, ", ")
	for _, want := range []string{"arrivals 64/s", "local limit 30/s", "pass missing 8.0/s", "challenge missing 5.0/s", "challenge wrong 7.0/s", "sold out mark 12/s", "admitted 2.0/s"} {
		if !strings.Contains(legend, want) {
			t.Errorf("funnel legend %q lacks %q", legend, want)
		}
	}
	for _, p := range parts {
		if strings.HasPrefix(p, "sold out ") && !strings.HasPrefix(p, "sold out mark") {
			t.Errorf("funnel legend %q shows a layer that stopped nothing", legend)
		}
	}
}
