package natengine

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/firewall"
)

// Iface identifies an interface (in the integration: a netstack NIC ID).
type Iface int32

// NoIface is the zero Iface; it names no interface.
const NoIface Iface = 0

// maxIface bounds interface IDs so the compiled rules can index a slice.
const maxIface = 4096

// Filtering is the inbound filtering behaviour of a NAT mapping (RFC 4787
// section 5) towards the outside. Hairpinned packets from an inside
// endpoint (Rules.Hairpin) reach any active mapping whatever the
// filtering (preNew).
type Filtering uint8

// Filtering behaviours.
const (
	// AddressAndPortDependent admits inbound packets only from endpoints the
	// internal endpoint has sent to (the default; Linux MASQUERADE behaviour).
	AddressAndPortDependent Filtering = iota
	// AddressDependent admits inbound packets from any port of an address the
	// internal endpoint has sent to.
	AddressDependent
	// EndpointIndependent admits inbound packets from any endpoint ("full cone").
	EndpointIndependent
)

// Timeouts are idle timeouts per state. The defaults meet RFC 4787 REQ-5,
// RFC 5382 REQ-5 and RFC 5508 REQ-2.
type Timeouts struct {
	TCPEstablished time.Duration // RFC 5382 REQ-5: at least 2 h 4 min
	TCPTransitory  time.Duration // SYN_SENT, SYN_RECV, FIN_WAIT, CLOSE_WAIT, LAST_ACK, TIME_WAIT, CLOSE; RFC 5382 REQ-5: at least 4 min
	UDPUnreplied   time.Duration // UDP mapping without a reply yet; RFC 4787 REQ-5: at least 2 min
	UDPStream      time.Duration // UDP flow with replies; RFC 4787 REQ-5 recommends 5 min
	ICMPQuery      time.Duration // ICMP query session; RFC 5508 REQ-2: at least 60 s
	Other          time.Duration // generic flows: every protocol but TCP, UDP and ICMP (generic.go)
}

// DefaultTimeouts returns the RFC-compliant defaults.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		TCPEstablished: 2*time.Hour + 4*time.Minute, // OpenWrt uses 7440 s, the RFC 5382 minimum
		TCPTransitory:  4 * time.Minute,
		UDPUnreplied:   2 * time.Minute,
		UDPStream:      5 * time.Minute,
		ICMPQuery:      60 * time.Second,
		Other:          10 * time.Minute, // Linux generic timeout
	}
}

// DefaultMaxConns is the default conntrack table limit (65,536;
// Linux nf_conntrack_max on a 256 MB box is of this order).
const DefaultMaxConns = 65536

// Config holds the engine's construction-time settings.
type Config struct {
	MaxConns int              // table limit; 0 means DefaultMaxConns
	Timeouts Timeouts         // zero fields take DefaultTimeouts values
	TimeNow  func() time.Time // clock; nil means time.Now (tests inject a fake clock)
	Rand     func() uint32    // source for port search offsets; nil means a per-engine hash

	// MaxConnsPerHost bounds the flows one inside source address holds,
	// e.g. 16384; 0 means no limit (limits.go).
	MaxConnsPerHost int
	// MaxPortsPerHost bounds the NAT mappings (external ports, ICMP
	// identifiers) one inside address holds, e.g. 16384; 0 means no
	// limit (limits.go).
	MaxPortsPerHost int
	// RouterReserve is how many of the MaxConns slots only the router's
	// own flows may take, e.g. 4096; 0 means none, and more than half of
	// MaxConns means half (limits.go).
	RouterReserve int
}

// IfaceConfig describes one interface to the engine.
type IfaceConfig struct {
	ID         Iface        // e.g. 2
	Name       string       // e.g. "eth0.2"; for counters and errors
	WAN        bool         // outside interface: new inbound flows are filtered
	Masquerade bool         // SNAT forwarded IPv4 flows leaving here to this interface's first IPv4 address
	SNAT       []netip.Addr // SNAT pool (IPv4) used instead of the interface address when set, e.g. [198.51.100.7]
	Addrs      []netip.Addr // the router's own addresses on this interface, e.g. [203.0.113.2, 2001:db8::1]
	// Subnets are the interface's connected prefixes, e.g.
	// [192.168.1.0/24, fd00:1::/64]. Those of interfaces that are not WAN
	// are inside: a packet from them arriving on a WAN interface is
	// spoofed (RFC 3704 ingress filtering), and so is one from a router
	// address.
	Subnets []netip.Prefix
	MTU     int // IP MTU, e.g. 1500; 0 means 1500
	// NoMSSClamp leaves the MSS of TCP SYNs leaving here alone (a
	// zone's mss_clamp: off); by default it is clamped to the MTU.
	NoMSSClamp bool
}

