package router

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

// TestPortGroups: each port hears all-nodes and the solicited-node groups
// of its link-local and static IPv6 addresses; a lan port also
// all-routers and, with stateless DHCPv6 on, all-DHCP-agents; a port
// with only IPv4 and a wan role gets no router-only group; one under an
// MKA SecY hears the PAE group.
func TestPortGroups(t *testing.T) {
	cfg := &config.Config{
		Interfaces: []config.Interface{
			{Name: "lan", Port: "p0", Role: config.RoleLAN, Addresses: []netip.Prefix{
				netip.MustParsePrefix("192.168.1.1/24"), netip.MustParsePrefix("fd00:1::1234:5678/64")}},
			{Name: "wan", Port: "p1", Role: config.RoleWAN, Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")}},
			{Name: "guest", Port: "p2", Role: config.RoleLAN, IPv6: &config.IPv6{DHCPv6: false}},
			{Name: "link", Port: "p3", Role: config.RoleWAN},
			{Name: "static", Port: "p4", Role: config.RoleWAN},
		},
		MACsec: []config.MACsec{
			{Name: "ms1", On: "link", MKA: &config.MKA{CKN: "01"}},
			{Name: "ms2", On: "static"},
		},
	}
	mac := net.HardwareAddr{0x02, 0x11, 0x22, 0xaa, 0xbb, 0xcc}
	str := func(g []net.HardwareAddr) []string {
		var out []string
		for _, m := range g {
			out = append(out, m.String())
		}
		return out
	}
	for _, tc := range []struct {
		port string
		want []string
	}{
		{"p0", []string{"33:33:00:00:00:01", "33:33:ff:aa:bb:cc", "33:33:ff:34:56:78", "33:33:00:00:00:02", "33:33:00:01:00:02"}},
		{"p1", []string{"33:33:00:00:00:01", "33:33:ff:aa:bb:cc"}},
		{"p2", []string{"33:33:00:00:00:01", "33:33:ff:aa:bb:cc", "33:33:00:00:00:02"}},
		{"p3", []string{"33:33:00:00:00:01", "33:33:ff:aa:bb:cc", "01:80:c2:00:00:03"}},
		{"p4", []string{"33:33:00:00:00:01", "33:33:ff:aa:bb:cc"}},
		{"p9", nil},
	} {
		if got := str(portGroups(cfg, tc.port, mac)); !slices.Equal(got, tc.want) {
			t.Errorf("portGroups(%s) = %v, want %v", tc.port, got, tc.want)
		}
	}
	ll := eui64LinkLocal(mac)
	if got := netip.AddrFrom16(ll).String(); got != "fe80::11:22ff:feaa:bbcc" {
		t.Errorf("eui64LinkLocal = %s", got)
	}
}

// TestPortGroupsSSDP: with UPnP on, a LAN-side port also hears SSDP's
// 239.255.255.250 (01-00-5e-7f-ff-fa); the wan port never does, nor any
// port with UPnP off.
func TestPortGroupsSSDP(t *testing.T) {
	cfg := &config.Config{
		Interfaces: []config.Interface{
			{Name: "lan", Port: "p0", Role: config.RoleLAN, Addresses: []netip.Prefix{netip.MustParsePrefix("192.168.1.1/24")}},
			{Name: "wan", Port: "p1", Role: config.RoleWAN, Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24")}},
		},
		PortMapping: &config.PortMapping{UPnP: true},
	}
	mac := net.HardwareAddr{0x02, 0x11, 0x22, 0xaa, 0xbb, 0xcc}
	has := func(port string) bool {
		return slices.ContainsFunc(portGroups(cfg, port, mac), func(m net.HardwareAddr) bool { return m.String() == "01:00:5e:7f:ff:fa" })
	}
	if !has("p0") || has("p1") {
		t.Errorf("SSDP group: lan port %v, wan port %v; want true, false", has("p0"), has("p1"))
	}
	cfg.PortMapping.UPnP = false
	if has("p0") {
		t.Error("SSDP group on the lan port with UPnP off")
	}
}
