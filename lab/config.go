package lab

import (
	"fmt"
	"net/netip"

	"gopkg.in/yaml.v3"
)

// labConfig is the router config the lab writes, in the shape package
// router/config reads (config.yaml).
type labConfig struct {
	Hardware   string         `yaml:"hardware"`
	Ports      []labPort      `yaml:"ports"`
	Interfaces []labInterface `yaml:"interfaces"`
	Routes     []labRoute     `yaml:"routes,omitempty"`
	NAT        labNAT         `yaml:"nat"`
	Firewall   labFirewall    `yaml:"firewall"`
	Status     labStatus      `yaml:"status"`
	StateDir   string         `yaml:"state_dir,omitempty"`
	// PortMapping is port_mapping: (NAT-PMP, PCP, UPnP IGD); nil = off.
	PortMapping *labPortMapping `yaml:"port_mapping,omitempty"`
}

// labPortMapping is port_mapping: in the lab config.
type labPortMapping struct {
	NATPMP     string `yaml:"natpmp,omitempty"` // "on"
	PCP        string `yaml:"pcp,omitempty"`
	UPnP       string `yaml:"upnp,omitempty"`
	MaxPerHost int    `yaml:"max_per_host,omitempty"`
	// Allow is the permission rules ("[allow|deny] EXTPORTS PREFIX
	// INTPORTS"); nil keeps the default.
	Allow []string `yaml:"allow,omitempty"`
}

type labRoute struct {
	To  string `yaml:"to"`
	Via string `yaml:"via"`
}

// labNAT masquerades the LAN behind the WAN address and forwards
// forwardPort (TCP and UDP) to the LAN host.
type labNAT struct {
	Masquerade []string      `yaml:"masquerade"`
	Forwards   []labForward  `yaml:"forwards"`
	Conntrack  *labConntrack `yaml:"conntrack,omitempty"`
}

// labFirewall lets new IPv6 connections from the WAN host reach the LAN
// host's forwardPort; the router's own sockets stay closed to the WAN.
type labFirewall struct {
	WANInput string      `yaml:"wan_input"`
	Allow6   []labAllow6 `yaml:"allow6"`
}

type labConntrack struct {
	Max int `yaml:"max"`
}

type labForward struct {
	Proto string `yaml:"proto"`
	Port  int    `yaml:"port"`
	To    string `yaml:"to"`
	On    string `yaml:"on"`
}

type labAllow6 struct {
	Proto string `yaml:"proto"`
	To    string `yaml:"to"`
	Port  int    `yaml:"port"`
}

type labPort struct {
	Name   string `yaml:"name"`
	Driver string `yaml:"driver,omitempty"`
	Tx     string `yaml:"tx,omitempty"`
	Queues int    `yaml:"queues,omitempty"`
	AQM    string `yaml:"aqm,omitempty"`
}

// withDriver returns the config edit that sets every port's driver.
func withDriver(driver string) func(*labConfig) {
	return func(c *labConfig) {
		for i := range c.Ports {
			c.Ports[i].Driver = driver
		}
	}
}

// withAQM returns the config edit that sets every port's receive queue
// (ports[].aqm: on or off).
func withAQM(aqm string) func(*labConfig) {
	return func(c *labConfig) {
		for i := range c.Ports {
			c.Ports[i].AQM = aqm
		}
	}
}

// withTx returns the config edit that sets every port's transmit path
// (ports[].tx: sendmmsg, ring or ring-bypass).
func withTx(tx string) func(*labConfig) {
	return func(c *labConfig) {
		for i := range c.Ports {
			c.Ports[i].Tx = tx
		}
	}
}

// withQueues returns the config edit that sets every port's receive
// queues (ports[].queues, PACKET_FANOUT members).
func withQueues(n int) func(*labConfig) {
	return func(c *labConfig) {
		for i := range c.Ports {
			c.Ports[i].Queues = n
		}
	}
}

type labInterface struct {
	Name      string   `yaml:"name"`
	Port      string   `yaml:"port"`
	VLAN      int      `yaml:"vlan,omitempty"`
	Addresses []string `yaml:"addresses"`
	Role      string   `yaml:"role"`
	GRO       string   `yaml:"gro,omitempty"`
	// DHCPServer serves the LAN (dhcp_server:).
	DHCPServer *labDHCPServer `yaml:"dhcp_server,omitempty"`
	// DHCP sets the WAN DHCP client (dhcp:) of addresses: [dhcp, ...].
	DHCP *labDHCPClient `yaml:"dhcp,omitempty"`
	// IPv6 is the ipv6: mapping: the WAN's prefix delegation.
	IPv6 *labIPv6 `yaml:"ipv6,omitempty"`
}

// labIPv6 asks the lab ISP's kea-dhcp6 for a delegated prefix (pd:); the
// WAN's IPv6 address is static, its default route learned from the ISP's
// radvd (ra: on, the default).
type labIPv6 struct {
	PD int    `yaml:"pd,omitempty"`
	RA string `yaml:"ra,omitempty"`
}

// labDHCPClient is the WAN's DHCP client: the hostname the ISP's dnsmasq
// logs.
type labDHCPClient struct {
	Hostname string `yaml:"hostname"`
}

// wanHostname is the router's DHCP hostname (option 12) in the lab.
const wanHostname = "gvrouter-lab"

// labDHCPServer is the LAN's DHCP server: a range away from the hosts'
// static addresses and a short lease, so that a client renews (T1 is
// half of it) while a test watches.
type labDHCPServer struct {
	Range     string          `yaml:"range"`
	LeaseTime string          `yaml:"lease_time"`
	Static    []labStaticHost `yaml:"static,omitempty"`
	// NewLeaseBurst and NewLeasesPerMinute lift the new-lease budget
	// for a bench that binds a thousand leases at once; 0 = the default.
	NewLeaseBurst      int `yaml:"new_lease_burst,omitempty"`
	NewLeasesPerMinute int `yaml:"new_leases_per_minute,omitempty"`
}

