package status

import "time"

// Source provides the data the status page shows.
type Source interface {
	// Snapshot returns the current state. It is called from the sampler
	// goroutine and, when no recent sample exists, from HTTP handlers, so it
	// must be safe for concurrent use. The Server never modifies the result
	// but keeps it until the next sample: the Source must not change the
	// returned slices and maps afterwards (return fresh ones, e.g.
	// maps.Clone of live drop counters).
	Snapshot() Snapshot
}

// Snapshot is the router's state at one instant. Fields marked "set by the
// Server" are filled in when the Server samples its Source; a Source leaves
// them zero.
type Snapshot struct {
	// Build identifies the build, e.g. "2026-11-30T07:00:00Z 3f2c1ab".
	Build string `json:"build"`
	// Version is the release version, e.g. "v0.3.0".
	Version string `json:"version"`
	// Started is when the router started; zero if unknown.
	Started time.Time `json:"started"`

	// Time is when the sample was taken (set by the Server).
	Time time.Time `json:"time"`
	// UptimeSeconds is Time - Started in seconds, 0 if Started is zero
	// (set by the Server).
	UptimeSeconds float64 `json:"uptime_seconds"`
	// Seq numbers the samples, 1 for the first one the Server took (set
	// by the Server). The page shows it and /api/history is indexed by
	// it, so a client can tell two samples apart and ask for the history
	// after the one it has.
	Seq uint64 `json:"seq"`
	// Process is the router process's CPU and memory; the Server fills it
	// in (process.go) unless the Source did.
	Process *Process `json:"process,omitempty"`

	// Interfaces are the router's L3 interfaces (netstack NICs).
	Interfaces []Interface `json:"interfaces"`
	// Ports are the physical ports the interfaces sit on.
	Ports []Port `json:"ports"`
	// Routes is the routing table.
	Routes []Route `json:"routes"`

	// MACsec are the SecYs, each also listed in Interfaces.
	MACsec []MACsec `json:"macsec,omitempty"`
	// Conntrack is connection tracking, NAT and the fast path; nil when
	// the router tracks no connections.
	Conntrack *Conntrack `json:"conntrack,omitempty"`
	// HTTP is the status server's own connections (set by the Server).
	HTTP HTTP `json:"http"`
	// Netstack counts the IP packets that reached netstack, the slow
	// path: with the fast path working they stay flat while an
	// offloaded flow runs.
	Netstack *Netstack `json:"netstack,omitempty"`
	// Fragments is the fragment guard's state; nil before the router runs.
	Fragments *Fragments `json:"fragments,omitempty"`

	// DHCPClients are the DHCPv4 clients, one per interface with
	// `addresses: [dhcp]` (services.go).
	DHCPClients []DHCPClient `json:"dhcp_clients,omitempty"`
	// PPPoE are the PPPoE sessions, one per wan interface with
	// `addresses: [pppoe]` (pppoe.go).
	PPPoE []PPPoE `json:"pppoe,omitempty"`
	// DHCPServers are the DHCPv4 servers, one per served lan interface.
	DHCPServers []DHCPServer `json:"dhcp_servers,omitempty"`
	// DNS is the DNS forwarder; nil when it does not run.
	DNS *DNS `json:"dns,omitempty"`
	// IPv6 is home-network IPv6 (ipv6.go): the delegation, RAs learned
	// and sent, stateless DHCPv6; nil when none of it runs.
	IPv6 *IPv6 `json:"ipv6,omitempty"`
	// Neighbors is the ARP and NDP neighbour table of every interface
	// (neighbors.go): the hosts on the LAN the router has heard from;
	// nil before the router runs.
	Neighbors []Neighbor `json:"neighbors,omitempty"`
	// SQM is the shaped directions of wan interfaces (sqm.go), by
	// interface then direction; nil when no sqm: is configured.
	SQM []SQM `json:"sqm,omitempty"`
	// PortMapping is NAT-PMP, PCP and UPnP IGD (portmap.go); nil when
	// port_mapping: turns none on.
	PortMapping *PortMapping `json:"port_mapping,omitempty"`
	// WireGuard is the WireGuard interfaces (wireguard.go), by name;
	// nil when none is configured.
	WireGuard []WireGuard `json:"wireguard,omitempty"`
}

