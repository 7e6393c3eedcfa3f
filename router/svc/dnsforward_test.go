package svc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/gvrouter/gvrouter/hw/hwtest"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/services/dnsforward"
	"github.com/gvrouter/gvrouter/stack"
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
// the lease's upstreams out, so that a lease change never restarts it;
// addresses and upstreams are taken in place (live), the rest restarts.
func TestDNSSpec(t *testing.T) {
	sp, ok := dnsSpec(parseDNSTest(t, "", "dns: {upstreams: [9.9.9.9], domain: home, cache: {size: 500, min_ttl: 10s}}\n"))
	if !ok {
		t.Fatal("dnsSpec: no forwarder for a dns: section")
	}
	set, live := sp.spec.(dnsSettings), sp.live.(dnsLive)
	want := []netip.AddrPort{netip.MustParseAddrPort("192.168.1.1:53"), netip.MustParseAddrPort("[fd00:1::1]:53")}
	if len(live.Listen) != 2 || live.Listen[0] != want[0] || live.Listen[1] != want[1] {
		t.Errorf("Listen = %v, want %v (lan only)", live.Listen, want)
	}
	if len(live.Upstreams) != 1 || live.Upstreams[0] != netip.MustParseAddrPort("9.9.9.9:53") || set.Domain != "home" || set.CacheSize != 500 {
		t.Errorf("settings = %+v, %+v", set, live)
	}
	if sp.update == nil {
		t.Error("dnsSpec has no update hook: a new lan address would restart the forwarder")
	}
	sp, _ = dnsSpec(parseDNSTest(t, ", dhcp_server: {range: 192.168.1.100-192.168.1.150}", ""))
	set, live = sp.spec.(dnsSettings), sp.live.(dnsLive)
	if live.Upstreams != nil || set.Domain != config.DefaultDomain || set.CacheSize != config.DefaultDNSCache {
		t.Errorf("default settings = %+v, %+v, want no upstreams (the leases'), domain %s, cache %d", set, live, config.DefaultDomain, config.DefaultDNSCache)
	}
}

// testManager is a Manager with only what the services need: a netstack
// whose interfaces write to a fake port, and a NAT engine. Its services
// stop when t ends.
func testManager(t *testing.T, cfg *config.Config) (*Manager, *stack.Netstack) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := stack.New(dnsTestStack(cfg), log)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := New(Env{
		Log: log, Interface: n.Interface, Sockets: n, NAT: natengine.New(natengine.Config{}),
		Dir:     func(string) (string, error) { return dir, nil },
		PortMTU: func(string) int { return 1500 },
		Post:    func(string, learned.Change) {},
		Owned:   func(string) []netip.Prefix { return nil },
	})
	t.Cleanup(func() {
		m.Stop()
		n.Close()
	})
	return m, n
}

// dnsTestStack is cfg's interfaces as netstack ones on a fake port.
func dnsTestStack(cfg *config.Config) stack.Config {
	var sc stack.Config
	for i, ic := range cfg.Interfaces {
		sc.Interfaces = append(sc.Interfaces, stack.InterfaceConfig{
			Name: ic.Name, MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, byte(i + 1)},
			Addresses: slices.Clone(ic.Addresses), Writer: &hwtest.Writer{},
		})
	}
	return sc
}