type labStaticHost struct {
	MAC      string `yaml:"mac"`
	Address  string `yaml:"address"`
	Hostname string `yaml:"hostname"`
}

// The LAN's static lease: a MAC no lab host has, which the abuse test
// asks for with scapy.
const (
	labStaticMAC  = "02:77:01:00:00:0a"
	labStaticAddr = "10.77.1.10"
)

// lanDHCPRange and lanLeaseTime are the lab LAN's DHCP pool and lease.
const (
	lanDHCPRange = "10.77.1.100-10.77.1.199"
	lanLeaseTime = "20s"
)

type labStatus struct {
	Listen []string `yaml:"listen"`
	Hosts  []string `yaml:"hosts,omitempty"`
}

// routerConfig returns the router's lab config: ports lan0 and wan0,
// interfaces lan and wan, and the status page on lan:80 (netstack) and on
// 127.0.0.1:statusPort in the router namespace (a kernel socket).
//
// For TopologyBCM47094 it is the appliance's layout instead: port eth0,
// interfaces eth0.1 (VLAN 1, LAN) and eth0.2 (VLAN 2, WAN), status page on
// eth0.1:80.
//
// gro, if not "", is the gro key of both interfaces (bench mode g);
// conntrackMax, if not 0, the conntrack table limit (the flood test).
func routerConfig(prefix string, statusPort int, topology, gro string, conntrackMax int, edits ...func(*labConfig)) ([]byte, error) {
	lan, wan := routerInterfaces(topology)
	c := labConfig{
		Hardware: "generic",
		Ports:    []labPort{{Name: lanPort}, {Name: wanPort}},
		Interfaces: []labInterface{
			{Name: lan, Port: lanPort, Addresses: prefixes(lanRouter4, lanRouter6), Role: "lan", GRO: gro,
				DHCPServer: &labDHCPServer{Range: lanDHCPRange, LeaseTime: lanLeaseTime,
					Static: []labStaticHost{{MAC: labStaticMAC, Address: labStaticAddr, Hostname: "labstatic"}}}},
			// The WAN's IPv4 address, default route and farNet route
			// (option 121, for the traceroute proof) come from the lab
			// ISP's DHCP server (isp_linux.go); IPv6 stays static.
			{Name: wan, Port: wanPort, Addresses: append([]string{"dhcp"}, prefixes(wanRouter6)...), Role: "wan", GRO: gro,
				DHCP: &labDHCPClient{Hostname: wanHostname}, IPv6: &labIPv6{PD: ispPDLength}},
		},
		NAT: labNAT{
			Masquerade: []string{wan},
			Forwards: []labForward{
				{Proto: "tcp", Port: forwardPort, To: netip.AddrPortFrom(lanHost4.Addr(), forwardPort).String(), On: wan},
				{Proto: "udp", Port: forwardPort, To: netip.AddrPortFrom(lanHost4.Addr(), forwardPort).String(), On: wan},
			},
		},
		Firewall: labFirewall{
			WANInput: "drop",
			Allow6:   []labAllow6{{Proto: "tcp", To: lanHost6.Addr().String(), Port: forwardPort}},
		},
		Status: labStatus{Listen: []string{
			lan + ":80",
			netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(statusPort)).String(),
		}},
	}
	if conntrackMax > 0 {
		c.NAT.Conntrack = &labConntrack{Max: conntrackMax}
	}
	if topology == TopologyBCM47094 {
		c.Hardware = "bcm47094"
		c.Ports = []labPort{{Name: cpuPort}}
		c.Interfaces[0].Port, c.Interfaces[0].VLAN = cpuPort, lanVID
		c.Interfaces[1].Port, c.Interfaces[1].VLAN = cpuPort, wanVID
	}
	for _, edit := range edits {
		edit(&c)
	}
	b, err := yaml.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("lab: config: %w", err)
	}
	head := fmt.Sprintf("# gvrouter lab config, written by gvlab run %s.\n", prefix)
	return append([]byte(head), b...), nil
}

// baselineConfig turns the lab config into the one of wave 1, which
// every earlier build reads: a static WAN address and the farNet route
// instead of DHCP, no LAN DHCP server and no ipv6: mapping.
func baselineConfig(c *labConfig) {
	for i := range c.Interfaces {
		c.Interfaces[i].DHCPServer = nil
		c.Interfaces[i].DHCP = nil
		c.Interfaces[i].IPv6 = nil
	}
	c.Interfaces[1].Addresses = prefixes(wanRouter4, wanRouter6)
	c.Routes = append(c.Routes, labRoute{To: farNet.String(), Via: wanHost4.Addr().String()})
}

func prefixes(ps ...netip.Prefix) []string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return s
}

// routerInterfaces returns the names of the router's LAN and WAN
// interfaces in topology.
func routerInterfaces(topology string) (lan, wan string) {
	if topology == TopologyMACsec {
		return "lan", msName
	}
	if topology == TopologyBCM47094 {
		return cpuPort + ".1", cpuPort + ".2"
	}
	return "lan", "wan"
}

// routerPorts returns the router's ports in topology.
func routerPorts(topology string) []string {
	if topology == TopologyMACsec {
		return []string{lanPort, msPort}
	}
	if topology == TopologyBCM47094 {
		return []string{cpuPort}
	}
	return []string{lanPort, wanPort}
}
