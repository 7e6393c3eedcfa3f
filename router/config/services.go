package config

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The router's own services: the DHCPv4 client on interfaces with "dhcp"
// among their addresses, the DHCPv4 server of a lan interface
// (dhcp_server:), the DNS forwarder (dns:) and the host TAP that keeps the
// board's own kernel reachable (host:).

// AddressDHCP is the word in an interface's addresses that asks for an
// IPv4 address by DHCP.
const AddressDHCP = "dhcp"

// Service defaults and bounds.
const (
	DefaultLeaseTime = 12 * time.Hour   // OpenWrt's dnsmasq default
	MinLeaseTime     = 10 * time.Second // below this, renewals would be most of the traffic
	MaxLeaseTime     = 365 * 24 * time.Hour
	DefaultDomain    = "lan" // OpenWrt's
	DefaultDNSCache  = 10000 // cache entries
	MaxDNSCache      = 1 << 20
	MaxDNSTTL        = 7 * 24 * time.Hour // RFC 8767 caps stale data at 7 days; no cache holds longer
	MaxStaticLeases  = 4096
	MaxClientIDBytes = 64
	// MaxNewLeaseBurst and MaxNewLeasesPerMinute bound dhcp_server:
	// new_lease_burst and new_leases_per_minute: past a million the
	// limit is off in all but name.
	MaxNewLeaseBurst      = 1 << 20
	MaxNewLeasesPerMinute = 1 << 20
)

// DHCPClient is an interface's DHCPv4 client (addresses: [dhcp], and
// optionally dhcp: with these keys).
type DHCPClient struct {
	// Hostname is sent in option 12, e.g. "gvrouter"; "" sends none.
	Hostname string
	// ClientID is option 61 as bytes, e.g. 01:02:00:00:00:00:02 in YAML
	// (hex, colons optional); nil sends 0x01 and the interface's MAC.
	ClientID []byte
	// Release sends DHCPRELEASE when the router stops cleanly (default
	// off: the lease is kept and INIT-REBOOT finds it again).
	Release bool
	Pos     Pos // where "dhcp" is written among the addresses
}

// DHCPServer is a lan interface's DHCPv4 server (dhcp_server:).
type DHCPServer struct {
	RangeStart, RangeEnd netip.Addr    // e.g. 192.168.1.100 and 192.168.1.249 ("192.168.1.100-192.168.1.249")
	LeaseTime            time.Duration // e.g. 12h; 0 = DefaultLeaseTime
	Router               []netip.Addr  // option 3; nil = the interface's address
	DNS                  []netip.Addr  // option 6; nil = the interface's address (the forwarder)
	Domain               string        // option 15; "" = dns: domain, else DefaultDomain
	MTU                  int           // option 26; 0 = none
	Routes               []ClasslessRoute
	NTP                  []netip.Addr // option 42
	Static               []StaticLease
	// NewLeaseBurst and NewLeasesPerMinute bound the new leases (to
	// clients holding none) of the interface, against a flood of random
	// MACs taking the range: e.g. 64 at once, then 60 a minute; 0 = the
	// server's defaults (64, 60). Renewals never count.
	NewLeaseBurst, NewLeasesPerMinute int
	Pos                               Pos

	src src
}

// ClasslessRoute is one option 121 route (RFC 3442).
type ClasslessRoute struct {
	To  netip.Prefix // e.g. 10.0.0.0/8
	Via netip.Addr   // e.g. 192.168.1.254
	Pos Pos
}

// StaticLease is a fixed address for one MAC.
type StaticLease struct {
	MAC      net.HardwareAddr // e.g. 02:00:00:00:00:10
	Address  netip.Addr       // e.g. 192.168.1.10
	Hostname string           // e.g. "nas"; "" = the client's own
	Pos      Pos
}

// DNS is the DNS forwarder (dns:), served on UDP and TCP port 53 of every
// lan interface's addresses, never on a wan interface.
type DNS struct {
	// Upstreams are the servers asked, e.g. [9.9.9.9, "[2620:fe::fe]:53"];
	// empty = the DNS servers of the WAN DHCP leases.
	Upstreams []netip.AddrPort
	Domain    string        // local domain of lease hostnames, e.g. "lan"; "" = DefaultDomain
	CacheSize int           // entries; 0 = DefaultDNSCache
	MinTTL    time.Duration // clamp; 0 = none
	MaxTTL    time.Duration // clamp; 0 = 1 day
	Pos       Pos

	src src
}

