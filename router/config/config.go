package config

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
)

// Hardware profile names accepted in "hardware:". They match the hw
// package's profiles.
const (
	HardwareBCM47094 = "bcm47094" // bgmac CPU port to a BCM53012 switch, 2 cores, no RX checksum offload
	HardwareIXGBE    = "ixgbe"    // 10 GbE, several receive queues joined with PACKET_FANOUT
	HardwareGeneric  = "generic"  // anything else, veth included; the default
)

// Port drivers accepted in "driver:".
const (
	// DriverAuto uses AF_XDP where its sockets bind in zero-copy mode
	// and AF_PACKET elsewhere: copy-mode AF_XDP is not known to beat the
	// TPACKET_V3 ring.
	DriverAuto = "auto"
	// DriverAFXDP uses AF_XDP (hw/xdpport), in zero-copy mode where the
	// driver can; the router falls back to AF_PACKET, and logs why, when
	// AF_XDP cannot start (no CAP_BPF, no XDP).
	DriverAFXDP = "af_xdp"
	// DriverAFPacket uses the TPACKET_V3 ring (hw.Port).
	DriverAFPacket = "af_packet"
)

// Transmit paths of an af_packet port accepted in "ports[].tx:"
// (hw.TxMode).
const (
	TxSendmmsg   = "sendmmsg"    // sendmmsg(2) of each batch
	TxRing       = "ring"        // PACKET_TX_RING, one send(2) per batch
	TxRingBypass = "ring-bypass" // the TX ring with PACKET_QDISC_BYPASS
)

// Receive queue settings accepted in "ports[].aqm:".
const (
	AQMOn  = "on"  // the router's own flow-fair CoDel queue
	AQMOff = "off" // the receive loop runs the data path on each ring block (default)
)

// DefaultDriver is the driver of a port whose config names none:
// af_xdp on ixgbe (native XDP and AF_XDP zero-copy), af_packet on
// bcm47094 (bgmac has no XDP) and on generic hardware.
func DefaultDriver(hardware string) string {
	if hardware == HardwareIXGBE {
		return DriverAFXDP
	}
	return DriverAFPacket
}

// DriverOf returns p's driver: p.Driver, or DefaultDriver(hardware).
func (p Port) DriverOf(hardware string) string {
	if p.Driver != "" {
		return p.Driver
	}
	return DefaultDriver(hardware)
}

// VLAN protocols accepted in "vlan_protocol:" (IEEE 802.1Q clause 9.5).
const (
	VLANProtocol8021Q  = "802.1Q"  // C-tag, TPID 0x8100; the default
	VLANProtocol8021AD = "802.1ad" // S-tag, TPID 0x88a8: the outer tag of QinQ
)

// Interface roles accepted in "role:".
const (
	RoleLAN = "lan" // inside: trusted, served by the status page
	RoleWAN = "wan" // outside: the uplink; new inbound flows are dropped unless forwarded or allowed
)

// DefaultStateDir is state_dir when the config does not name one
// (systemd's StateDirectory=gvrouter).
const DefaultStateDir = "/var/lib/gvrouter"

// Limits checked by Validate.
const (
	// MaxQueues bounds a port's receive queues. 64 is the most RSS queues
	// of the NICs we target (ixgbe has 64 RX queues with RSS); more rings
	// than that would only cost memory.
	MaxQueues = 64
	// MinMTU is the smallest IPv4 MTU (RFC 791: every host must accept 68-octet datagrams).
	MinMTU = 68
	// MinMTUIPv6 is the smallest MTU of a link that carries IPv6 (RFC 8200 §5).
	MinMTUIPv6 = 1280
	// MaxMTU is the largest IP packet (the 16-bit total length field).
	MaxMTU = 65535
	// MaxVID is the largest usable VLAN ID; 0 means "priority tagged"
	// and 4095 is reserved (IEEE 802.1Q clause 9.6, table 9-2).
	MaxVID = 4094
	// MaxPCP is the largest priority code point (3 bits).
	MaxPCP = 7
)

