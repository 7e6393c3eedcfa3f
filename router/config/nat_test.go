package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// natBase has a LAN and a WAN interface for the nat: snippets below.
const natBase = `ports:
  - name: eth0
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24, fd00:1::1/64]}
  - {name: wan, port: eth0, vlan: 2, role: wan, addresses: [203.0.113.2/24, 2001:db8::2/64]}
  - {name: wan6, port: eth0, vlan: 3, role: wan, addresses: [2001:db8:6::2/64]}
status:
  listen: [lan:80]
`

func TestParseNAT(t *testing.T) {
	in := natBase + `nat:
  masquerade: [wan]
  snat:
    - {on: lan, to: [192.168.1.1]}
  forwards:
    - {proto: tcp, port: 8080, to: "192.168.1.10:80", on: wan}
    - {proto: udp, port: "6000-6010", to: 192.168.1.11}
    - {proto: tcp, port: "443", to: "192.168.1.12:8443"}
  hairpin: off
  filtering: endpoint-independent
  conntrack:
    max: 4096
    per_host: 1024
    ports_per_host: 2048
    router_reserve: 256
    timeouts: {tcp_established: 5h, tcp_transitory: 4m, udp_unreplied: 120, udp_stream: 5m, icmp: 60s, other: 10m}
firewall:
  wan_input: accept
  allow6:
    - {proto: tcp, to: "2001:db8:1::10", port: 22}
    - {to: "2001:db8:2::/64"}
    - {proto: 47, to: "2001:db8:1::20"}
    - {proto: any, to: "2001:db8:3::/64"}
    - {proto: "17", to: "2001:db8:1::30", port: 53}
`
	c, err := Parse("nat.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	strip(c)
	want := NAT{
		Masquerade: []string{"wan"},
		SNAT:       []SNAT{{On: "lan", To: []netip.Addr{ip("192.168.1.1")}, Pos: Pos{12, 7}}},
		Forwards: []Forward{
			{Proto: "tcp", FirstPort: 8080, LastPort: 8080, To: netip.MustParseAddrPort("192.168.1.10:80"), On: "wan", Pos: Pos{14, 7}},
			{Proto: "udp", FirstPort: 6000, LastPort: 6010, To: netip.MustParseAddrPort("192.168.1.11:0"), Pos: Pos{15, 7}},
			{Proto: "tcp", FirstPort: 443, LastPort: 443, To: netip.MustParseAddrPort("192.168.1.12:8443"), Pos: Pos{16, 7}},
		},
		Hairpin:   "off",
		Filtering: FilteringEndpointIndependent,
		Conntrack: Conntrack{Max: 4096, PerHost: 1024, PortsPerHost: 2048, RouterReserve: 256, Timeouts: Timeouts{
			TCPEstablished: 5 * time.Hour, TCPTransitory: 4 * time.Minute, UDPUnreplied: 2 * time.Minute,
			UDPStream: 5 * time.Minute, ICMP: time.Minute, Other: 10 * time.Minute,
		}},
		Pos: Pos{9, 1},
	}
	if !reflect.DeepEqual(c.NAT, want) {
		t.Errorf("NAT =\n%+v\nwant\n%+v", c.NAT, want)
	}
	wantFW := Firewall{WANInput: "accept", Pos: Pos{25, 1}, Allow6: []Allow6{
		{Proto: "tcp", To: pfx("2001:db8:1::10/128"), FirstPort: 22, LastPort: 22, Pos: Pos{28, 7}},
		{To: pfx("2001:db8:2::/64"), FirstPort: 1, LastPort: 65535, Pos: Pos{29, 7}},
		{Proto: "47", To: pfx("2001:db8:1::20/128"), FirstPort: 1, LastPort: 65535, Pos: Pos{30, 7}},
		{Proto: "any", To: pfx("2001:db8:3::/64"), FirstPort: 1, LastPort: 65535, Pos: Pos{31, 7}},
		{Proto: "udp", To: pfx("2001:db8:1::30/128"), FirstPort: 53, LastPort: 53, Pos: Pos{32, 7}},
	}}
	for i, want := range []struct {
		proto uint8
		any   bool
	}{{6, false}, {0, false}, {47, false}, {0, true}, {17, false}} {
		if p, any := c.Firewall.Allow6[i].ProtoNumber(); p != want.proto || any != want.any {
			t.Errorf("allow6[%d].ProtoNumber() = %d, %v; want %d, %v", i, p, any, want.proto, want.any)
		}
	}
	if !reflect.DeepEqual(c.Firewall, wantFW) {
		t.Errorf("Firewall =\n%+v\nwant\n%+v", c.Firewall, wantFW)
	}
	if c.NAT.ConnsPerHost() != 1024 || c.NAT.PortsPerHost() != 2048 || c.NAT.RouterReserve() != 256 {
		t.Errorf("accessors: per_host %d ports_per_host %d router_reserve %d, want 1024 2048 256", c.NAT.ConnsPerHost(), c.NAT.PortsPerHost(), c.NAT.RouterReserve())
	}
	if c.NAT.HairpinOn() || c.NAT.MaxConns() != 4096 || c.NAT.FilteringMode() != FilteringEndpointIndependent || c.Firewall.WANInputDrop() {
		t.Errorf("accessors: hairpin %v max %d filtering %s drop %v", c.NAT.HairpinOn(), c.NAT.MaxConns(), c.NAT.FilteringMode(), c.Firewall.WANInputDrop())
	}
}

func TestNATDefaults(t *testing.T) {
	c, err := Parse("nat.yaml", []byte(natBase))
	if err != nil {
		t.Fatal(err)
	}
	if !c.NAT.HairpinOn() || c.NAT.MaxConns() != DefaultConntrackMax || c.NAT.FilteringMode() != FilteringAddressAndPortDependent || !c.Firewall.WANInputDrop() {
		t.Errorf("defaults: hairpin %v max %d filtering %s wan_input drop %v; want on, %d, %s, drop",
			c.NAT.HairpinOn(), c.NAT.MaxConns(), c.NAT.FilteringMode(), c.Firewall.WANInputDrop(), DefaultConntrackMax, FilteringAddressAndPortDependent)
	}
	if c.NAT.ConnsPerHost() != 16384 || c.NAT.PortsPerHost() != 16384 || c.NAT.RouterReserve() != 4096 {
		t.Errorf("defaults: per_host %d ports_per_host %d router_reserve %d, want 16384 16384 4096", c.NAT.ConnsPerHost(), c.NAT.PortsPerHost(), c.NAT.RouterReserve())
	}
	c, err = Parse("nat.yaml", []byte(natBase+"nat: {conntrack: {max: 4096}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.NAT.ConnsPerHost() != 1024 || c.NAT.RouterReserve() != 256 {
		t.Errorf("max 4096: per_host %d router_reserve %d, want 1024 (max/4) and 256 (max/16)", c.NAT.ConnsPerHost(), c.NAT.RouterReserve())
	}
	for _, in := range []string{"nat:\n", "nat: {}\nfirewall: {}\n", "nat: {hairpin: on}\n", "nat: {hairpin: true}\n"} {
		c, err := Parse("nat.yaml", []byte(natBase+in))
		if err != nil {
			t.Errorf("Parse(%q) = %v", in, err)
			continue
		}
		if !c.NAT.HairpinOn() {
			t.Errorf("Parse(%q): hairpin off, want on", in)
		}
	}
}

func TestParseNATErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want []string
	}{
		{"masquerade unknown", "nat: {masquerade: [wna]}\n", []string{`nat.yaml:9:20: nat: masquerade: unknown interface "wna"; did you mean "wan"?`}},
		{"masquerade twice", "nat: {masquerade: [wan, wan]}\n", []string{`nat.yaml:9:25: nat: masquerade: interface "wan" is listed twice (first at line 9)`}},
		{"masquerade no ipv4", "nat: {masquerade: [wan6]}\n", []string{`nat.yaml:9:20: nat: masquerade: interface "wan6" has no IPv4 address to masquerade to`}},
		{"masquerade not a name", "nat: {masquerade: [{a: b}]}\n", []string{`nat.yaml:9:20: nat: masquerade: want an interface name, got a mapping`}},
		{"unknown nat key", "nat: {masqerade: [wan]}\n", []string{`nat.yaml:9:7: nat: unknown key "masqerade"; did you mean "masquerade"?`}},
		{"snat and masquerade", "nat:\n  masquerade: [wan]\n  snat: [{on: wan, to: 203.0.113.2}]\n", []string{`nat.yaml:11:15: nat: snat: interface "wan" is also in masquerade; choose one`}},
		{"snat no to", "nat:\n  snat: [{on: wan}]\n", []string{`nat.yaml:10:10: nat: snat: to needs at least one IPv4 address`}},
		{"snat v6", "nat:\n  snat: [{on: wan, to: [\"2001:db8::7\"]}]\n", []string{`nat.yaml:10:25: nat: snat: to: 2001:db8::7 is not IPv4`}},
		{"snat other iface address", "nat:\n  snat: [{on: wan, to: [192.168.1.1]}]\n", []string{`nat.yaml:10:25: nat: snat: 192.168.1.1 is interface "lan"'s address, not "wan"'s`}},
		{"snat twice", "nat:\n  snat: [{on: wan, to: [198.51.100.7]}, {on: wan, to: [198.51.100.8]}]\n",
			[]string{`nat.yaml:10:46: nat: snat: interface "wan" has two snat entries (first at line 10); list every address in one`}},
		{"snat no on", "nat:\n  snat: [{to: [198.51.100.7]}]\n", []string{`nat.yaml:10:10: nat: snat: on is required`}},
		{"forward unknown iface", "nat:\n  forwards: [{proto: tcp, port: 80, to: 192.168.1.10, on: wam}]\n",
			[]string{`nat.yaml:10:59: nat: forward tcp 80: on: unknown interface "wam"; did you mean "wan"?`}},
		{"forward bad proto", "nat:\n  forwards: [{proto: sctp, port: 80, to: 192.168.1.10}]\n",
			[]string{`nat.yaml:10:22: nat: forward: unknown proto "sctp": want tcp or udp`}},
		{"forward no proto", "nat:\n  forwards: [{port: 80, to: 192.168.1.10}]\n",
			[]string{`nat.yaml:10:14: nat: forward: proto is required (tcp or udp)`}},
		{"forward bad port", "nat:\n  forwards: [{proto: tcp, port: 70000, to: 192.168.1.10}]\n",
			[]string{`nat.yaml:10:33: nat: forward: port: bad port "70000": want 1..65535 or a range like "8000-8010"`}},
		{"forward port 0", "nat:\n  forwards: [{proto: tcp, port: 0, to: 192.168.1.10}]\n",
			[]string{`nat.yaml:10:33: nat: forward: port: bad port "0"`}},
		{"forward reversed range", "nat:\n  forwards: [{proto: tcp, port: \"90-80\", to: 192.168.1.10}]\n",
			[]string{`nat.yaml:10:33: nat: forward: port: bad port range "90-80": the first port is above the last`}},
		{"forward no port", "nat:\n  forwards: [{proto: tcp, to: 192.168.1.10}]\n",
			[]string{`nat.yaml:10:14: nat: forward: port is required`}},
		{"forward no to", "nat:\n  forwards: [{proto: tcp, port: 80}]\n",
			[]string{`nat.yaml:10:14: nat: forward tcp 80: to is required`}},
		{"forward bad to", "nat:\n  forwards: [{proto: tcp, port: 80, to: \"host:80\"}]\n",
			[]string{`nat.yaml:10:41: nat: forward: to: bad target "host:80"`}},
		{"forward to v6", "nat:\n  forwards: [{proto: tcp, port: 80, to: \"[fd00:1::10]:80\"}]\n",
			[]string{`nat.yaml:10:41: nat: forward: to: "[fd00:1::10]:80" is not IPv4: IPv6 is routed, not translated; use firewall: allow6`}},
		{"forward to own address", "nat:\n  forwards: [{proto: tcp, port: 80, to: \"192.168.1.1:80\"}]\n",
			[]string{`nat.yaml:10:41: nat: forward tcp 80: to: 192.168.1.1 is the router's own address (interface "lan")`}},
		{"forward range overflow", "nat:\n  forwards: [{proto: tcp, port: \"1000-1010\", to: \"192.168.1.10:65530\"}]\n",
			[]string{`nat.yaml:10:50: nat: forward tcp 1000-1010: to: port range 65530-65540 does not fit below 65536`}},
		{"forward overlap", "nat:\n  forwards:\n    - {proto: tcp, port: \"8000-8010\", to: 192.168.1.10}\n    - {proto: tcp, port: 8005, to: 192.168.1.11, on: wan}\n",
			[]string{`nat.yaml:12:26: nat: forward tcp 8005: overlaps forward tcp 8000-8010 (line 11) on interface "wan"`}},
		{"forward same port other proto", "nat:\n  forwards:\n    - {proto: tcp, port: 53, to: 192.168.1.10}\n    - {proto: udp, port: 53, to: 192.168.1.10}\n", nil},
		{"forward same port other iface", "nat:\n  forwards:\n    - {proto: tcp, port: 81, to: 192.168.1.10, on: wan}\n    - {proto: tcp, port: 81, to: 192.168.1.11, on: lan}\n", nil},
		{"forward on status port", "nat:\n  forwards: [{proto: tcp, port: 80, to: 192.168.1.10, on: lan}]\n",
			[]string{`nat.yaml:10:33: nat: forward tcp 80: port 80 on interface "lan" is the status page's (status: listen "lan:80" (line 8))`}},
		{"forward no ipv4 on", "nat:\n  forwards: [{proto: tcp, port: 80, to: 192.168.1.10, on: wan6}]\n",
			[]string{`nat.yaml:10:59: nat: forward tcp 80: on: interface "wan6" has no IPv4 address to listen on`}},
		{"hairpin bad", "nat: {hairpin: maybe}\n", []string{`nat.yaml:9:16: nat: hairpin: want on or off, got "maybe"`}},
		{"filtering bad", "nat: {filtering: full-cone}\n", []string{`nat.yaml:9:18: nat: unknown filtering "full-cone"; want one of: endpoint-independent, address-dependent, address-and-port-dependent`}},
		{"filtering typo", "nat: {filtering: address-dependant}\n", []string{`nat.yaml:9:18: nat: unknown filtering "address-dependant"; did you mean "address-dependent"?`}},
		{"conntrack max low", "nat: {conntrack: {max: 10}}\n", []string{`nat.yaml:9:24: nat: conntrack: max 10 out of range: want 64..16777216, or leave it out for 65536`}},
		{"conntrack per_host over max", "nat: {conntrack: {max: 4096, per_host: 5000}}\n", []string{`nat.yaml:9:40: nat: conntrack: per_host 5000 out of range: want 1..4096 (max), or leave it out for 1024 (max/4)`}},
		{"conntrack per_host negative", "nat: {conntrack: {per_host: -1}}\n", []string{`nat.yaml:9:29: nat: conntrack: per_host -1 out of range: want 1..65536 (max), or leave it out for 16384 (max/4)`}},
		{"conntrack ports_per_host zero ok", "nat: {conntrack: {ports_per_host: 0}}\n", nil},
		{"conntrack ports_per_host huge", "nat: {conntrack: {ports_per_host: 99999999}}\n", []string{`nat.yaml:9:35: nat: conntrack: ports_per_host 99999999 out of range: want 1..16777216, or leave it out for 16384`}},
		{"conntrack router_reserve over half", "nat: {conntrack: {router_reserve: 40000}}\n", []string{`nat.yaml:9:35: nat: conntrack: router_reserve 40000 out of range: want 1..32768 (max/2), or leave it out for 4096 (max/16)`}},
		{"conntrack per_host string", "nat: {conntrack: {per_host: many}}\n", []string{`nat.yaml:9:29: nat: conntrack: per_host: want an integer, got "many"`}},
		{"conntrack per_host typo", "nat: {conntrack: {per_hosts: 10}}\n", []string{`nat.yaml:9:19: nat: conntrack: unknown key "per_hosts"; did you mean "per_host"?`}},
		{"conntrack max string", "nat: {conntrack: {max: lots}}\n", []string{`nat.yaml:9:24: nat: conntrack: max: want an integer, got "lots"`}},
		{"tcp established below RFC", "nat:\n  conntrack:\n    timeouts: {tcp_established: 1h}\n",
			[]string{`nat.yaml:11:33: nat: conntrack: timeouts: tcp_established 1h is below 2h4m, the minimum (RFC 5382 REQ-5)`}},
		{"udp below RFC", "nat:\n  conntrack:\n    timeouts: {udp_unreplied: 30s, udp_stream: 60}\n",
			[]string{`nat.yaml:11:31: nat: conntrack: timeouts: udp_unreplied 30s is below 2m, the minimum (RFC 4787 REQ-5)`,
				`nat.yaml:11:48: nat: conntrack: timeouts: udp_stream 1m is below 2m, the minimum (RFC 4787 REQ-5)`}},
		{"icmp below RFC", "nat: {conntrack: {timeouts: {icmp: 30s}}}\n", []string{`nat.yaml:9:36: nat: conntrack: timeouts: icmp 30s is below 1m, the minimum (RFC 5508 REQ-2)`}},
		{"transitory below RFC", "nat: {conntrack: {timeouts: {tcp_transitory: 2m}}}\n", []string{`nat.yaml:9:46: nat: conntrack: timeouts: tcp_transitory 2m is below 4m, the minimum (RFC 5382 REQ-5)`}},
		{"timeout too long", "nat: {conntrack: {timeouts: {tcp_established: 1000h}}}\n", []string{`nat.yaml:9:47: nat: conntrack: timeouts: tcp_established 1000h is above 720h`}},
		{"timeout bad", "nat: {conntrack: {timeouts: {icmp: soon}}}\n", []string{`nat.yaml:9:36: nat: conntrack: timeouts: icmp: want a positive duration like 2h4m, 4m or 60s (or seconds), got "soon"`}},
		{"timeout zero", "nat: {conntrack: {timeouts: {icmp: 0}}}\n", []string{`nat.yaml:9:36: nat: conntrack: timeouts: icmp: want a positive duration`}},
		{"timeout unknown", "nat: {conntrack: {timeouts: {tcp_establised: 3h}}}\n", []string{`nat.yaml:9:30: nat: conntrack: timeouts: unknown key "tcp_establised"; did you mean "tcp_established"?`}},
		{"wan_input bad", "firewall: {wan_input: reject}\n", []string{`nat.yaml:9:23: firewall: unknown wan_input "reject": want drop or accept`}},
		{"listen on wan with drop", strings.Replace(natBase, "[lan:80]", "[lan:80, wan:8443]", 1),
			[]string{`nat.yaml:8:20: status: listen "wan:8443" is on wan interface "wan", where firewall: wan_input: drop (the default) refuses new connections`}},
		{"mtu below conntrack minimum", strings.Replace(natBase, "role: lan,", "role: lan, mtu: 500,", 1),
			[]string{`nat.yaml:4:54: interface "lan": mtu 500 is below 576, the smallest the connection tracker supports (RFC 791)`,
				`nat.yaml:4:54: interface "lan": mtu 500 is below 1280, the IPv6 minimum`}},
		{"port mtu below conntrack minimum", strings.Replace(natBase, "- name: eth0", "- {name: eth0, mtu: 400}", 1),
			[]string{`nat.yaml:2:23: port "eth0": mtu 400 is below 576, the smallest the connection tracker supports (RFC 791), and interface "lan" uses it`,
				`nat.yaml:4:60: interface "lan": has IPv6 addresses but port "eth0"'s mtu 400`,
				`nat.yaml:5:60: interface "wan": has IPv6 addresses`, `nat.yaml:6:61: interface "wan6": has IPv6 addresses`}},
		{"allow6 v4", "firewall: {allow6: [{to: 192.168.1.0/24}]}\n", []string{`nat.yaml:9:26: firewall: allow6: to: 192.168.1.0/24 is not IPv6 (IPv4 uses nat: forwards)`}},
		{"allow6 host bits", "firewall: {allow6: [{to: \"2001:db8::1/64\"}]}\n", []string{`nat.yaml:9:26: firewall: allow6: to: "2001:db8::1/64" has host bits set; did you mean 2001:db8::/64?`}},
		{"allow6 no to", "firewall: {allow6: [{proto: tcp, port: 22}]}\n", []string{`nat.yaml:9:21: firewall: allow6: to or suffix is required`}},
		{"allow6 suffix with prefix bits", "firewall: {allow6: [{suffix: \"2001:db8::1234\"}]}\n", []string{`nat.yaml:9:30: firewall: allow6: suffix: 2001:db8::1234 has prefix bits set: an interface ID is the last 64 bits only, like ::1234`}},
		{"allow6 suffix not an address", "firewall: {allow6: [{suffix: host1}]}\n", []string{`nat.yaml:9:30: firewall: allow6: suffix: bad interface ID "host1"`}},
		{"allow6 suffix unspecified", "firewall: {allow6: [{suffix: \"::\"}]}\n", []string{`nat.yaml:9:30: firewall: allow6: suffix: :: is no host`}},
		{"allow6 to and suffix", "firewall: {allow6: [{to: \"2001:db8::/64\", suffix: \"::1\"}]}\n", []string{`nat.yaml:9:51: firewall: allow6: to and suffix both written`}},
		{"allow6 interface without suffix", "firewall: {allow6: [{to: \"2001:db8::/64\", interface: lan}]}\n", []string{`nat.yaml:9:54: firewall: allow6: interface goes with suffix`}},
		{"allow6 interface wan", "firewall: {allow6: [{suffix: \"::1\", interface: wan}]}\n", []string{`nat.yaml:9:48: firewall: allow6: interface "wan" is not a lan interface`}},
		{"allow6 interface unknown", "firewall: {allow6: [{suffix: \"::1\", interface: dmz}]}\n", []string{`nat.yaml:9:48: firewall: allow6: interface "dmz" is not defined`}},
		{"allow6 bad proto", "firewall: {allow6: [{proto: icmp, to: \"2001:db8::/64\"}]}\n", []string{`nat.yaml:9:29: firewall: allow6: unknown proto "icmp": want tcp, udp, any or a protocol number like 47 (GRE), or leave it out for tcp and udp`}},
		{"allow6 proto out of range", "firewall: {allow6: [{proto: 256, to: \"2001:db8::/64\"}]}\n", []string{`nat.yaml:9:29: firewall: allow6: unknown proto "256"`}},
		{"allow6 extension header", "firewall: {allow6: [{proto: 44, to: \"2001:db8::/64\"}]}\n", []string{`nat.yaml:9:29: firewall: allow6: proto 44 is an IPv6 extension header, never a flow's protocol (RFC 8200)`}},
		{"allow6 icmpv6", "firewall: {allow6: [{proto: 58, to: \"2001:db8::/64\"}]}\n", []string{`nat.yaml:9:29: firewall: allow6: proto 58 (ICMPv6) is not for allow6`}},
		{"allow6 port without ports", "firewall: {allow6: [{proto: 47, port: 22, to: \"2001:db8::/64\"}]}\n", []string{`nat.yaml:9:39: firewall: allow6: port: proto 47 has no ports; a port needs proto tcp or udp (or no proto for both)`}},
		{"allow6 any with port", "firewall: {allow6: [{proto: any, port: 22, to: \"2001:db8::/64\"}]}\n", []string{`nat.yaml:9:40: firewall: allow6: port: proto any has no ports`}},
		{"allow6 bad port", "firewall: {allow6: [{port: \"22-\", to: \"2001:db8::/64\"}]}\n", []string{`nat.yaml:9:28: firewall: allow6: port: bad port "22-"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if !strings.HasPrefix(in, "ports:") {
				in = natBase + in
			}
			c, err := Parse("nat.yaml", []byte(in))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse() = %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse() = %+v, nil; want errors %q", c, tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			for _, w := range tt.want {
				found := false
				for _, l := range lines {
					found = found || strings.HasPrefix(l, w)
				}
				if !found {
					t.Errorf("Parse() errors:\n%s\nwant a line starting %q", err, w)
				}
			}
			if len(lines) != len(tt.want) {
				t.Errorf("Parse() gave %d errors, want %d:\n%s", len(lines), len(tt.want), err)
			}
		})
	}
}

// TestValidateNATInCode checks that a Config built in code (the lab) gets
// the same range checks as a parsed one.
func TestValidateNATInCode(t *testing.T) {
	c, err := Parse("nat.yaml", []byte(natBase))
	if err != nil {
		t.Fatal(err)
	}
	c.NAT.Conntrack.Max = 1
	c.NAT.Conntrack.Timeouts.TCPEstablished = time.Hour
	c.NAT.Forwards = []Forward{{Proto: "tcp", FirstPort: 80, LastPort: 80, To: netip.MustParseAddrPort("192.168.1.10:80"), On: "nope"}}
	c.Firewall.WANInput = "reject"
	err = c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want errors")
	}
	for _, w := range []string{"max 1 out of range", "tcp_established 1h is below 2h4m", `unknown interface "nope"`, `unknown wan_input "reject"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %v, want %q in it", err, w)
		}
	}
}

// TestParseAllow6Suffix: a suffix: rule with interface: parses to the
// interface ID and the lan interface, with tcp/22.
func TestParseAllow6Suffix(t *testing.T) {
	c, err := Parse("nat.yaml", []byte(natBase+"firewall: {allow6: [{suffix: \"::211:22ff:fe33:4455\", interface: lan, proto: tcp, port: 22}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Firewall.Allow6[0]
	if a.Suffix != netip.MustParseAddr("::211:22ff:fe33:4455") || a.Interface != "lan" || a.To.IsValid() ||
		a.Proto != ProtoTCP || a.FirstPort != 22 || a.LastPort != 22 {
		t.Errorf("allow6 = %+v", a)
	}
}
