package config

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/firewall"
)

// format writes c back as YAML, for the round-trip check.
func format(c *Config) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "hardware: %q\nports:\n", c.Hardware)
	for _, p := range c.Ports {
		if p.Kind == PortTAP {
			continue // synthesized from host:
		}
		fmt.Fprintf(&b, "  - {name: %q, queues: %d, mtu: %d}\n", p.Name, p.Queues, p.MTU)
	}
	b.WriteString("interfaces:\n")
	for _, ifc := range c.Interfaces {
		if ifc.Host {
			continue
		}
		fmt.Fprintf(&b, "  - {name: %q, port: %q, role: %q, mtu: %d, ", ifc.Name, ifc.Port, ifc.Role, ifc.MTU)
		if len(ifc.VLAN) > 0 {
			fmt.Fprintf(&b, "vlan: %s, ", vlanString(ifc.VLAN))
		}
		if ifc.VLANProtocol != "" {
			fmt.Fprintf(&b, "vlan_protocol: %q, ", ifc.VLANProtocol)
		}
		if ifc.PCPSet {
			fmt.Fprintf(&b, "pcp: %d, ", ifc.PCP)
		}
		b.WriteString("addresses: [")
		sep := ""
		if ifc.DHCP != nil {
			b.WriteString(`"dhcp"`)
			sep = ", "
		}
		for _, a := range ifc.Addresses {
			fmt.Fprintf(&b, "%s%q", sep, a.String())
			sep = ", "
		}
		b.WriteString("]")
		formatDHCP(&b, &ifc)
		formatIPv6(&b, &ifc)
		b.WriteString("}\n")
	}
	b.WriteString("routes:\n")
	for _, r := range c.Routes {
		fmt.Fprintf(&b, "  - to: %q\n", r.To.String())
		if r.Via.IsValid() {
			fmt.Fprintf(&b, "    via: %q\n", r.Via.String())
		}
		if r.Dev != "" {
			fmt.Fprintf(&b, "    dev: %q\n", r.Dev)
		}
	}
	formatNAT(&b, c)
	if h := c.Host; h != nil {
		fmt.Fprintf(&b, "host:\n  tap: %q\n  interface: %q\n  addresses: [", h.Tap, h.Interface)
		for i, a := range h.Addresses {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", a.String())
		}
		b.WriteString("]\n  kernel_addresses: [")
		for i, a := range h.KernelAddresses {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", a.String())
		}
		b.WriteString("]\n  forwards:\n")
		for _, f := range h.Forwards {
			fmt.Fprintf(&b, "    - {proto: %q, port: %d", f.Proto, f.Port)
			if f.On != "" {
				fmt.Fprintf(&b, ", on: %q", f.On)
			}
			b.WriteString("}\n")
		}
	}
	if n := c.DNS; n != nil {
		b.WriteString("dns:\n  upstreams: [")
		for i, u := range n.Upstreams {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", u.String())
		}
		b.WriteString("]\n")
		if n.Domain != "" {
			fmt.Fprintf(&b, "  domain: %q\n", n.Domain)
		}
		fmt.Fprintf(&b, "  cache: {size: %d", n.CacheSize)
		if n.MinTTL != 0 {
			fmt.Fprintf(&b, ", min_ttl: %q", n.MinTTL.String())
		}
		if n.MaxTTL != 0 {
			fmt.Fprintf(&b, ", max_ttl: %q", n.MaxTTL.String())
		}
		b.WriteString("}\n")
	}
	b.WriteString("status:\n  listen:\n")
	for _, l := range c.Status.Listen {
		fmt.Fprintf(&b, "    - %q\n", l.String())
	}
	return []byte(b.String())
}

// formatIPv6 writes an interface's ipv6: mapping with every key of its
// role (inside its flow mapping).
func formatIPv6(b *strings.Builder, ifc *Interface) {
	v := ifc.IPv6
	if v == nil {
		return
	}
	onOff := func(x bool) string {
		if x {
			return "on"
		}
		return "off"
	}
	if ifc.Role == RoleWAN {
		fmt.Fprintf(b, ", ipv6: {address: %s, release: %s, ra: %s", onOff(v.Address), onOff(v.Release), onOff(v.AcceptRA))
		if v.PD != 0 {
			fmt.Fprintf(b, ", pd: %d", v.PD)
		}
		b.WriteString("}")
		return
	}
	fmt.Fprintf(b, ", ipv6: {ra: %s, dhcpv6: %s, managed: %s, other: %s", onOff(v.RA), onOff(v.DHCPv6), onOff(v.Managed), onOff(v.Other))
	if v.Subnet != SubnetAuto {
		fmt.Fprintf(b, ", subnet: %d", v.Subnet)
	}
	b.WriteString("}")
}

