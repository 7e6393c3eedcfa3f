package natrules

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/wireguard"
)

const natBase = `ports:
  - {name: eth0, mtu: 1500}
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24, fd00:1::1/64]}
  - {name: wan, port: eth0, vlan: 2, role: wan, mtu: 1492, addresses: [203.0.113.2/24, 2001:db8::2/64]}
  - {name: wan2, port: eth0, vlan: 3, role: wan, addresses: [198.51.100.2/24]}
status:
  listen: [lan:80, "127.0.0.1:8080"]
`

// seqIDs numbers the interfaces in config order from 1, like NIC IDs.
func seqIDs(cfg *config.Config, missing ...string) IDs {
	return func(name string) (natengine.Iface, bool) {
		for _, m := range missing {
			if m == name {
				return 0, false
			}
		}
		for i, ic := range cfg.Interfaces {
			if ic.Name == name {
				return natengine.Iface(i + 1), true
			}
		}
		return 0, false
	}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestNATRules(t *testing.T) {
	lan := natengine.IfaceConfig{ID: 1, Name: "lan", Addrs: addrs("192.168.1.1", "fd00:1::1"), Subnets: prefixes("192.168.1.0/24", "fd00:1::/64"), MTU: 1500}
	wan := natengine.IfaceConfig{ID: 2, Name: "wan", WAN: true, Addrs: addrs("203.0.113.2", "2001:db8::2"), Subnets: prefixes("203.0.113.0/24", "2001:db8::/64"), MTU: 1492}
	wan2 := natengine.IfaceConfig{ID: 3, Name: "wan2", WAN: true, Addrs: addrs("198.51.100.2"), Subnets: prefixes("198.51.100.0/24"), MTU: 1500}
	with := func(c natengine.IfaceConfig, f func(*natengine.IfaceConfig)) natengine.IfaceConfig {
		f(&c)
		return c
	}
	to := netip.MustParseAddrPort
	for _, tt := range []struct {
		name    string
		in      string
		missing []string
		want    natengine.Rules
	}{
		{
			name: "defaults",
			in:   "",
			want: natengine.Rules{Ifaces: []natengine.IfaceConfig{lan, wan, wan2}, Hairpin: true},
		},
		{
			name: "masquerade and snat",
			in:   "nat:\n  masquerade: [wan]\n  snat: [{on: wan2, to: [198.51.100.7, 198.51.100.8]}]\n",
			want: natengine.Rules{
				Ifaces: []natengine.IfaceConfig{lan,
					with(wan, func(c *natengine.IfaceConfig) { c.Masquerade = true }),
					with(wan2, func(c *natengine.IfaceConfig) { c.SNAT = addrs("198.51.100.7", "198.51.100.8") })},
				Hairpin: true,
			},
		},
		{
			name: "forwards: on one, on every wan, ranges",
			in: "nat:\n  forwards:\n    - {proto: tcp, port: 8080, to: \"192.168.1.10:80\", on: wan}\n" +
				"    - {proto: udp, port: \"5000-5010\", to: 192.168.1.11}\n",
			want: natengine.Rules{
				Ifaces:  []natengine.IfaceConfig{lan, wan, wan2},
				Hairpin: true,
				Forwards: []natengine.Forward{
					{Proto: natengine.ProtoTCP, In: 2, FirstPort: 8080, LastPort: 8080, To: to("192.168.1.10:80")},
					{Proto: natengine.ProtoUDP, In: 2, FirstPort: 5000, LastPort: 5010, To: to("192.168.1.11:0")},
					{Proto: natengine.ProtoUDP, In: 3, FirstPort: 5000, LastPort: 5010, To: to("192.168.1.11:0")},
				},
			},
		},
		{
			name:    "interface the stack lacks is left out with its forwards",
			in:      "nat:\n  masquerade: [wan2]\n  forwards:\n    - {proto: tcp, port: 22, to: 192.168.1.10, on: wan2}\n    - {proto: tcp, port: 23, to: 192.168.1.10}\n",
			missing: []string{"wan2"},
			want: natengine.Rules{
				Ifaces: []natengine.IfaceConfig{lan, wan}, Hairpin: true,
				Forwards: []natengine.Forward{{Proto: natengine.ProtoTCP, In: 2, FirstPort: 23, LastPort: 23, To: to("192.168.1.10:0")}},
			},
		},
		{
			name: "hairpin off, filtering, wan_input accept, allow6",
			in: "nat: {hairpin: off, filtering: endpoint-independent}\nfirewall:\n  wan_input: accept\n  allow6:\n" +
				"    - {proto: tcp, to: \"fd00:1::10\", port: 22}\n    - {to: \"fd00:1::/64\", port: \"60000-61000\"}\n" +
				"    - {proto: 47, to: \"fd00:1::20\"}\n    - {proto: any, to: \"fd00:1::30\"}\n",
			want: natengine.Rules{
				Ifaces: []natengine.IfaceConfig{lan, wan, wan2}, Filtering: natengine.EndpointIndependent,
				Allow6: []natengine.Allow6{
					{Proto: natengine.ProtoTCP, Dst: netip.MustParsePrefix("fd00:1::10/128"), FirstPort: 22, LastPort: 22},
					{Dst: netip.MustParsePrefix("fd00:1::/64"), FirstPort: 60000, LastPort: 61000},
					{Proto: 47, Dst: netip.MustParsePrefix("fd00:1::20/128"), FirstPort: 1, LastPort: 65535},
					{AnyProto: true, Dst: netip.MustParsePrefix("fd00:1::30/128"), FirstPort: 1, LastPort: 65535},
				},
			},
		},
		{
			name: "address-dependent",
			in:   "nat: {filtering: address-dependent}\n",
			want: natengine.Rules{Ifaces: []natengine.IfaceConfig{lan, wan, wan2}, Hairpin: true, Filtering: natengine.AddressDependent},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("nat.yaml", []byte(natBase+tt.in))
			if err != nil {
				t.Fatal(err)
			}
			got := Compile(cfg, seqIDs(cfg, tt.missing...), func(string) int { return 1500 }, nil)
			if got.Reserved != nil {
				t.Errorf("Reserved set with no reserved ports")
			}
			if got.Zones == nil {
				t.Errorf("no zones: every config has its zone set (LegacyPolicy; zones_test.go checks it)")
			}
			zones := got.Zones
			got.Zones = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Compile =\n%+v\nwant\n%+v", got, tt.want)
			}
			got.Zones = zones
			if err := natengine.New(EngineConfig(cfg)).SetRules(got); err != nil {
				t.Errorf("SetRules: %v", err)
			}
		})
	}
}

