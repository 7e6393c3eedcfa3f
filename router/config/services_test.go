package config

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/services/dhcp4server"
)

const servicesBase = `ports:
  - name: eth0
interfaces:
  - name: lan
    port: eth0
    vlan: 1
    role: lan
    addresses: [192.168.1.1/24]
    dhcp_server:
      range: 192.168.1.100-192.168.1.199
      lease_time: 1h
      mtu: 1492
      routes: [{to: 10.0.0.0/8, via: 192.168.1.254}]
      ntp: [192.168.1.1]
      static:
        - {mac: "02:00:00:00:00:10", address: 192.168.1.10, hostname: nas}
  - name: wan
    port: eth0
    vlan: 2
    role: wan
    addresses: [dhcp]
    dhcp: {hostname: gvrouter, client_id: "01:02:00:00:00:00:02", release: on}
dns:
  domain: home
  cache: {size: 500, min_ttl: 10s, max_ttl: 1h}
host:
  tap: gvr-host
  interface: host
  addresses: [10.255.0.1/30]
  kernel_addresses: [10.255.0.2/30]
  forwards: [{proto: tcp, port: 22, on: lan}]
`

// allServices lets a test parse the keys of services not running yet.
func allServices(t *testing.T) {
	saved := notYetRunning
	notYetRunning = map[string]bool{}
	t.Cleanup(func() { notYetRunning = saved })
}

// TestServicesNotYetRunning: every service the config names runs now, so
// the full services config parses without allServices.
func TestServicesNotYetRunning(t *testing.T) {
	if _, err := Parse("svc.yaml", []byte(servicesBase)); err != nil {
		t.Errorf("Parse = %v, want every service accepted", err)
	}
}

func TestParseServices(t *testing.T) {
	allServices(t)
	c, err := Parse("svc.yaml", []byte(servicesBase))
	if err != nil {
		t.Fatal(err)
	}
	wan := c.Interface("wan")
	if wan.DHCP == nil || wan.DHCP.Hostname != "gvrouter" || !wan.DHCP.Release || len(wan.DHCP.ClientID) != 7 || len(wan.Addresses) != 0 {
		t.Errorf("wan = %+v, DHCP %+v", wan, wan.DHCP)
	}
	s := c.Interface("lan").DHCPServer
	if s == nil {
		t.Fatal("lan has no dhcp_server")
	}
	if s.RangeStart != netip.MustParseAddr("192.168.1.100") || s.RangeEnd != netip.MustParseAddr("192.168.1.199") ||
		s.LeaseTime != time.Hour || s.MTU != 1492 || len(s.Routes) != 1 || s.Routes[0].To != netip.MustParsePrefix("10.0.0.0/8") ||
		len(s.NTP) != 1 || len(s.Static) != 1 || s.Static[0].Hostname != "nas" || s.Static[0].MAC.String() != "02:00:00:00:00:10" {
		t.Errorf("dhcp_server = %+v", s)
	}
	if c.DNS == nil || c.DNS.Domain != "home" || c.DNS.CacheSize != 500 || c.DNS.MinTTL != 10*time.Second || c.DNS.MaxTTL != time.Hour {
		t.Errorf("dns = %+v", c.DNS)
	}
	if c.DomainName() != "home" {
		t.Errorf("DomainName() = %q, want home", c.DomainName())
	}
	h := c.Interface("host")
	if h == nil || !h.Host || h.Role != RoleLAN || h.Port != "gvr-host" || c.Port("gvr-host") == nil || c.Port("gvr-host").Kind != PortTAP {
		t.Fatalf("host interface = %+v, port %+v", h, c.Port("gvr-host"))
	}
	if got := c.Host.KernelAddress(); got != netip.MustParseAddr("10.255.0.2") {
		t.Errorf("KernelAddress() = %v", got)
	}
	if len(c.Host.Forwards) != 1 || c.Host.Forwards[0] != (HostForward{Proto: "tcp", Port: 22, On: "lan", Pos: Pos{31, 14}}) {
		t.Errorf("forwards = %+v", c.Host.Forwards)
	}
}

// TestParseNewLeaseLimit: dhcp_server's new-lease keys reach the config;
// absent, they are 0 (the server's defaults).
func TestParseNewLeaseLimit(t *testing.T) {
	for _, tt := range []struct {
		name, extra      string
		burst, perMinute int
	}{
		{"absent: defaults", "", 0, 0},
		{"both", "\n      new_lease_burst: 200\n      new_leases_per_minute: 600", 200, 600},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("svc.yaml", []byte(strings.Replace(servicesBase, "lease_time: 1h", "lease_time: 1h"+tt.extra, 1)))
			if err != nil {
				t.Fatal(err)
			}
			s := c.Interface("lan").DHCPServer
			if s.NewLeaseBurst != tt.burst || s.NewLeasesPerMinute != tt.perMinute {
				t.Errorf("NewLeaseBurst, NewLeasesPerMinute = %d, %d; want %d, %d", s.NewLeaseBurst, s.NewLeasesPerMinute, tt.burst, tt.perMinute)
			}
		})
	}
}

