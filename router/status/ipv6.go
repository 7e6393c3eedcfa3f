package status

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gvrouter/gvrouter/services/dhcp6client"
	"github.com/gvrouter/gvrouter/services/dhcp6server"
	"github.com/gvrouter/gvrouter/services/ra"
)

// This file holds the Snapshot sections of home-network IPv6: the
// delegating wan's DHCPv6 client, the RAs learned on wan interfaces, the
// RAs sent on lan interfaces and the stateless DHCPv6 servers. Each
// embeds its service's Status as it is.

// DHCPv6Client is the DHCPv6 client (RFC 8415) of the delegating wan
// interface and the prefix it holds: the client's own Status (state,
// the lease's prefixes, address, DNS and domains, T1 and T2, DUIDs,
// counters) encoded as it is. The copy the page gets always has a Lease
// (zero when none), so the JSON keeps its keys and the template needs no
// nil checks.
type DHCPv6Client struct {
	// Interface is the wan interface, e.g. "wan".
	Interface string `json:"interface"`
	dhcp6client.Status
}

// DelegatedPrefix is one delegated prefix with its lifetimes' ends.
type DelegatedPrefix = dhcp6client.Prefix

// RALearner is what the RAs heard on a wan interface taught it (as
// Linux's accept_ra=2): the learner's own Status (routers, most
// preferred first; prefixes; RDNSS and DNSSL, RFC 8106; MTU; counters)
// encoded as it is.
type RALearner struct {
	Interface string `json:"interface"`
	ra.LearnerStatus
}

// RARouter is one default router learned from its RAs.
type RARouter = ra.Router

// RAAdvertiser is the RA sender of a lan interface: its own Status
// (prefixes announced, withdrawn ones with them until their short valid
// lifetime ends; RDNSS, DNSSL, flags, counters) encoded as it is.
type RAAdvertiser struct {
	Interface string `json:"interface"`
	ra.Status
}

// DHCPv6Server is the stateless DHCPv6 server of a lan interface: its
// own Status (options in force, counters) encoded as it is.
type DHCPv6Server struct {
	Interface string `json:"interface"`
	dhcp6server.Status
}

// IPv6 is the Snapshot's home-network IPv6 section.
type IPv6 struct {
	// Delegation is the delegating wan's DHCPv6 client; nil when no
	// interface asks for a prefix.
	Delegation *DHCPv6Client `json:"delegation,omitempty"`
	// LANPrefixes are the lan interfaces' /64s of the delegation, by
	// interface, e.g. {"lan": "2001:db8:aa00:1::/64"}.
	LANPrefixes map[string]netip.Prefix `json:"lan_prefixes"`
	// WANRA are the wan interfaces' RA learners, LANRA the lan
	// interfaces' RA senders, DHCPv6Servers their stateless servers.
	WANRA         []RALearner    `json:"wan_ra"`
	LANRA         []RAAdvertiser `json:"lan_ra"`
	DHCPv6Servers []DHCPv6Server `json:"dhcpv6_servers"`
}

