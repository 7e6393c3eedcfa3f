// Package statustest provides a fake status.Source for tests and demos.
package statustest

import (
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
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
				Drops: map[string]uint64{"no_route": 12, "ttl_exceeded": 3},
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
				Name: "eth0", State: "up", MAC: "02:00:00:00:00:01", MTU: 1500, Queues: 2,
				RxPackets: 1_234_600, RxBytes: 992_000_000, TxPackets: 2_345_700, TxBytes: 3_220_000_000,
				Drops: map[string]uint64{"ring_full": 7},
			},
			{
				Name: "eth1", State: "up", MAC: "02:00:00:00:00:02", MTU: 1500, Queues: 2,
				RxPackets: 2_345_100, RxBytes: 3_110_000_000, TxPackets: 1_200_010, TxBytes: 905_000_000,
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
