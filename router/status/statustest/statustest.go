// Package statustest provides a fake status.Source for tests and demos.
package statustest

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/dhcp4client"
	"github.com/gvrouter/gvrouter/services/dhcp4server"
	"github.com/gvrouter/gvrouter/services/dnsforward"
)

// Source is a status.Source that returns whatever was last Set. It is safe
// for concurrent use.
type Source struct {
	// mu protects snap, flows and calls.
	mu    sync.Mutex
	snap  status.Snapshot
	flows []status.Flow
	calls int
}

var (
	_ status.Source     = (*Source)(nil)
	_ status.FlowSource = (*Source)(nil)
)

// SetFlows replaces the conntrack table Flows returns (a copy is kept).
func (s *Source) SetFlows(flows []status.Flow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flows = slices.Clone(flows)
}

// Flows implements status.FlowSource. It returns a copy.
func (s *Source) Flows() []status.Flow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.flows)
}

// New returns a Source that returns snap until the next Set.
func New(snap status.Snapshot) *Source {
	return &Source{snap: Clone(snap)}
}

// Set replaces the snapshot. Set keeps a copy, so the caller may reuse snap.
func (s *Source) Set(snap status.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap = Clone(snap)
}

// Snapshot implements status.Source. It returns a deep copy.
func (s *Source) Snapshot() status.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return Clone(s.snap)
}

// Calls returns how many times Snapshot was called.
func (s *Source) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Clone returns a deep copy of snap: no slice or map is shared.
func Clone(snap status.Snapshot) status.Snapshot {
	snap.Interfaces = slices.Clone(snap.Interfaces)
	for k := range snap.Interfaces {
		i := &snap.Interfaces[k]
		i.Addresses = slices.Clone(i.Addresses)
		i.Drops = maps.Clone(i.Drops)
	}
	snap.Ports = slices.Clone(snap.Ports)
	for k := range snap.Ports {
		snap.Ports[k].Drops = maps.Clone(snap.Ports[k].Drops)
		if u := snap.Ports[k].UMEM; u != nil {
			c := *u
			c.SharedWith = slices.Clone(u.SharedWith)
			snap.Ports[k].UMEM = &c
		}
		if a := snap.Ports[k].AQM; a != nil {
			c := *a
			snap.Ports[k].AQM = &c
		}
	}
	snap.Routes = slices.Clone(snap.Routes)
	if c := snap.Conntrack; c != nil {
		n := *c
		n.States = slices.Clone(c.States)
		n.NATPorts = slices.Clone(c.NATPorts)
		n.SlowPath = maps.Clone(c.SlowPath)
		n.Drops = maps.Clone(c.Drops)
		n.Events = maps.Clone(c.Events)
		snap.Conntrack = &n
	}
	if snap.DHCPClients != nil {
		snap.DHCPClients = slices.Clone(snap.DHCPClients)
		for k := range snap.DHCPClients {
			c := &snap.DHCPClients[k]
			if l := c.Lease; l != nil {
				n := *l
				n.ServerMAC = slices.Clone(l.ServerMAC)
				n.Routers = slices.Clone(l.Routers)
				n.Routes = slices.Clone(l.Routes)
				n.DNS = slices.Clone(l.DNS)
				c.Lease = &n
			}
			c.Counters = maps.Clone(c.Counters)
			c.Drops = maps.Clone(c.Drops)
		}
	}
	if snap.DHCPServers != nil {
		snap.DHCPServers = slices.Clone(snap.DHCPServers)
		for k := range snap.DHCPServers {
			s := &snap.DHCPServers[k]
			s.Leases = slices.Clone(s.Leases)
			s.Counters = maps.Clone(s.Counters)
			s.Drops = maps.Clone(s.Drops)
		}
	}
	if d := snap.DNS; d != nil {
		n := *d
		n.Listen = slices.Clone(d.Listen)
		n.Status.Upstreams = slices.Clone(d.Status.Upstreams)
		n.Upstreams = slices.Clone(d.Upstreams)
		n.LatencyBuckets = slices.Clone(d.LatencyBuckets)
		n.Queries = maps.Clone(d.Queries)
		n.UpstreamErrors = maps.Clone(d.UpstreamErrors)
		n.Drops = maps.Clone(d.Drops)
		snap.DNS = &n
	}
	return snap
}

