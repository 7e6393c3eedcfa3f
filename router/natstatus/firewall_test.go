package natstatus

import (
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/natrules"
)

// TestFirewallCounters: a config with zones; a LAN host blocked by a
// rule and a LAN flow that the lan policy admits show up in the status
// section's firewall counters and events.
func TestFirewallCounters(t *testing.T) {
	cfg, err := config.Parse("zones.yaml", []byte(natBase+`firewall:
  zones:
    - {name: lan, interfaces: [lan], input: accept, forward: accept}
    - {name: wan, interfaces: [wan, wan2], input: drop, forward: drop, masquerade: on}
  rules:
    - {name: block, src: lan, dest: wan, src_ip: 192.168.1.50, proto: all, target: reject, log: on}
`))
	if err != nil {
		t.Fatal(err)
	}
	e := natengine.New(natrules.EngineConfig(cfg))
	if err := e.SetRules(natrules.Compile(cfg, seqIDs(cfg), nil, nil)); err != nil {
		t.Fatal(err)
	}
	remote := netip.MustParseAddrPort("198.51.100.7:53")
	ok := udp4(netip.MustParseAddrPort("192.168.1.10:5000"), remote)
	if e.Prerouting(ok, 1) != natengine.Accept || e.Postrouting(ok, 2) != natengine.Accept {
		t.Fatal("lan host's flow refused")
	}
	blocked := udp4(netip.MustParseAddrPort("192.168.1.50:5000"), remote)
	if e.Prerouting(blocked, 1) != natengine.Accept {
		t.Fatal("Prerouting refused the blocked host's first packet (rules decide at Postrouting)")
	}
	if v := e.Postrouting(blocked, 2); v != natengine.Reject {
		t.Fatalf("blocked host: %v, want reject", v)
	}
	c := Counters(e, 65536)
	for k, want := range map[string]uint64{"rule block hits": 1, "rule block logged": 1, "zone lan forward": 1, "zone wan input": 0} {
		if got, ok := c.Firewall[k]; !ok || got != want {
			t.Errorf("firewall[%q] = %d (present %v), want %d; all %v", k, got, ok, want, c.Firewall)
		}
	}
	if c.Drops["firewall"] != 1 || c.Events["firewall_rejects"] != 1 {
		t.Errorf("drops firewall %d, events firewall_rejects %d; want 1 and 1", c.Drops["firewall"], c.Events["firewall_rejects"])
	}
}