// Host is the TAP interface into the board's own kernel (host:). It
// becomes one more port (Kind PortTAP) and one more lan interface.
type Host struct {
	Tap       string         // the kernel's interface name, e.g. "gvr-host"
	Interface string         // the router's interface name on it, e.g. "host"
	Addresses []netip.Prefix // the router's side, e.g. [10.255.0.1/30]
	// KernelAddresses are the kernel's side, e.g. [10.255.0.2/30]; its
	// default route goes via the router's address in the same subnet.
	KernelAddresses []netip.Prefix
	// Forwards send a router address's port to the kernel (e.g. SSH on
	// 192.168.1.1:22 to the kernel's 10.255.0.2:22).
	Forwards []HostForward
	Pos      Pos

	src src
}

// HostForward forwards TCP or UDP port Port of the router's addresses on
// interface On (or on every lan interface when "") to the kernel.
type HostForward struct {
	Proto string // "tcp" | "udp"
	Port  uint16 // e.g. 22
	On    string // e.g. "eth0.1"; "" = every lan interface
	Pos   Pos
}

// Port kinds.
const (
	PortPacket = ""    // a kernel interface taken over with AF_PACKET
	PortTAP    = "tap" // the host TAP, created by the router
)

// KernelAddress returns the kernel's address on the host link, for
// forwards: the first IPv4 one.
func (h *Host) KernelAddress() netip.Addr {
	for _, p := range h.KernelAddresses {
		if p.Addr().Is4() {
			return p.Addr()
		}
	}
	return netip.Addr{}
}

// LeaseTimeOrDefault returns LeaseTime, or DefaultLeaseTime.
func (s *DHCPServer) LeaseTimeOrDefault() time.Duration {
	if s.LeaseTime == 0 {
		return DefaultLeaseTime
	}
	return s.LeaseTime
}

// DomainName is the domain in force: DNS Domain, or DefaultDomain.
func (c *Config) DomainName() string {
	if c.DNS != nil && c.DNS.Domain != "" {
		return c.DNS.Domain
	}
	return DefaultDomain
}

var (
	dhcpClientKeys = []string{"hostname", "client_id", "release"}
	dhcpServerKeys = []string{"range", "lease_time", "router", "dns", "domain", "mtu", "routes", "ntp", "static", "new_lease_burst", "new_leases_per_minute"}
	staticKeys     = []string{"mac", "address", "hostname"}
	dnsKeys        = []string{"upstreams", "domain", "cache"}
	dnsCacheKeys   = []string{"size", "min_ttl", "max_ttl"}
	hostKeys       = []string{"tap", "interface", "addresses", "kernel_addresses", "forwards"}
	hostFwdKeys    = []string{"proto", "port", "on"}
)

// dhcpClient decodes an interface's dhcp: mapping into ifc.DHCP, which
// the addresses key has created (or not: that is Validate's to report).
func (d *decoder) dhcpClient(ifc *Interface, e entry, what string) {
	what += ": dhcp"
	ifc.src.set("dhcp", posOf(e.key))
	if isNull(e.val) || !d.object(e.val, what) {
		return
	}
	if ifc.DHCP == nil {
		ifc.dhcpOptions = true
		ifc.DHCP = &DHCPClient{Pos: posOf(e.key)}
	}
	m := d.mapping(e.val, what, dhcpClientKeys, nil)
	if d.strKey(m, "hostname", what, &ifc.src, &ifc.DHCP.Hostname) {
		if err := checkHostname(ifc.DHCP.Hostname); err != nil {
			d.errorf(m["hostname"].val, "%s: hostname: %v", what, err)
		}
	}
	var id string
	if d.strKey(m, "client_id", what, &ifc.src, &id) {
		b, err := parseHexBytes(id)
		switch {
		case err != nil:
			d.errorf(m["client_id"].val, "%s: client_id: %v", what, err)
		case len(b) < 2 || len(b) > MaxClientIDBytes:
			d.errorf(m["client_id"].val, "%s: client_id: %d bytes, want 2..%d (RFC 2132 §9.14)", what, len(b), MaxClientIDBytes)
		default:
			ifc.DHCP.ClientID = b
		}
	}
	if e, ok := m["release"]; ok {
		if w, ok := d.onOffWord(e, what); ok {
			ifc.DHCP.Release = w == "on"
		}
	}
}