// TestNATRulesTestdata checks that every valid example config yields rules
// the engine accepts: config validation is at least as strict as the
// engine's compile.
func TestNATRulesTestdata(t *testing.T) {
	files, _ := filepath.Glob("../config/testdata/*.yaml")
	files = append(files, "../../config.yaml")
	for _, f := range files {
		cfg, err := config.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		r := Compile(cfg, seqIDs(cfg), func(string) int { return 1500 }, ReservedPorts(cfg, nil))
		if err := natengine.New(EngineConfig(cfg)).SetRules(r); err != nil {
			t.Errorf("%s: SetRules: %v", f, err)
		}
	}
}

func TestReservedPorts(t *testing.T) {
	cfg, err := config.Parse("nat.yaml", []byte(natBase))
	if err != nil {
		t.Fatal(err)
	}
	sink := netip.MustParseAddrPort("203.0.113.2:9")
	res := ReservedPorts(cfg, []netip.AddrPort{sink})
	want := []Reserved{
		{natengine.ProtoTCP, netip.MustParseAddr("192.168.1.1"), 80},
		{natengine.ProtoTCP, netip.MustParseAddr("fd00:1::1"), 80},
		{natengine.ProtoTCP, netip.MustParseAddr("203.0.113.2"), 9},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("ReservedPorts = %v, want %v", res, want)
	}
	r := Compile(cfg, seqIDs(cfg), nil, res)
	for _, tt := range []struct {
		proto uint8
		addr  string
		port  uint16
		want  bool
	}{
		{natengine.ProtoTCP, "192.168.1.1", 80, true},
		{natengine.ProtoTCP, "203.0.113.2", 9, true},
		{natengine.ProtoTCP, "::ffff:203.0.113.2", 9, true},
		{natengine.ProtoUDP, "203.0.113.2", 9, false},
		{natengine.ProtoTCP, "203.0.113.2", 80, false},
		{natengine.ProtoTCP, "127.0.0.1", 8080, false}, // a host listener is the kernel's
	} {
		if got := r.Reserved(tt.proto, netip.MustParseAddr(tt.addr), tt.port); got != tt.want {
			t.Errorf("Reserved(%d, %s, %d) = %v, want %v", tt.proto, tt.addr, tt.port, got, tt.want)
		}
	}
}