// Config is a parsed and valid config.yaml. A Config is a plain value:
// it is not safe for concurrent mutation, but may be read from several
// goroutines once built.
type Config struct {
	// File is the name errors are reported under, e.g. "/etc/gvrouter/config.yaml";
	// "" for a Config built in code.
	File string

	Hardware   string      // "bcm47094" | "ixgbe" | "generic"; "" in YAML becomes "generic"
	Ports      []Port      // kernel interfaces the router takes over; names are unique
	Interfaces []Interface // one netstack NIC each; names are unique
	Routes     []Route     // static routes, in file order
	NAT        NAT         // conntrack and NAT (nat:); the zero NAT translates nothing
	Firewall   Firewall    // wan interface defaults and exceptions (firewall:)
	Status     Status      // the status page
	MACsec     []MACsec    // SecYs on interfaces, each a NIC of its own (macsec.go)
	// StateDir is the directory of state that survives a restart (the
	// record of what a port takeover changed, PN high-water marks,
	// leases), e.g. "/var/lib/gvrouter"; "" = DefaultStateDir (see
	// StateDirectory).
	StateDir string
	// DNS is the DNS forwarder (dns:); nil = none.
	DNS *DNS
	// Host is the TAP into the board's own kernel (host:); nil = none.
	// Its port and interface are also in Ports and Interfaces.
	Host *Host
	// PortMapping is NAT-PMP, PCP and UPnP IGD (port_mapping:, portmap.go);
	// nil = none.
	PortMapping *PortMapping

	src src
}

// Port is a kernel network interface the router takes over with AF_PACKET.
type Port struct {
	Name   string // kernel interface name, e.g. "eth0", "br-lan", "wan"
	Queues int    // receive queues joined with PACKET_FANOUT, 1..64, e.g. 2; 0 = the hardware profile's default
	MTU    int    // L3 MTU, 68..65535, e.g. 1500; 0 = leave the kernel's MTU as it is
	// Driver is the port backend: DriverAFXDP, DriverAFPacket or
	// DriverAuto, e.g. "af_xdp"; "" = the hardware profile's default
	// (DefaultDriver). Valid iff Kind is PortPacket.
	Driver string
	// Tx is how an af_packet port transmits: TxSendmmsg, TxRing or
	// TxRingBypass, e.g. "ring"; "" = the hardware profile's default
	// (sendmmsg on every profile, docs/performance.md). Valid iff Kind is
	// PortPacket; an af_xdp port uses it only if it falls back to
	// af_packet.
	Tx string
	// AQM is the port's receive queue (stack.RxQueue: flow-fair, CoDel
	// with ECN marking, for when the router is the bottleneck): AQMOn
	// or AQMOff, e.g. "on"; "" = AQMOff.
	AQM string
	Pos Pos // where the port is defined, e.g. {Line: 9, Col: 5}
	// Kind is PortPacket (a kernel interface) or PortTAP (the host TAP,
	// which the router creates).
	Kind string

	src src
}

// Interface is one netstack NIC on a port. A port carries any number of
// interfaces with different VLANs, and at most one untagged one.
type Interface struct {
	Name      string         // NIC name used everywhere (status page, routes, listen), e.g. "lan"
	Port      string         // the Port it sends and receives on, e.g. "br-lan"
	Addresses []netip.Prefix // addresses with their subnet, e.g. [192.168.1.1/24 fd00:1::1/64]
	MTU       int            // L3 MTU, 68..65535 (≥1280 with IPv6 addresses), e.g. 1500; 0 = the port's
	Role      string         // "lan" | "wan"
	// VLAN is the 802.1Q VID, 1..4094, e.g. [1]; two for QinQ, outer
	// first, e.g. [100, 10] ("vlan: 1" or "vlan: [100, 10]" in YAML);
	// nil = untagged.
	VLAN []int
	// VLANProtocol is the outer tag's TPID: "802.1Q" (0x8100, the
	// default when "") or "802.1ad" (0x88a8). Valid iff VLAN is set.
	VLANProtocol string
	// PCP is the 802.1Q priority, 0..7, e.g. 5, of the frames the router
	// sends on this interface. Valid iff VLAN is set.
	PCP int
	// PCPSet reports that "pcp" was written.
	PCPSet bool
	// GRO is the receive coalescing policy: "off", "on" (all TCP, like
	// Linux; forwarded merges are segmented again on egress) or
	// "selective" (only TCP to the router's own addresses), e.g. "off";
	// "" = "selective".
	GRO string
	// DHCP is the interface's DHCPv4 client, non-nil iff "dhcp" is among
	// its addresses; the leased address comes and goes at run time.
	DHCP *DHCPClient
	// PPPoE is the interface's PPPoE client, non-nil iff "pppoe" is
	// among its addresses (or pppoe: is written, which Validate then
	// reports); the IPCP address comes and goes at run time.
	PPPoE *PPPoE
	// DHCPServer is the interface's DHCPv4 server (dhcp_server:); nil = none.
	DHCPServer *DHCPServer
	// IPv6 is the interface's ipv6: mapping (prefix delegation, router
	// advertisements, stateless DHCPv6); nil = DefaultIPv6(Role).
	IPv6 *IPv6
	// SQM is the wan interface's shaping (sqm:); nil = none.
	SQM *SQM
	// WireGuard makes the interface a WireGuard tunnel (wireguard:),
	// which has no port; nil = an interface on a port.
	WireGuard *WireGuard
	// Host reports the host TAP's interface (from host:).
	Host bool
	Pos  Pos // where the interface is defined

	// dhcpOptions: dhcp: was written without "dhcp" in addresses.
	dhcpOptions bool
	// pppoeOptions: pppoe: was written without "pppoe" in addresses.
	pppoeOptions bool

	src src
}