// Forward is a DNAT port forward (Linux DNAT / fw4 redirect).
type Forward struct {
	Proto     uint8          // ProtoTCP or ProtoUDP
	In        Iface          // interface whose addresses the forward listens on, e.g. the WAN
	FirstPort uint16         // first external port, e.g. 8080
	LastPort  uint16         // last external port (== FirstPort for one port), e.g. 8090
	To        netip.AddrPort // internal target; port 0 keeps the external port, else ports map 1:1 from it
	// Src, if set, are the outside sources that may use the forward
	// from In (fw4 redirect src_ip), e.g. [198.51.100.0/24]; others
	// are not redirected. Hairpinned flows (from inside) are not
	// filtered by it.
	Src []netip.Prefix
	// Dst, if valid, is the address of In the forward listens on (fw4
	// src_dip), e.g. 203.0.113.3; else In's first IPv4 address.
	Dst netip.Addr
}

// admits reports whether the outside source src may use f.
func (f *Forward) admits(src *[16]byte) bool {
	if len(f.Src) == 0 {
		return true
	}
	a := netip.AddrFrom4([4]byte(src[:4]))
	for _, p := range f.Src {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Allow6 admits new inbound IPv6 flows from WAN interfaces to Dst (a
// prefix): of protocol Proto (0: TCP and UDP), or of every protocol with
// AnyProto. The port range applies to TCP and UDP only; LastPort 0 means
// every port.
type Allow6 struct {
	Proto     uint8        // e.g. ProtoTCP, ProtoUDP, 47 (GRE), 50 (ESP); 0 for TCP and UDP
	AnyProto  bool         // every protocol; Proto is ignored
	Dst       netip.Prefix // e.g. 2001:db8:1::/64
	FirstPort uint16       // e.g. 22
	LastPort  uint16       // e.g. 22
}

// Rules is the hot, reloadable NAT/firewall configuration. SetRules compiles
// it into an immutable snapshot; the engine keeps no reference to the Rules.
type Rules struct {
	Ifaces    []IfaceConfig
	Forwards  []Forward
	Allow6    []Allow6
	Filtering Filtering // default AddressAndPortDependent
	Hairpin   bool      // translate LAN-to-own-external-address flows (RFC 4787 REQ-9); fw4 "reflection"
	// Zones, when set, decides every new flow (firewall.go): forwarded
	// flows when they are confirmed, packets that would open a flow to
	// the router when they arrive; Allow6 is then not used. Interface IDs
	// in it are the Ifaces' IDs. nil keeps the built-in WAN defaults.
	// SetRules hands it the counters of the ruleset in force
	// (firewall.Ruleset.Inherit), so give it a new one, not yet in use.
	Zones *firewall.Ruleset
	// Reserved reports whether proto/port on the router's address addr is
	// taken by one of the router's own sockets; SNAT never allocates such a
	// port. It is called on the slow path only, must be safe for concurrent
	// use and must not call back into the engine. May be nil.
	Reserved func(proto uint8, addr netip.Addr, port uint16) bool
}

// snapshot is the compiled, immutable form of Rules.
type snapshot struct {
	ifaces    []ifaceSnap // indexed by Iface
	local     []localAddr
	forwards  []Forward
	fwdAddr   [][16]byte // per forward: the IPv4 address it listens on (first of In)
	allow6    []Allow6
	filtering Filtering
	hairpin   bool
	fw        *firewall.Ruleset // Rules.Zones; nil: the built-in WAN defaults
	reserved  func(proto uint8, addr netip.Addr, port uint16) bool
	// inside are the subnets of the interfaces that are not WAN (link-local
	// ones left out: every link has them); see IfaceConfig.Subnets.
	inside []netip.Prefix
}

type ifaceSnap struct {
	ok      bool
	name    string
	wan     bool
	snat    [][16]byte // IPv4 SNAT addresses (masquerade: the first IPv4 address); empty: no SNAT
	mtu     int
	noClamp bool
	addr4   [16]byte // first IPv4 address
	has4    bool
	bcast   [][16]byte // the directed broadcast addresses of its IPv4 subnets
}

// linkWide reports whether the IPv4 address a is one every host of the
// link of ic (nil: unknown) receives: the limited broadcast, a multicast
// group or the directed broadcast of one of ic's subnets.
func linkWide(a *[16]byte, ic *ifaceSnap) bool {
	if *a == limitedBroadcast || a[0]&0xf0 == 0xe0 { // 224.0.0.0/4 (RFC 5771)
		return true
	}
	if ic != nil {
		for i := range ic.bcast {
			if ic.bcast[i] == *a {
				return true
			}
		}
	}
	return false
}

type localAddr struct {
	a     [16]byte
	v6    bool
	iface Iface
}

// ErrInvalidRules is wrapped by SetRules errors.
var ErrInvalidRules = errors.New("natengine: invalid rules")

func compile(r *Rules) (*snapshot, error) {
	s := &snapshot{filtering: r.Filtering, hairpin: r.Hairpin, fw: r.Zones, reserved: r.Reserved, allow6: append([]Allow6(nil), r.Allow6...)}
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidRules}, a...)...))
	}
	if r.Filtering > EndpointIndependent {
		bad("filtering %d", r.Filtering)
	}
	for _, ic := range r.Ifaces {
		if ic.ID <= 0 || ic.ID >= maxIface {
			bad("interface %q: id %d out of range 1..%d", ic.Name, ic.ID, maxIface-1)
			continue
		}
		for int(ic.ID) >= len(s.ifaces) {
			s.ifaces = append(s.ifaces, ifaceSnap{})
		}
		is := &s.ifaces[ic.ID]
		if is.ok {
			bad("interface %q: duplicate id %d", ic.Name, ic.ID)
		}
		*is = ifaceSnap{ok: true, name: ic.Name, wan: ic.WAN, mtu: ic.MTU, noClamp: ic.NoMSSClamp}
		if is.mtu == 0 {
			is.mtu = 1500
		}
		if is.mtu < 576 || is.mtu > 65535 { // RFC 791 minimum
			bad("interface %q: mtu %d", ic.Name, ic.MTU)
		}
		for _, a := range ic.Addrs {
			b, v6 := fromAddr(a)
			s.local = append(s.local, localAddr{a: b, v6: v6, iface: ic.ID})
			if !v6 && !is.has4 {
				is.addr4, is.has4 = b, true
			}
		}
		for _, p := range ic.Subnets {
			if p.Addr().Is4() && p.Bits() < 31 { // RFC 3021: a /31 has no broadcast
				b := p.Masked().Addr().As4()
				for i := p.Bits(); i < 32; i++ {
					b[i/8] |= 0x80 >> (i % 8)
				}
				is.bcast = append(is.bcast, [16]byte{b[0], b[1], b[2], b[3]})
			}
		}
		if !ic.WAN {
			for _, p := range ic.Subnets {
				if p.IsValid() && !p.Addr().IsLinkLocalUnicast() {
					s.inside = append(s.inside, p.Masked())
				}
			}
		}
		for _, a := range ic.SNAT {
			b, v6 := fromAddr(a)
			if v6 {
				bad("interface %q: IPv6 SNAT address %s (IPv6 is not translated)", ic.Name, a)
				continue
			}
			is.snat = append(is.snat, b)
		}
		if ic.Masquerade && len(is.snat) == 0 && is.has4 {
			is.snat = append(is.snat, is.addr4)
		}
	}
	for i, f := range r.Forwards {
		if f.Proto != ProtoTCP && f.Proto != ProtoUDP {
			bad("forward %d: protocol %d (tcp or udp)", i, f.Proto)
		}
		if f.FirstPort == 0 || f.LastPort < f.FirstPort {
			bad("forward %d: ports %d-%d", i, f.FirstPort, f.LastPort)
		}
		if !f.To.Addr().Unmap().Is4() {
			bad("forward %d: target %s is not IPv4", i, f.To)
		}
		if f.To.Port() != 0 && int(f.To.Port())+int(f.LastPort-f.FirstPort) > 65535 {
			bad("forward %d: target port range overflows", i)
		}
		is := s.iface(f.In)
		if is == nil || !is.has4 {
			bad("forward %d: interface %d has no IPv4 address", i, f.In)
			continue
		}
		for _, p := range f.Src {
			if !p.Addr().Is4() {
				bad("forward %d: source %s is not IPv4", i, p)
			}
		}
		at := is.addr4
		if f.Dst.IsValid() {
			a, v6 := fromAddr(f.Dst)
			if v6 || !s.localOn(&a, f.In) {
				bad("forward %d: address %s is not one of interface %d's", i, f.Dst, f.In)
				continue
			}
			at = a
		}
		f.Src = slices.Clone(f.Src)
		s.forwards = append(s.forwards, f)
		s.fwdAddr = append(s.fwdAddr, at)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// spoofed reports whether the packet b, received on interface in, is from
// a WAN interface with a source it cannot have there: one of the router's
// own addresses or an address inside a LAN subnet (RFC 3704 section 2.1,
// ingress filtering; Linux's strict rp_filter has the same effect). Such a
// packet could otherwise pass conntrack as the reply of a flow an inside
// host holds (a port forward's) and be un-NATed back out of the WAN.
func (s *snapshot) spoofed(b []byte, v6 bool, in Iface) bool {
	ic := s.iface(in)
	if ic == nil || !ic.wan {
		return false
	}
	var src [16]byte
	var a netip.Addr
	if v6 {
		copy(src[:], b[8:24])
		a = netip.AddrFrom16(src)
	} else {
		copy(src[:], b[12:16])
		a = netip.AddrFrom4([4]byte(b[12:16]))
	}
	if s.isLocal(&src, v6) {
		return true
	}
	for _, p := range s.inside {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (s *snapshot) iface(id Iface) *ifaceSnap {
	if id <= 0 || int(id) >= len(s.ifaces) || !s.ifaces[id].ok {
		return nil
	}
	return &s.ifaces[id]
}

// localOn reports whether the IPv4 address a is one of interface in's.
func (s *snapshot) localOn(a *[16]byte, in Iface) bool {
	for i := range s.local {
		if !s.local[i].v6 && s.local[i].a == *a && s.local[i].iface == in {
			return true
		}
	}
	return false
}

// redirect returns the port forward that redirects the new flow t
// arriving on in: one listening on t's destination, from its own
// interface for a source it admits, or, with hairpin, from any inside
// interface (wan: in is a wan interface).
func (s *snapshot) redirect(t *Tuple, in Iface, wan bool) *Forward {
	for i := range s.forwards {
		f := &s.forwards[i]
		if f.Proto != t.Proto || t.DstPort < f.FirstPort || t.DstPort > f.LastPort || s.fwdAddr[i] != t.Dst {
			continue
		}
		if f.In == in && f.admits(&t.Src) || !wan && s.hairpin {
			return f
		}
	}
	return nil
}

// isLocal reports whether a is one of the router's own addresses.
func (s *snapshot) isLocal(a *[16]byte, v6 bool) bool {
	for i := range s.local {
		if s.local[i].v6 == v6 && s.local[i].a == *a {
			return true
		}
	}
	return false
}

// forward returns the port forward for a packet to dst:port, or nil.
func (s *snapshot) forward(proto uint8, dst *[16]byte, port uint16) (*Forward, int) {
	for i := range s.forwards {
		f := &s.forwards[i]
		if f.Proto == proto && port >= f.FirstPort && port <= f.LastPort && s.fwdAddr[i] == *dst {
			return f, i
		}
	}
	return nil, -1
}

// forwardTarget returns the internal endpoint for external port p of f.
func forwardTarget(f *Forward, p uint16) ([16]byte, uint16) {
	a, _ := fromAddr(f.To.Addr())
	if f.To.Port() == 0 {
		return a, p
	}
	return a, f.To.Port() + (p - f.FirstPort)
}

// forwarded reports whether proto/port on ext is a port forward's port.
func (s *snapshot) forwarded(proto uint8, ext *[16]byte, port uint16) bool {
	f, _ := s.forward(proto, ext, port)
	return f != nil
}

func (s *snapshot) allowed6(t *Tuple) bool {
	ports := t.Proto == ProtoTCP || t.Proto == ProtoUDP
	dst := netip.AddrFrom16(t.Dst)
	for _, a := range s.allow6 {
		switch {
		case a.AnyProto:
		case a.Proto == 0:
			if !ports {
				continue
			}
		case a.Proto != t.Proto:
			continue
		}
		if !a.Dst.Contains(dst) {
			continue
		}
		if ports && a.LastPort != 0 && (t.DstPort < a.FirstPort || t.DstPort > a.LastPort) {
			continue
		}
		return true
	}
	return false
}