// HTTP is the status server's connections.
type HTTP struct {
	// Open is how many connections were open, at most MaxConns, e.g. 2.
	Open int64 `json:"open_connections"`
	// Refused counts connections answered 503 (or closed unanswered)
	// because MaxConns were open, since the router started.
	Refused uint64 `json:"refused_connections"`
	// ForbiddenHost counts requests answered 403 because their Host
	// named none of the router's addresses or names (DNS rebinding),
	// since the router started.
	ForbiddenHost uint64 `json:"forbidden_host"`
	// ForbiddenOrigin counts reads of /api/... or /metrics answered 403
	// because they came from another origin (Origin, Sec-Fetch-Site).
	ForbiddenOrigin uint64 `json:"forbidden_origin"`
}

// Netstack is netstack's own IP counters (IPv4 and IPv6 together).
type Netstack struct {
	// IPPacketsReceived counts IP packets netstack received: forwarded
	// on the slow path or for the router.
	IPPacketsReceived uint64 `json:"ip_packets_received"`
	// IPPacketsDelivered counts those delivered to the router's own
	// transport endpoints.
	IPPacketsDelivered uint64 `json:"ip_packets_delivered"`
	// IPPacketsSent counts IP packets netstack sent: forwarded or its own.
	IPPacketsSent uint64 `json:"ip_packets_sent"`
}

// Interface is one L3 interface (a netstack NIC).
type Interface struct {
	// Name is the interface name from the config, e.g. "lan".
	Name string `json:"name"`
	// Port is the physical port it uses, e.g. "eth0".
	Port string `json:"port"`
	// State is "up", "down" or another short word, e.g. "unknown".
	State string `json:"state"`
	// MAC is the hardware address, e.g. "02:00:00:00:00:01".
	MAC string `json:"mac"`
	// Addresses are the assigned prefixes, e.g. "192.168.1.1/24".
	Addresses []string `json:"addresses"`
	// MTU is the L3 MTU, e.g. 1500.
	MTU int `json:"mtu"`
	// VLAN is the 802.1Q VID, e.g. [2], or the QinQ pair [outer, inner],
	// e.g. [100, 10]; absent for an untagged interface, whose parent is
	// simply Port.
	VLAN []int `json:"vlan,omitempty"`
	// VLANProtocol is the outer tag, "802.1Q" or "802.1ad"; valid iff
	// VLAN is set.
	VLANProtocol string `json:"vlan_protocol,omitempty"`
	// PCP is the 802.1Q priority, 0..7, of the frames the router sends on
	// the interface; nil iff VLAN is not set.
	PCP *int `json:"pcp,omitempty"`
	// GROMode is the receive coalescing policy, "off", "on" or
	// "selective"; empty when unknown.
	GROMode string `json:"gro,omitempty"`
	// GRO is the interface's GRO and software checksum counters; nil
	// when unknown.
	GRO *GRO `json:"gro_counters,omitempty"`
	// NextHopForwarded counts packets received here and forwarded without
	// netstack before their flow reached the NAT fast path (the next hop
	// of their destination was known).
	NextHopForwarded uint64 `json:"next_hop_forwarded"`
	// GSO counts superframes: local senders' TSO/GSO frames.
	GSO GSO `json:"gso_counters"`
	// Tapped counts received frames a raw-frame tap consumed (the DHCP
	// server's and client's UDP 67/68) before netstack and NAT.
	Tapped uint64 `json:"tapped"`

	// RxPackets counts packets received.
	RxPackets uint64 `json:"rx_packets"`
	// RxBytes counts bytes received.
	RxBytes uint64 `json:"rx_bytes"`
	// TxPackets counts packets sent.
	TxPackets uint64 `json:"tx_packets"`
	// TxBytes counts bytes sent.
	TxBytes uint64 `json:"tx_bytes"`
	// Drops counts dropped packets by reason, e.g. {"no_route": 3}.
	Drops map[string]uint64 `json:"drops"`

	// Rates are the current rates (set by the Server).
	Rates Rates `json:"rates"`
}