// WithServices returns a copy of snap with a plausible WAN DHCP client
// (bound on "wan" since two hours before now, T1 at now+3h2m), a LAN DHCP
// server with 37 of 150 addresses used and three leases, and a DNS
// forwarder, their times relative to now.
func WithServices(snap status.Snapshot, now time.Time) status.Snapshot {
	snap = Clone(snap)
	a := netip.MustParseAddr
	acquired := now.Add(-2 * time.Hour).Truncate(time.Second)
	snap.DHCPClients = []status.DHCPClient{{
		Interface: "wan",
		Status: dhcp4client.Status{
			State: "bound",
			Lease: &dhcp4client.Lease{
				Addr: netip.MustParsePrefix("198.51.100.2/30"), Server: a("198.51.100.1"),
				Routers: []netip.Addr{a("198.51.100.1")},
				Routes: []dhcp4client.Route{
					{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: a("198.51.100.1")},
					{Dst: netip.MustParsePrefix("203.0.113.0/24"), Via: a("198.51.100.1")},
				},
				DNS:      []netip.Addr{a("198.51.100.53"), a("198.51.100.54")},
				Domain:   "isp.example",
				MTU:      1492,
				Acquired: acquired,
				T1:       now.Add(3*time.Hour + 2*time.Minute).Truncate(time.Second),
				T2:       acquired.Add(8*time.Hour + 45*time.Minute),
				Expiry:   acquired.Add(10 * time.Hour),
			},
			Counters: map[string]uint64{"discover": 1, "offer": 1, "request": 3, "ack": 3, "renew": 2},
			Drops:    map[string]uint64{"wrong_xid": 2},
		},
	}}
	mac := func(s string) dhcp4server.MAC {
		hw, err := net.ParseMAC(s)
		if err != nil {
			panic(err)
		}
		return dhcp4server.MAC(hw)
	}
	snap.DHCPServers = []status.DHCPServer{{
		Interface: "lan", Status: dhcp4server.Status{
			RangeStart: a("192.168.1.100"), RangeEnd: a("192.168.1.249"),
			PoolSize: 150, PoolUsed: 37, Offered: 1, Declined: 1,
			Leases: []status.DHCPLease{
				{MAC: mac("02:00:00:00:01:0a"), Addr: a("192.168.1.100"), Hostname: "laptop", Expiry: now.Add(11 * time.Hour).Truncate(time.Second)},
				{MAC: mac("02:00:00:00:01:0b"), Addr: a("192.168.1.101"), Hostname: "phone", Expiry: now.Add(-5 * time.Minute).Truncate(time.Second), State: "expired"},
				{MAC: mac("02:00:00:00:01:02"), Addr: a("192.168.1.2"), Hostname: "nas", Expiry: now.Add(12 * time.Hour).Truncate(time.Second), Static: true, State: "bound"},
				{MAC: mac("02:00:00:00:01:03"), Addr: a("192.168.1.3"), Hostname: "printer", Static: true, State: "unused"},
			},
			Counters: map[string]uint64{"discover": 40, "offer": 40, "request": 120, "ack": 118, "nak": 2, "release": 3},
			Drops:    map[string]uint64{"wrong_magic_cookie": 3, "malformed": 0},
		},
	}}
	snap.DNS = &status.DNS{
		Status: dnsforward.Status{
			Listen:    []netip.AddrPort{netip.MustParseAddrPort("192.168.1.1:53")},
			Queries:   map[string]uint64{"udp": 12_000, "tcp": 40},
			CacheHits: 9_000, CacheMisses: 3_040, CacheEntries: 812, CacheMax: 10_000,
			LocalAnswers: 150, InFlight: 2, UpstreamQueries: 2_900,
			UpstreamErrors: map[string]uint64{"timeout": 4, "servfail": 1},
			LatencySum:     2_900 * 0.0123, LatencyCount: 2_900,
			LatencyBuckets: []status.LatencyBucket{{LE: 0.005, Count: 1_000}, {LE: 0.025, Count: 2_500}, {LE: 0.1, Count: 2_880}, {LE: 1, Count: 2_899}},
			Drops:          map[string]uint64{"malformed": 2, "answer_mismatch": 1},
		},
		Upstreams: []status.DNSUpstream{{Address: "198.51.100.53:53", Source: "dhcp"}, {Address: "198.51.100.54:53", Source: "dhcp"}},
	}
	return snap
}

// ExampleConntrack returns a plausible conntrack section: a busy home
// router with most packets on the fast path.
func ExampleConntrack() *status.Conntrack {
	return &status.Conntrack{
		Max: 65536, Flows: 412, Assured: 380, Offloaded: 301,
		States: []status.FlowCount{
			{Proto: "tcp", State: "ESTABLISHED", Flows: 310},
			{Proto: "tcp", State: "SYN_SENT", Flows: 4},
			{Proto: "tcp", State: "TIME_WAIT", Flows: 20},
			{Proto: "udp", State: "REPLIED", Flows: 60},
			{Proto: "udp", State: "UNREPLIED", Flows: 16},
			{Proto: "icmp", State: "ACTIVE", Flows: 2},
		},
		FastPathHits: 9_000_000,
		SlowPath:     map[string]uint64{"miss": 950_000, "fin_rst": 40_000, "mtu": 10_000},
		Drops:        map[string]uint64{"unsolicited": 1234, "input": 56, "invalid_tcp": 7},
		Events:       map[string]uint64{"created": 52_000, "expired": 51_000, "offloaded": 40_000},
		NATPorts: []status.NATPorts{
			{Proto: "tcp", Address: "198.51.100.2", Ports: 330, Flows: 334},
			{Proto: "udp", Address: "198.51.100.2", Ports: 70, Flows: 76},
		},
	}
}