// parseHexBytes parses "01:02:0a" or "01020a".
func parseHexBytes(s string) ([]byte, error) {
	b, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
	if err != nil {
		return nil, fmt.Errorf("%s: want hex bytes like 01:02:00:00:00:00:02", quote(s))
	}
	return b, nil
}

// checkHostname checks an RFC 1123 host name of dot-separated labels.
func checkHostname(s string) error {
	if s == "" || len(s) > 253 {
		return fmt.Errorf("%s: want a host name of 1..253 characters", quote(s))
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%s: labels are 1..63 letters, digits or inner hyphens (RFC 1123)", quote(s))
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("%s: %q is not allowed in a host name (letters, digits, hyphens; RFC 1123)", quote(s), r)
			}
		}
	}
	return nil
}

// addrKey decodes a single address under key.
func (d *decoder) addrKey(m map[string]entry, key, what string, s *src, dst *netip.Addr) bool {
	var v string
	if !d.strKey(m, key, what, s, &v) {
		return false
	}
	a, err := netip.ParseAddr(v)
	if err != nil || a.Zone() != "" {
		d.errorf(m[key].val, "%s: %s: bad address %s", what, key, quote(v))
		s.markBad(key)
		return false
	}
	*dst = a
	return true
}

// addrList decodes a list of addresses under key.
func (d *decoder) addrList(m map[string]entry, key, what string, s *src) []netip.Addr {
	e, ok := m[key]
	if !ok {
		return nil
	}
	s.set(key, posOf(e.val))
	items, ok := d.list(e, what)
	if !ok {
		s.markBad(key)
	}
	out := []netip.Addr{}
	for _, it := range items {
		a, err := netip.ParseAddr(it.Value)
		if it.Kind != yaml.ScalarNode || err != nil || a.Zone() != "" {
			d.errorf(it, "%s: %s: want an address like 192.168.1.1, got %s", what, key, scalarOrKind(it))
			s.markBad(key)
			continue
		}
		out = append(out, a)
	}
	return out
}

func scalarOrKind(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		return quote(n.Value)
	}
	return kindName(n)
}

