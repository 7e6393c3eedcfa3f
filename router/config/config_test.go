package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// strip clears the unexported source bookkeeping so parsed configs can be
// compared with literals.
func strip(c *Config) *Config {
	if c == nil {
		return nil
	}
	c.src = src{}
	for i := range c.Ports {
		c.Ports[i].src = src{}
	}
	for i := range c.Interfaces {
		c.Interfaces[i].src = src{}
	}
	for i := range c.Routes {
		c.Routes[i].src = src{}
	}
	c.NAT.src = src{}
	for i := range c.NAT.SNAT {
		c.NAT.SNAT[i].src = src{}
	}
	for i := range c.NAT.Forwards {
		c.NAT.Forwards[i].src = src{}
	}
	c.Firewall.src = src{}
	for i := range c.Firewall.Allow6 {
		c.Firewall.Allow6[i].src = src{}
	}
	return c
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

// minimal is a valid config that snippets below extend.
const minimal = `ports:
  - name: eth0
interfaces:
  - name: lan
    port: eth0
    role: lan
    addresses: [192.168.1.1/24]
`

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want *Config
	}{
		{
			name: "minimal",
			in:   minimal,
			want: &Config{
				File:     "name.yaml",
				Hardware: "generic",
				Ports:    []Port{{Name: "eth0", Pos: Pos{2, 5}}},
				Interfaces: []Interface{{
					Name: "lan", Port: "eth0", Role: "lan",
					Addresses: []netip.Prefix{pfx("192.168.1.1/24")},
					Pos:       Pos{4, 5},
				}},
			},
		},
		{
			name: "full",
			in: `hardware: ixgbe
ports:
  - {name: eth0, queues: 4, mtu: 9000, driver: af_xdp, tx: ring, aqm: off}
  - name: eth1
    queues: 64
    mtu: 1500
interfaces:
  - name: lan
    port: eth0
    role: lan
    mtu: 9000
    addresses: [192.168.1.1/24, fd00:1::1/64, 10.0.0.1/31]
  - name: up
    port: eth1
    role: wan
    addresses:
      - 203.0.113.2/24
      - 2001:db8::2/64
routes:
  - to: default
    via: 203.0.113.1
  - to: default
    via: 2001:db8::1
  - {to: 10.8.0.0/16, via: 192.168.1.254}
  - {to: 10.9.0.0/16, dev: lan}
  - {to: 198.51.100.7, via: 192.168.1.2, dev: lan}
  - {to: "2001:db8:ff::/48", via: "fe80::1", dev: up}
status:
  listen: [lan:80, "127.0.0.1:8080", "[::1]:8081", up:8443]
firewall: {wan_input: accept}
`,
			want: &Config{
				File:     "name.yaml",
				Hardware: "ixgbe",
				Ports: []Port{
					{Name: "eth0", Queues: 4, MTU: 9000, Driver: "af_xdp", Tx: "ring", AQM: "off", Pos: Pos{3, 5}},
					{Name: "eth1", Queues: 64, MTU: 1500, Pos: Pos{4, 5}},
				},
				Interfaces: []Interface{
					{Name: "lan", Port: "eth0", Role: "lan", MTU: 9000, Pos: Pos{8, 5},
						Addresses: []netip.Prefix{pfx("192.168.1.1/24"), pfx("fd00:1::1/64"), pfx("10.0.0.1/31")}},
					{Name: "up", Port: "eth1", Role: "wan", Pos: Pos{13, 5},
						Addresses: []netip.Prefix{pfx("203.0.113.2/24"), pfx("2001:db8::2/64")}},
				},
				Routes: []Route{
					{To: pfx("0.0.0.0/0"), Via: ip("203.0.113.1"), Pos: Pos{20, 5}},
					{To: pfx("::/0"), Via: ip("2001:db8::1"), Pos: Pos{22, 5}},
					{To: pfx("10.8.0.0/16"), Via: ip("192.168.1.254"), Pos: Pos{24, 5}},
					{To: pfx("10.9.0.0/16"), Dev: "lan", Pos: Pos{25, 5}},
					{To: pfx("198.51.100.7/32"), Via: ip("192.168.1.2"), Dev: "lan", Pos: Pos{26, 5}},
					{To: pfx("2001:db8:ff::/48"), Via: ip("fe80::1"), Dev: "up", Pos: Pos{27, 5}},
				},
				Status: Status{Listen: []Listen{
					{Interface: "lan", Port: 80, Pos: Pos{29, 12}},
					{Host: netip.MustParseAddrPort("127.0.0.1:8080"), Port: 8080, Pos: Pos{29, 20}},
					{Host: netip.MustParseAddrPort("[::1]:8081"), Port: 8081, Pos: Pos{29, 38}},
					{Interface: "up", Port: 8443, Pos: Pos{29, 52}},
				}},
				Firewall: Firewall{WANInput: "accept", Pos: Pos{30, 1}},
			},
		},
		{
			name: "status listen forms",
			in: minimal + `status:
  listen:
    - lan:80
    - 127.0.0.1:8080
    - "[::1]:8080"
`,
			want: &Config{
				File:       "name.yaml",
				Hardware:   "generic",
				Ports:      []Port{{Name: "eth0", Pos: Pos{2, 5}}},
				Interfaces: []Interface{{Name: "lan", Port: "eth0", Role: "lan", Addresses: []netip.Prefix{pfx("192.168.1.1/24")}, Pos: Pos{4, 5}}},
				Status: Status{Listen: []Listen{
					{Interface: "lan", Port: 80, Pos: Pos{10, 7}},
					{Host: netip.MustParseAddrPort("127.0.0.1:8080"), Port: 8080, Pos: Pos{11, 7}},
					{Host: netip.MustParseAddrPort("[::1]:8080"), Port: 8080, Pos: Pos{12, 7}},
				}},
			},
		},
		{
			name: "status hosts",
			in: minimal + `status:
  listen: [lan:80]
  hosts: [GVRouter.lan., router, 203.0.113.7, "2001:DB8::1", "::ffff:192.0.2.1"]
`,
			want: &Config{
				File:       "name.yaml",
				Hardware:   "generic",
				Ports:      []Port{{Name: "eth0", Pos: Pos{2, 5}}},
				Interfaces: []Interface{{Name: "lan", Port: "eth0", Role: "lan", Addresses: []netip.Prefix{pfx("192.168.1.1/24")}, Pos: Pos{4, 5}}},
				Status: Status{
					Listen: []Listen{{Interface: "lan", Port: 80, Pos: Pos{9, 12}}},
					Hosts:  []string{"gvrouter.lan", "router", "203.0.113.7", "2001:db8::1", "192.0.2.1"},
				},
			},
		},
		{
			name: "empty sections and aliases",
			in: `hardware: bcm47094
ports:
  - name: eth0
interfaces:
  - name: lan
    port: eth0
    role: lan
    addresses: &lanaddrs [192.168.1.1/24]
routes:
status:
`,
			want: &Config{
				File:       "name.yaml",
				Hardware:   "bcm47094",
				Ports:      []Port{{Name: "eth0", Pos: Pos{3, 5}}},
				Interfaces: []Interface{{Name: "lan", Port: "eth0", Role: "lan", Addresses: []netip.Prefix{pfx("192.168.1.1/24")}, Pos: Pos{5, 5}}},
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("name.yaml", []byte(tt.in))
			if err != nil {
				t.Fatalf("Parse() = %v, want no error", err)
			}
			if !reflect.DeepEqual(strip(got), tt.want) {
				t.Errorf("Parse() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want []string // substrings, each of which must appear in the error
	}{
		{"empty", "", []string{"name.yaml:1:1: config is empty"}},
		{"comments only", "# nothing\n", []string{"name.yaml:1:1: config is empty"}},
		{"not a mapping", "- a\n", []string{"name.yaml:1:1: config: want a mapping"}},
		{"syntax", "ports: [\n", []string{"name.yaml:1:8: yaml: did not find expected node content"}},
		{"syntax later line", "ports:\n  - name: a\nb: c\n d: e\n", []string{"name.yaml:4:3: yaml: mapping values are not allowed in this context"}},
		{"two documents", minimal + "---\nports: []\n", []string{"name.yaml:8:1: only one YAML document is allowed"}},
		{"unknown top key with suggestion", minimal + "interface: []\n",
			[]string{`name.yaml:8:1: config: unknown key "interface"; did you mean "interfaces"?`}},
		{"unknown top key without suggestion", minimal + "dhcp: {}\n",
			[]string{`name.yaml:8:1: config: unknown key "dhcp"; want one of: hardware, ports, interfaces, routes, nat, firewall, status`}},
		{"unknown port key", "ports:\n  - name: eth0\n    queus: 2\n" + minimal[len("ports:\n  - name: eth0\n"):],
			[]string{`name.yaml:3:5: port "eth0": unknown key "queus"; did you mean "queues"?`}},
		{"unknown interface key", minimal + "    adresses: []\n",
			[]string{`name.yaml:8:5: interface "lan": unknown key "adresses"; did you mean "addresses"?`}},
		{"duplicate key", minimal + "    role: wan\n",
			[]string{`name.yaml:8:5: interface "lan": duplicate key "role" (first at line 6)`}},
		{"duplicate top key", minimal + "ports: []\n",
			[]string{`name.yaml:8:1: config: duplicate key "ports" (first at line 1)`}},
		{"merge key", minimal + "    <<: {mtu: 1500}\n", []string{"name.yaml:8:5: interface \"lan\": merge keys (<<) are not supported"}},
		{"vlan 0", minimal + "    vlan: 0\n", []string{`name.yaml:8:11: interface "lan": vlan 0 out of range: want 1..4094 (0 is a priority tag, 4095 is reserved)`}},
		{"vlan 4095", minimal + "    vlan: [4095, 1]\n", []string{`name.yaml:8:11: interface "lan": vlan 4095 out of range: want 1..4094 (0 is a priority tag, 4095 is reserved)`}},
		{"vlan three tags", minimal + "    vlan: [1, 2, 3]\n", []string{`name.yaml:8:11: interface "lan": vlan: 3 VIDs; want one, or two for QinQ [outer, inner]`}},
		{"vlan empty", minimal + "    vlan: []\n", []string{`name.yaml:8:11: interface "lan": vlan: want a VID like 1 or a list [outer, inner] like [100, 10], got an empty list`}},
		{"vlan string", minimal + "    vlan: one\n", []string{`name.yaml:8:11: interface "lan": vlan: want an integer, got "one"`}},
		{"vlan_protocol unknown", minimal + "    vlan: 1\n    vlan_protocol: 802.1x\n", []string{`name.yaml:9:20: interface "lan": unknown vlan_protocol "802.1x": want 802.1Q or 802.1ad`}},
		{"vlan_protocol untagged", minimal + "    vlan_protocol: 802.1ad\n", []string{`name.yaml:8:20: interface "lan": vlan_protocol needs a vlan`}},
		{"pcp range", minimal + "    vlan: 1\n    pcp: 8\n", []string{`name.yaml:9:10: interface "lan": pcp 8 out of range: want 0..7`}},
		{"pcp untagged", minimal + "    pcp: 3\n", []string{`name.yaml:8:10: interface "lan": pcp needs a vlan: untagged frames carry no priority`}},
		{"vlan twice on a port", minimal + "    vlan: 1\n  - {name: wan, port: eth0, role: wan, vlan: 1, addresses: [10.0.0.1/24]}\n",
			[]string{`name.yaml:9:46: interface "wan": vlan 1 on port "eth0" is already interface "lan"'s (line 4)`}},
		{"two untagged on a port", minimal + "  - {name: wan, port: eth0, role: wan, addresses: [10.0.0.1/24]}\n",
			[]string{`name.yaml:8:23: interface "wan": port "eth0" already carries untagged interface "lan" (line 4); give one of them a vlan`}},
		{"gro unknown", minimal + "    gro: maybe\n", []string{`name.yaml:8:10: interface "lan": unknown gro "maybe": want off, on or selective`}},
		{"gro bool", minimal + "    gro: true\n", []string{`name.yaml:8:10: interface "lan": unknown gro "true": want off, on or selective`}},
		{"gro list", minimal + "    gro: [on]\n", []string{`name.yaml:8:10: interface "lan": gro: want a string, got a list`}},
		{"macsec without on", minimal + "macsec:\n  - name: ms1\n", []string{`name.yaml:9:5: macsec "ms1": on is required`}},
		{"hardware unknown", "hardware: bcm4709\n" + minimal,
			[]string{`name.yaml:1:11: hardware: unknown hardware profile "bcm4709"; did you mean "bcm47094"?`}},
		{"hardware unknown far", "hardware: raspberry\n" + minimal,
			[]string{`name.yaml:1:11: hardware: unknown hardware profile "raspberry"; want one of: bcm47094, ixgbe, generic`}},
		{"hardware wrong type", "hardware: [a]\n" + minimal, []string{"name.yaml:1:11: config: hardware: want a string, got a list"}},
		{"ports wrong type", "ports: eth0\n", []string{`name.yaml:1:8: config: ports: want a list, got "eth0"`}},
		{"port not a mapping", "ports: [eth0]\n", []string{`name.yaml:1:9: port: want a mapping, got "eth0"`}},
		{"no ports", "ports: []\ninterfaces: []\n", []string{
			"name.yaml:1:1: ports: at least one port is required",
			"name.yaml:2:1: interfaces: at least one interface is required"}},
		{"port name missing", "ports:\n  - queues: 1\n" + minimal[len("ports:\n  - name: eth0\n"):],
			[]string{"name.yaml:2:5: port: name is required"}},
		{"port name bad", "ports:\n  - name: eth0/1\n", []string{`name.yaml:2:11: port: name "eth0/1" must not contain`}},
		{"port name long", "ports:\n  - name: abcdefghijklmnop\n", []string{`name.yaml:2:11: port: name "abcdefghijklmnop" is longer than 15 bytes`}},
		{"port duplicate", "ports:\n  - name: eth0\n  - name: eth0\n", []string{`name.yaml:3:11: port "eth0" is defined twice (first at line 2)`}},
		{"queues too many", "ports:\n  - {name: eth0, queues: 65}\n", []string{`name.yaml:2:26: port "eth0": queues 65 out of range: want 1..64`}},
		{"queues negative", "ports:\n  - {name: eth0, queues: -1}\n", []string{`name.yaml:2:26: port "eth0": queues -1 out of range`}},
		{"driver unknown", "ports:\n  - {name: eth0, driver: xdp}\n", []string{`name.yaml:2:26: port "eth0": unknown driver "xdp"`}},
		{"tx unknown", "ports:\n  - {name: eth0, tx: mmap}\n", []string{`name.yaml:2:22: port "eth0": unknown tx "mmap"`}},
		{"aqm unknown", "ports:\n  - {name: eth0, aqm: codel}\n", []string{`name.yaml:2:23: port "eth0": unknown aqm "codel"; want one of: on, off`}},
		{"aqm not a string", "ports:\n  - {name: eth0, aqm: [on]}\n", []string{`port "eth0": aqm:`}},
		{"tx not a string", "ports:\n  - {name: eth0, tx: [ring]}\n", []string{`port "eth0": tx:`}},
		{"driver not a string", "ports:\n  - {name: eth0, driver: [af_xdp]}\n", []string{`port "eth0": driver:`}},
		{"queues string", "ports:\n  - {name: eth0, queues: two}\n", []string{`name.yaml:2:26: port "eth0": queues: want an integer, got "two"`}},
		{"queues float", "ports:\n  - {name: eth0, queues: 1.5}\n", []string{`name.yaml:2:26: port "eth0": queues: want an integer, got "1.5"`}},
		{"queues huge", "ports:\n  - {name: eth0, queues: 99999999999999999999}\n", []string{`name.yaml:2:26: port "eth0": queues: `}},
		{"port mtu low", "ports:\n  - {name: eth0, mtu: 67}\n", []string{`name.yaml:2:23: port "eth0": mtu 67 out of range: want 68..65535`}},
		{"port mtu high", "ports:\n  - {name: eth0, mtu: 65536}\n", []string{`name.yaml:2:23: port "eth0": mtu 65536 out of range`}},
		{"interface unknown port", strings.Replace(minimal, "port: eth0", "port: eth1", 1),
			[]string{`name.yaml:5:11: interface "lan": unknown port "eth1"; did you mean "eth0"?`}},
		{"interface no port", strings.Replace(minimal, "    port: eth0\n", "", 1),
			[]string{`name.yaml:4:5: interface "lan": port is required`}},
		{"interface no role", strings.Replace(minimal, "    role: lan\n", "", 1),
			[]string{`name.yaml:4:5: interface "lan": role is required (lan or wan)`}},
		{"interface bad role", strings.Replace(minimal, "role: lan", "role: dmz", 1),
			[]string{`name.yaml:6:11: interface "lan": unknown role "dmz"; want one of: lan, wan`}},
		{"interface duplicate name", minimal + "  - {name: lan, port: eth0, role: lan}\n",
			[]string{`name.yaml:8:12: interface "lan" is defined twice (first at line 4)`}},
		{"two untagged on one port", minimal + "  - {name: guest, port: eth0, role: lan, addresses: [10.0.0.1/24]}\n",
			[]string{`name.yaml:8:25: interface "guest": port "eth0" already carries untagged interface "lan" (line 4)`}},
		{"bad prefix", strings.Replace(minimal, "192.168.1.1/24", "192.168.1.1/33", 1),
			[]string{`name.yaml:7:17: interface "lan": addresses: bad address "192.168.1.1/33"`}},
		{"address without length", strings.Replace(minimal, "192.168.1.1/24", "192.168.1.1", 1),
			[]string{`name.yaml:7:17: interface "lan": addresses: "192.168.1.1" has no prefix length`}},
		{"network address", strings.Replace(minimal, "192.168.1.1/24", "192.168.1.0/24", 1),
			[]string{`name.yaml:7:17: interface "lan": addresses: 192.168.1.0/24 is the network address of 192.168.1.0/24`}},
		{"broadcast address", strings.Replace(minimal, "192.168.1.1/24", "192.168.1.255/24", 1),
			[]string{`name.yaml:7:17: interface "lan": addresses: 192.168.1.255/24 is the broadcast address`}},
		{"multicast address", strings.Replace(minimal, "192.168.1.1/24", "ff02::1/64", 1),
			[]string{`name.yaml:7:17: interface "lan": addresses: ff02::1/64: multicast address`}},
		{"address listed twice", strings.Replace(minimal, "[192.168.1.1/24]", "[192.168.1.1/24, 192.168.1.1/16]", 1),
			[]string{`name.yaml:7:33: interface "lan": address 192.168.1.1 is listed twice`}},
		{"address not a string", strings.Replace(minimal, "[192.168.1.1/24]", "[[192.168.1.1/24]]", 1),
			[]string{`name.yaml:7:17: interface "lan": addresses: want an address like 192.168.1.1/24, got a list`}},
		{"address overlap", minimal + "  - {name: wan, port: eth1, role: wan, addresses: [192.168.1.2/25]}\nports2: x\n",
			[]string{`name.yaml:8:52: interface "wan": address 192.168.1.2/25 overlaps 192.168.1.1/24 of interface "lan" (line 4)`}},
		{"interface mtu range", minimal + "    mtu: 70000\n",
			[]string{`name.yaml:8:10: interface "lan": mtu 70000 out of range: want 68..65535`}},
		{"interface mtu ipv6", strings.Replace(minimal, "[192.168.1.1/24]", "[fd00::1/64]", 1) + "    mtu: 1279\n",
			[]string{`name.yaml:8:10: interface "lan": mtu 1279 is below 1280, the IPv6 minimum`}},
		{"port mtu ipv6", strings.Replace(strings.Replace(minimal, "[192.168.1.1/24]", "[fd00::1/64]", 1), "- name: eth0", "- {name: eth0, mtu: 1000}", 1),
			[]string{`name.yaml:7:16: interface "lan": has IPv6 addresses but port "eth0"'s mtu 1000 is below 1280`}},
		{"interface mtu above port", strings.Replace(minimal, "- name: eth0", "- {name: eth0, mtu: 1500}", 1) + "    mtu: 9000\n",
			[]string{`name.yaml:8:10: interface "lan": mtu 9000 is larger than port "eth0"'s mtu 1500`}},
		{"route unreachable via", minimal + "routes:\n  - {to: default, via: 10.0.0.1}\n",
			[]string{`name.yaml:9:24: route to 0.0.0.0/0: via 10.0.0.1 is not in the subnet of any interface`}},
		{"route unknown dev", minimal + "routes:\n  - {to: 10.0.0.0/8, dev: lna}\n",
			[]string{`name.yaml:9:27: route to 10.0.0.0/8: dev: unknown interface "lna"; did you mean "lan"?`}},
		{"route neither via nor dev", minimal + "routes:\n  - to: 10.0.0.0/8\n",
			[]string{`name.yaml:9:5: route to 10.0.0.0/8: needs via or dev`}},
		{"route default without via", minimal + "routes:\n  - to: default\n",
			[]string{`name.yaml:9:5: route: needs via or dev`}},
		{"route default with dev only", minimal + "routes:\n  - {to: default, dev: lan}\n",
			[]string{`name.yaml:9:10: route: to: default needs a valid via to pick IPv4 or IPv6`}},
		{"route no to", minimal + "routes:\n  - via: 192.168.1.254\n",
			[]string{`name.yaml:9:5: route: to is required`}},
		{"route host bits", minimal + "routes:\n  - {to: 10.0.0.1/8, via: 192.168.1.254}\n",
			[]string{`name.yaml:9:10: route: to: "10.0.0.1/8" has host bits set; did you mean 10.0.0.0/8?`}},
		{"route bad to", minimal + "routes:\n  - {to: everywhere, via: 192.168.1.254}\n",
			[]string{`name.yaml:9:10: route: to: bad destination "everywhere"`}},
		{"route bad via", minimal + "routes:\n  - {to: default, via: 192.168.1.}\n",
			[]string{`name.yaml:9:24: route: via: bad address "192.168.1."`}},
		{"route via zone", minimal + "routes:\n  - {to: default, via: \"fe80::1%lan\"}\n",
			[]string{`name.yaml:9:24: route: via: "fe80::1%lan": write the interface as dev`}},
		{"route family mismatch", minimal + "routes:\n  - {to: 10.0.0.0/8, via: \"fd00::1\"}\n",
			[]string{`name.yaml:9:27: route to 10.0.0.0/8: via fd00::1 is not of the destination's address family`}},
		{"route via own address", minimal + "routes:\n  - {to: 10.0.0.0/8, via: 192.168.1.1}\n",
			[]string{`name.yaml:9:27: route to 10.0.0.0/8: via 192.168.1.1 is the router's own address on interface "lan"`}},
		{"route link-local without dev", minimal + "routes:\n  - {to: \"::/0\", via: \"fe80::1\"}\n",
			[]string{`name.yaml:9:23: route to ::/0: link-local via fe80::1 needs dev`}},
		{"route duplicate", minimal + "routes:\n  - {to: default, via: 192.168.1.254}\n  - {to: 0.0.0.0/0, via: 192.168.1.253}\n",
			[]string{`name.yaml:10:10: route to 0.0.0.0/0: duplicate route (first at line 9)`}},
		{"listen unknown interface", minimal + "status:\n  listen: [wan:80]\n",
			[]string{`name.yaml:9:12: status: listen "wan:80": unknown interface "wan"; did you mean "lan"?`}},
		{"listen bad port", minimal + "status:\n  listen: [lan:http]\n",
			[]string{`name.yaml:9:12: status: listen: "lan:http": port must be 1..65535`}},
		{"listen port zero", minimal + "status:\n  listen: [\"127.0.0.1:0\"]\n",
			[]string{`name.yaml:9:12: status: listen: "127.0.0.1:0": port must be 1..65535`}},
		{"listen no port", minimal + "status:\n  listen: [lan]\n",
			[]string{`name.yaml:9:12: status: listen: "lan": want "interface:port"`}},
		{"listen bare ipv6", minimal + "status:\n  listen: [\"::1:80\"]\n",
			[]string{`name.yaml:9:12: status: listen: "::1:80": bad address; IPv6 is written "[::1]:8080"`}},
		{"listen not a list", minimal + "status:\n  listen: lan:80\n",
			[]string{`name.yaml:9:11: status: listen: want a list, got "lan:80"`}},
		{"listen duplicate", minimal + "status:\n  listen: [lan:80, lan:80]\n",
			[]string{`name.yaml:9:20: status: listen "lan:80" is listed twice (first at line 9)`}},
		{"listen no addresses", strings.Replace(minimal, "    addresses: [192.168.1.1/24]\n", "", 1) + "status:\n  listen: [lan:80]\n",
			[]string{`name.yaml:8:12: status: listen "lan:80": interface "lan" has no addresses`}},
		{"hosts with a port", minimal + "status:\n  hosts: [\"gvrouter.lan:80\"]\n",
			[]string{`name.yaml:9:11: status: hosts: "gvrouter.lan:80": want a host name or an address, without a port (IPv6 without brackets)`}},
		{"hosts bracketed ipv6", minimal + "status:\n  hosts: [\"[2001:db8::1]\"]\n",
			[]string{`name.yaml:9:11: status: hosts: "[2001:db8::1]": want a host name or an address`}},
		{"hosts zone", minimal + "status:\n  hosts: [\"fe80::1%eth0\"]\n",
			[]string{`name.yaml:9:11: status: hosts: "fe80::1%eth0": an address with a zone cannot be a Host`}},
		{"hosts wildcard", minimal + "status:\n  hosts: [\"*.lan\"]\n",
			[]string{`name.yaml:9:11: status: hosts: "*.lan": '*' is not allowed in a host name`}},
		{"hosts empty name", minimal + "status:\n  hosts: [\"\"]\n",
			[]string{`name.yaml:9:11: status: hosts: "": want a host name of 1..253 characters`}},
		{"hosts not a list", minimal + "status:\n  hosts: gvrouter.lan\n",
			[]string{`name.yaml:9:10: status: hosts: want a list, got "gvrouter.lan"`}},
		{"hosts a mapping", minimal + "status:\n  hosts: [{name: x}]\n",
			[]string{`name.yaml:9:11: status: hosts: want a host name or an address, got a mapping`}},
		{"hosts duplicate", minimal + "status:\n  hosts: [gvrouter.lan, GVROUTER.LAN]\n",
			[]string{`name.yaml:9:25: status: hosts: "gvrouter.lan" is listed twice (first at line 9)`}},
		{"status unknown key", minimal + "status:\n  listn: []\n",
			[]string{`name.yaml:9:3: status: unknown key "listn"; did you mean "listen"?`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("name.yaml", []byte(tt.in))
			if err == nil {
				t.Fatalf("Parse() = %+v, nil; want errors %q", c, tt.want)
			}
			if c != nil {
				t.Errorf("Parse() returned a config with error %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse() error =\n%v\nwant it to contain\n%s", err, w)
				}
			}
			checkErrorLines(t, "name.yaml", err)
		})
	}
}

var errLineRE = regexp.MustCompile(`^[^:]+:[1-9][0-9]*:[1-9][0-9]*: \S`)

// checkErrorLines checks that every line of err is "file:line:col: msg".
func checkErrorLines(t testing.TB, file string, err error) {
	t.Helper()
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, file+":") || !errLineRE.MatchString(line) {
			t.Errorf("error line %q is not %s:line:col: message", line, file)
		}
	}
}

