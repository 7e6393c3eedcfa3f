package dhcp4server

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/services/svcconfig"
)

// Defaults for the zero values of Config.
const (
	// DefaultLeaseTime is the lease length when Config.LeaseTime is 0
	// (OpenWrt's and dnsmasq's 12 hours).
	DefaultLeaseTime = 12 * time.Hour
	// DefaultOfferHold is how long an OFFER reserves its address when
	// Config.OfferHold is 0: long enough for a client's retransmitted
	// REQUEST (RFC 2131 §4.1: at most 64 s of back-off, most clients
	// request within a second), short enough that a flood of DISCOVERs
	// frees the range quickly.
	DefaultOfferHold = 30 * time.Second
	// DefaultDeclineQuarantine is how long an address a client declined
	// (RFC 2131 §4.3.3) is kept out of the range when
	// Config.DeclineQuarantine is 0.
	DefaultDeclineQuarantine = 10 * time.Minute
	// DefaultNewLeaseBurst is how many new leases the server hands out at
	// once when Config.NewLeaseBurst is 0: every device of a large
	// household meeting a new router (or one that lost its lease file)
	// at the same moment, while a flood of random MACs takes less than
	// half of a /24's usual range of 150 before the rate decides.
	DefaultNewLeaseBurst = 64
	// DefaultNewLeaseRate is the new leases a second earned back when
	// Config.NewLeaseRate is 0: guests arriving one at a time never wait,
	// and a starvation flood needs minutes, not a second, for a range.
	DefaultNewLeaseRate = 1.0
)

// Bounds of Config.LeaseTime, MTU and Static.
const (
	// MinLeaseTime is the shortest lease: below it, renewals (at half the
	// lease, RFC 2131 §4.4.5) would be most of the traffic.
	MinLeaseTime = 10 * time.Second
	// MaxLeaseTime is the longest lease, a year: well within option 51's
	// 32 bits of seconds (RFC 2132 §9.2), and no address should be held
	// longer by a client that left.
	MaxLeaseTime = 365 * 24 * time.Hour
	// MinMTU and MaxMTU bound option 26: RFC 2132 §5.1 allows 68, but
	// every IPv4 host must take 576-byte datagrams (RFC 791), and a
	// smaller MTU only breaks clients.
	MinMTU = 576
	MaxMTU = 65535
	// MaxStaticLeases bounds Config.Static, beyond any LAN's fixed hosts.
	MaxStaticLeases = 4096
)

// Bounds of Config.NewLeaseBurst and NewLeaseRate: a range holds at most
// 2^24 addresses (a /8), and more than a million new leases a second is no
// limit at all.
const (
	MaxNewLeaseBurst = 1 << 24
	MaxNewLeaseRate  = 1 << 20
)

// Per-client limits (see the package doc, "Floods"). A client's
// messages, by its MAC, are rationed so that one looping or hostile
// client cannot keep the server and its lease file busy.
const (
	// clientBurst is the messages one MAC may send at once: a DORA, a
	// DECLINE and a second DORA (RFC 2131 §3.1, §4.4.1), retransmitted,
	// come to less than half of it.
	clientBurst = 16
	// clientRate is the messages a second a MAC earns back; a client
	// retransmits every 4 s at the fastest (RFC 2131 §4.1) and renews at
	// T1, so only a looping or hostile one meets it.
	clientRate = 1.0
	// maxClients bounds the table of per-MAC buckets, beyond any LAN's
	// hosts; idle buckets are forgotten when it fills.
	maxClients = 4096
)

// Clock gives the server the time; tests use a fake one.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Route is one classless static route of option 121 (RFC 3442).
type Route struct {
	To  netip.Prefix // destination, e.g. 10.0.0.0/8 (host bits zero)
	Via netip.Addr   // next hop on the subnet, e.g. 192.168.1.254; 0.0.0.0 = on-link
}

// StaticLease is a fixed address for one MAC. Its address lies in the
// subnet but outside the range.
type StaticLease struct {
	MAC      net.HardwareAddr // e.g. 02:00:00:00:00:10
	Addr     netip.Addr       // e.g. 192.168.1.10
	Hostname string           // e.g. "nas"; "" = the one the client sends (option 12)
}