func (d *decoder) dhcpServer(ifc *Interface, e entry, what string) {
	what += ": dhcp_server"
	ifc.src.set("dhcp_server", posOf(e.key))
	if isNull(e.val) {
		ifc.DHCPServer = &DHCPServer{Pos: posOf(e.key)}
		ifc.DHCPServer.src.set("", posOf(e.key))
		return
	}
	if !d.object(e.val, what) {
		return
	}
	s := &DHCPServer{Pos: posOf(e.key)}
	s.src.set("", posOf(e.key))
	ifc.DHCPServer = s
	m := d.mapping(e.val, what, dhcpServerKeys, nil)
	var r string
	if d.strKey(m, "range", what, &s.src, &r) {
		a, b, ok := strings.Cut(r, "-")
		start, err1 := netip.ParseAddr(strings.TrimSpace(a))
		end, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || !start.Is4() || !end.Is4() {
			d.errorf(m["range"].val, "%s: range: want FIRST-LAST IPv4 addresses like 192.168.1.100-192.168.1.249, got %s", what, quote(r))
			s.src.markBad("range")
		} else {
			s.RangeStart, s.RangeEnd = start, end
		}
	}
	if e, ok := m["lease_time"]; ok {
		s.src.set("lease_time", posOf(e.val))
		if v, ok := d.duration(e, what); ok {
			s.LeaseTime = v
		} else {
			s.src.markBad("lease_time")
		}
	}
	if _, ok := m["router"]; ok {
		s.Router = d.addrList(m, "router", what, &s.src)
	}
	if _, ok := m["dns"]; ok {
		s.DNS = d.addrList(m, "dns", what, &s.src)
	}
	d.strKey(m, "domain", what, &s.src, &s.Domain)
	d.intKey(m, "mtu", what, &s.src, &s.MTU)
	d.intKey(m, "new_lease_burst", what, &s.src, &s.NewLeaseBurst)
	d.intKey(m, "new_leases_per_minute", what, &s.src, &s.NewLeasesPerMinute)
	s.NTP = d.addrList(m, "ntp", what, &s.src)
	if e, ok := m["routes"]; ok {
		items, _ := d.list(e, what)
		for _, it := range items {
			if !d.object(it, what+": route") {
				continue
			}
			rm := d.mapping(it, what+": route", []string{"to", "via"}, nil)
			cr := ClasslessRoute{Pos: posOf(it)}
			var rs src
			var to string
			if d.strKey(rm, "to", what+": route", &rs, &to) {
				p, err := parseRouteTo(to, netip.IPv4Unspecified())
				if err != nil || !p.Addr().Is4() {
					d.errorf(rm["to"].val, "%s: route: to: want an IPv4 prefix like 10.0.0.0/8 or default, got %s", what, quote(to))
				} else {
					cr.To = p
				}
			} else if _, ok := rm["to"]; !ok {
				d.errorf(it, "%s: route: to is required", what)
			}
			if !d.addrKey(rm, "via", what+": route", &rs, &cr.Via) {
				if _, ok := rm["via"]; !ok {
					d.errorf(it, "%s: route: via is required", what)
				}
			}
			s.Routes = append(s.Routes, cr)
		}
	}
	if e, ok := m["static"]; ok {
		items, _ := d.list(e, what)
		for _, it := range items {
			if !d.object(it, what+": static") {
				continue
			}
			sm := d.mapping(it, what+": static", staticKeys, nil)
			sl := StaticLease{Pos: posOf(it)}
			var ss src
			var mac string
			if d.strKey(sm, "mac", what+": static", &ss, &mac) {
				hw, err := net.ParseMAC(mac)
				if err != nil || len(hw) != 6 {
					d.errorf(sm["mac"].val, "%s: static: mac: want a MAC like 02:00:00:00:00:10, got %s", what, quote(mac))
				} else {
					sl.MAC = hw
				}
			} else if _, ok := sm["mac"]; !ok {
				d.errorf(it, "%s: static: mac is required", what)
			}
			if !d.addrKey(sm, "address", what+": static", &ss, &sl.Address) {
				if _, ok := sm["address"]; !ok {
					d.errorf(it, "%s: static: address is required", what)
				}
			}
			if d.strKey(sm, "hostname", what+": static", &ss, &sl.Hostname) {
				if err := checkHostname(sl.Hostname); err != nil || strings.Contains(sl.Hostname, ".") {
					d.errorf(sm["hostname"].val, "%s: static: hostname: want one label (the domain is added), got %s", what, quote(sl.Hostname))
				}
			}
			s.Static = append(s.Static, sl)
		}
	}
}

func (d *decoder) dns(c *Config, e entry) {
	const what = "dns"
	n := &DNS{Pos: posOf(e.key)}
	n.src.set("", posOf(e.key))
	c.DNS = n
	if isNull(e.val) || !d.object(e.val, what) {
		return
	}
	m := d.mapping(e.val, what, dnsKeys, nil)
	if ue, ok := m["upstreams"]; ok {
		n.src.set("upstreams", posOf(ue.val))
		items, _ := d.list(ue, what)
		for _, it := range items {
			ap, err := parseUpstream(it)
			if err != nil {
				d.errorf(it, "dns: upstreams: %v", err)
				continue
			}
			n.Upstreams = append(n.Upstreams, ap)
		}
	}
	if d.strKey(m, "domain", what, &n.src, &n.Domain) {
		if err := checkHostname(n.Domain); err != nil {
			d.errorf(m["domain"].val, "dns: domain: %v", err)
		}
	}
	if ce, ok := m["cache"]; ok && !isNull(ce.val) && d.object(ce.val, "dns: cache") {
		cm := d.mapping(ce.val, "dns: cache", dnsCacheKeys, nil)
		d.intKey(cm, "size", "dns: cache", &n.src, &n.CacheSize)
		for key, dst := range map[string]*time.Duration{"min_ttl": &n.MinTTL, "max_ttl": &n.MaxTTL} {
			if te, ok := cm[key]; ok {
				n.src.set(key, posOf(te.val))
				if v, ok := d.duration(te, "dns: cache"); ok {
					*dst = v
				} else {
					n.src.markBad(key)
				}
			}
		}
	}
}

