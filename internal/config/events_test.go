package config

import (
	"net/netip"
	"strings"
	"testing"
)

// prodEvents is a production environment with the events settings of m.
func prodEvents(m map[string]string) map[string]string {
	m["SECKILL_ENV"] = "prod"
	m["SECKILL_JWT_SECRET"] = "a-production-secret-nobody-else-knows-0123456789"
	m["SECKILL_PAYMENT_WEBHOOK_SECRET"] = "a-webhook-secret-of-the-provider"
	if m["SECKILL_EVENTS_WEBHOOK_URL"] != "" {
		m["SECKILL_EVENTS_WEBHOOK_SECRET"] = "the-platform's-secret-for-events"
	}
	return m
}

// TestLoadEventsEndpoint: production refuses an environment endpoint that
// reaches inside, or carries credentials, unless SECKILL_EVENTS_ALLOW_NETS
// lists its range; development takes loopback; the allow-list is CIDRs.
func TestLoadEventsEndpoint(t *testing.T) {
	for _, tc := range []struct {
		url, allow, want string // want: "" for taken
	}{
		{"https://hooks.example.com/seckill", "", ""},
		{"http://169.254.169.254/latest", "", "SECKILL_EVENTS_WEBHOOK_URL: the endpoint's host 169.254.169.254 is the cloud metadata service"},
		{"http://metadata.google.internal/", "", "SECKILL_EVENTS_WEBHOOK_URL: the endpoint's host metadata.google.internal is the cloud metadata service"},
		{"http://localhost:8080/", "", "loopback"},
		{"http://[::ffff:127.0.0.1]/", "", "loopback"},
		{"http://2130706433/", "", "usual form"},
		{"http://10.1.2.3/", "", "private"},
		{"http://10.1.2.3/", "10.1.0.0/16", ""},
		{"http://127.0.0.1:9000/", "127.0.0.0/8, ::1", ""},
		{"https://user:pw@hooks.example.com/", "", "must not carry a user or password"},
		{"ftp://hooks.example.com/", "", "http:// or https://"},
		{"", "10.1.2.3/16", "SECKILL_EVENTS_ALLOW_NETS must be CIDRs separated by commas: \"10.1.2.3/16\" has bits set past its prefix length: write its network, 10.1.0.0/16"},
		{"", "10.0.0.0/8,intranet", "SECKILL_EVENTS_ALLOW_NETS must be CIDRs"},
		{"", "::ffff:10.0.0.0/104", "IPv4-mapped"},
	} {
		_, err := Load(env(prodEvents(map[string]string{"SECKILL_EVENTS_WEBHOOK_URL": tc.url, "SECKILL_EVENTS_ALLOW_NETS": tc.allow})))
		switch {
		case tc.want == "" && err != nil && strings.Contains(err.Error(), "SECKILL_EVENTS"):
			t.Errorf("url %q allow %q: %v, want it taken", tc.url, tc.allow, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("url %q allow %q: %v, want %q", tc.url, tc.allow, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("the message repeats the password: %v", err)
		}
	}
	dev := loadDev(t, map[string]string{"SECKILL_EVENTS_WEBHOOK_URL": "http://127.0.0.1:9000/", "SECKILL_EVENTS_WEBHOOK_SECRET": "the-platform's-secret-for-events"})
	if p := dev.EventsPolicy(); p.Restrict {
		t.Errorf("development restricts endpoints: %+v", p)
	}
	c, err := Load(env(prodEvents(map[string]string{"SECKILL_EVENTS_ALLOW_NETS": "10.1.0.0/16, 192.0.2.7"})))
	if err != nil && strings.Contains(err.Error(), "SECKILL_EVENTS") {
		t.Fatal(err)
	}
	if c != nil {
		p := c.EventsPolicy()
		if !p.Restrict || len(p.Allow) != 2 || p.Allow[1] != netip.MustParsePrefix("192.0.2.7/32") {
			t.Errorf("production policy %+v", p)
		}
	}
}