// formatDHCP writes an interface's dhcp: and dhcp_server: keys (inside
// its flow mapping).
func formatDHCP(b *strings.Builder, ifc *Interface) {
	if d := ifc.DHCP; d != nil {
		fmt.Fprintf(b, ", dhcp: {release: %v", d.Release)
		if d.Hostname != "" {
			fmt.Fprintf(b, ", hostname: %q", d.Hostname)
		}
		if d.ClientID != nil {
			fmt.Fprintf(b, ", client_id: %q", hex.EncodeToString(d.ClientID))
		}
		b.WriteString("}")
	}
	s := ifc.DHCPServer
	if s == nil {
		return
	}
	addrs := func(key string, as []netip.Addr) {
		if as == nil {
			return
		}
		fmt.Fprintf(b, ", %s: [", key)
		for i, a := range as {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "%q", a.String())
		}
		b.WriteString("]")
	}
	fmt.Fprintf(b, ", dhcp_server: {range: %q", s.RangeStart.String()+"-"+s.RangeEnd.String())
	if s.LeaseTime != 0 {
		fmt.Fprintf(b, ", lease_time: %q", s.LeaseTime.String())
	}
	addrs("router", s.Router)
	addrs("dns", s.DNS)
	addrs("ntp", s.NTP)
	if s.Domain != "" {
		fmt.Fprintf(b, ", domain: %q", s.Domain)
	}
	if s.MTU != 0 {
		fmt.Fprintf(b, ", mtu: %d", s.MTU)
	}
	if s.Routes != nil {
		b.WriteString(", routes: [")
		for i, r := range s.Routes {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "{to: %q, via: %q}", r.To.String(), r.Via.String())
		}
		b.WriteString("]")
	}
	if s.Static != nil {
		b.WriteString(", static: [")
		for i, l := range s.Static {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "{mac: %q, address: %q", l.MAC.String(), l.Address.String())
			if l.Hostname != "" {
				fmt.Fprintf(b, ", hostname: %q", l.Hostname)
			}
			b.WriteString("}")
		}
		b.WriteString("]")
	}
	b.WriteString("}")
}

// clearPos zeroes every position so configs from different texts compare.
func clearPos(c *Config) *Config {
	strip(c)
	c.File = ""
	for i := range c.Ports {
		c.Ports[i].Pos = Pos{}
	}
	for i := range c.Interfaces {
		c.Interfaces[i].Pos = Pos{}
		c.Interfaces[i].dhcpOptions = false
		if v := c.Interfaces[i].IPv6; v != nil {
			v.Pos, v.src = Pos{}, src{}
		}
		if d := c.Interfaces[i].DHCP; d != nil {
			d.Pos = Pos{}
		}
		if s := c.Interfaces[i].DHCPServer; s != nil {
			s.Pos, s.src = Pos{}, src{}
			for j := range s.Routes {
				s.Routes[j].Pos = Pos{}
			}
			for j := range s.Static {
				s.Static[j].Pos = Pos{}
			}
		}
		if len(c.Interfaces[i].Addresses) == 0 {
			c.Interfaces[i].Addresses = nil
		}
	}
	for i := range c.Routes {
		c.Routes[i].Pos = Pos{}
	}
	for i := range c.Status.Listen {
		c.Status.Listen[i].Pos = Pos{}
	}
	c.NAT.Pos, c.Firewall.Pos = Pos{}, Pos{}
	if h := c.Host; h != nil {
		h.Pos, h.src = Pos{}, src{}
		for i := range h.Forwards {
			h.Forwards[i].Pos = Pos{}
		}
	}
	if n := c.DNS; n != nil {
		n.Pos, n.src = Pos{}, src{}
		if len(n.Upstreams) == 0 {
			n.Upstreams = nil
		}
	}
	for i := range c.NAT.SNAT {
		c.NAT.SNAT[i].Pos = Pos{}
	}
	for i := range c.NAT.Forwards {
		c.NAT.Forwards[i].Pos = Pos{}
	}
	for i := range c.Firewall.Allow6 {
		c.Firewall.Allow6[i].Pos = Pos{}
	}
	for i := range c.Firewall.Zones {
		c.Firewall.Zones[i].Pos, c.Firewall.Zones[i].src = Pos{}, src{}
	}
	for i := range c.Firewall.Rules {
		c.Firewall.Rules[i].Pos, c.Firewall.Rules[i].src = Pos{}, src{}
	}
	for i := range c.Firewall.Redirects {
		c.Firewall.Redirects[i].Pos, c.Firewall.Redirects[i].src = Pos{}, src{}
	}
	return c
}