// parseUpstream parses "9.9.9.9", "9.9.9.9:53", "2620:fe::fe" or
// "[2620:fe::fe]:53".
func parseUpstream(n *yaml.Node) (netip.AddrPort, error) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return netip.AddrPort{}, fmt.Errorf("want an address like 9.9.9.9 or [2620:fe::fe]:53, got %s", kindName(n))
	}
	if a, err := netip.ParseAddr(n.Value); err == nil && a.Zone() == "" {
		return netip.AddrPortFrom(a, 53), nil
	}
	if ap, err := netip.ParseAddrPort(n.Value); err == nil && ap.Port() != 0 && ap.Addr().Zone() == "" {
		return ap, nil
	}
	return netip.AddrPort{}, fmt.Errorf("bad upstream %s: want an address like 9.9.9.9 or [2620:fe::fe]:53", quote(n.Value))
}

// host decodes host: and adds its port and interface to c, so that every
// check and every consumer of interfaces sees it as one more lan
// interface.
func (d *decoder) host(c *Config, e entry) {
	const what = "host"
	if isNull(e.val) || !d.object(e.val, what) {
		return
	}
	h := &Host{Pos: posOf(e.key)}
	h.src.set("", posOf(e.key))
	c.Host = h
	m := d.mapping(e.val, what, hostKeys, nil)
	if !d.strKey(m, "tap", what, &h.src, &h.Tap) {
		if _, ok := m["tap"]; !ok {
			d.errorf(e.key, "host: tap is required (the kernel interface's name, e.g. gvr-host)")
		}
	}
	if !d.strKey(m, "interface", what, &h.src, &h.Interface) {
		if _, ok := m["interface"]; !ok {
			d.errorf(e.key, "host: interface is required (the router's interface name on the link, e.g. host)")
		}
	}
	for _, key := range []string{"addresses", "kernel_addresses"} {
		ae, ok := m[key]
		if !ok {
			d.errorf(e.key, "host: %s is required", key)
			continue
		}
		h.src.set(key, posOf(ae.val))
		items, _ := d.list(ae, what)
		for _, it := range items {
			if it.Kind != yaml.ScalarNode || isNull(it) {
				d.errorf(it, "host: %s: want an address like 10.255.0.1/30, got %s", key, kindName(it))
				continue
			}
			p, err := parseAddress(it.Value)
			if err != nil {
				d.errorf(it, "host: %s: %v", key, err)
				continue
			}
			if key == "addresses" {
				h.src.set("addresses."+strconv.Itoa(len(h.Addresses)), posOf(it))
				h.Addresses = append(h.Addresses, p)
			} else {
				h.src.set("kernel_addresses."+strconv.Itoa(len(h.KernelAddresses)), posOf(it))
				h.KernelAddresses = append(h.KernelAddresses, p)
			}
		}
	}
	if fe, ok := m["forwards"]; ok {
		items, _ := d.list(fe, what)
		for _, it := range items {
			if !d.object(it, "host: forward") {
				continue
			}
			fm := d.mapping(it, "host: forward", hostFwdKeys, nil)
			f := HostForward{Pos: posOf(it)}
			var fs src
			if !d.strKey(fm, "proto", "host: forward", &fs, &f.Proto) {
				if _, ok := fm["proto"]; !ok {
					d.errorf(it, "host: forward: proto is required (tcp or udp)")
				}
			} else if f.Proto != ProtoTCP && f.Proto != ProtoUDP {
				d.errorf(fm["proto"].val, "host: forward: proto: want tcp or udp, got %s", quote(f.Proto))
			}
			var port int
			if d.intKey(fm, "port", "host: forward", &fs, &port) {
				if port < 1 || port > 65535 {
					d.errorf(fm["port"].val, "host: forward: port %d out of range 1..65535", port)
				}
				f.Port = uint16(port)
			} else if _, ok := fm["port"]; !ok {
				d.errorf(it, "host: forward: port is required")
			}
			d.strKey(fm, "on", "host: forward", &fs, &f.On)
			h.Forwards = append(h.Forwards, f)
		}
	}
	if h.Tap == "" || h.Interface == "" {
		return
	}
	p := Port{Name: h.Tap, Kind: PortTAP, Pos: h.src.at("tap", h.Pos)}
	p.src.set("name", p.Pos)
	ifc := Interface{Name: h.Interface, Port: h.Tap, Role: RoleLAN, Addresses: h.Addresses, Pos: h.src.at("interface", h.Pos), Host: true}
	ifc.src.set("name", ifc.Pos)
	ifc.src.set("port", p.Pos)
	ifc.src.set("addresses", h.src.at("addresses", h.Pos))
	for i := range h.Addresses {
		ifc.src.set("addresses."+strconv.Itoa(i), h.src.at("addresses."+strconv.Itoa(i), h.Pos))
	}
	c.Ports = append(c.Ports, p)
	c.Interfaces = append(c.Interfaces, ifc)
}

