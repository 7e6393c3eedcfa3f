package router

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/config"
)

// TestUPnPUUIDKept: the UPnP device's UUID is made once, kept in the
// state directory and read back, so clients know the gateway after a
// restart; a damaged file is replaced.
func TestUPnPUUIDKept(t *testing.T) {
	r := &Router{}
	r.state.dir = t.TempDir()
	first, err := r.upnpUUIDLocked()
	if err != nil || !uuidRE.MatchString(first) || first[14] != '4' {
		t.Fatalf("upnpUUIDLocked = %q, %v; want a version 4 UUID", first, err)
	}
	again, err := r.upnpUUIDLocked()
	if err != nil || again != first {
		t.Errorf("second call = %q, %v; want %q kept", again, err, first)
	}
	path := filepath.Join(r.state.dir, upnpUUIDFile)
	if err := os.WriteFile(path, []byte("not a uuid\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh, err := r.upnpUUIDLocked()
	if err != nil || fresh == first || !uuidRE.MatchString(fresh) {
		t.Errorf("after damage = %q, %v; want a new UUID", fresh, err)
	}
}

// TestPortMapPolicyChange: turning a protocol on or off keeps the table;
// a change of the policy rebuilds it.
func TestPortMapPolicyChange(t *testing.T) {
	base := config.PortMapping{NATPMP: true, Secure: true}
	for _, tc := range []struct {
		name string
		edit func(*config.PortMapping)
		same bool
	}{
		{"unchanged", func(*config.PortMapping) {}, true},
		{"upnp on", func(p *config.PortMapping) { p.UPnP = true }, true},
		{"natpmp off, pcp on", func(p *config.PortMapping) { p.NATPMP, p.PCP = false, true }, true},
		{"zones (the servers' business)", func(p *config.PortMapping) { p.Zones = []string{"lan", "guest"} }, true},
		{"secure off", func(p *config.PortMapping) { p.Secure = false }, false},
		{"max_per_host", func(p *config.PortMapping) { p.MaxPerHost = 8 }, false},
		{"max_lifetime", func(p *config.PortMapping) { p.MaxLifetime = time.Hour }, false},
		{"allow", func(p *config.PortMapping) {
			p.Rules = []config.PortMapRule{{Allow: true, External: [2]uint16{1024, 2048}, Inside: netip.MustParsePrefix("192.168.1.0/24"), Internal: [2]uint16{1024, 2048}}}
		}, false},
	} {
		b := base
		tc.edit(&b)
		if got := samePortMapPolicy(&base, &b); got != tc.same {
			t.Errorf("%s: samePortMapPolicy = %v, want %v", tc.name, got, tc.same)
		}
	}
}

// TestPortMapWANAndInside: mappings are made on the first wan with an
// IPv4 address; the servers' addresses are the lan interfaces' IPv4
// ones (config.PortMapIfaces), never a wan's.
func TestPortMapWANAndInside(t *testing.T) {
	p := netip.MustParsePrefix
	cfg := &config.Config{Interfaces: []config.Interface{
		{Name: "lan", Role: config.RoleLAN, Addresses: []netip.Prefix{p("192.168.1.1/24"), p("fd00::1/64"), p("10.9.0.1/16")}},
		{Name: "wan6", Role: config.RoleWAN, Addresses: []netip.Prefix{p("2001:db8::2/64")}},
		{Name: "wan", Role: config.RoleWAN, Addresses: []netip.Prefix{p("203.0.113.2/24")}},
		{Name: "iot", Role: config.RoleLAN},
	}}
	if name, addr := portMapWAN(cfg); name != "wan" || addr != netip.MustParseAddr("203.0.113.2") {
		t.Errorf("portMapWAN = %s %v, want wan 203.0.113.2", name, addr)
	}
	ifaces, inside, refused := portMapInside(cfg)
	if len(ifaces) != 1 || ifaces[0].Name != "lan" || ifaces[0].Zone != "lan" || !ifaces[0].Permitted || len(ifaces[0].Addrs) != 2 ||
		len(inside) != 2 || inside[0] != p("192.168.1.0/24") || inside[1] != p("10.9.0.0/16") || len(refused) != 0 {
		t.Errorf("portMapInside = %+v %v %v", ifaces, inside, refused)
	}
	cfg.Interfaces[2].Addresses = nil // no lease yet
	if name, addr := portMapWAN(cfg); name != "wan6" || addr.IsValid() {
		t.Errorf("without a wan IPv4 address: portMapWAN = %s %v, want wan6 and none", name, addr)
	}
}
