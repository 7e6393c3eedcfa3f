package natrules

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
)

// TestHostForwards: host: forwards become NAT forwards on the lan
// interfaces' own addresses (all of them, or the one named) to the
// kernel's address, never on a wan or the host interface itself.
func TestHostForwards(t *testing.T) {
	src := `ports:
  - {name: eth0, mtu: 1500}
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24]}
  - {name: wan, port: eth0, vlan: 2, role: wan, addresses: [203.0.113.2/24]}
  - {name: lan2, port: eth0, vlan: 4, role: lan, addresses: [192.168.2.1/24]}
host:
  tap: gvr-host
  interface: host
  addresses: [10.255.0.1/30]
  kernel_addresses: [10.255.0.2/30]
  forwards:
    - {proto: tcp, port: 22}
    - {proto: udp, port: 514, on: lan2}
`
	cfg, err := config.Parse("host.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Port("gvr-host"); p == nil || p.Kind != config.PortTAP {
		t.Fatalf("port gvr-host = %+v, want a tap port", p)
	}
	r := Compile(cfg, seqIDs(cfg), nil, nil)
	kernel := netip.MustParseAddr("10.255.0.2")
	want := []natengine.Forward{
		{Proto: natengine.ProtoTCP, In: 1, FirstPort: 22, LastPort: 22, To: netip.AddrPortFrom(kernel, 22)},
		{Proto: natengine.ProtoTCP, In: 3, FirstPort: 22, LastPort: 22, To: netip.AddrPortFrom(kernel, 22)},
		{Proto: natengine.ProtoUDP, In: 3, FirstPort: 514, LastPort: 514, To: netip.AddrPortFrom(kernel, 514)},
	}
	if !reflect.DeepEqual(r.Forwards, want) {
		t.Errorf("Forwards = %+v\nwant %+v", r.Forwards, want)
	}
	// The rules compile: every forward's interface has an IPv4 address.
	if err := natengine.New(natengine.Config{}).SetRules(r); err != nil {
		t.Errorf("SetRules: %v", err)
	}
}