// notYetRunning names the service keys this version parses and checks
// but whose service the router does not run yet; a config using one is
// refused rather than silently left unserved.
var notYetRunning = map[string]bool{
	"sqm": true, // package qdisc is not yet on the data path
}

// validateServices checks the services against the interfaces.
func (c *Config) validateServices(l *errorList) {
	if c.DNS != nil && notYetRunning["dns"] {
		l.add(c.DNS.Pos, "dns: the DNS forwarder is %s yet", errNotSupportedSuffix)
	}
	if c.Host != nil && notYetRunning["host"] {
		l.add(c.Host.Pos, "host: the host TAP is %s yet", errNotSupportedSuffix)
	}
	lanV4 := false
	dhcpClients := 0
	for i := range c.Interfaces {
		ifc := &c.Interfaces[i]
		what := interfaceWhat(ifc.Name)
		if ifc.DHCP != nil {
			dhcpClients++
			if ifc.dhcpOptions {
				l.add(ifc.src.at("dhcp", ifc.Pos), "%s: dhcp: options given but addresses has no %q", what, AddressDHCP)
			}
			if ifc.Host {
				l.add(ifc.DHCP.Pos, "%s: the host interface cannot use dhcp", what)
			}
		}
		if ifc.Role == RoleLAN && slicesAny(ifc.Addresses, func(p netip.Prefix) bool { return p.Addr().Is4() }) {
			lanV4 = true
		}
		if ifc.DHCPServer != nil {
			c.validateDHCPServer(l, ifc, what)
		}
		if ifc.IPv6 != nil {
			c.validateIPv6(l, ifc, what)
		}
	}
	c.validateDelegation(l)
	if n := c.DNS; n != nil {
		if !lanV4 {
			l.add(n.Pos, "dns: the forwarder listens on lan interfaces' addresses, and no lan interface has a static IPv4 address")
		}
		if len(n.Upstreams) == 0 && dhcpClients == 0 {
			l.add(n.Pos, "dns: upstreams: none given and no interface gets them by dhcp; add upstreams: [ADDRESS]")
		}
		if n.CacheSize < 0 || n.CacheSize > MaxDNSCache {
			l.add(n.src.at("size", n.Pos), "dns: cache: size %d out of range 0..%d", n.CacheSize, MaxDNSCache)
		}
		if n.MaxTTL > MaxDNSTTL {
			l.add(n.src.at("max_ttl", n.Pos), "dns: cache: max_ttl %s is above %s", fmtDuration(n.MaxTTL), fmtDuration(MaxDNSTTL))
		}
		if n.MaxTTL != 0 && n.MinTTL > n.MaxTTL {
			l.add(n.src.at("min_ttl", n.Pos), "dns: cache: min_ttl %s is above max_ttl %s", fmtDuration(n.MinTTL), fmtDuration(n.MaxTTL))
		}
		for _, u := range n.Upstreams {
			for j := range c.Interfaces {
				if slicesAny(c.Interfaces[j].Addresses, func(p netip.Prefix) bool { return p.Addr() == u.Addr() }) {
					l.add(n.src.at("upstreams", n.Pos), "dns: upstreams: %s is the router's own address (interface %q)", u, c.Interfaces[j].Name)
				}
			}
		}
	}
	if h := c.Host; h != nil {
		c.validateHost(l, h)
	}
}