// Config is one LAN interface's DHCP server.
type Config struct {
	// ServerAddr is the router's address on the LAN: the source of every
	// reply and the server identifier (option 54, RFC 2132 §9.7).
	ServerAddr netip.Addr
	// Subnet is the LAN's prefix, e.g. 192.168.1.0/24 (option 1).
	Subnet netip.Prefix
	// RangeStart and RangeEnd bound the dynamic addresses, both included.
	RangeStart, RangeEnd netip.Addr
	// LeaseTime is the lease length (option 51), whatever a client asks
	// for; 0 = DefaultLeaseTime.
	// T1 and T2 (options 58, 59) are 1/2 and 7/8 of it (RFC 2131 §4.4.5).
	LeaseTime time.Duration
	// Router is option 3; nil = ServerAddr.
	Router []netip.Addr
	// DNS is option 6; nil = ServerAddr (the router's forwarder).
	DNS []netip.Addr
	// Domain is option 15, e.g. "lan"; "" sends none.
	Domain string
	// MTU is option 26; 0 sends none.
	MTU int
	// Routes are option 121 (RFC 3442). When set, the default route via
	// the first Router is sent among them too (unless a /0 is listed),
	// since a client that takes option 121 ignores option 3 (RFC 3442,
	// "DHCP Client Behavior"), as the RFC's note to administrators says.
	Routes []Route
	// NTP is option 42; nil sends none.
	NTP []netip.Addr
	// Static are the fixed leases by MAC.
	Static []StaticLease
	// LeaseFile is where bound leases persist; "" keeps them in memory
	// only. Its directory must exist.
	LeaseFile string
	// OfferHold is how long an OFFER reserves its address; 0 =
	// DefaultOfferHold.
	OfferHold time.Duration
	// DeclineQuarantine is how long a declined address stays unused; 0 =
	// DefaultDeclineQuarantine.
	DeclineQuarantine time.Duration
	// NewLeaseBurst and NewLeaseRate bound the new leases of this
	// interface: addresses given (OFFERed, or ACKed at once) to clients
	// that hold none, NewLeaseBurst at once and NewLeaseRate a second
	// after, so that a flood from random MACs cannot take the whole range
	// in a moment. Renewals, and a client's own offer or lease, never
	// count. 0 = DefaultNewLeaseBurst, DefaultNewLeaseRate; e.g. 64 and
	// 1.
	NewLeaseBurst int
	NewLeaseRate  float64
	// Clock gives the time; nil = the system clock.
	Clock Clock
	// Rand picks where the search for a never-used address starts, so
	// that a new server does not hand out the same first addresses as the
	// last one did; nil = a random seed.
	Rand *rand.Rand
	// OnChange, if set, is called after the lease table changed (a lease
	// bound, renewed, released, declined or expired) and, with a lease
	// file, was written; Hosts and Status then show the change. It is
	// called from the server's goroutines, one call at a time, without
	// the server's lock; it should return quickly.
	OnChange func()
	// Log receives the server's events; nil = none.
	Log *slog.Logger
}

