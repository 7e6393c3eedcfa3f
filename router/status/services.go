package status

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/services/dhcp4client"
	"github.com/gvrouter/gvrouter/services/dhcp4server"
	"github.com/gvrouter/gvrouter/services/dnsforward"
)

// This file holds the Snapshot sections of the router's own services: the
// WAN DHCPv4 clients, the LAN DHCPv4 servers and the DNS forwarder. A
// section embeds its service's JSON-tagged Status as it is (this package
// imports the services, never the reverse), adding only what the router
// knows: the interface, where an upstream came from. Counters and Drops
// maps come from each service's Stats (services/svcstats), so a new
// counter or field shows here and in the metrics with no change to this
// package but the template block that shows it.

// DHCPClient is one interface's DHCPv4 client (RFC 2131): the client's
// own Status, with the lease it holds and its counters, encoded as it
// is. The Server's copy always has a Lease, zero when the client holds
// none (Addr invalid), so the JSON keeps its keys and the page needs no
// nil checks.
type DHCPClient struct {
	// Interface is the interface the client runs on, e.g. "wan" or
	// "eth0.2".
	Interface string `json:"interface"`
	dhcp4client.Status
}

// DHCPClientStates are the client states of RFC 2131 §4.4 (figure 5) as
// DHCPClient.State spells them; gvrouter_dhcp_client_state has a series
// for each.
var DHCPClientStates = []string{
	"init", "selecting", "requesting", "bound", "renewing", "rebinding", "init-reboot", "rebooting",
}

// Held returns the lease the client holds, zero (Addr invalid) when
// none; unlike the embedded Lease it is never nil.
func (c *DHCPClient) Held() dhcp4client.Lease {
	if c.Lease == nil {
		return dhcp4client.Lease{}
	}
	return *c.Lease
}

// Bound reports whether the client holds a lease it may use: bound,
// renewing or rebinding.
func (c *DHCPClient) Bound() bool {
	switch c.State {
	case "bound", "renewing", "rebinding":
		return true
	}
	return false
}

// DHCPServer is one LAN interface's DHCPv4 server (RFC 2131): the
// server's own Status with its lease table and counters, encoded as it is.
type DHCPServer struct {
	// Interface is the interface served, e.g. "lan".
	Interface string `json:"interface"`
	dhcp4server.Status
}

// DHCPLease is one row of a DHCPServer's lease table.
type DHCPLease = dhcp4server.Lease

// DNS is the DNS forwarder: its own Status (where it listens, its cache
// and upstream counters) encoded as it is, with the upstreams and where
// each came from.
//
// Upstream latency is a histogram: LatencySum and LatencyCount give the
// mean; LatencyBuckets are optional cumulative buckets. The metrics
// export it as the histogram gvrouter_dns_upstream_latency_seconds, with
// only the +Inf bucket (its count) when LatencyBuckets is empty.
type DNS struct {
	dnsforward.Status
	// Upstreams are the servers queries are forwarded to, in order, with
	// their source (Status.Upstreams without it).
	Upstreams []DNSUpstream `json:"upstreams"`

	// Rates are the current rates (set by the Server).
	Rates DNSRates `json:"rates"`
}

// DNSUpstream is one upstream DNS server.
type DNSUpstream struct {
	// Address is the server, e.g. "198.51.100.53:53".
	Address string `json:"address"`
	// Source is where it came from: "config", or "dhcp" (a WAN lease's
	// option 6).
	Source string `json:"source"`
}

// LatencyBucket is one cumulative histogram bucket: Count observations
// took at most LE seconds.
type LatencyBucket = dnsforward.LatencyBucket

// DNSRates are the forwarder's rates over the last sample interval.
type DNSRates struct {
	QueriesPerSecond float64 `json:"queries_per_second"`
}

// QueriesTotal returns the sum of Queries.
func (d *DNS) QueriesTotal() uint64 { return sum(d.Queries) }

// UpstreamErrorsTotal returns the sum of UpstreamErrors.
func (d *DNS) UpstreamErrorsTotal() uint64 { return sum(d.UpstreamErrors) }

// HitRatio returns CacheHits over CacheHits+CacheMisses, 0..1; 0 before
// the first query.
func (d *DNS) HitRatio() float64 {
	if n := d.CacheHits + d.CacheMisses; n > 0 {
		return float64(d.CacheHits) / float64(n)
	}
	return 0
}

// MeanLatency returns LatencySum/LatencyCount in seconds; 0 before the
// first answer.
func (d *DNS) MeanLatency() float64 {
	if d.LatencyCount == 0 {
		return 0
	}
	return d.LatencySum / float64(d.LatencyCount)
}