// normalizeIPv6 makes the IPv6 section safe to keep and encode: its own
// slices and maps, never nil.
func normalizeIPv6(snap *Snapshot) {
	v := snap.IPv6
	if v == nil {
		return
	}
	n := *v
	cloneMap := func(m map[string]uint64) map[string]uint64 {
		if m == nil {
			return map[string]uint64{}
		}
		return maps.Clone(m)
	}
	addrs := func(a []netip.Addr) []netip.Addr { return append(make([]netip.Addr, 0, len(a)), a...) }
	strs := func(a []string) []string { return append(make([]string, 0, len(a)), a...) }
	if d := v.Delegation; d != nil {
		c := *d
		l := dhcp6client.Lease{}
		if d.Lease != nil {
			l = *d.Lease
		}
		if l.Address != nil {
			a := *l.Address
			l.Address = &a
		}
		l.Prefixes = append(make([]DelegatedPrefix, 0, len(l.Prefixes)), l.Prefixes...)
		l.DNS, l.Domains = addrs(l.DNS), strs(l.Domains)
		c.Lease = &l
		c.Counters, c.Drops = cloneMap(d.Counters), cloneMap(d.Drops)
		n.Delegation = &c
	}
	n.LANPrefixes = maps.Clone(v.LANPrefixes)
	if n.LANPrefixes == nil {
		n.LANPrefixes = map[string]netip.Prefix{}
	}
	n.WANRA = slices.Clone(v.WANRA)
	for i := range n.WANRA {
		l := &n.WANRA[i]
		l.Routers = append(make([]ra.Router, 0, len(l.Routers)), l.Routers...)
		l.Prefixes = append(make([]ra.LearnedPrefix, 0, len(l.Prefixes)), l.Prefixes...)
		l.RDNSS = append(make([]ra.DNSServer, 0, len(l.RDNSS)), l.RDNSS...)
		l.DNSSL = append(make([]ra.SearchDomain, 0, len(l.DNSSL)), l.DNSSL...)
		l.Counters, l.Drops = cloneMap(l.Counters), cloneMap(l.Drops)
	}
	if n.WANRA == nil {
		n.WANRA = []RALearner{}
	}
	n.LANRA = slices.Clone(v.LANRA)
	for i := range n.LANRA {
		a := &n.LANRA[i]
		a.Prefixes = append(make([]ra.AnnouncedPrefix, 0, len(a.Prefixes)), a.Prefixes...)
		a.RDNSS, a.DNSSL = addrs(a.RDNSS), strs(a.DNSSL)
		a.Counters, a.Drops = cloneMap(a.Counters), cloneMap(a.Drops)
	}
	if n.LANRA == nil {
		n.LANRA = []RAAdvertiser{}
	}
	n.DHCPv6Servers = slices.Clone(v.DHCPv6Servers)
	for i := range n.DHCPv6Servers {
		s := &n.DHCPv6Servers[i]
		s.DNS, s.Domains = addrs(s.DNS), strs(s.Domains)
		s.Counters, s.Drops = cloneMap(s.Counters), cloneMap(s.Drops)
	}
	if n.DHCPv6Servers == nil {
		n.DHCPv6Servers = []DHCPv6Server{}
	}
	snap.IPv6 = &n
}

// ipv6Collector exports the IPv6 section: per-interface series only, none
// per host or per prefix beyond the delegation's.
type ipv6Collector struct {
	s *Server

	pdInfo, pdValid, pdPreferred, pdRenew, pdEvents, pdDrops *prometheus.Desc
	raRouters, raPrefixes, raEvents, raDrops                 *prometheus.Desc
	advPrefixes, advEvents, advDrops                         *prometheus.Desc
	d6Events, d6Drops                                        *prometheus.Desc
}

