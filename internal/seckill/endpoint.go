package seckill

import (
	"net/netip"
	"net/url"
	"strings"
)

// Where an event endpoint may point. An operator's endpoint URL makes this
// service send requests (server-side request forgery): in production it
// must not reach inside the network it runs in (loopback, link-local and
// the cloud's metadata service, private ranges) unless the operator says
// so with an allow-list. The URL is checked when the endpoint is added and
// the address actually dialled again at every connection (CheckAddr), since
// a name may resolve elsewhere later.

// EndpointPolicy decides which addresses event endpoints may reach.
type EndpointPolicy struct {
	// Restrict refuses internal addresses (production); off, any address
	// is taken (development: the receiver is on this machine).
	Restrict bool
	// Allow lists ranges taken even when Restrict refuses them.
	Allow []netip.Prefix
}

// metadataNames are names of cloud metadata services and of this machine,
// with the address each stands for: refused as that address would be.
var metadataNames = map[string]netip.Addr{
	"localhost":                  netip.MustParseAddr("127.0.0.1"),
	"metadata":                   netip.MustParseAddr("169.254.169.254"),
	"metadata.google.internal":   netip.MustParseAddr("169.254.169.254"),
	"metadata.goog":              netip.MustParseAddr("169.254.169.254"),
	"instance-data":              netip.MustParseAddr("169.254.169.254"),
	"instance-data.ec2.internal": netip.MustParseAddr("169.254.169.254"),
}

// internalRanges are the ranges refused beside what netip's predicates
// name (loopback, private, link-local, multicast, unspecified).
var internalRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
}

// CheckURL checks an endpoint's URL: http or https, a host, no
// credentials (the signature is the authentication), an IP address only in
// its usual spelling, and, when p restricts, no internal address or
// metadata name. EINVALID on the url field, saying why.
func (p EndpointPolicy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" || len(raw) > 2048 {
		return Invalidf("url", "the endpoint's URL must be an http:// or https:// URL of at most 2048 characters")
	}
	if u.User != nil {
		return Invalidf("url", "the endpoint's URL must not carry a user or password: the receiver authenticates the signature (Seckill-Signature) instead")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return Invalidf("url", "the endpoint's URL has no host")
	}
	addr, err := hostAddr(host)
	if err != nil {
		return err
	}
	if !addr.IsValid() {
		return nil // a name: its addresses are checked when it is dialled
	}
	if reason := p.refuses(addr); reason != "" {
		return Invalidf("url", "the endpoint's host %s is %s, which production refuses unless SECKILL_EVENTS_ALLOW_NETS lists it", host, reason)
	}
	return nil
}

// hostAddr is the address host names: an IP address (IPv6 without zone),
// a metadata name's address, or the zero Addr for an ordinary name. A host
// that reads as a number (2130706433, 0x7f.1, 017700000001, 127.1) but is
// not an IPv4 address in four decimal parts is refused: resolvers read such
// spellings differently, and a check must see the address that is dialled.
func hostAddr(host string) (netip.Addr, error) {
	if a, ok := metadataNames[host]; ok {
		return a, nil
	}
	if strings.HasSuffix(host, ".localhost") {
		return metadataNames["localhost"], nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return netip.Addr{}, Invalidf("url", "the endpoint's host must not name an interface (%%%s)", a.Zone())
		}
		return a.Unmap(), nil
	}
	last := host[strings.LastIndexByte(host, '.')+1:]
	if numeric(last) || strings.ContainsAny(host, ":%[]") {
		return netip.Addr{}, Invalidf("url", "the endpoint's host %q is not a name and not an IP address in its usual form (four decimal numbers, or IPv6 in brackets)", host)
	}
	return netip.Addr{}, nil
}

// numeric reports whether a host's last label reads as a number (decimal,
// octal or hex), which no top-level domain does.
func numeric(label string) bool {
	if label == "" {
		return false
	}
	s := label
	if strings.HasPrefix(s, "0x") {
		s = s[2:]
		return strings.Trim(s, "0123456789abcdef") == ""
	}
	return strings.Trim(s, "0123456789") == ""
}

// CheckAddr checks an address about to be dialled: a RefusedAddrError
// when p refuses it.
func (p EndpointPolicy) CheckAddr(a netip.Addr) error {
	if reason := p.refuses(a); reason != "" {
		return &RefusedAddrError{Addr: a.Unmap(), Reason: reason}
	}
	return nil
}

// refuses says why p refuses a, "" when it takes it.
func (p EndpointPolicy) refuses(a netip.Addr) string {
	if !p.Restrict {
		return ""
	}
	a = a.Unmap().WithZone("")
	for _, n := range p.Allow {
		if n.Contains(a) {
			return ""
		}
	}
	return InternalAddr(a)
}

// InternalAddr says what a is when it is internal (loopback, private,
// link-local, metadata, multicast, unspecified and the like), "" when it
// is a public address. IPv4-mapped IPv6 addresses are their IPv4 address.
func InternalAddr(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	switch {
	case !a.IsValid():
		return "not an address"
	case a == netip.MustParseAddr("169.254.169.254") || a == netip.MustParseAddr("fd00:ec2::254"):
		return "the cloud metadata service"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsPrivate():
		return "a private address"
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	for _, r := range internalRanges {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	return ""
}

// RefusedAddrError is a connection refused before it was made: the
// address is one the endpoint policy refuses.
type RefusedAddrError struct {
	Addr   netip.Addr
	Reason string
}

func (e *RefusedAddrError) Error() string {
	return "refused: " + e.Addr.String() + " is " + e.Reason
}

// RedactURL is raw without its user and password, for pages and logs.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unreadable URL)"
	}
	if u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}