func slicesAny[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if f(v) {
			return true
		}
	}
	return false
}

func (c *Config) validateDHCPServer(l *errorList, ifc *Interface, what string) {
	s := ifc.DHCPServer
	what += ": dhcp_server"
	if ifc.Role != RoleLAN {
		l.add(s.Pos, "%s: a DHCP server runs on lan interfaces only (this one is %s)", what, quote(ifc.Role))
	}
	var subnet netip.Prefix
	for _, p := range ifc.Addresses {
		if p.Addr().Is4() {
			subnet = p
			break
		}
	}
	if !subnet.IsValid() {
		l.add(s.Pos, "%s: the interface needs a static IPv4 address to serve DHCP", what)
		return
	}
	own := subnet.Addr()
	net4 := subnet.Masked()
	bcast := lastAddr(net4)
	inSubnet := func(a netip.Addr) bool { return net4.Contains(a) && a != net4.Addr() && a != bcast }
	rangeOK := false
	switch {
	case s.src.bad["range"]:
	case !s.RangeStart.IsValid():
		l.add(s.Pos, "%s: range is required, e.g. range: %s", what, exampleRange(net4))
	case s.RangeEnd.Less(s.RangeStart):
		l.add(s.src.at("range", s.Pos), "%s: range %s-%s: the first address is above the last", what, s.RangeStart, s.RangeEnd)
	case !inSubnet(s.RangeStart) || !inSubnet(s.RangeEnd):
		l.add(s.src.at("range", s.Pos), "%s: range %s-%s is not inside the interface's subnet %s (network and broadcast excluded)", what, s.RangeStart, s.RangeEnd, net4)
	case !own.Less(s.RangeStart) && !s.RangeEnd.Less(own):
		l.add(s.src.at("range", s.Pos), "%s: range %s-%s covers the router's own address %s", what, s.RangeStart, s.RangeEnd, own)
	default:
		rangeOK = true
	}
	if s.LeaseTime != 0 && (s.LeaseTime < MinLeaseTime || s.LeaseTime > MaxLeaseTime) {
		l.add(s.src.at("lease_time", s.Pos), "%s: lease_time %s out of range %s..%s", what, fmtDuration(s.LeaseTime), fmtDuration(MinLeaseTime), fmtDuration(MaxLeaseTime))
	}
	if s.MTU != 0 && (s.MTU < MinMTUConntrack || s.MTU > MaxMTU) {
		l.add(s.src.at("mtu", s.Pos), "%s: mtu %d out of range %d..%d (RFC 2132 §5.1: at least 68; hosts must take 576)", what, s.MTU, MinMTUConntrack, MaxMTU)
	}
	for _, k := range []struct {
		key string
		v   int
		max int
	}{{"new_lease_burst", s.NewLeaseBurst, MaxNewLeaseBurst}, {"new_leases_per_minute", s.NewLeasesPerMinute, MaxNewLeasesPerMinute}} {
		if _, set := s.src.pos[k.key]; set && !s.src.bad[k.key] && (k.v < 1 || k.v > k.max) {
			l.add(s.src.at(k.key, s.Pos), "%s: %s %d out of range 1..%d", what, k.key, k.v, k.max)
		}
	}
	if s.Domain != "" {
		if err := checkHostname(s.Domain); err != nil {
			l.add(s.src.at("domain", s.Pos), "%s: domain: %v", what, err)
		}
	}
	for _, list := range []struct {
		key   string
		addrs []netip.Addr
	}{{"router", s.Router}, {"dns", s.DNS}, {"ntp", s.NTP}} {
		for _, a := range list.addrs {
			if !a.Is4() {
				l.add(s.src.at(list.key, s.Pos), "%s: %s: %s is not an IPv4 address", what, list.key, a)
			}
		}
	}
	for _, r := range s.Routes {
		if r.Via.IsValid() && !net4.Contains(r.Via) {
			l.add(r.Pos, "%s: route to %s: via %s is not in the interface's subnet %s", what, r.To, r.Via, net4)
		}
	}
	if len(s.Static) > MaxStaticLeases {
		l.add(s.src.at("static", s.Pos), "%s: %d static leases, at most %d", what, len(s.Static), MaxStaticLeases)
	}
	macs := map[string]Pos{}
	addrs := map[netip.Addr]Pos{}
	for _, st := range s.Static {
		if st.MAC != nil {
			if p, ok := macs[st.MAC.String()]; ok {
				l.add(st.Pos, "%s: static: mac %s is listed twice%s", what, st.MAC, atLine(p))
			}
			macs[st.MAC.String()] = st.Pos
		}
		if !st.Address.IsValid() {
			continue
		}
		if p, ok := addrs[st.Address]; ok {
			l.add(st.Pos, "%s: static: address %s is listed twice%s", what, st.Address, atLine(p))
		}
		addrs[st.Address] = st.Pos
		switch {
		case !inSubnet(st.Address):
			l.add(st.Pos, "%s: static: address %s is not inside the interface's subnet %s", what, st.Address, net4)
		case st.Address == own:
			l.add(st.Pos, "%s: static: address %s is the router's own", what, st.Address)
		case rangeOK && !st.Address.Less(s.RangeStart) && !s.RangeEnd.Less(st.Address):
			l.add(st.Pos, "%s: static: address %s lies inside the dynamic range %s-%s; put static leases outside it", what, st.Address, s.RangeStart, s.RangeEnd)
		}
	}
}