// Route is a static route.
type Route struct {
	// To is the destination, e.g. 10.0.0.0/8. "default" in YAML becomes
	// 0.0.0.0/0 or ::/0 by the family of Via; a bare address becomes a
	// host route (/32 or /128). Always masked (no host bits set).
	To  netip.Prefix
	Via netip.Addr // next hop, e.g. 203.0.113.1; zero = on-link through Dev
	Dev string     // interface name, e.g. "wan"; "" = the interface whose subnet contains Via
	Pos Pos        // where the route is defined

	src src
}

// Status configures the status page (HTML, JSON and /metrics).
type Status struct {
	Listen []Listen // where to serve it; empty = nowhere
	// Hosts are further names and addresses a browser may use for the
	// router in the Host and Origin headers, lowercase without a final
	// dot, e.g. ["gvrouter.lan", "203.0.113.7"]: besides them the page
	// answers only its own addresses and loopback names (DNS rebinding).
	Hosts []string
}

// Listen is one address the status page is served on. Exactly one of
// Interface and Host is set.
type Listen struct {
	// Interface is a NIC name, e.g. "lan": the page is served by netstack on
	// that interface's addresses ("lan:80" in YAML).
	Interface string
	// Host is a host socket address, e.g. 127.0.0.1:8080 or [::1]:8080,
	// served by the kernel's stack ("127.0.0.1:8080" in YAML).
	Host netip.AddrPort
	// Port is the TCP port, 1..65535, e.g. 80; for a Host listen it equals Host.Port().
	Port uint16
	Pos  Pos // where the entry is written
}

// String returns the listen address as written in YAML: "lan:80" or
// "127.0.0.1:8080".
func (l Listen) String() string {
	if l.Interface != "" {
		return l.Interface + ":" + strconv.Itoa(int(l.Port))
	}
	return l.Host.String()
}

// Load reads and parses the config file at path. Errors name path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// StateDirectory returns the state directory in force: StateDir, or
// DefaultStateDir.
func (c *Config) StateDirectory() string {
	if c.StateDir == "" {
		return DefaultStateDir
	}
	return c.StateDir
}

// Port returns the port named name, or nil.
func (c *Config) Port(name string) *Port {
	for i := range c.Ports {
		if c.Ports[i].Name == name {
			return &c.Ports[i]
		}
	}
	return nil
}

// Interface returns the interface named name, or nil.
func (c *Config) Interface(name string) *Interface {
	for i := range c.Interfaces {
		if c.Interfaces[i].Name == name {
			return &c.Interfaces[i]
		}
	}
	return nil
}

// src remembers where each key's value was written, so errors found after
// decoding point at the value rather than at the item.
type src struct {
	pos map[string]Pos  // key ("port", "addresses.1") → position of its value
	bad map[string]bool // keys already reported while decoding: Validate skips them
}

func (s *src) set(key string, p Pos) {
	if s.pos == nil {
		s.pos = make(map[string]Pos)
	}
	s.pos[key] = p
}

func (s *src) markBad(key string) {
	if s.bad == nil {
		s.bad = make(map[string]bool)
	}
	s.bad[key] = true
}

// setAll copies the positions of an element's src into s, under prefix:
// "static.1" and "mac" make "static.1.mac".
func (s *src) setAll(prefix string, e *src) {
	for k, p := range e.pos {
		s.set(prefix+"."+k, p)
	}
}

// at returns where key was written, or def.
func (s *src) at(key string, def Pos) Pos {
	if p, ok := s.pos[key]; ok {
		return p
	}
	return def
}
