package clientaddr_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"seckill/internal/clientaddr"
)

func TestAddr(t *testing.T) {
	trusted, err := clientaddr.ParseTrusted("10.0.0.0/8, 192.0.2.7, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	behind := clientaddr.New(trusted)
	tests := []struct {
		name string
		res  clientaddr.Resolver
		peer string
		xff  []string
		want string
	}{
		{"no proxy trusted: the peer", clientaddr.Resolver{}, "198.51.100.1:4000", nil, "198.51.100.1"},
		{"spoofed header from an untrusted peer is ignored", behind, "198.51.100.1:4000", []string{"203.0.113.9"}, "198.51.100.1"},
		{"spoofed header ignored when no proxy is trusted", clientaddr.Resolver{}, "10.1.1.1:4000", []string{"203.0.113.9"}, "10.1.1.1"},
		{"trusted peer: the last entry", behind, "10.1.1.1:4000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"trusted chain: first untrusted from the right", behind, "10.1.1.1:4000", []string{"1.1.1.1, 203.0.113.9, 10.2.2.2, 192.0.2.7"}, "203.0.113.9"},
		{"client's forged entries left of the real one are ignored", behind, "10.1.1.1:4000", []string{"6.6.6.6, 203.0.113.9"}, "203.0.113.9"},
		{"several header lines are one list", behind, "10.1.1.1:4000", []string{"6.6.6.6, 203.0.113.9", "10.3.3.3"}, "203.0.113.9"},
		{"all trusted: the farthest", behind, "10.1.1.1:4000", []string{"10.9.9.9, 10.8.8.8"}, "10.9.9.9"},
		{"garbage stops at the last trusted hop", behind, "10.1.1.1:4000", []string{"203.0.113.9, nonsense, 10.2.2.2"}, "10.2.2.2"},
		{"empty header: the peer", behind, "10.1.1.1:4000", []string{""}, "10.1.1.1"},
		{"entry with a port", behind, "10.1.1.1:4000", []string{"203.0.113.9:5555"}, "203.0.113.9"},
		{"IPv6 peer", clientaddr.Resolver{}, "[2001:db8::1]:4000", nil, "2001:db8::1"},
		{"IPv6 trusted proxy, bracketed entry", behind, "[fd00::1]:4000", []string{"[2001:db8::5]:80"}, "2001:db8::5"},
		{"IPv4-mapped peer is IPv4", clientaddr.Resolver{}, "[::ffff:198.51.100.1]:4000", nil, "198.51.100.1"},
		{"zone is not an address", behind, "10.1.1.1:4000", []string{"fe80::1%eth0"}, "10.1.1.1"},
		{"peer not an address", behind, "pipe", []string{"203.0.113.9"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := tt.res.Addr(r); got != tt.want {
				t.Errorf("Addr = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAddrBounded: a chain of trusted hops longer than the bounds stops at
// the last hop reached instead of walking the whole header.
func TestAddrBounded(t *testing.T) {
	trusted, _ := clientaddr.ParseTrusted("10.0.0.0/8")
	res := clientaddr.New(trusted)
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:1"
	hops := make([]string, 0, 1000)
	hops = append(hops, "203.0.113.9")
	for range 999 {
		hops = append(hops, "10.0.0.2")
	}
	r.Header.Set("X-Forwarded-For", strings.Join(hops, ","))
	if got := res.Addr(r); got != "10.0.0.2" {
		t.Errorf("Addr = %q, want the last trusted hop reached, 10.0.0.2", got)
	}
	r.Header.Set("X-Forwarded-For", "203.0.113.9,"+strings.Repeat(" ", clientaddr.MaxHeader)+"10.0.0.2")
	if got := res.Addr(r); got != "10.0.0.1" {
		t.Errorf("Addr with an oversized entry = %q, want the peer", got)
	}
}

func TestParseTrusted(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0", "fe80::1%eth0", "1.2.3.4/"} {
		if _, err := clientaddr.ParseTrusted(bad); err == nil {
			t.Errorf("ParseTrusted(%q): no error", bad)
		}
	}
	got, err := clientaddr.ParseTrusted(" 10.1.2.3/8 ,, ::ffff:192.0.2.1 ")
	if err != nil || len(got) != 2 || got[0].String() != "10.0.0.0/8" || got[1].String() != "192.0.2.1/32" {
		t.Errorf("ParseTrusted = %v, %v", got, err)
	}
}

func TestBucket(t *testing.T) {
	for in, want := range map[string]string{
		"198.51.100.1":         "198.51.100.1",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2::9":      "2001:db8:1:2::/64",
		"":                     "",
		"junk":                 "",
	} {
		if got := clientaddr.Bucket(in); got != want {
			t.Errorf("Bucket(%q) = %q, want %q", in, got, want)
		}
	}
}
