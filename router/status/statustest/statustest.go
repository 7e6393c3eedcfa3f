// Package statustest provides a fake status.Source for tests and demos.
package statustest

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// Source is a status.Source that returns whatever was last Set. It is safe
// for concurrent use.
type Source struct {
	// mu protects snap and calls.
	mu    sync.Mutex
	snap  status.Snapshot
	calls int
}

var _ status.Source = (*Source)(nil)

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
	return snap
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
