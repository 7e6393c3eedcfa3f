package status

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Neighbor is one entry of an interface's neighbour table: an IPv4 host
// the router resolved by ARP (RFC 826) or an IPv6 host it resolved or
// heard by Neighbor Discovery (RFC 4861 §7.3). On a LAN interface these
// are the hosts on the network, whether or not they hold a DHCP lease.
type Neighbor struct {
	// Interface is the router's interface, e.g. "lan".
	Interface string `json:"interface"`
	// Address is the host's IP address, e.g. 192.168.1.23 or fe80::1.
	Address netip.Addr `json:"address"`
	// MAC is the host's link address, e.g. "02:00:00:00:01:0a"; "" while
	// it is being resolved.
	MAC string `json:"mac"`
	// State is the RFC 4861 §7.3.2 reachability state in lower case:
	// "reachable", "stale", "delay", "probe", "incomplete", "unreachable"
	// or "static" (ARP entries use the same machine in netstack).
	State string `json:"state"`
}

// normalizeNeighbors copies snap.Neighbors and sorts them by interface,
// then address, so the page and the JSON list them in a stable order.
func normalizeNeighbors(snap *Snapshot) {
	if snap.Neighbors == nil {
		return
	}
	snap.Neighbors = slices.Clone(snap.Neighbors)
	slices.SortStableFunc(snap.Neighbors, func(a, b Neighbor) int {
		return cmp.Or(cmp.Compare(a.Interface, b.Interface), a.Address.Compare(b.Address))
	})
}

// neighborCollector exports the neighbour table's size per interface and
// state; the table itself is in /api/status.
type neighborCollector struct {
	s     *Server
	count *prometheus.Desc
}

func newNeighborCollector(s *Server) *neighborCollector {
	return &neighborCollector{
		s: s,
		count: prometheus.NewDesc("gvrouter_neighbors",
			"Entries of the interface's ARP/NDP neighbour table, by family (ipv4, ipv6) and reachability state (RFC 4861 7.3.2).",
			[]string{"interface", "family", "state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *neighborCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.count }

// Collect implements prometheus.Collector.
func (c *neighborCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ iface, family, state string }
	n := map[key]int{}
	for _, e := range c.s.current().Neighbors {
		f := "ipv6"
		if e.Address.Unmap().Is4() {
			f = "ipv4"
		}
		n[key{e.Interface, f, e.State}]++
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(v), k.iface, k.family, k.state)
	}
}
