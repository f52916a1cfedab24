package seckill_test

import (
	"net/netip"
	"strings"
	"testing"

	"seckill/internal/seckill"
)

var prodPolicy = seckill.EndpointPolicy{Restrict: true}

// TestEndpointPolicyRefusesInternalHosts: in production an endpoint URL
// that names an internal address, in any spelling, or a metadata name, is
// refused when it is added, saying why; the allow-list lets a range back
// in; development takes loopback. Credentials and numeric spellings are
// refused everywhere.
func TestEndpointPolicyRefusesInternalHosts(t *testing.T) {
	for _, tc := range []struct {
		url, why string
	}{
		{"http://127.0.0.1/hooks", "loopback"},
		{"http://127.8.9.10:6379/", "loopback"},
		{"http://localhost/", "loopback"},
		{"http://LOCALHOST./", "loopback"},
		{"http://api.localhost/", "loopback"},
		{"http://[::1]/", "loopback"},
		{"http://[::ffff:127.0.0.1]/", "loopback"},
		{"http://[::ffff:7f00:1]/", "loopback"},
		{"http://[0:0:0:0:0:ffff:127.0.0.1]/", "loopback"},
		{"http://0.0.0.0/", "unspecified"},
		{"http://0.1.2.3/", "this network"},
		{"http://[::]/", "unspecified"},
		{"http://169.254.169.254/latest/meta-data/", "metadata"},
		{"http://169.254.1.1/", "link-local"},
		{"http://[fe80::1]/", "link-local"},
		{"http://[fd00:ec2::254]/", "metadata"},
		{"http://metadata.google.internal/computeMetadata/v1/", "metadata"},
		{"http://metadata/", "metadata"},
		{"http://metadata.google.internal./", "metadata"},
		{"http://10.0.0.5/", "private"},
		{"http://172.16.0.1/", "private"},
		{"http://172.31.255.255/", "private"},
		{"http://192.168.1.1/", "private"},
		{"http://[fc00::1]/", "private"},
		{"http://[fd12:3456::1]/", "private"},
		{"http://100.64.0.1/", "CGNAT"},
		{"http://224.0.0.1/", "multicast"},
		{"http://[ff02::1]/", "multicast"},
		{"http://255.255.255.255/", "broadcast"},
		{"http://[64:ff9b::7f00:1]/", "NAT64"},
		{"http://[::127.0.0.1]/", "IPv4-compatible"},
		{"http://2130706433/", "usual form"},
		{"http://0x7f.1/", "usual form"},
		{"http://0x7f000001/", "usual form"},
		{"http://017700000001/", "usual form"},
		{"http://0177.0.0.1/", "usual form"},
		{"http://127.1/", "usual form"},
		{"http://[fe80::1%25eth0]/", "interface"},
		{"https://user:pass@hooks.example.com/", "password"},
		{"https://token@hooks.example.com/", "password"},
		{"ftp://hooks.example.com/", "http://"},
		{"http:///nohost", "http://"},
	} {
		err := prodPolicy.CheckURL(tc.url)
		if seckill.ErrorCode(err) != seckill.EINVALID || !strings.Contains(seckill.ErrorMessage(err), tc.why) {
			t.Errorf("CheckURL(%q) = %v, want INVALID_INPUT saying %q", tc.url, err, tc.why)
		}
		if strings.Contains(tc.url, "pass") && strings.Contains(seckill.ErrorMessage(err), "pass@") {
			t.Errorf("CheckURL(%q) repeats the password: %v", tc.url, err)
		}
	}
	for _, ok := range []string{"https://hooks.example.com/seckill", "http://93.184.215.14:8080/x", "https://[2606:4700::1111]/",
		"https://10x.example/", "https://a.example.com./"} {
		if err := prodPolicy.CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q) = %v, want it taken", ok, err)
		}
	}
	allow := seckill.EndpointPolicy{Restrict: true, Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("127.0.0.0/8")}}
	for _, ok := range []string{"http://10.1.2.3/", "http://127.0.0.1:8080/", "http://localhost/", "http://[::ffff:10.1.0.9]/"} {
		if err := allow.CheckURL(ok); err != nil {
			t.Errorf("allowed CheckURL(%q) = %v", ok, err)
		}
	}
	if err := allow.CheckURL("http://10.2.0.1/"); err == nil {
		t.Error("10.2.0.1 taken with only 10.1.0.0/16 allowed")
	}
	dev := seckill.EndpointPolicy{}
	for _, ok := range []string{"http://127.0.0.1:8080/", "http://localhost:9000/", "http://[::1]/"} {
		if err := dev.CheckURL(ok); err != nil {
			t.Errorf("development CheckURL(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"http://u:p@127.0.0.1/", "http://2130706433/"} {
		if err := dev.CheckURL(bad); err == nil {
			t.Errorf("development took %q", bad)
		}
	}
}

// TestEndpointPolicyCheckAddr: the dial-time check of the address a name
// resolved to.
func TestEndpointPolicyCheckAddr(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "::1", "::ffff:127.0.0.1", "10.9.8.7", "169.254.169.254", "fd00:ec2::254", "0.0.0.0", "::", "100.100.100.200", "fe80::1%eth0"} {
		err := prodPolicy.CheckAddr(netip.MustParseAddr(a))
		if err == nil || !strings.HasPrefix(err.Error(), "refused: ") {
			t.Errorf("CheckAddr(%s) = %v, want refused", a, err)
		}
	}
	for _, a := range []string{"93.184.215.14", "2606:4700::1111", "8.8.8.8"} {
		if err := prodPolicy.CheckAddr(netip.MustParseAddr(a)); err != nil {
			t.Errorf("CheckAddr(%s) = %v", a, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	if got := seckill.RedactURL("https://user:s3cret@hooks.example.com/x?a=1"); strings.Contains(got, "s3cret") || strings.Contains(got, "user") {
		t.Errorf("RedactURL = %q", got)
	}
}