// formatZones writes firewall: zones, rules and redirects (inside the
// firewall: mapping).
func formatZones(b *strings.Builder, fw *Firewall) {
	if len(fw.Zones) == 0 {
		return
	}
	list := func(xs []string) string {
		q := make([]string, len(xs))
		for i, x := range xs {
			q[i] = strconv.Quote(x)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	b.WriteString("  zones:\n")
	for _, z := range fw.Zones {
		fmt.Fprintf(b, "    - {name: %q, interfaces: %s", z.Name, list(z.Interfaces))
		for _, kv := range [][2]string{{"input", z.Input}, {"forward", z.Forward}, {"output", z.Output}} {
			if kv[1] != "" {
				fmt.Fprintf(b, ", %s: %q", kv[0], kv[1])
			}
		}
		if z.Masquerade {
			b.WriteString(", masquerade: on")
		}
		if z.NoMSSClamp {
			b.WriteString(", mss_clamp: off")
		}
		b.WriteString("}\n")
	}
	b.WriteString("  rules:\n")
	for _, r := range fw.Rules {
		m := r.Match
		fmt.Fprintf(b, "    - {target: %q", m.Target.String())
		for _, kv := range [][2]string{{"name", m.Name}, {"src", m.Src}, {"dest", m.Dest}} {
			if kv[1] != "" {
				fmt.Fprintf(b, ", %s: %q", kv[0], kv[1])
			}
		}
		if m.Family != 0 {
			fmt.Fprintf(b, ", family: ipv%d", m.Family)
		}
		switch {
		case len(m.Protos) > 0:
			var ps []string
			for _, p := range m.Protos {
				ps = append(ps, strconv.Itoa(int(p)))
			}
			b.WriteString(", proto: " + list(ps))
		case len(m.ICMPTypes) == 0:
			b.WriteString(", proto: all")
		}
		addrs := func(key string, ps []netip.Prefix, sf []firewall.Suffix) {
			var xs []string
			for _, p := range ps {
				xs = append(xs, p.String())
			}
			if len(xs) > 0 {
				fmt.Fprintf(b, ", %s: %s", key, list(xs))
			}
			xs = nil
			for _, s := range sf {
				xs = append(xs, netip.Addr(s).String())
			}
			if len(xs) > 0 {
				fmt.Fprintf(b, ", %s_suffix: %s", key[:len(key)-3], list(xs))
			}
		}
		addrs("src_ip", m.SrcAddrs, m.SrcSuffix)
		addrs("dest_ip", m.DestAddrs, m.DestSuffix)
		ports := func(key string, prs []firewall.PortRange) {
			var xs []string
			for _, p := range prs {
				xs = append(xs, portRange(p.First, p.Last))
			}
			if len(xs) > 0 {
				fmt.Fprintf(b, ", %s: %s", key, list(xs))
			}
		}
		ports("src_port", m.SrcPorts)
		ports("dest_port", m.DestPorts)
		if len(m.ICMPTypes) > 0 {
			var xs []string
			for _, t := range m.ICMPTypes {
				x := map[bool]string{false: "icmp:", true: "icmpv6:"}[t.V6] + strconv.Itoa(int(t.Type))
				if !t.AnyCode {
					x += "/" + strconv.Itoa(int(t.Code))
				}
				xs = append(xs, x)
			}
			b.WriteString(", icmp_type: " + list(xs))
		}
		if m.Limit > 0 {
			for _, u := range []struct {
				name string
				secs float64
			}{{"second", 1}, {"minute", 60}, {"hour", 3600}, {"day", 86400}} {
				if n := math.Round(m.Limit * u.secs); math.Abs(n-m.Limit*u.secs) < 1e-6 {
					fmt.Fprintf(b, ", limit: \"%d/%s\"", int(n), u.name)
					break
				}
			}
		}
		if m.Burst > 0 {
			fmt.Fprintf(b, ", limit_burst: %d", m.Burst)
		}
		if m.Log {
			b.WriteString(", log: on")
		}
		b.WriteString("}\n")
	}
	b.WriteString("  redirects:\n")
	for _, r := range fw.Redirects {
		proto := r.Proto
		if proto == "" {
			proto = "tcpudp"
		}
		fmt.Fprintf(b, "    - {src: %q, proto: %q, src_dport: %q, dest_ip: %q", r.Src, proto, portRange(r.FirstPort, r.LastPort), r.To.Addr().String())
		if r.Name != "" {
			fmt.Fprintf(b, ", name: %q", r.Name)
		}
		if r.To.Port() != 0 {
			fmt.Fprintf(b, ", dest_port: %d", r.To.Port())
		}
		b.WriteString("}\n")
	}
}

// formatNAT writes the nat: and firewall: sections.
func formatNAT(b *strings.Builder, c *Config) {
	n := &c.NAT
	t := n.Conntrack.Timeouts
	b.WriteString("nat:\n  masquerade: [")
	for i, m := range n.Masquerade {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%q", m)
	}
	b.WriteString("]\n  snat:\n")
	for _, s := range n.SNAT {
		fmt.Fprintf(b, "    - on: %q\n      to: [", s.On)
		for i, a := range s.To {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "%q", a.String())
		}
		b.WriteString("]\n")
	}
	b.WriteString("  forwards:\n")
	for _, f := range n.Forwards {
		to := f.To.String()
		if f.To.Port() == 0 {
			to = f.To.Addr().String()
		}
		fmt.Fprintf(b, "    - {proto: %q, port: %q, to: %q", f.Proto, f.PortString(), to)
		if f.On != "" {
			fmt.Fprintf(b, ", on: %q", f.On)
		}
		b.WriteString("}\n")
	}
	if n.Hairpin != "" {
		fmt.Fprintf(b, "  hairpin: %q\n", n.Hairpin)
	}
	if n.Filtering != "" {
		fmt.Fprintf(b, "  filtering: %q\n", n.Filtering)
	}
	b.WriteString("  conntrack:\n")
	if n.Conntrack.Max != 0 {
		fmt.Fprintf(b, "    max: %d\n", n.Conntrack.Max)
	}
	b.WriteString("    timeouts:\n")
	for _, x := range []struct {
		k string
		v time.Duration
	}{{"tcp_established", t.TCPEstablished}, {"tcp_transitory", t.TCPTransitory}, {"udp_unreplied", t.UDPUnreplied},
		{"udp_stream", t.UDPStream}, {"icmp", t.ICMP}, {"other", t.Other}} {
		if x.v != 0 {
			fmt.Fprintf(b, "      %s: %q\n", x.k, x.v.String())
		}
	}
	b.WriteString("firewall:\n")
	if c.Firewall.WANInput != "" {
		fmt.Fprintf(b, "  wan_input: %q\n", c.Firewall.WANInput)
	}
	formatZones(b, &c.Firewall)
	b.WriteString("  allow6:\n")
	for _, a := range c.Firewall.Allow6 {
		fmt.Fprintf(b, "    - {to: %q", a.To.String())
		if a.hasPorts() {
			fmt.Fprintf(b, ", port: %q", portRange(a.FirstPort, a.LastPort))
		}
		if a.Proto != "" {
			fmt.Fprintf(b, ", proto: %q", a.Proto)
		}
		b.WriteString("}\n")
	}
}

// FuzzParse checks that Parse never panics, that every error line is
// "file:line:col: message", that accepted configs pass Validate, and that
// an accepted config written back as YAML parses to the same Config.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(""))
	f.Add([]byte("ports: [\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("interfaces:\n  - &i {name: lan, port: eth0, role: lan}\n  - *i\nports: [{name: eth0}]\n"))
	f.Add([]byte(minimal + "routes:\n  - {to: default, via: 192.168.1.254}\nstatus:\n  listen: [lan:80, \"[::1]:80\"]\n"))
	seeds, _ := filepath.Glob("testdata/*.yaml")
	bad, _ := filepath.Glob("testdata/invalid/*.yaml")
	for _, name := range append(append(seeds, bad...), "../../config.yaml") {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse() = %+v, %v; want a nil Config with an error", c, err)
			}
			checkErrorLines(t, "fuzz.yaml", err)
			if _, err2 := Parse("fuzz.yaml", data); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("Parse() is not deterministic: %v, then %v", err, err2)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse() accepted a config that Validate() rejects: %v", err)
		}
		for _, ifc := range c.Interfaces {
			if c.Port(ifc.Port) == nil {
				t.Fatalf("interface %q on unknown port %q accepted", ifc.Name, ifc.Port)
			}
		}
		text := format(c)
		c2, err := Parse("fuzz.yaml", text)
		if err != nil {
			t.Fatalf("Parse(format(c)) = %v\n%s", err, text)
		}
		if a, b := clearPos(c), clearPos(c2); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip:\n%+v\n%+v\n%s", a, b, text)
		}
	})
}