// exampleRange suggests a range for subnet: .100 to .249 on a /24.
func exampleRange(p netip.Prefix) string {
	if p.Bits() == 24 {
		b := p.Addr().As4()
		return fmt.Sprintf("%d.%d.%d.100-%d.%d.%d.249", b[0], b[1], b[2], b[0], b[1], b[2])
	}
	return "FIRST-LAST"
}

func (c *Config) validateHost(l *errorList, h *Host) {
	if h.Tap != "" && len(h.Tap) > 15 {
		l.add(h.src.at("tap", h.Pos), "host: tap: %s is longer than 15 bytes (IFNAMSIZ)", quote(h.Tap))
	}
	if len(h.Addresses) == 0 {
		l.add(h.src.at("addresses", h.Pos), "host: addresses: at least one address of the router's side is required, e.g. 10.255.0.1/30")
	}
	for i, k := range h.KernelAddresses {
		at := h.src.at("kernel_addresses."+strconv.Itoa(i), h.Pos)
		if err := checkAddress(k); err != nil {
			l.add(at, "host: kernel_addresses: %v", err)
			continue
		}
		var mine netip.Prefix
		for _, p := range h.Addresses {
			if p.Masked() == k.Masked() {
				mine = p
			}
		}
		switch {
		case !mine.IsValid():
			l.add(at, "host: kernel_addresses: %s is in none of the subnets of host: addresses", k)
		case mine.Addr() == k.Addr():
			l.add(at, "host: kernel_addresses: %s is the router's own address on the link", k.Addr())
		}
	}
	if !h.KernelAddress().IsValid() && len(h.Forwards) > 0 {
		l.add(h.src.at("kernel_addresses", h.Pos), "host: forwards need an IPv4 kernel address")
	}
	for _, f := range h.Forwards {
		c.checkHostForwardStatus(l, f)
		if f.On == "" {
			continue
		}
		ifc := c.Interface(f.On)
		switch {
		case ifc == nil:
			l.add(f.Pos, "host: forward: on: unknown interface %q%s", f.On, hint(f.On, c.interfaceNames()))
		case ifc.Role != RoleLAN || ifc.Host:
			l.add(f.Pos, "host: forward: on: %q is not a lan interface; reach the kernel from the WAN with a nat: forwards entry to %s", f.On, h.KernelAddress())
		}
	}
}

// checkHostForwardStatus refuses a host forward that would take the
// status page's port on an interface it listens on (the forward, applied
// first, would hide the page).
func (c *Config) checkHostForwardStatus(l *errorList, f HostForward) {
	if f.Proto != ProtoTCP {
		return
	}
	for _, ls := range c.Status.Listen {
		ifc := c.Interface(ls.Interface)
		if ifc == nil || ls.Port != f.Port || ifc.Role != RoleLAN || ifc.Host || (f.On != "" && f.On != ls.Interface) {
			continue
		}
		l.add(f.Pos, "host: forward: tcp port %d on %q is the status page's (status.listen %s:%d)", f.Port, ls.Interface, ls.Interface, ls.Port)
	}
}