// ExampleFlows returns n flows from LAN hosts 192.168.1.(10+i%50) to
// 203.0.113.7, masqueraded to 198.51.100.2.
func ExampleFlows(n int) []status.Flow {
	out := make([]status.Flow, 0, n)
	for i := 0; i < n; i++ {
		host := netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + i%50)})
		port := uint16(40000 + i)
		srv := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, 7}), 443)
		out = append(out, status.Flow{
			Proto: "tcp", State: "ESTABLISHED",
			Src: netip.AddrPortFrom(host, port), Dst: srv,
			ReplySrc: srv, ReplyDst: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, 2}), port),
			Assured: true, Offloaded: i%2 == 0,
			PacketsOrig: 10, PacketsReply: 20, BytesOrig: 1000, BytesReply: 20000,
			ExpiresSeconds: 7439,
		})
	}
	return out
}

// Example returns a plausible two-port router (LAN and WAN, a down guest
// port) that started at started. Tests and the demo page use it.
func Example(started time.Time) status.Snapshot {
	return status.Snapshot{
		Build:   "2026-11-30T07:00:00Z 3f2c1ab",
		Version: "v0.1.0",
		Started: started,
		Interfaces: []status.Interface{
			{
				Name: "lan", Port: "eth0", State: "up", MAC: "02:00:00:00:00:01",
				Addresses: []string{"192.168.1.1/24", "fd00:1::1/64"}, MTU: 1500,
				RxPackets: 1_234_567, RxBytes: 987_654_321, TxPackets: 2_345_678, TxBytes: 3_210_987_654,
				Drops:  map[string]uint64{"no_route": 12, "ttl_exceeded": 3},
				Tapped: 42,
			},
			{
				Name: "wan", Port: "eth1", State: "up", MAC: "02:00:00:00:00:02",
				Addresses: []string{"198.51.100.2/30"}, MTU: 1500,
				RxPackets: 2_345_000, RxBytes: 3_100_000_000, TxPackets: 1_200_000, TxBytes: 900_000_000,
				Drops: map[string]uint64{"martian_source": 41},
			},
			{
				Name: "guest", Port: "eth2", State: "down", MAC: "02:00:00:00:00:03",
				Addresses: []string{"10.10.0.1/24"}, MTU: 1500,
			},
		},
		Ports: []status.Port{
			{
				Name: "eth0", State: "up", MAC: "02:00:00:00:00:01", MTU: 1500, Queues: 2, Driver: "af_xdp", Mode: "zero-copy, native",
				RxPackets: 1_234_600, RxBytes: 992_000_000, TxPackets: 2_345_700, TxBytes: 3_220_000_000,
				Drops: map[string]uint64{"ring_full": 7},
				UMEM: &status.PortUMEM{
					ID: 1, SharedWith: []string{"eth3"}, Frames: 16896, FrameSize: 2048,
					Free: 8448, Fill: 8192, Held: 128, Lent: 64, TX: 64,
					TxZeroCopy: 2_300_000, TxCopied: 45_700,
				},
			},
			{
				Name: "eth1", State: "up", MAC: "02:00:00:00:00:02", MTU: 1500, Queues: 2,
				RxPackets: 2_345_100, RxBytes: 3_110_000_000, TxPackets: 1_200_010, TxBytes: 905_000_000,
				Drops: map[string]uint64{"aqm": 412, "aqm_overlimit": 64},
				AQM: &status.PortAQM{
					On: true, Passed: 40_100, Queued: 2_305_000, Dropped: 412, Marked: 1_033, Overlimit: 64, Copied: 1_200,
					Backlog: 37, BacklogBytes: 54_760, MaxSojournMs: 6.4,
				},
			},
			{Name: "eth2", State: "down", MAC: "02:00:00:00:00:03", MTU: 1500, Queues: 1},
		},
		Routes: []status.Route{
			{To: "0.0.0.0/0", Via: "198.51.100.1", Dev: "wan"},
			{To: "192.168.1.0/24", Dev: "lan"},
			{To: "198.51.100.0/30", Dev: "wan"},
			{To: "10.10.0.0/24", Dev: "guest"},
			{To: "fd00:1::/64", Dev: "lan"},
		},
		Conntrack: ExampleConntrack(),
	}
}

// Advance returns a copy of snap whose interfaces and ports have received
// and sent rxBytes/txBytes bytes and rxPackets/txPackets packets more: the
// next sample for a known rate.
func Advance(snap status.Snapshot, rxPackets, rxBytes, txPackets, txBytes uint64) status.Snapshot {
	snap = Clone(snap)
	for k := range snap.Interfaces {
		i := &snap.Interfaces[k]
		i.RxPackets += rxPackets
		i.RxBytes += rxBytes
		i.TxPackets += txPackets
		i.TxBytes += txBytes
	}
	for k := range snap.Ports {
		p := &snap.Ports[k]
		p.RxPackets += rxPackets
		p.RxBytes += rxBytes
		p.TxPackets += txPackets
		p.TxBytes += txBytes
	}
	return snap
}