// GRO is what receive coalescing did on one interface.
type GRO struct {
	// Coalesced counts segments merged into an earlier one, e.g. 9000.
	Coalesced uint64 `json:"coalesced"`
	// Flushed counts packets GRO handed to netstack, merged or not.
	Flushed uint64 `json:"flushed"`
	// BypassedForward counts forwarded TCP packets passed on one by one
	// ("selective").
	BypassedForward uint64 `json:"bypassed_forward"`
	// Segmented counts forwarded merged packets split again on egress
	// from this interface ("on").
	Segmented uint64 `json:"segmented"`
	// ChecksumVerified counts TCP/UDP checksums verified in software.
	ChecksumVerified uint64 `json:"checksum_verified"`
	// ChecksumBad counts those that were wrong.
	ChecksumBad uint64 `json:"checksum_bad"`
}

// GSO counts the superframes of one interface: frames of up to 64 KiB
// from a local sender with TSO/GSO (a veth peer, a VM), which a port
// with vnet headers takes whole.
type GSO struct {
	// Received counts superframes received, e.g. 4000.
	Received uint64 `json:"received"`
	// SentWhole counts superframes sent out of this interface whole.
	SentWhole uint64 `json:"sent_whole"`
	// Segmented counts superframes cut into wire frames in software
	// (for the slow path, or for an egress that cannot take them whole).
	Segmented uint64 `json:"segmented"`
}

// Port is one physical port.
type Port struct {
	// Name is the kernel interface name, e.g. "eth0".
	Name string `json:"name"`
	// State is "up", "down" or another short word.
	State string `json:"state"`
	// MAC is the hardware address.
	MAC string `json:"mac"`
	// MTU is the L3 MTU, e.g. 1500.
	MTU int `json:"mtu"`
	// Queues is the number of receive rings, e.g. 2.
	Queues int `json:"queues"`
	// Driver is the port's backend, e.g. "af_xdp", "af_packet" or
	// "tap"; "" when unknown.
	Driver string `json:"driver,omitempty"`
	// Mode is the backend's mode, e.g. "copy, native" or "zero-copy,
	// native" for af_xdp; "" for the others.
	Mode string `json:"mode,omitempty"`
	// UMEM is an af_xdp port's packet memory and its zero-copy and
	// copied transmits (umem.go); nil for the other backends.
	UMEM *PortUMEM `json:"umem,omitempty"`
	// AQM is the port's receive queue (aqm.go); nil for a port without
	// one.
	AQM *PortAQM `json:"aqm,omitempty"`

	// RxPackets counts frames received.
	RxPackets uint64 `json:"rx_packets"`
	// RxBytes counts bytes received.
	RxBytes uint64 `json:"rx_bytes"`
	// TxPackets counts frames sent.
	TxPackets uint64 `json:"tx_packets"`
	// TxBytes counts bytes sent.
	TxBytes uint64 `json:"tx_bytes"`
	// Drops counts dropped frames by reason, e.g. {"ring_full": 1}.
	Drops map[string]uint64 `json:"drops"`

	// Rates are the current rates (set by the Server).
	Rates Rates `json:"rates"`
}

// Route is one routing table entry.
type Route struct {
	// To is the destination prefix, e.g. "0.0.0.0/0".
	To string `json:"to"`
	// Via is the gateway, e.g. "192.0.2.1"; "" means on-link.
	Via string `json:"via"`
	// Dev is the interface, e.g. "wan"; "" means chosen by Via.
	Dev string `json:"dev"`
}

// Rates are current rates, computed from the counters of the last two
// samples. A rate is 0 when there is no earlier sample of the same name or
// when a counter went backwards (the interface was re-created).
type Rates struct {
	// RxBitsPerSecond is the receive rate in bit/s.
	RxBitsPerSecond float64 `json:"rx_bits_per_second"`
	// TxBitsPerSecond is the transmit rate in bit/s.
	TxBitsPerSecond float64 `json:"tx_bits_per_second"`
	// RxPacketsPerSecond is the receive rate in packets/s.
	RxPacketsPerSecond float64 `json:"rx_packets_per_second"`
	// TxPacketsPerSecond is the transmit rate in packets/s.
	TxPacketsPerSecond float64 `json:"tx_packets_per_second"`
}

// DropsTotal returns the sum of i.Drops.
func (i *Interface) DropsTotal() uint64 { return sum(i.Drops) }

// DropsTotal returns the sum of p.Drops.
func (p *Port) DropsTotal() uint64 { return sum(p.Drops) }

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}