// Validate checks the config and returns nil or every problem found,
// joined, each one a *svcconfig.FieldError naming the config key (the
// YAML key of the router's dhcp_server: section, e.g. "range" or
// "static.1.address"): the subnet and server address are IPv4 and the
// server is a host of the subnet; the range is inside the subnet (network
// and broadcast addresses excluded) and covers neither the server's
// address nor a static lease's; static leases are inside the subnet, with
// unique MACs and addresses; options are IPv4 and in range.
func (c *Config) Validate() error {
	l := svcconfig.NewList("dhcp4server")
	subnetOK := c.Subnet.IsValid() && c.Subnet.Addr().Is4() && c.Subnet.Bits() <= 30
	if !subnetOK {
		l.Add("subnet", "%v is not an IPv4 prefix of at most /30", c.Subnet)
	}
	net4 := c.Subnet.Masked()
	host := func(a netip.Addr) bool {
		return subnetOK && a.Is4() && net4.Contains(a) && a != net4.Addr() && a != lastAddr(net4)
	}
	if !c.ServerAddr.Is4() {
		l.Add("server_addr", "%v is not an IPv4 address", c.ServerAddr)
	} else if subnetOK && !host(c.ServerAddr) {
		l.Add("server_addr", "%v is not a host address of the subnet %v", c.ServerAddr, net4)
	}
	inRange := func(a netip.Addr) bool { return !a.Less(c.RangeStart) && !c.RangeEnd.Less(a) }
	rangeOK := false
	switch {
	case !c.RangeStart.IsValid() && !c.RangeEnd.IsValid():
		l.Add("range", "is required, e.g. %s", exampleRange(net4))
	case !c.RangeStart.Is4() || !c.RangeEnd.Is4():
		l.Add("range", "%v-%v: both ends must be IPv4 addresses", c.RangeStart, c.RangeEnd)
	case c.RangeEnd.Less(c.RangeStart):
		l.Add("range", "%v-%v: the first address is above the last", c.RangeStart, c.RangeEnd)
	case subnetOK && (!host(c.RangeStart) || !host(c.RangeEnd)):
		l.Add("range", "%v-%v is not inside the subnet %v (network and broadcast excluded)", c.RangeStart, c.RangeEnd, net4)
	case c.ServerAddr.Is4() && inRange(c.ServerAddr):
		l.Add("range", "%v-%v covers the server's own address %v", c.RangeStart, c.RangeEnd, c.ServerAddr)
	default:
		rangeOK = true
	}
	if c.LeaseTime != 0 && (c.LeaseTime < MinLeaseTime || c.LeaseTime > MaxLeaseTime) {
		l.Add("lease_time", "%s out of range %s..%s", svcconfig.Duration(c.LeaseTime), svcconfig.Duration(MinLeaseTime), svcconfig.Duration(MaxLeaseTime))
	}
	for _, list := range []struct {
		key   string
		addrs []netip.Addr
	}{{"router", c.Router}, {"dns", c.DNS}, {"ntp", c.NTP}} {
		for i, a := range list.addrs {
			if !a.Is4() {
				l.Add(svcconfig.Key(list.key, i), "%v is not an IPv4 address", a)
			}
		}
	}
	if c.Domain != "" {
		if err := checkDomain(c.Domain); err != nil {
			l.Add("domain", "%q: %v", c.Domain, err)
		}
	}
	if c.MTU != 0 && (c.MTU < MinMTU || c.MTU > MaxMTU) {
		l.Add("mtu", "%d out of range %d..%d (RFC 2132 §5.1: at least 68; hosts must take 576)", c.MTU, MinMTU, MaxMTU)
	}
	for i, r := range c.Routes {
		switch {
		case !r.To.IsValid() || !r.To.Addr().Is4():
			l.Add(svcconfig.Key("routes", i, "to"), "%v is not an IPv4 prefix", r.To)
		case r.To != r.To.Masked():
			l.Add(svcconfig.Key("routes", i, "to"), "%v has host bits set (RFC 3442 §2: %v)", r.To, r.To.Masked())
		}
		if !r.Via.Is4() || (!r.Via.IsUnspecified() && subnetOK && !net4.Contains(r.Via)) {
			l.Add(svcconfig.Key("routes", i, "via"), "%v is not an IPv4 address in the subnet %v", r.Via, net4)
		}
	}
	if len(c.Static) > MaxStaticLeases {
		l.Add("static", "%d static leases, at most %d", len(c.Static), MaxStaticLeases)
	}
	macs := map[string]int{}
	addrs := map[netip.Addr]int{}
	for i, s := range c.Static {
		if len(s.MAC) != 6 {
			l.Add(svcconfig.Key("static", i, "mac"), "%q is not a 6-byte Ethernet address", s.MAC.String())
		} else if j, ok := macs[string(s.MAC)]; ok {
			l.AddClash(svcconfig.Key("static", i, "mac"), svcconfig.Key("static", j, "mac"), "%v is listed twice", s.MAC)
		} else {
			macs[string(s.MAC)] = i
		}
		addr := svcconfig.Key("static", i, "address")
		switch {
		case !s.Addr.Is4():
			l.Add(addr, "%v is not an IPv4 address", s.Addr)
		case subnetOK && !host(s.Addr):
			l.Add(addr, "%v is not a host address of the subnet %v", s.Addr, net4)
		case s.Addr == c.ServerAddr:
			l.Add(addr, "%v is the server's own address", s.Addr)
		case rangeOK && inRange(s.Addr):
			l.Add(addr, "%v lies inside the dynamic range %v-%v; put static leases outside it", s.Addr, c.RangeStart, c.RangeEnd)
		default:
			if j, ok := addrs[s.Addr]; ok {
				l.AddClash(addr, svcconfig.Key("static", j, "address"), "%v is listed twice", s.Addr)
			}
			addrs[s.Addr] = i
		}
		if s.Hostname != "" && sanitizeHostname(s.Hostname) != strings.ToLower(s.Hostname) {
			l.Add(svcconfig.Key("static", i, "hostname"), "%q is not a host name label (letters, digits, '-', at most 63)", s.Hostname)
		}
	}
	if c.OfferHold < 0 {
		l.Add("offer_hold", "%v is negative", c.OfferHold)
	}
	if c.DeclineQuarantine < 0 {
		l.Add("decline_quarantine", "%v is negative", c.DeclineQuarantine)
	}
	if c.NewLeaseBurst < 0 || c.NewLeaseBurst > MaxNewLeaseBurst {
		l.Add("new_lease_burst", "%d is not between 1 and %d", c.NewLeaseBurst, MaxNewLeaseBurst)
	}
	if r := c.NewLeaseRate; r < 0 || r > MaxNewLeaseRate || math.IsNaN(r) || r != 0 && r < 0.001 {
		l.Add("new_lease_rate", "%v is not between 0.001 and %d a second", r, MaxNewLeaseRate)
	}
	return l.Err()
}