// TestParseGRO checks the gro key's values.
func TestParseGRO(t *testing.T) {
	for _, mode := range []string{"off", "on", "selective"} {
		c, err := Parse("gro.yaml", []byte(minimal+"    gro: "+mode+"\n"))
		if err != nil {
			t.Fatalf("gro: %s: %v", mode, err)
		}
		if got := c.Interfaces[0].GRO; got != mode {
			t.Errorf("gro: %s parsed as %q", mode, got)
		}
	}
	c, err := Parse("gro.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Interfaces[0].GRO; got != "" {
		t.Errorf("no gro parsed as %q, want \"\" (selective)", got)
	}
}

// TestParseAllErrorsAtOnce checks that problems in every section are
// reported together, each once, in file order.
func TestParseAllErrorsAtOnce(t *testing.T) {
	in := `hardware: bcm4709
ports:
  - name: eth0
    queues: 65
    offload: on
interfaces:
  - name: lan
    port: eth9
    gro: fast
    role: lan
    addresses: [192.168.1.1/24, bogus]
routes:
  - {to: default, via: 10.0.0.1}
status:
  listen: [wan:80]
nat: {masquerade: [wan]}
`
	want := []string{
		`bad.yaml:1:11: hardware: unknown hardware profile "bcm4709"; did you mean "bcm47094"?`,
		`bad.yaml:4:13: port "eth0": queues 65 out of range: want 1..64, or 0 for the hardware profile's default`,
		`bad.yaml:5:5: port "eth0": unknown key "offload"; want one of: name, queues, mtu, driver, tx, aqm`,
		`bad.yaml:8:11: interface "lan": unknown port "eth9"; did you mean "eth0"?`,
		`bad.yaml:9:10: interface "lan": unknown gro "fast": want off, on or selective`,
		`bad.yaml:11:33: interface "lan": addresses: bad address "bogus": want address/prefix-length, e.g. 192.168.1.1/24 or fd00:1::1/64`,
		`bad.yaml:13:24: route to 0.0.0.0/0: via 10.0.0.1 is not in the subnet of any interface; add dev or fix the address`,
		`bad.yaml:15:12: status: listen "wan:80": unknown interface "wan"; did you mean "lan"?`,
		`bad.yaml:16:20: nat: masquerade: unknown interface "wan"; did you mean "lan"?`,
	}
	c, err := Parse("bad.yaml", []byte(in))
	if err == nil {
		t.Fatalf("Parse() = %+v, nil; want errors", c)
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse() errors:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	// Each problem is an *Error with its position.
	var e *Error
	if !errors.As(err, &e) || e.File != "bad.yaml" || e.Pos != (Pos{1, 11}) {
		t.Errorf("errors.As(*Error) = %+v, want the first problem at bad.yaml:1:11", e)
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != len(want) {
		t.Errorf("Parse() joined %d errors, want %d", n, len(want))
	}
}

// TestRootConfig keeps the config.yaml users read valid under router check.
func TestRootConfig(t *testing.T) {
	c, err := Load("../../config.yaml")
	if err != nil {
		t.Fatalf("Load(../../config.yaml) = %v", err)
	}
	if c.Hardware != HardwareBCM47094 {
		t.Errorf("Hardware = %q, want %q", c.Hardware, HardwareBCM47094)
	}
	lan, wan := c.Interface("eth0.1"), c.Interface("eth0.2")
	if lan == nil || wan == nil {
		t.Fatalf("interfaces eth0.1 and eth0.2 = %v, %v; want both", lan, wan)
	}
	if lan.Port != "eth0" || wan.Port != "eth0" || !slices.Equal(lan.VLAN, []int{1}) || !slices.Equal(wan.VLAN, []int{2}) {
		t.Errorf("eth0.1, eth0.2 = port %s vlan %v, port %s vlan %v; want VLANs 1 and 2 on eth0", lan.Port, lan.VLAN, wan.Port, wan.VLAN)
	}
	if c.Port(lan.Port) == nil || c.Port(wan.Port) == nil {
		t.Errorf("ports of lan (%q) and wan (%q) must be defined", lan.Port, wan.Port)
	}
	if lan.Role != RoleLAN || wan.Role != RoleWAN {
		t.Errorf("roles = %q, %q; want lan, wan", lan.Role, wan.Role)
	}
	if wan.DHCP == nil || lan.DHCPServer == nil {
		t.Errorf("eth0.2 DHCP client %v, eth0.1 DHCP server %v; want both (OpenWrt's defaults)", wan.DHCP, lan.DHCPServer)
	}
	if c.DNS == nil {
		t.Errorf("no dns: section, want the forwarder on the LAN (OpenWrt's dnsmasq)")
	}
	if len(c.Status.Listen) == 0 {
		t.Errorf("Status.Listen is empty, want the status page on lan")
	}
}

// TestTestdata checks that the example configs in testdata are valid.
func TestTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("Glob(testdata/*.yaml) = %v, %v; want files", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := Load(f); err != nil {
				t.Errorf("Load(%s) = %v", f, err)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want os.ErrNotExist", err)
	}
}

func TestLookups(t *testing.T) {
	c, err := Parse("name.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Port("eth0"); p == nil || p != &c.Ports[0] {
		t.Errorf("Port(eth0) = %p, want %p", p, &c.Ports[0])
	}
	if p := c.Port("eth1"); p != nil {
		t.Errorf("Port(eth1) = %+v, want nil", p)
	}
	if i := c.Interface("lan"); i == nil || i != &c.Interfaces[0] {
		t.Errorf("Interface(lan) = %p, want %p", i, &c.Interfaces[0])
	}
	if i := c.Interface("eth0"); i != nil {
		t.Errorf("Interface(eth0) = %+v, want nil", i)
	}
}

// TestErrorf checks errors for problems found after parsing.
func TestErrorf(t *testing.T) {
	c, err := Parse("name.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	inner := errors.New("no such device")
	err = c.Errorf(c.Ports[0].Pos, "port %s: %w", c.Ports[0].Name, inner)
	if got, want := err.Error(), "name.yaml:2:5: port eth0: no such device"; got != want {
		t.Errorf("Errorf() = %q, want %q", got, want)
	}
	if !errors.Is(err, inner) {
		t.Errorf("errors.Is(Errorf(..., %%w), inner) = false, want true")
	}
}

// TestValidateInCode checks Validate on a Config built without YAML.
func TestValidateInCode(t *testing.T) {
	c := &Config{
		Ports: []Port{{Name: "veth0"}, {Name: "veth1", Queues: 2}},
		Interfaces: []Interface{
			{Name: "lan", Port: "veth0", Role: RoleLAN, Addresses: []netip.Prefix{pfx("10.1.0.1/24")}},
			{Name: "wan", Port: "veth1", Role: RoleWAN, Addresses: []netip.Prefix{pfx("10.2.0.1/24")}},
		},
		Routes: []Route{{To: pfx("0.0.0.0/0"), Via: ip("10.2.0.254")}},
		Status: Status{Listen: []Listen{{Interface: "lan", Port: 80}}},
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
	c.Routes = append(c.Routes, Route{To: pfx("10.9.0.0/16"), Dev: "dmz"})
	c.Ports[1].Queues = 100
	err := c.Validate()
	for _, w := range []string{
		`port "veth1": queues 100 out of range`,
		`route to 10.9.0.0/16: dev: unknown interface "dmz"`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %v, want it to contain %q", err, w)
		}
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"name", "port", "addresses", "mtu", "role"}
	for _, tt := range []struct{ in, want string }{
		{"adresses", "addresses"},
		{"addresess", "addresses"},
		{"nmae", "name"}, // a transposition is one edit
		{"rol", "role"},
		{"mut", "mtu"},
		{"mtuu", "mtu"},
		{"prot", "port"},
		{"vlan", ""},
		{"firewall", ""},
		{"", ""},
	} {
		if got := suggest(tt.in, known); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestEqualIgnoresPositions checks that a config moved within its file
// (here: behind a comment block) compares equal item by item.
func TestEqualIgnoresPositions(t *testing.T) {
	in := minimal + "routes: [{to: default, via: 192.168.1.254}]\nstatus: {listen: [lan:80]}\n"
	a, err := Parse("a.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.yaml", []byte("# moved\n# down\n"+in))
	if err != nil {
		t.Fatal(err)
	}
	if a.Ports[0].Pos == b.Ports[0].Pos {
		t.Fatalf("positions %v and %v should differ", a.Ports[0].Pos, b.Ports[0].Pos)
	}
	if !a.Ports[0].Equal(b.Ports[0]) || !a.Interfaces[0].Equal(b.Interfaces[0]) ||
		!a.Routes[0].Equal(b.Routes[0]) || !a.Status.Listen[0].Equal(b.Status.Listen[0]) {
		t.Errorf("Equal() = false for the same items at other lines")
	}
	c := b.Interfaces[0]
	c.Addresses = []netip.Prefix{pfx("192.168.1.2/24")}
	if a.Interfaces[0].Equal(c) {
		t.Errorf("Interface.Equal() = true for different addresses")
	}
}

func TestDriverOf(t *testing.T) {
	for _, tt := range []struct {
		hardware, driver, want string
	}{
		{HardwareIXGBE, "", DriverAFXDP},
		{HardwareBCM47094, "", DriverAFPacket},
		{HardwareGeneric, "", DriverAFPacket},
		{HardwareGeneric, DriverAFXDP, DriverAFXDP},
		{HardwareIXGBE, DriverAFPacket, DriverAFPacket},
		{HardwareIXGBE, DriverAuto, DriverAuto},
	} {
		if got := (Port{Driver: tt.driver}).DriverOf(tt.hardware); got != tt.want {
			t.Errorf("Port{Driver: %q}.DriverOf(%q) = %q, want %q", tt.driver, tt.hardware, got, tt.want)
		}
	}
}