func TestServicesErrors(t *testing.T) {
	tests := []struct {
		name, from, to, want string
	}{
		{"range outside subnet", "range: 192.168.1.100-192.168.1.199", "range: 192.168.1.100-192.168.2.10", "svc.yaml:10:14: interface \"lan\": dhcp_server: range: 192.168.1.100-192.168.2.10 is not inside the subnet 192.168.1.0/24 (network and broadcast excluded)"},
		{"range covers router", "range: 192.168.1.100-192.168.1.199", "range: 192.168.1.1-192.168.1.199", "svc.yaml:10:14: interface \"lan\": dhcp_server: range: 192.168.1.1-192.168.1.199 covers the server's own address 192.168.1.1"},
		{"range reversed", "range: 192.168.1.100-192.168.1.199", "range: 192.168.1.199-192.168.1.100", "svc.yaml:10:14: interface \"lan\": dhcp_server: range: 192.168.1.199-192.168.1.100: the first address is above the last"},
		{"range syntax", "range: 192.168.1.100-192.168.1.199", "range: 192.168.1.100", "want FIRST-LAST IPv4 addresses"},
		{"static in range", "address: 192.168.1.10", "address: 192.168.1.150", "svc.yaml:16:47: interface \"lan\": dhcp_server: static.0.address: 192.168.1.150 lies inside the dynamic range"},
		{"static outside subnet", "address: 192.168.1.10", "address: 10.0.0.1", "svc.yaml:16:47: interface \"lan\": dhcp_server: static.0.address: 10.0.0.1 is not a host address of the subnet 192.168.1.0/24"},
		{"static is router", "address: 192.168.1.10", "address: 192.168.1.1", "svc.yaml:16:47: interface \"lan\": dhcp_server: static.0.address: 192.168.1.1 is the server's own address"},
		{"static bad mac", `mac: "02:00:00:00:00:10"`, `mac: "02:00:00"`, "want a MAC like"},
		{"duplicate mac", `        - {mac: "02:00:00:00:00:10", address: 192.168.1.10, hostname: nas}`, `        - {mac: "02:00:00:00:00:10", address: 192.168.1.10, hostname: nas}
        - {mac: "02:00:00:00:00:10", address: 192.168.1.11}`, "svc.yaml:17:17: interface \"lan\": dhcp_server: static.1.mac: 02:00:00:00:00:10 is listed twice (line 16)"},
		{"lease too short", "lease_time: 1h", "lease_time: 5s", "svc.yaml:11:19: interface \"lan\": dhcp_server: lease_time: 5s out of range 10s..8760h"},
		{"new lease burst zero", "lease_time: 1h", "lease_time: 1h\n      new_lease_burst: 0", `svc.yaml:12:24: interface "lan": dhcp_server: new_lease_burst 0 out of range 1..1048576`},
		{"new leases per minute huge", "lease_time: 1h", "lease_time: 1h\n      new_leases_per_minute: 2000000", `svc.yaml:12:30: interface "lan": dhcp_server: new_leases_per_minute 2000000 out of range 1..1048576`},
		{"new leases per minute word", "lease_time: 1h", "lease_time: 1h\n      new_leases_per_minute: many", `svc.yaml:12:30: interface "lan": dhcp_server: new_leases_per_minute`},
		{"new lease key misspelt", "lease_time: 1h", "lease_time: 1h\n      new_lease_rate: 5", `svc.yaml:12:7: interface "lan": dhcp_server: unknown key "new_lease_rate"`},
		{"mtu too small", "mtu: 1492", "mtu: 500", "svc.yaml:12:12: interface \"lan\": dhcp_server: mtu: 500 out of range 576..65535"},
		{"route via outside", "via: 192.168.1.254", "via: 10.1.1.1", "svc.yaml:13:38: interface \"lan\": dhcp_server: routes.0.via: 10.1.1.1 is not an IPv4 address in the subnet 192.168.1.0/24"},
		{"static hostname two labels", "hostname: nas}", "hostname: nas.home}", `svc.yaml:16:71: interface "lan": dhcp_server: static.0.hostname: "nas.home" is not a host name label`},
		{"duplicate static address", `        - {mac: "02:00:00:00:00:10", address: 192.168.1.10, hostname: nas}`, `        - {mac: "02:00:00:00:00:10", address: 192.168.1.10, hostname: nas}
        - {mac: "02:00:00:00:00:11", address: 192.168.1.10}`, `svc.yaml:17:47: interface "lan": dhcp_server: static.1.address: 192.168.1.10 is listed twice (line 16)`},
		{"range missing", "      range: 192.168.1.100-192.168.1.199\n", "", `svc.yaml:9:5: interface "lan": dhcp_server: range: is required, e.g. 192.168.1.100-192.168.1.249`},
		{"router not IPv4", "mtu: 1492", "mtu: 1492\n      router: [\"fd00::1\"]", `svc.yaml:13:15: interface "lan": dhcp_server: router.0: fd00::1 is not an IPv4 address`},
		{"dns cache too big", "size: 500", "size: 2000000", `svc.yaml:25:17: dns: cache.size: 2000000 out of range 0..1048576`},
		{"client id long", `client_id: "01:02:00:00:00:00:02"`, `client_id: "` + strings.Repeat("ab", 65) + `"`, `interface "wan": dhcp: client_id: 65 bytes, want 2..64 (RFC 2132 §9.14)`},
		{"server on wan", "    addresses: [dhcp]\n", "    addresses: [dhcp]\n    dhcp_server: {range: 192.168.2.2-192.168.2.9}\n", "a DHCP server runs on lan interfaces only"},
		{"dhcp twice", "addresses: [dhcp]", "addresses: [dhcp, dhcp]", `addresses: "dhcp" is listed twice`},
		{"dhcp options without dhcp", "addresses: [dhcp]", "addresses: [203.0.113.2/24]", `dhcp: options given but addresses has no "dhcp"`},
		{"bad hostname", "hostname: gvrouter", "hostname: gv_router", "is not allowed in a host name"},
		{"client id short", `client_id: "01:02:00:00:00:00:02"`, `client_id: "01"`, "1 bytes, want 2..64"},
		{"client id hex", `client_id: "01:02:00:00:00:00:02"`, `client_id: "zz"`, "want hex bytes"},
		{"dns upstream bad", "domain: home", "domain: home\n  upstreams: [\"nine\"]", `bad upstream "nine"`},
		{"dns no upstream", "addresses: [dhcp]\n    dhcp: {hostname: gvrouter, client_id: \"01:02:00:00:00:00:02\", release: on}", "addresses: [203.0.113.2/24]", "dns: upstreams: none given and no interface gets them by dhcp"},
		{"dns ttl order", "min_ttl: 10s, max_ttl: 1h", "min_ttl: 2h, max_ttl: 1h", "svc.yaml:25:31: dns: cache.min_ttl: 2h is above max_ttl 1h"},
		{"host kernel outside", "kernel_addresses: [10.255.0.2/30]", "kernel_addresses: [10.9.0.2/30]", "svc.yaml:30:22: host: kernel_addresses: 10.9.0.2/30 is in none of the subnets"},
		{"host kernel same", "kernel_addresses: [10.255.0.2/30]", "kernel_addresses: [10.255.0.1/30]", "is the router's own address on the link"},
		{"host forward wan", "on: lan}", "on: wan}", `host: forward: on: "wan" is not a lan interface`},
		{"host tap long", "tap: gvr-host", "tap: gvr-host-much-too-long", "longer than 15 bytes"},
		{"host overlaps lan", "addresses: [10.255.0.1/30]", "addresses: [192.168.1.2/30]", "overlaps 192.168.1.1/24 of interface \"lan\""},
		{"host proto", "proto: tcp, port: 22", "proto: sctp, port: 22", "proto: want tcp or udp"},
	}
	allServices(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(servicesBase, tt.from) {
				t.Fatalf("base has no %q", tt.from)
			}
			in := strings.Replace(servicesBase, tt.from, tt.to, 1)
			_, err := Parse("svc.yaml", []byte(in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestCheckHostname(t *testing.T) {
	for s, ok := range map[string]bool{"gvrouter": true, "a.b-c.d": true, "-a": false, "a..b": false, "": false, strings.Repeat("a", 64): false, "ok1": true} {
		if err := checkHostname(s); (err == nil) != ok {
			t.Errorf("checkHostname(%q) = %v, want ok %v", s, err, ok)
		}
	}
	if _, err := net.ParseMAC("02:00:00:00:00:10"); err != nil {
		t.Fatal(err)
	}
}

func TestHostForwardStatusPort(t *testing.T) {
	allServices(t)
	const from = "forwards: [{proto: tcp, port: 22, on: lan}]\n"
	for _, tt := range []struct{ to, want string }{
		{"forwards: [{proto: tcp, port: 80}]\nstatus:\n  listen: [lan:80]\n", `host: forward: tcp port 80 on "lan" is the status page's (status.listen lan:80)`},
		{"forwards: [{proto: tcp, port: 80, on: lan}]\nstatus:\n  listen: [lan:80]\n", `host: forward: tcp port 80 on "lan" is the status page's`},
		{"forwards: [{proto: udp, port: 80}]\nstatus:\n  listen: [lan:80]\n", ""},
		{"forwards: [{proto: tcp, port: 80}]\nstatus:\n  listen: [\"127.0.0.1:80\"]\n", ""},
	} {
		_, err := Parse("svc.yaml", []byte(strings.Replace(servicesBase, from, tt.to, 1)))
		switch {
		case tt.want == "" && err != nil && strings.Contains(err.Error(), "status page's"):
			t.Errorf("%q: Parse = %v, want no status port clash", tt.to, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: Parse = %v, want %q", tt.to, err, tt.want)
		}
	}
}

// TestDHCPServerOneRule: Parse accepts a dhcp_server: setting iff
// dhcp4server's Validate accepts the server it asks for. The rules live
// in the service alone (issue 36): on the tree before, router/config had
// its own copies, and they disagreed (a 5 s lease, an MTU of 500 and an
// on-link route were refused by one and taken by the other).
func TestDHCPServerOneRule(t *testing.T) {
	allServices(t)
	base := func() dhcp4server.Config {
		return dhcp4server.Config{
			ServerAddr: netip.MustParseAddr("192.168.1.1"), Subnet: netip.MustParsePrefix("192.168.1.0/24"),
			RangeStart: netip.MustParseAddr("192.168.1.100"), RangeEnd: netip.MustParseAddr("192.168.1.199"),
			LeaseTime: time.Hour, MTU: 1492, NTP: []netip.Addr{netip.MustParseAddr("192.168.1.1")},
			Routes: []dhcp4server.Route{{To: netip.MustParsePrefix("10.0.0.0/8"), Via: netip.MustParseAddr("192.168.1.254")}},
			Static: []dhcp4server.StaticLease{{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x10},
				Addr: netip.MustParseAddr("192.168.1.10"), Hostname: "nas"}},
		}
	}
	for _, tc := range []struct {
		name, from, to string
		mod            func(*dhcp4server.Config)
	}{
		{"as written", "", "", func(*dhcp4server.Config) {}},
		{"lease 5s", "lease_time: 1h", "lease_time: 5s", func(c *dhcp4server.Config) { c.LeaseTime = 5 * time.Second }},
		{"lease 10s", "lease_time: 1h", "lease_time: 10s", func(c *dhcp4server.Config) { c.LeaseTime = 10 * time.Second }},
		{"lease 9000h", "lease_time: 1h", "lease_time: 9000h", func(c *dhcp4server.Config) { c.LeaseTime = 9000 * time.Hour }},
		{"mtu 500", "mtu: 1492", "mtu: 500", func(c *dhcp4server.Config) { c.MTU = 500 }},
		{"mtu 576", "mtu: 1492", "mtu: 576", func(c *dhcp4server.Config) { c.MTU = 576 }},
		{"route on-link", "via: 192.168.1.254", "via: 0.0.0.0", func(c *dhcp4server.Config) {
			c.Routes[0].Via = netip.IPv4Unspecified()
		}},
		{"route via outside", "via: 192.168.1.254", "via: 10.1.1.1", func(c *dhcp4server.Config) {
			c.Routes[0].Via = netip.MustParseAddr("10.1.1.1")
		}},
		{"router v6", "mtu: 1492", "mtu: 1492\n      router: [\"fd00::1\"]", func(c *dhcp4server.Config) {
			c.Router = []netip.Addr{netip.MustParseAddr("fd00::1")}
		}},
		{"static hostname with a dot", "hostname: nas}", "hostname: nas.home}", func(c *dhcp4server.Config) {
			c.Static[0].Hostname = "nas.home"
		}},
		{"static is the router", "address: 192.168.1.10", "address: 192.168.1.1", func(c *dhcp4server.Config) {
			c.Static[0].Addr = netip.MustParseAddr("192.168.1.1")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(servicesBase, tc.from) {
				t.Fatalf("base has no %q", tc.from)
			}
			_, perr := Parse("svc.yaml", []byte(strings.Replace(servicesBase, tc.from, tc.to, 1)))
			sc := base()
			tc.mod(&sc)
			verr := sc.Validate()
			if (perr == nil) != (verr == nil) {
				t.Errorf("Parse = %v\ndhcp4server Validate = %v\nwant both nil or both errors", perr, verr)
			}
		})
	}
}