// exampleRange suggests a range for subnet: .100 to .249 on a /24.
func exampleRange(p netip.Prefix) string {
	if p.Bits() == 24 && p.Addr().Is4() {
		b := p.Addr().As4()
		return fmt.Sprintf("%d.%d.%d.100-%d.%d.%d.249", b[0], b[1], b[2], b[0], b[1], b[2])
	}
	return "FIRST-LAST"
}

// withDefaults returns c with its zero values replaced.
func (c Config) withDefaults() Config {
	if c.LeaseTime == 0 {
		c.LeaseTime = DefaultLeaseTime
	}
	if c.OfferHold == 0 {
		c.OfferHold = DefaultOfferHold
	}
	if c.DeclineQuarantine == 0 {
		c.DeclineQuarantine = DefaultDeclineQuarantine
	}
	if c.NewLeaseBurst == 0 {
		c.NewLeaseBurst = DefaultNewLeaseBurst
	}
	if c.NewLeaseRate == 0 {
		c.NewLeaseRate = DefaultNewLeaseRate
	}
	if c.Router == nil {
		c.Router = []netip.Addr{c.ServerAddr}
	}
	if c.DNS == nil {
		c.DNS = []netip.Addr{c.ServerAddr}
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Subnet = c.Subnet.Masked()
	return c
}

// lastAddr is p's broadcast address.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	v := be32(a) | (1<<(32-p.Bits()) - 1)
	return addrFrom32(v)
}

func be32(a [4]byte) uint32 {
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

func addrFrom32(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func u32(a netip.Addr) uint32 { return be32(a.As4()) }

// checkDomain accepts a DNS name of letters, digits, '-' and '.' labels
// (RFC 1123 §2.1), at most 253 characters.
func checkDomain(d string) error {
	d = strings.TrimSuffix(d, ".")
	if len(d) == 0 || len(d) > 253 {
		return fmt.Errorf("length %d is not 1 to 253", len(d))
	}
	for l := range strings.SplitSeq(d, ".") {
		if l == "" || sanitizeHostname(l) != strings.ToLower(l) {
			return fmt.Errorf("label %q is not letters, digits and '-' (at most 63)", l)
		}
	}
	return nil
}

// sanitizeHostname returns the host name a client sent (option 12, RFC
// 2132 §3.14) as a lower-case label usable in DNS (RFC 1123 §2.1): only
// its first label, and "" when that is not 1 to 63 letters, digits and
// inner hyphens.
func sanitizeHostname(h string) string {
	if i := strings.IndexByte(h, '.'); i >= 0 {
		h = h[:i]
	}
	if len(h) == 0 || len(h) > 63 || h[0] == '-' || h[len(h)-1] == '-' {
		return ""
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return ""
		}
	}
	return strings.ToLower(h)
}