func newIPv6Collector(s *Server) *ipv6Collector {
	d := prometheus.NewDesc
	ifl := []string{"interface"}
	ev := []string{"interface", "event"}
	rs := []string{"interface", "reason"}
	return &ipv6Collector{
		s:           s,
		pdInfo:      d("gvrouter_dhcpv6_client_prefix_info", "1 for each prefix delegated to the router, with its state.", []string{"interface", "prefix", "state"}, nil),
		pdValid:     d("gvrouter_dhcpv6_client_prefix_valid_until_seconds", "When the delegated prefix's valid lifetime ends, Unix time.", []string{"interface", "prefix"}, nil),
		pdPreferred: d("gvrouter_dhcpv6_client_prefix_preferred_until_seconds", "When the delegated prefix's preferred lifetime ends, Unix time.", []string{"interface", "prefix"}, nil),
		pdRenew:     d("gvrouter_dhcpv6_client_renew_seconds", "When the DHCPv6 client renews (T1), Unix time.", ifl, nil),
		pdEvents:    d("gvrouter_dhcpv6_client_events_total", "DHCPv6 client messages and events, by name.", ev, nil),
		pdDrops:     d("gvrouter_dhcpv6_client_drops_total", "DHCPv6 messages the client dropped, by reason.", rs, nil),
		raRouters:   d("gvrouter_ra_learned_routers", "Default routers learned from RAs on a wan interface.", ifl, nil),
		raPrefixes:  d("gvrouter_ra_learned_prefixes", "Prefixes learned from RAs on a wan interface.", ifl, nil),
		raEvents:    d("gvrouter_ra_learner_events_total", "RA learner events on a wan interface, by name.", ev, nil),
		raDrops:     d("gvrouter_ra_learner_drops_total", "RAs a wan interface's learner dropped, by reason.", rs, nil),
		advPrefixes: d("gvrouter_ra_advertised_prefixes", "Prefixes announced in a lan interface's RAs, withdrawn ones included.", ifl, nil),
		advEvents:   d("gvrouter_ra_advertiser_events_total", "RAs sent and RSs received on a lan interface, by name.", ev, nil),
		advDrops:    d("gvrouter_ra_advertiser_drops_total", "RSs and RAs a lan interface's advertiser refused, by reason.", rs, nil),
		d6Events:    d("gvrouter_dhcpv6_server_events_total", "Stateless DHCPv6 server events on a lan interface, by name.", ev, nil),
		d6Drops:     d("gvrouter_dhcpv6_server_drops_total", "DHCPv6 messages a lan interface's server dropped, by reason.", rs, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ipv6Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.pdInfo, c.pdValid, c.pdPreferred, c.pdRenew, c.pdEvents, c.pdDrops,
		c.raRouters, c.raPrefixes, c.raEvents, c.raDrops,
		c.advPrefixes, c.advEvents, c.advDrops, c.d6Events, c.d6Drops,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. An entry whose interface
// repeats an earlier one is skipped: the registry would reject the scrape.
func (c *ipv6Collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.current()
	if snap.IPv6 == nil {
		return
	}
	v := snap.IPv6
	send := func(desc *prometheus.Desc, typ prometheus.ValueType, val float64, labels ...string) {
		m, err := prometheus.NewConstMetric(desc, typ, val, labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(desc, err)
		}
		ch <- m
	}
	gauge := func(desc *prometheus.Desc, val float64, labels ...string) {
		send(desc, prometheus.GaugeValue, val, labels...)
	}
	counters := func(desc *prometheus.Desc, m map[string]uint64, iface string) {
		for k, n := range m {
			send(desc, prometheus.CounterValue, float64(n), iface, k)
		}
	}
	unix := func(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }
	if d := v.Delegation; d != nil {
		seen := map[netip.Prefix]bool{}
		l := d.Lease
		if l == nil {
			l = &dhcp6client.Lease{}
		}
		for _, p := range l.Prefixes {
			if seen[p.Prefix] {
				continue
			}
			seen[p.Prefix] = true
			gauge(c.pdInfo, 1, d.Interface, p.Prefix.String(), d.State)
			if !p.ValidUntil.IsZero() {
				gauge(c.pdValid, unix(p.ValidUntil), d.Interface, p.Prefix.String())
			}
			if !p.PreferredUntil.IsZero() {
				gauge(c.pdPreferred, unix(p.PreferredUntil), d.Interface, p.Prefix.String())
			}
		}
		if !l.T1.IsZero() {
			gauge(c.pdRenew, unix(l.T1), d.Interface)
		}
		counters(c.pdEvents, d.Counters, d.Interface)
		counters(c.pdDrops, d.Drops, d.Interface)
	}
	seen := map[string]bool{}
	for i := range v.WANRA {
		l := &v.WANRA[i]
		if seen[l.Interface] {
			continue
		}
		seen[l.Interface] = true
		gauge(c.raRouters, float64(len(l.Routers)), l.Interface)
		gauge(c.raPrefixes, float64(len(l.Prefixes)), l.Interface)
		counters(c.raEvents, l.Counters, l.Interface)
		counters(c.raDrops, l.Drops, l.Interface)
	}
	clear(seen)
	for i := range v.LANRA {
		a := &v.LANRA[i]
		if seen[a.Interface] {
			continue
		}
		seen[a.Interface] = true
		gauge(c.advPrefixes, float64(len(a.Prefixes)), a.Interface)
		counters(c.advEvents, a.Counters, a.Interface)
		counters(c.advDrops, a.Drops, a.Interface)
	}
	clear(seen)
	for i := range v.DHCPv6Servers {
		s := &v.DHCPv6Servers[i]
		if seen[s.Interface] {
			continue
		}
		seen[s.Interface] = true
		counters(c.d6Events, s.Counters, s.Interface)
		counters(c.d6Drops, s.Drops, s.Interface)
	}
}
