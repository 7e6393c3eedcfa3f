package status

import (
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gvrouter/gvrouter/services/dhcp4client"
)

// servicesCollector exports the DHCP client, DHCP server and DNS sections
// of the latest sample. It exports no per-lease or per-client series:
// their number is the LAN's, not the config's. Label values come from the
// config (interface names) and the services (event and drop names), and
// an invalid one makes that one metric an error of the scrape, never a
// panic.
type servicesCollector struct {
	s *Server

	// DHCP clients, by interface.
	clientState, clientLease, clientError                         *prometheus.Desc
	clientAcquired, clientRenew, clientRebind, clientExpiry       *prometheus.Desc
	clientEvents, clientDrops                                     *prometheus.Desc
	serverPoolSize, serverPoolUsed, serverOffered, serverDeclined *prometheus.Desc
	serverLeases, serverEvents, serverDrops, serverFileError      *prometheus.Desc

	// DNS forwarder.
	dnsQueries, dnsHits, dnsMisses, dnsEntries, dnsMax, dnsLocal, dnsInFlight *prometheus.Desc
	dnsUpQueries, dnsUpErrors, dnsLatency, dnsDrops, dnsUpstream              *prometheus.Desc
}

func newServicesCollector(s *Server) *servicesCollector {
	d := prometheus.NewDesc
	ifl := []string{"interface"}
	return &servicesCollector{
		s: s,

		clientState: d("gvrouter_dhcp_client_state",
			"1 for the DHCPv4 client's RFC 2131 state (init, selecting, requesting, bound, renewing, rebinding, init-reboot, rebooting), 0 for the others.",
			[]string{"interface", "state"}, nil),
		clientLease: d("gvrouter_dhcp_client_lease_info",
			"1 while the DHCPv4 client holds a lease; labels give its address and server.",
			[]string{"interface", "address", "server"}, nil),
		clientError: d("gvrouter_dhcp_client_error",
			"1 while the DHCPv4 client reports an error (the lease was lost, a NAK, no answer), 0 once a lease is bound again.", ifl, nil),
		clientAcquired: d("gvrouter_dhcp_client_lease_acquired_timestamp_seconds",
			"Unix time of the DHCPACK that bound or last extended the lease.", ifl, nil),
		clientRenew: d("gvrouter_dhcp_client_lease_renew_timestamp_seconds",
			"Unix time of the lease's T1, when the client renews with its server (RFC 2131 §4.4.5).", ifl, nil),
		clientRebind: d("gvrouter_dhcp_client_lease_rebind_timestamp_seconds",
			"Unix time of the lease's T2, when the client rebinds with any server (RFC 2131 §4.4.5).", ifl, nil),
		clientExpiry: d("gvrouter_dhcp_client_lease_expiry_timestamp_seconds",
			"Unix time the lease expires and its address is removed.", ifl, nil),
		clientEvents: d("gvrouter_dhcp_client_events_total",
			"DHCPv4 client events: messages sent and received by type, renew, rebind, expired, mtu_ignored and the like.",
			[]string{"interface", "event"}, nil),
		clientDrops: d("gvrouter_dhcp_client_drops_total",
			"DHCPv4 messages the client dropped, by reason.", []string{"interface", "reason"}, nil),

		serverPoolSize: d("gvrouter_dhcp_server_pool_size",
			"Addresses in the DHCPv4 server's dynamic range.", ifl, nil),
		serverPoolUsed: d("gvrouter_dhcp_server_pool_used",
			"Addresses of the range bound, offered or quarantined.", ifl, nil),
		serverOffered: d("gvrouter_dhcp_server_pool_offered",
			"Addresses of the range an OFFER holds for now.", ifl, nil),
		serverDeclined: d("gvrouter_dhcp_server_pool_declined",
			"Addresses of the range quarantined after a DHCPDECLINE (RFC 2131 §4.3.3).", ifl, nil),
		serverLeases: d("gvrouter_dhcp_server_leases",
			"Leases in the DHCPv4 server's table, by kind (static, dynamic) and state (bound, expired, released, unused).",
			[]string{"interface", "kind", "state"}, nil),
		serverEvents: d("gvrouter_dhcp_server_events_total",
			"DHCPv4 server events: messages received and sent by type, pool_exhausted, expired, lease writes and the like.",
			[]string{"interface", "event"}, nil),
		serverDrops: d("gvrouter_dhcp_server_drops_total",
			"DHCPv4 messages the server dropped, by reason.", []string{"interface", "reason"}, nil),
		serverFileError: d("gvrouter_dhcp_server_lease_file_error",
			"1 while the DHCPv4 server's lease file has a problem (a failed write, or corrupt at start and replaced), else 0.", ifl, nil),

		dnsQueries: d("gvrouter_dns_queries_total", "DNS queries received from clients, by transport (udp, tcp).", []string{"transport"}, nil),
		dnsHits:    d("gvrouter_dns_cache_hits_total", "DNS queries answered from the cache, negative answers (RFC 2308) included.", nil, nil),
		dnsMisses:  d("gvrouter_dns_cache_misses_total", "DNS queries not found in the cache.", nil, nil),
		dnsEntries: d("gvrouter_dns_cache_entries", "Answers in the DNS cache.", nil, nil),
		dnsMax:     d("gvrouter_dns_cache_max_entries", "The DNS cache's bound.", nil, nil),
		dnsLocal:   d("gvrouter_dns_local_answers_total", "DNS queries answered from the DHCP leases and static hosts.", nil, nil),
		dnsInFlight: d("gvrouter_dns_in_flight_queries",
			"Upstream DNS queries awaiting an answer.", nil, nil),
		dnsUpQueries: d("gvrouter_dns_upstream_queries_total", "DNS queries sent upstream, TCP retries included.", nil, nil),
		dnsUpErrors: d("gvrouter_dns_upstream_errors_total",
			"Upstream DNS queries that failed, by kind (timeout, network, servfail, refused, malformed and the like).", []string{"kind"}, nil),
		dnsLatency: d("gvrouter_dns_upstream_latency_seconds", "Time upstream DNS servers took to answer.", nil, nil),
		dnsDrops:   d("gvrouter_dns_drops_total", "DNS messages the forwarder dropped, by reason.", []string{"reason"}, nil),
		dnsUpstream: d("gvrouter_dns_upstream_info",
			"1 for each upstream DNS server in use; source is config or dhcp.", []string{"address", "source"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *servicesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.clientState, c.clientLease, c.clientError, c.clientAcquired, c.clientRenew, c.clientRebind,
		c.clientExpiry, c.clientEvents, c.clientDrops,
		c.serverPoolSize, c.serverPoolUsed, c.serverOffered, c.serverDeclined, c.serverLeases,
		c.serverEvents, c.serverDrops, c.serverFileError,
		c.dnsQueries, c.dnsHits, c.dnsMisses, c.dnsEntries, c.dnsMax, c.dnsLocal, c.dnsInFlight,
		c.dnsUpQueries, c.dnsUpErrors, c.dnsLatency, c.dnsDrops, c.dnsUpstream,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A client or server whose
// interface repeats an earlier one is skipped: the registry would reject
// the whole scrape.
func (c *servicesCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.current()
	send := func(desc *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		m, err := prometheus.NewConstMetric(desc, typ, v, labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(desc, err)
		}
		ch <- m
	}
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		send(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		send(desc, prometheus.CounterValue, float64(v), labels...)
	}
	counters := func(desc *prometheus.Desc, m map[string]uint64, labels ...string) {
		for k, v := range m {
			counter(desc, v, append(slices.Clip(labels), k)...)
		}
	}
	bool01 := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}

	seen := make(map[string]bool)
	for i := range snap.DHCPClients {
		cl := &snap.DHCPClients[i]
		if seen[cl.Interface] {
			continue
		}
		seen[cl.Interface] = true
		for _, st := range DHCPClientStates {
			gauge(c.clientState, bool01(st == cl.State), cl.Interface, st)
		}
		if cl.State != "" && !slices.Contains(DHCPClientStates, cl.State) {
			gauge(c.clientState, 1, cl.Interface, cl.State)
		}
		l := cl.Lease
		if l == nil {
			l = &dhcp4client.Lease{}
		}
		if l.Addr.IsValid() {
			server := ""
			if l.Server.IsValid() {
				server = l.Server.String()
			}
			gauge(c.clientLease, 1, cl.Interface, l.Addr.String(), server)
		}
		gauge(c.clientError, bool01(cl.LastError != ""), cl.Interface)
		for _, t := range []struct {
			desc *prometheus.Desc
			at   time.Time
		}{
			{c.clientAcquired, l.Acquired}, {c.clientRenew, l.T1},
			{c.clientRebind, l.T2}, {c.clientExpiry, l.Expiry},
		} {
			if !t.at.IsZero() {
				gauge(t.desc, float64(t.at.UnixMilli())/1e3, cl.Interface)
			}
		}
		counters(c.clientEvents, cl.Counters, cl.Interface)
		counters(c.clientDrops, cl.Drops, cl.Interface)
	}

	clear(seen)
	for i := range snap.DHCPServers {
		sv := &snap.DHCPServers[i]
		if seen[sv.Interface] {
			continue
		}
		seen[sv.Interface] = true
		gauge(c.serverPoolSize, float64(sv.PoolSize), sv.Interface)
		gauge(c.serverPoolUsed, float64(sv.PoolUsed), sv.Interface)
		gauge(c.serverOffered, float64(sv.Offered), sv.Interface)
		gauge(c.serverDeclined, float64(sv.Declined), sv.Interface)
		leases := map[[2]string]int{{"static", "bound"}: 0, {"dynamic", "bound"}: 0}
		for k := range sv.Leases {
			l := &sv.Leases[k]
			leases[[2]string{l.Kind(), string(l.LeaseState())}]++
		}
		for k, n := range leases {
			gauge(c.serverLeases, float64(n), sv.Interface, k[0], k[1])
		}
		counters(c.serverEvents, sv.Counters, sv.Interface)
		counters(c.serverDrops, sv.Drops, sv.Interface)
		gauge(c.serverFileError, bool01(sv.LeaseFileError != ""), sv.Interface)
	}

	d := snap.DNS
	if d == nil {
		return
	}
	counters(c.dnsQueries, d.Queries)
	counter(c.dnsHits, d.CacheHits)
	counter(c.dnsMisses, d.CacheMisses)
	gauge(c.dnsEntries, float64(d.CacheEntries))
	if d.CacheMax > 0 {
		gauge(c.dnsMax, float64(d.CacheMax))
	}
	counter(c.dnsLocal, d.LocalAnswers)
	gauge(c.dnsInFlight, float64(d.InFlight))
	counter(c.dnsUpQueries, d.UpstreamQueries)
	counters(c.dnsUpErrors, d.UpstreamErrors)
	counters(c.dnsDrops, d.Drops)
	buckets := make(map[float64]uint64, len(d.LatencyBuckets))
	for _, b := range d.LatencyBuckets {
		if !math.IsNaN(b.LE) && !math.IsInf(b.LE, 0) {
			buckets[b.LE] = b.Count
		}
	}
	m, err := prometheus.NewConstHistogram(c.dnsLatency, d.LatencyCount, d.LatencySum, buckets)
	if err != nil {
		m = prometheus.NewInvalidMetric(c.dnsLatency, err)
	}
	ch <- m
	up := make(map[DNSUpstream]bool)
	for _, u := range d.Upstreams {
		if !up[u] {
			up[u] = true
			gauge(c.dnsUpstream, 1, u.Address, u.Source)
		}
	}
}
