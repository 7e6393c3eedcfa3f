package config

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/firewall"
)

// zoneBase has a lan, a guest and a wan interface for the zone snippets.
const zoneBase = `ports:
  - name: eth0
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24, fd00:1::1/64]}
  - {name: guest, port: eth0, vlan: 3, role: lan, addresses: [192.168.2.1/24]}
  - {name: wan, port: eth0, vlan: 2, role: wan, addresses: [203.0.113.2/24, 2001:db8::2/64]}
status:
  listen: [lan:80]
`

const zoneSet = `firewall:
  zones:
    - {name: lan, interfaces: [lan], input: accept, forward: accept}
    - {name: guest, interfaces: guest, input: reject, forward: drop}
    - {name: wan, interfaces: [wan], input: drop, forward: drop, masquerade: on, mss_clamp: off}
`

func TestParseZones(t *testing.T) {
	in := zoneBase + zoneSet + `  rules:
    - {name: guest-dns, src: guest, dest_port: 53, target: accept}
    - {name: guest-dhcp, src: guest, proto: udp, dest_port: "67-68", target: accept}
    - {name: guest-wan, src: guest, dest: wan, proto: all, target: accept}
    - name: block-tv
      src: lan
      dest: wan
      src_ip: 192.168.1.50
      proto: all
      target: reject
      log: on
    - {name: ping, src: wan, icmp_type: echo-request, family: ipv6, limit: 10/second, limit_burst: 20, target: accept}
    - {name: nas, src: wan, dest: lan, proto: tcp, dest_suffix: "::1234", dest_port: [443, "8000-8010"], target: accept}
    - {name: esp, src: "*", dest: lan, proto: [esp, 51], dest_ip: "2001:db8:1::/64", target: accept}
    - {name: ptb, src: wan, dest: lan, icmp_type: ["icmpv6:2", "icmp:3/4"], target: accept}
    - {name: seen, src: guest, dest: lan, proto: tcp, dest_port: 22, target: drop, log: capture}
  redirects:
    - {name: web, src: wan, proto: tcp, src_dport: 8080, dest_ip: 192.168.1.10, dest_port: 80}
    - {name: game, src: wan, src_dport: "3074-3075", dest_ip: 192.168.1.11}
    - {name: office, src: wan, proto: tcp, src_ip: [198.51.100.7, 192.0.2.0/24], src_dip: 203.0.113.2, src_dport: 3389, dest_ip: 192.168.1.12}
`
	c, err := Parse("zones.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	fw := &c.Firewall
	var zones []string
	for _, z := range fw.Zones {
		in, fwd, out := z.Policies()
		zones = append(zones, strings.Join([]string{z.Name, strings.Join(z.Interfaces, ","), in.String(), fwd.String(), out.String()}, " "))
	}
	if want := []string{"lan lan accept accept accept", "guest guest reject drop accept", "wan wan drop drop accept"}; !reflect.DeepEqual(zones, want) {
		t.Errorf("zones %q, want %q", zones, want)
	}
	if !fw.Zones[2].Masquerade || !fw.Zones[2].NoMSSClamp || fw.Zones[0].Masquerade {
		t.Errorf("wan masquerade/mss_clamp not decoded: %+v", fw.Zones[2])
	}
	pfx := netip.MustParsePrefix
	want := []firewall.Rule{
		{Name: "guest-dns", Src: "guest", Protos: []uint8{6, 17}, DestPorts: []firewall.PortRange{{First: 53, Last: 53}}},
		{Name: "guest-dhcp", Src: "guest", Protos: []uint8{17}, DestPorts: []firewall.PortRange{{First: 67, Last: 68}}},
		{Name: "guest-wan", Src: "guest", Dest: "wan"},
		{Name: "block-tv", Src: "lan", Dest: "wan", SrcAddrs: []netip.Prefix{pfx("192.168.1.50/32")}, Target: firewall.Reject, Log: true},
		{Name: "ping", Src: "wan", Family: 6, ICMPTypes: []firewall.ICMPType{{Type: 8, AnyCode: true}, {Type: 128, AnyCode: true, V6: true}}, Limit: 10, Burst: 20},
		{Name: "nas", Src: "wan", Dest: "lan", Protos: []uint8{6}, DestSuffix: []firewall.Suffix{firewall.Suffix(netip.MustParseAddr("::1234"))},
			DestPorts: []firewall.PortRange{{First: 443, Last: 443}, {First: 8000, Last: 8010}}},
		{Name: "esp", Src: "*", Dest: "lan", Protos: []uint8{50, 51}, DestAddrs: []netip.Prefix{pfx("2001:db8:1::/64")}},
		{Name: "ptb", Src: "wan", Dest: "lan", ICMPTypes: []firewall.ICMPType{{Type: 2, AnyCode: true, V6: true}, {Type: 3, Code: 4}}},
		{Name: "seen", Src: "guest", Dest: "lan", Protos: []uint8{6}, DestPorts: []firewall.PortRange{{First: 22, Last: 22}}, Target: firewall.Drop, Log: true, LogCapture: true},
	}
	for i, r := range fw.Rules {
		if i >= len(want) || !reflect.DeepEqual(r.Match, want[i]) {
			t.Errorf("rule %d:\n%+v\nwant\n%+v", i, r.Match, want[min(i, len(want)-1)])
		}
	}
	if len(fw.Rules) != len(want) {
		t.Errorf("%d rules, want %d", len(fw.Rules), len(want))
	}
	if o := fw.Redirects[len(fw.Redirects)-1]; !reflect.DeepEqual(o.SrcIPs, []netip.Prefix{pfx("198.51.100.7/32"), pfx("192.0.2.0/24")}) || o.SrcDIP != netip.MustParseAddr("203.0.113.2") {
		t.Errorf("redirect office: src_ip %v, src_dip %v", o.SrcIPs, o.SrcDIP)
	}
	if len(fw.Redirects) != 3 || fw.Redirects[0].To != netip.MustParseAddrPort("192.168.1.10:80") || fw.Redirects[1].Proto != "" ||
		fw.Redirects[1].FirstPort != 3074 || fw.Redirects[1].LastPort != 3075 {
		t.Errorf("redirects %+v", fw.Redirects)
	}
	// The whole thing compiles.
	var p firewall.Policy
	for _, z := range fw.Zones {
		p.Zones = append(p.Zones, firewall.Zone{Name: z.Name})
	}
	for _, r := range fw.Rules {
		p.Rules = append(p.Rules, r.Match)
	}
	if _, err := firewall.Compile(p); err != nil {
		t.Error(err)
	}
}

func TestZoneErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"unknown interface", `firewall:
  zones:
    - {name: lan, interfaces: [lan, guest]}
    - {name: wan, interfaces: [wna]}
`, `zones.yaml:12:32: firewall: zone "wan": unknown interface "wna"; did you mean "wan"?`},
		{"overlapping zones", `firewall:
  zones:
    - {name: lan, interfaces: [lan, guest]}
    - {name: guest, interfaces: [guest]}
    - {name: wan, interfaces: [wan]}
`, `zones.yaml:12:34: firewall: zone "guest": interface "guest" is in zone "lan" too (line 11) (zones must not overlap)`},
		{"output enforced only toward a wan", `firewall:
  zones:
    - {name: lan, interfaces: [lan], output: accept}
    - {name: guest, interfaces: [guest], output: drop}
    - {name: wan, interfaces: [wan], output: reject}
`, `zones.yaml:12:50: firewall: zone "guest": output: drop is enforced only in a zone with a wan interface`},
		{"interface in no zone", `firewall:
  zones:
    - {name: lan, interfaces: [lan]}
    - {name: wan, interfaces: [wan]}
`, `zones.yaml:10:3: firewall: zones: interface "guest" is in no zone`},
		{"zone twice", zoneSet + `    - {name: lan}
`, `zones.yaml:14:14: firewall: zone "lan": defined twice`},
		{"bad policy", `firewall:
  zones:
    - {name: lan, interfaces: [lan, guest], input: allow}
    - {name: wan, interfaces: [wan]}
`, `zones.yaml:11:52: firewall: zone: input: unknown policy "allow": want accept, drop or reject`},
		{"redirect src_ip ipv6", zoneSet + `  redirects:
    - {src: wan, src_ip: "2001:db8::1", src_dport: 80, dest_ip: 192.168.1.10}
`, `zones.yaml:15:26: firewall: redirect: src_ip: bad source "2001:db8::1": want an IPv4 address or prefix`},
		{"redirect src_ip host bits", zoneSet + `  redirects:
    - {src: wan, src_ip: [198.51.100.7, 192.0.2.1/24], src_dport: 80, dest_ip: 192.168.1.10}
`, `zones.yaml:15:41: firewall: redirect: src_ip: "192.0.2.1/24" has host bits set; did you mean 192.0.2.0/24?`},
		{"redirect src_dip not ipv4", zoneSet + `  redirects:
    - {src: wan, src_dip: "2001:db8::2", src_dport: 80, dest_ip: 192.168.1.10}
`, `zones.yaml:15:27: firewall: redirect: src_dip: "2001:db8::2" is not an IPv4 address`},
		{"redirect src_dip not the zone's", zoneSet + `  redirects:
    - {src: wan, src_dip: 192.168.1.1, src_dport: 80, dest_ip: 192.168.1.10}
`, `zones.yaml:15:27: firewall: redirect: src_dip: 192.168.1.1 is no address of zone "wan"'s interfaces`},
		{"bad log", zoneSet + `  rules:
    - {src: guest, dest: wan, target: accept, log: syslog}
`, `zones.yaml:15:52: firewall: rule: log: want on, off or capture, got "syslog"`},
		{"unknown zone in rule", zoneSet + `  rules:
    - {src: gust, dest: wan, target: accept}
`, `zones.yaml:15:13: firewall: rule: src: unknown zone "gust"; did you mean "guest"?`},
		{"rule never matches: ipv4 family, ipv6 address", zoneSet + `  rules:
    - {name: x, src: wan, dest: lan, family: ipv4, dest_ip: "2001:db8:1::/64", target: accept}
`, `zones.yaml:15:7: firewall: rule "x": can never match: its family, addresses and ICMP types have no IP version in common`},
		{"rule never matches: ports on gre", zoneSet + `  rules:
    - {name: x, src: wan, dest: lan, proto: gre, dest_port: 22, target: accept}
`, `zones.yaml:15:7: firewall: rule "x": can never match: ports, but no protocol with ports`},
		{"rule never matches: suffix on ipv4", zoneSet + `  rules:
    - {name: x, src: wan, dest: lan, family: ipv4, dest_suffix: "::1", target: accept}
`, `can never match`},
		{"rule without zones", zoneSet + `  rules:
    - {name: x, proto: tcp, target: drop}
`, `can never match: neither src nor dest`},
		{"rule without target", zoneSet + `  rules:
    - {name: x, src: lan}
`, `zones.yaml:15:7: firewall: rule: target: required (accept, drop or reject)`},
		{"unknown rule key", zoneSet + `  rules:
    - {name: x, src: lan, target: drop, dport: 22}
`, `unknown key "dport"`},
		{"bad icmp type", zoneSet + `  rules:
    - {src: wan, icmp_type: echo, target: accept}
`, `zones.yaml:15:29: firewall: rule: icmp_type: unknown ICMP type "echo"`},
		{"bad limit", zoneSet + `  rules:
    - {src: wan, target: accept, limit: 10/fortnight}
`, `unknown unit "fortnight"`},
		{"host bits", zoneSet + `  rules:
    - {src: wan, target: accept, dest_ip: 192.168.1.1/24}
`, `has host bits set; did you mean 192.168.1.0/24?`},
		{"wan_input with zones", zoneSet + `  wan_input: accept
`, `zones.yaml:14:14: firewall: wan_input: not with zones:`},
		{"rules without zones", `firewall:
  rules:
    - {src: lan, target: drop}
`, `firewall: rules: need zones:`},
		{"redirect to unknown zone", zoneSet + `  redirects:
    - {src: dmz, src_dport: 80, dest_ip: 192.168.1.10}
`, `firewall: redirect: src: unknown zone "dmz"`},
		{"redirect to ipv6", zoneSet + `  redirects:
    - {src: wan, src_dport: 80, dest_ip: "fd00:1::10"}
`, `is not an IPv4 address`},
		{"redirect without port", zoneSet + `  redirects:
    - {src: wan, dest_ip: 192.168.1.10}
`, `firewall: redirect: src_dport: required`},
	} {
		_, err := Parse("zones.yaml", []byte(zoneBase+tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err\n%v\nwant it to contain\n%s", tc.name, err, tc.want)
		}
	}
}
