package router

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

const dnsTestBase = `ports: [{name: eth0}]
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24, "fd00:1::1/64"]%s}
  - {name: wan, port: eth0, vlan: 2, role: wan, addresses: [203.0.113.2/24]}
%s`

func parseDNSTest(t *testing.T, lanExtra, rest string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("t.yaml", []byte(fmt.Sprintf(dnsTestBase, lanExtra, rest)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDNSWanted: the forwarder runs with dns:, or without it while a DHCP
// server hands out the router's address (its default), and not when the
// DHCP server names other servers.
func TestDNSWanted(t *testing.T) {
	for _, tt := range []struct {
		name, lan, rest string
		want            bool
	}{
		{"nothing", "", "", false},
		{"dns section", "", "dns: {upstreams: [9.9.9.9]}\n", true},
		{"dhcp server default dns", ", dhcp_server: {range: 192.168.1.100-192.168.1.150}", "", true},
		{"dhcp server with the router as dns", ", dhcp_server: {range: 192.168.1.100-192.168.1.150, dns: [192.168.1.1]}", "", true},
		{"dhcp server with other dns", ", dhcp_server: {range: 192.168.1.100-192.168.1.150, dns: [9.9.9.9]}", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := dnsWanted(parseDNSTest(t, tt.lan, tt.rest)); got != tt.want {
				t.Errorf("dnsWanted = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDNSSpec: it listens on every lan address (never the wan one), takes
// the config's upstreams or none (the leases'), and its settings keep
// the lease's upstreams out, so that a lease change never restarts it.
func TestDNSSpec(t *testing.T) {
	r := &Router{}
	sp, ok := r.dnsSpec(parseDNSTest(t, "", "dns: {upstreams: [9.9.9.9], domain: home, cache: {size: 500, min_ttl: 10s}}\n"))
	if !ok {
		t.Fatal("dnsSpec: no forwarder for a dns: section")
	}
	set := sp.spec.(dnsSettings)
	want := []netip.AddrPort{netip.MustParseAddrPort("192.168.1.1:53"), netip.MustParseAddrPort("[fd00:1::1]:53")}
	if len(set.Listen) != 2 || set.Listen[0] != want[0] || set.Listen[1] != want[1] {
		t.Errorf("Listen = %v, want %v (lan only)", set.Listen, want)
	}
	if len(set.Upstreams) != 1 || set.Upstreams[0] != netip.MustParseAddrPort("9.9.9.9:53") || set.Domain != "home" || set.CacheSize != 500 {
		t.Errorf("settings = %+v", set)
	}
	sp, _ = r.dnsSpec(parseDNSTest(t, ", dhcp_server: {range: 192.168.1.100-192.168.1.150}", ""))
	set = sp.spec.(dnsSettings)
	if set.Upstreams != nil || set.Domain != config.DefaultDomain || set.CacheSize != config.DefaultDNSCache {
		t.Errorf("default settings = %+v, want no upstreams (the leases'), domain %s, cache %d", set, config.DefaultDomain, config.DefaultDNSCache)
	}
}