// TestDNSListenChangeInPlace: a DHCPv6 delegation that gives the lan a
// new /64 (the reload path's withIPv6), and a change of dns.upstreams,
// keep the running forwarder (same service, same Forwarder, so its
// cache): it listens on the new address and answers its reverse names
// locally. A change of the domain still restarts it.
func TestDNSListenChangeInPlace(t *testing.T) {
	const base = `ports: [{name: eth0}]
interfaces:
  - {name: lan, port: eth0, role: lan, addresses: [192.168.1.1/24], ipv6: {ra: off, dhcpv6: off}}
`
	parse := func(dns string) *config.Config {
		cfg, err := config.Parse("t.yaml", []byte(base+dns))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := parse("dns: {upstreams: [192.0.2.53]}\n")
	m, n := testManager(t, cfg)
	apply := func(cfg *config.Config) {
		t.Helper()
		if err := n.Apply(dnsTestStack(cfg)); err != nil {
			t.Fatalf("netstack Apply: %v", err)
		}
		if err := m.Sync(cfg, &learned.State{}); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	apply(cfg)
	s := m.services[dnsServiceName]
	if s == nil {
		t.Fatal("no dns service")
	}
	f := s.impl.(*dnsforward.Forwarder)
	eq := func(a, b []netip.AddrPort) bool { return slices.Equal(a, b) }

	pd := &learned.Delegation{Prefix: netip.MustParsePrefix("2001:db8:aa00::/56"), ValidUntil: time.Now().Add(time.Hour)}
	apply(learned.WithIPv6(cfg, nil, pd, map[string]int{"lan": 1}))
	newAddr := netip.MustParseAddrPort("[2001:db8:aa00:1::1]:53")
	if got := m.services[dnsServiceName]; got != s || got.impl != f {
		t.Fatalf("a new lan /64 restarted the forwarder (service %p -> %p)", s, got)
	}
	if got, want := f.Listening(), []netip.AddrPort{netip.MustParseAddrPort("192.168.1.1:53"), newAddr}; !eq(got, want) {
		t.Errorf("after the delegation, Listening() = %v, want %v", got, want)
	}
	// The forwarder holds the new address's port 53 in the netstack.
	if pc, err := n.ListenUDPConn(newAddr); err == nil {
		pc.Close()
		t.Errorf("ListenUDPConn(%v) succeeded: the forwarder does not hold it", newAddr)
	}
	// The new /64 is a local reverse zone: answered, not forwarded
	// (asked on a loopback socket of the same forwarder).
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { f.Serve(ctx, pc); close(served) }()
	defer func() { cancel(); <-served }()
	q := new(dns.Msg)
	q.SetQuestion("9.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.0.0.a.a.8.b.d.0.1.0.0.2.ip6.arpa.", dns.TypePTR)
	before := f.Status().LocalAnswers
	c := &dns.Client{Timeout: 3 * time.Second}
	if m, _, err := c.Exchange(q, pc.LocalAddr().String()); err != nil || m.Rcode != dns.RcodeNameError || !m.Authoritative {
		t.Errorf("PTR in the new /64: %v, %v; want a local NXDOMAIN", m, err)
	}
	if got := f.Status().LocalAnswers; got != before+1 {
		t.Errorf("LocalAnswers %d after a PTR in the new /64, want %d", got, before+1)
	}

	cfg2 := parse("dns: {upstreams: [192.0.2.54]}\n")
	apply(learned.WithIPv6(cfg2, nil, pd, map[string]int{"lan": 1}))
	if got := m.services[dnsServiceName]; got != s {
		t.Fatal("a dns.upstreams change restarted the forwarder")
	}
	if got, want := f.Status().Upstreams, []netip.AddrPort{netip.MustParseAddrPort("192.0.2.54:53")}; !eq(got, want) {
		t.Errorf("after the upstreams change, Upstreams = %v, want %v", got, want)
	}

	// The delegation goes: its address is no longer served.
	apply(cfg2)
	if got := m.services[dnsServiceName]; got != s {
		t.Fatal("losing the delegation restarted the forwarder")
	}
	if got, want := f.Listening(), []netip.AddrPort{netip.MustParseAddrPort("192.168.1.1:53")}; !eq(got, want) {
		t.Errorf("after the delegation went, Listening() = %v, want %v", got, want)
	}

	apply(parse("dns: {upstreams: [192.0.2.54], domain: home}\n"))
	if got := m.services[dnsServiceName]; got == s || got == nil {
		t.Errorf("a domain change kept the forwarder (service %p -> %p), want a restart", s, got)
	}
}
