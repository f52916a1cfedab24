package config

import (
	"fmt"
	"net/netip"
	"strings"

	"seckill/internal/seckill"
)

// EventsPolicy is where event endpoints may point: in production no
// internal address (loopback, private, link-local, metadata) outside
// SECKILL_EVENTS_ALLOW_NETS; in development anywhere.
func (c *Config) EventsPolicy() seckill.EndpointPolicy {
	allow, _ := parseAllowNets(c.EventsAllowNets) // Load refused it when bad
	return seckill.EndpointPolicy{Restrict: !c.Dev(), Allow: allow}
}

// parseAllowNets reads SECKILL_EVENTS_ALLOW_NETS: CIDRs separated by
// commas, each written as its network (10.1.0.0/16, not 10.1.2.3/16: a
// range wider than meant is a typo to say, not to guess), or a single
// address.
func parseAllowNets(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an IP address", f)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8", f)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("%q has bits set past its prefix length: write its network, %s", f, p.Masked())
		}
		if p.Addr().Is4In6() {
			return nil, fmt.Errorf("%q is IPv4-mapped IPv6: write the IPv4 range", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// events checks the environment's event endpoint and the allow-list.
func (l *loader) events(c *Config) {
	if _, err := parseAllowNets(c.EventsAllowNets); err != nil {
		l.errf("SECKILL_EVENTS_ALLOW_NETS must be CIDRs separated by commas: %v", err)
		return
	}
	if c.EventsWebhookURL == "" {
		return
	}
	if err := c.EventsPolicy().CheckURL(c.EventsWebhookURL); err != nil {
		l.errf("SECKILL_EVENTS_WEBHOOK_URL: %s", seckill.ErrorMessage(err))
	}
}
