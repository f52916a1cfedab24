// Package clientaddr finds the address a request came from: the TCP peer,
// or, behind proxies the operator trusts, the address those proxies saw in
// front of them (X-Forwarded-For). Every limit keyed by a client address
// (sign-in, purchases) asks it, so they agree on who the client is.
package clientaddr

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// MaxHeader bounds the X-Forwarded-For bytes read (all of its lines
// together) and MaxHops the entries walked: a longer chain is cut there and
// the client is the nearest hop reached, so a forged header costs linear
// time in a bounded length.
const (
	MaxHeader = 4096
	MaxHops   = 32
)

// Resolver finds client addresses. The zero value trusts no proxy: the TCP
// peer is the client, whatever X-Forwarded-For says.
type Resolver struct {
	trusted []netip.Prefix
}

// ParseTrusted parses a comma-separated list of IP addresses and CIDR
// prefixes ("10.0.0.0/8, 192.0.2.7, fd00::/8"); "" trusts no proxy.
func ParseTrusted(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not an IP address or CIDR prefix", f)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is not an IP address or CIDR prefix", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// New returns a Resolver that believes X-Forwarded-For entries added by the
// proxies in trusted.
func New(trusted []netip.Prefix) Resolver {
	return Resolver{trusted: trusted}
}

// Addr returns the client address of r: the TCP peer unless it is a
// trusted proxy; then X-Forwarded-For walked from the right, skipping
// trusted hops, gives the first address no trusted proxy owns. An entry
// that is not an address (or a chain longer than the bounds) stops the
// walk at the last hop reached, which a trusted proxy vouched for. "" when
// the peer itself is not an address (a test's RemoteAddr, a Unix socket).
func (res Resolver) Addr(r *http.Request) string {
	peer, ok := parseHost(r.RemoteAddr)
	if !ok {
		return ""
	}
	if !res.trusts(peer) {
		return peer.String()
	}
	client := peer
	size, hops := 0, 0
	lines := r.Header.Values("X-Forwarded-For")
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for line != "" {
			entry := line
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				entry, line = line[j+1:], line[:j]
			} else {
				line = ""
			}
			size += len(entry) + 1
			hops++
			if size > MaxHeader || hops > MaxHops {
				return client.String()
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			a, ok := parseHost(entry)
			if !ok {
				return client.String()
			}
			client = a
			if !res.trusts(a) {
				return a.String()
			}
		}
	}
	return client.String()
}

func (res Resolver) trusts(a netip.Addr) bool {
	for _, p := range res.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHost reads "1.2.3.4", "1.2.3.4:80", "2001:db8::1" or
// "[2001:db8::1]:80", without zone, IPv4-mapped IPv6 as IPv4.
func parseHost(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(s)
		if err2 != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	if a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Bucket is the unit a per-address limit counts: an IPv4 address, or the
// /64 network of an IPv6 address (one subscriber's usual allocation, so a
// host cannot dodge the limit by walking its own /64). "" stays "".
func Bucket(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}