// normalizeServices makes the services sections of a sampled Snapshot
// safe to keep and encode: their own slices and maps, never nil, so JSON
// has [] and {} not null; leases sorted by address.
func normalizeServices(snap *Snapshot) {
	cloneMap := func(m map[string]uint64) map[string]uint64 {
		if m == nil {
			return map[string]uint64{}
		}
		return maps.Clone(m)
	}
	cloneAddrs := func(a []netip.Addr) []netip.Addr { return append(make([]netip.Addr, 0, len(a)), a...) }
	if snap.DHCPClients != nil {
		snap.DHCPClients = slices.Clone(snap.DHCPClients)
		for k := range snap.DHCPClients {
			c := &snap.DHCPClients[k]
			l := dhcp4client.Lease{}
			if c.Lease != nil {
				l = *c.Lease
			}
			l.ServerMAC = slices.Clone(l.ServerMAC)
			l.Routers = cloneAddrs(l.Routers)
			l.DNS = cloneAddrs(l.DNS)
			l.Routes = append(make([]dhcp4client.Route, 0, len(l.Routes)), l.Routes...)
			c.Lease = &l
			c.Counters = cloneMap(c.Counters)
			c.Drops = cloneMap(c.Drops)
		}
	}
	if snap.DHCPServers != nil {
		snap.DHCPServers = slices.Clone(snap.DHCPServers)
		for k := range snap.DHCPServers {
			s := &snap.DHCPServers[k]
			s.Leases = append(make([]DHCPLease, 0, len(s.Leases)), s.Leases...)
			slices.SortStableFunc(s.Leases, func(a, b DHCPLease) int { return a.Addr.Compare(b.Addr) })
			s.Counters = cloneMap(s.Counters)
			s.Drops = cloneMap(s.Drops)
		}
	}
	if d := snap.DNS; d != nil {
		n := *d
		n.Listen = append(make([]netip.AddrPort, 0, len(d.Listen)), d.Listen...)
		n.Status.Upstreams = slices.Clone(d.Status.Upstreams)
		n.Upstreams = append(make([]DNSUpstream, 0, len(d.Upstreams)), d.Upstreams...)
		if d.LatencyBuckets != nil {
			n.LatencyBuckets = slices.Clone(d.LatencyBuckets)
		}
		n.Queries = cloneMap(d.Queries)
		n.UpstreamErrors = cloneMap(d.UpstreamErrors)
		n.Drops = cloneMap(d.Drops)
		n.Rates = DNSRates{}
		snap.DNS = &n
	}
}

// fillDNSRates sets cur.Rates from prev, taken dt earlier.
func fillDNSRates(prev, cur *DNS, dt time.Duration) {
	if prev == nil || cur == nil || dt <= 0 {
		return
	}
	cur.Rates = DNSRates{QueriesPerSecond: float64(delta(prev.QueriesTotal(), cur.QueriesTotal())) / dt.Seconds()}
}

// formatWhen formats t for the page as an absolute time and its distance
// from now: "2026-11-30 11:02:00 UTC (in 3h 2m 0s)", "... (5m 0s ago)";
// "" for a zero t.
func formatWhen(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now).Round(time.Second)
	rel := "in " + formatUptime(d.Seconds())
	if d < 0 {
		rel = formatUptime(-d.Seconds()) + " ago"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC") + " (" + rel + ")"
}

// formatLatency formats seconds as "850 µs", "12.3 ms" or "1.20 s".
func formatLatency(s float64) string {
	switch {
	case math.IsNaN(s) || s <= 0:
		return "0 ms"
	case s < 1e-3:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}

// leaseClass maps a DHCP client state to the CSS class of its badge:
// green with a usable lease, amber while renewing or rebinding, red
// without one.
func leaseClass(state string) string {
	switch state {
	case "bound":
		return "up"
	case "renewing", "rebinding":
		return "other"
	}
	return "down"
}

// addrList joins addresses with ", "; "" for none.
func addrList(a []netip.Addr) string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = x.String()
	}
	return strings.Join(s, ", ")
}

// pageLeasesMax is the most leases the page lists per interface: it
// redraws every second (page.js keeps the same limit), and a starved /16
// pool would be tens of thousands of rows. The JSON has every lease.
const pageLeasesMax = 1000

// leasePage is the part of a lease table the page lists.
type leasePage struct {
	// Shown are the first pageLeasesMax leases.
	Shown []DHCPLease
	// Hidden is how many more there are.
	Hidden int
}

// pageLeases returns the leases the page lists.
func pageLeases(l []DHCPLease) leasePage {
	if len(l) <= pageLeasesMax {
		return leasePage{Shown: l}
	}
	return leasePage{Shown: l[:pageLeasesMax], Hidden: len(l) - pageLeasesMax}
}
