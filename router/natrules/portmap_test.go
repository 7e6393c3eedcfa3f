package natrules

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
)

// TestPortMapInput: with port_mapping: on, the guest zone (input
// reject) admits NAT-PMP/PCP and UPnP's HTTP to the router's guest
// address, so that its hosts are answered "not authorized", and nothing
// else: not the same ports on the LAN address, not the status page,
// not SSH; without port_mapping:, not even those. The lan zone (input
// accept) needs no rule. SSDP discovery to its group is admitted only
// from a zone that may map ports.
func TestPortMapInput(t *testing.T) {
	base, err := os.ReadFile("../config/testdata/guest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	guestHost := netip.MustParseAddr("192.168.2.100")
	guestAddr := netip.MustParseAddr("192.168.2.1")
	lanAddr := netip.MustParseAddr("192.168.1.1")
	for _, tc := range []struct {
		name, pm string
		admit    map[string]bool // probe name -> admitted
	}{
		{"port mapping off", "", map[string]bool{}},
		{"natpmp and upnp", "port_mapping: {natpmp: on, upnp: on}\n", map[string]bool{"udp 5351": true, "tcp 5000": true}},
		{"pcp only", "port_mapping: {pcp: on}\n", map[string]bool{"udp 5351": true}},
		{"guest permitted", "port_mapping: {natpmp: on, zones: [lan, guest]}\n", map[string]bool{"udp 5351": true}},
		{"guest permitted upnp", "port_mapping: {upnp: on, zones: [lan, guest]}\n", map[string]bool{"tcp 5000": true, "ssdp": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("guest.yaml", append(append([]byte{}, base...), tc.pm...))
			if err != nil {
				t.Fatal(err)
			}
			ids := seqIDs(cfg)
			e := natengine.New(EngineConfig(cfg))
			if err := e.SetRules(Compile(cfg, ids, func(string) int { return 1500 }, nil)); err != nil {
				t.Fatal(err)
			}
			in, _ := ids("guest")
			for _, p := range []struct {
				name  string
				proto uint8
				dst   netip.Addr
				port  uint16
			}{
				{"udp 5351", natengine.ProtoUDP, guestAddr, 5351},
				{"tcp 5000", natengine.ProtoTCP, guestAddr, 5000},
				{"udp 5351 on the lan address", natengine.ProtoUDP, lanAddr, 5351},
				{"tcp 5000 on the lan address", natengine.ProtoTCP, lanAddr, 5000},
				{"status page", natengine.ProtoTCP, guestAddr, 80},
				{"ssh", natengine.ProtoTCP, guestAddr, 22},
				{"udp 1900 unicast", natengine.ProtoUDP, guestAddr, 1900},
				{"ssdp", natengine.ProtoUDP, netip.MustParseAddr("239.255.255.250"), 1900},
			} {
				v := verdict(e, probe{src: guestHost, dst: p.dst, proto: p.proto, dport: p.port, syn: true, in: in}, false)
				if got := v == natengine.Accept; got != tc.admit[p.name] {
					t.Errorf("guest to the router, %s: %v, want admitted %v", p.name, v, tc.admit[p.name])
				}
			}
			if !strings.Contains(tc.pm, "on") {
				return
			}
			// The lan is served by its input policy, without a rule.
			for _, r := range Policy(cfg, nil, nil).Rules {
				if strings.HasPrefix(r.Name, "port-mapping") && r.Src != "guest" {
					t.Errorf("rule %s for zone %s, want rules for the guest zone only", r.Name, r.Src)
				}
			}
		})
	}
}