func TestEngineConfig(t *testing.T) {
	cfg, err := config.Parse("nat.yaml", []byte(natBase+"nat:\n  conntrack:\n    max: 1024\n    timeouts: {tcp_established: 3h, icmp: 90s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := EngineConfig(cfg)
	want := natengine.Config{MaxConns: 1024, MaxConnsPerHost: 256, MaxPortsPerHost: config.DefaultPortsPerHost, RouterReserve: 64, Timeouts: natengine.Timeouts{TCPEstablished: 3 * time.Hour, ICMPQuery: 90 * time.Second}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EngineConfig = %+v, want %+v", got, want)
	}
	def, _ := config.Parse("nat.yaml", []byte(natBase))
	if got := EngineConfig(def); got.MaxConns != natengine.DefaultMaxConns || got.Timeouts != (natengine.Timeouts{}) {
		t.Errorf("EngineConfig(defaults) = %+v, want the engine's defaults", got)
	}
	if w := RestartNeeded(def, cfg); w != "nat: conntrack: max" {
		t.Errorf("RestartNeeded = %q", w)
	}
	perHost, _ := config.Parse("nat.yaml", []byte(natBase+"nat: {conntrack: {per_host: 100}}\n"))
	if w := RestartNeeded(def, perHost); w != "nat: conntrack: per_host" {
		t.Errorf("RestartNeeded(per_host) = %q", w)
	}
	if w := RestartNeeded(def, def); w != "" {
		t.Errorf("RestartNeeded(same) = %q", w)
	}
}

func TestRoutingChanged(t *testing.T) {
	parse := func(s string) *config.Config {
		c, err := config.Parse("r.yaml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := parse(natBase)
	if RoutingChanged(a, parse(natBase+"nat: {masquerade: [wan]}\n")) {
		t.Error("a NAT-only change counts as a routing change")
	}
	if !RoutingChanged(a, parse(natBase+"routes: [{to: default, via: 203.0.113.1}]\n")) {
		t.Error("a new route is not a routing change")
	}
}

func TestDropNewInput(t *testing.T) {
	for _, tt := range []struct {
		in        string
		lan, wans bool
	}{
		{"", false, true},
		{"firewall: {wan_input: drop}\n", false, true},
		{"firewall: {wan_input: accept}\n", false, false},
	} {
		cfg, err := config.Parse("fw.yaml", []byte(natBase+tt.in))
		if err != nil {
			t.Fatal(err)
		}
		if got := DropNewInput(cfg, *cfg.Interface("lan")); got != tt.lan {
			t.Errorf("%q: lan drops new input = %v, want %v", tt.in, got, tt.lan)
		}
		for _, w := range []string{"wan", "wan2"} {
			if got := DropNewInput(cfg, *cfg.Interface(w)); got != tt.wans {
				t.Errorf("%q: %s drops new input = %v, want %v", tt.in, w, got, tt.wans)
			}
		}
	}
}

// FuzzNATRules checks that every config router check accepts yields rules
// the engine accepts, so a checked config never fails at start.
func FuzzNATRules(f *testing.F) {
	seeds, _ := filepath.Glob("../config/testdata/*.yaml")
	for _, name := range append(seeds, "../../config.yaml") {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(natBase + "nat:\n  masquerade: [wan]\n  snat: [{on: wan2, to: 198.51.100.9}]\n  forwards: [{proto: udp, port: \"1-65535\", to: 192.168.1.9}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		r := Compile(cfg, seqIDs(cfg), func(string) int { return 1500 }, ReservedPorts(cfg, nil))
		if err := natengine.New(EngineConfig(cfg)).SetRules(r); err != nil {
			t.Fatalf("config accepted, engine refused: %v\n%s", err, data)
		}
	})
}

// TestNATRulesSecY: a SecY is an interface of the engine (so flows through
// it are offloaded), never an outside one, with the lower interface's MTU
// minus the MACsec overhead.
func TestNATRulesSecY(t *testing.T) {
	cfg, err := config.Parse("secy.yaml", []byte(natBase+`macsec:
  - name: ms1
    on: wan
    tx: [{an: 0, key_id: "01", key: 000102030405060708090a0b0c0d0e0f}]
    addresses: [10.9.0.1/30]
`))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(name string) (natengine.Iface, bool) {
		if name == "ms1" {
			return 9, true
		}
		return seqIDs(cfg)(name)
	}
	r := Compile(cfg, ids, nil, nil)
	want := natengine.IfaceConfig{ID: 9, Name: "ms1", Addrs: addrs("10.9.0.1"), Subnets: prefixes("10.9.0.0/30"), MTU: 1492 - 32}
	for _, ic := range r.Ifaces {
		if ic.Name == "ms1" {
			if !reflect.DeepEqual(ic, want) {
				t.Fatalf("ms1 = %+v, want %+v", ic, want)
			}
			return
		}
	}
	t.Fatalf("no ms1 in %+v", r.Ifaces)
}

// TestNATRulesInsideRoutes: a network routed behind a LAN interface is
// inside (its sources are spoofed on a wan interface), found by dev or by
// the next hop's subnet; default routes add nothing.
func TestNATRulesInsideRoutes(t *testing.T) {
	cfg, err := config.Parse("nat.yaml", []byte(natBase+`routes:
  - {to: default, via: 203.0.113.1}
  - {to: 10.50.0.0/16, via: 192.168.1.254}
  - {to: "fd00:50::/48", via: "fd00:1::fe", dev: lan}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := Compile(cfg, seqIDs(cfg), func(string) int { return 1500 }, nil)
	want := prefixes("192.168.1.0/24", "fd00:1::/64", "10.50.0.0/16", "fd00:50::/48")
	if got := r.Ifaces[0].Subnets; !slices.Equal(got, want) {
		t.Errorf("lan subnets = %v, want %v", got, want)
	}
	if got, want := r.Ifaces[1].Subnets, prefixes("203.0.113.0/24", "2001:db8::/64"); !slices.Equal(got, want) {
		t.Errorf("wan subnets = %v, want %v (no default route)", got, want)
	}
}

// TestReservedWireGuardPort: a WireGuard listen port is reserved for UDP
// on every address of the router, so SNAT never maps a flow onto it.
func TestReservedWireGuardPort(t *testing.T) {
	dir := t.TempDir()
	key, _ := wireguard.GenerateKey()
	keyFile := filepath.Join(dir, "wg0.key")
	if err := os.WriteFile(keyFile, []byte(key.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	in := strings.Replace(natBase, "status:", "  - {name: wg0, role: lan, addresses: [10.8.0.1/24], wireguard: {private_key_file: "+keyFile+", listen_port: 51820}}\nstatus:", 1)
	cfg, err := config.Parse("nat.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	r := Compile(cfg, seqIDs(cfg), nil, ReservedPorts(cfg, nil))
	for _, tt := range []struct {
		proto uint8
		addr  string
		want  bool
	}{
		{natengine.ProtoUDP, "203.0.113.2", true},
		{natengine.ProtoUDP, "198.51.100.2", true},
		{natengine.ProtoUDP, "10.8.0.1", true},
		{natengine.ProtoTCP, "203.0.113.2", false},
	} {
		if got := r.Reserved(tt.proto, netip.MustParseAddr(tt.addr), 51820); got != tt.want {
			t.Errorf("Reserved(%d, %s, 51820) = %v, want %v", tt.proto, tt.addr, got, tt.want)
		}
	}
}

// TestRedirectSourceFilters: a redirect's src_ip and src_dip reach the
// engine's forwards: src_dip only on the zone's interface that has the
// address (wan2 has not), src_ip as the forward's sources.
func TestRedirectSourceFilters(t *testing.T) {
	cfg, err := config.Parse("nat.yaml", []byte(strings.Replace(natBase, "addresses: [203.0.113.2/24, 2001:db8::2/64]", "addresses: [203.0.113.2/24, 203.0.113.3/24, 2001:db8::2/64]", 1)+`firewall:
  zones:
    - {name: lan, interfaces: [lan], input: accept, forward: accept}
    - {name: wan, interfaces: [wan, wan2], input: drop, forward: drop}
  redirects:
    - {name: rdp, src: wan, proto: tcp, src_ip: [198.51.100.7, 192.0.2.0/24], src_dip: 203.0.113.3, src_dport: 3389, dest_ip: 192.168.1.12}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := Compile(cfg, seqIDs(cfg), func(string) int { return 1500 }, nil)
	want := []natengine.Forward{{Proto: natengine.ProtoTCP, In: 2, FirstPort: 3389, LastPort: 3389, To: netip.MustParseAddrPort("192.168.1.12:0"),
		Src: prefixes("198.51.100.7/32", "192.0.2.0/24"), Dst: netip.MustParseAddr("203.0.113.3")}}
	if !reflect.DeepEqual(r.Forwards, want) {
		t.Errorf("forwards = %+v, want %+v", r.Forwards, want)
	}
	e := natengine.New(natengine.Config{})
	if err := e.SetRules(r); err != nil {
		t.Errorf("SetRules: %v", err)
	}
}

// TestNATRulesWireGuardMTU: a wireguard interface without mtu: has the
// tunnel's default MTU in the engine, not the 1500 it gets for having no
// port, so the fast path into the tunnel leaves larger packets to
// netstack's frag-needed; one with mtu: keeps it.
func TestNATRulesWireGuardMTU(t *testing.T) {
	cfg, err := config.Parse("wg.yaml", []byte(natBase))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interfaces = append(cfg.Interfaces,
		config.Interface{Name: "wg0", Role: config.RoleLAN, WireGuard: &config.WireGuard{}},
		config.Interface{Name: "wg1", Role: config.RoleLAN, WireGuard: &config.WireGuard{}, MTU: 1380})
	r := Compile(cfg, seqIDs(cfg), func(string) int { return 0 }, nil)
	want := map[string]int{"wg0": 1420, "wg1": 1380}
	for _, ic := range r.Ifaces {
		if w, ok := want[ic.Name]; ok {
			if ic.MTU != w {
				t.Errorf("%s: MTU %d, want %d", ic.Name, ic.MTU, w)
			}
			delete(want, ic.Name)
		}
	}
	if len(want) != 0 {
		t.Errorf("not in the rules: %v", want)
	}
}
