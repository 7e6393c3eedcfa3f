package config

import (
	"net/netip"
	"strings"
	"testing"
)

const ipv6Base = `ports:
  - name: eth0
interfaces:
  - name: lan
    port: eth0
    vlan: 1
    role: lan
    addresses: [192.168.1.1/24]
    ipv6: {subnet: 1}
  - name: guest
    port: eth0
    vlan: 3
    role: lan
    addresses: [192.168.3.1/24, fd00:3::1/64]
    ipv6: {ra: off, dhcpv6: off}
  - name: wan
    port: eth0
    vlan: 2
    role: wan
    addresses: [dhcp]
    ipv6: {pd: 56, address: on}
`

// TestIPv6NotYetRunning: every IPv6 service runs, so the base config
// parses without allServices, ra: on and off on the wan too.
func TestIPv6NotYetRunning(t *testing.T) {
	for _, ra := range []string{"", ", ra: on", ", ra: off"} {
		if _, err := Parse("v6.yaml", []byte(strings.Replace(ipv6Base, "pd: 56, address: on", "pd: 56, address: on"+ra, 1))); err != nil {
			t.Errorf("Parse(wan ipv6 with %q) = %v, want accepted", ra, err)
		}
	}
}

func TestParseIPv6(t *testing.T) {
	allServices(t)
	c, err := Parse("v6.yaml", []byte(ipv6Base))
	if err != nil {
		t.Fatal(err)
	}
	wan := c.Interface("wan").IPv6
	if wan == nil || wan.PD != 56 || !wan.Address || !wan.AcceptRA {
		t.Errorf("wan ipv6 = %+v", wan)
	}
	if c.DelegatingWAN() != "wan" {
		t.Errorf("DelegatingWAN() = %q", c.DelegatingWAN())
	}
	lan := c.Interface("lan").IPv6
	if lan == nil || lan.Subnet != 1 || !lan.RA || !lan.DHCPv6 || !lan.Other || lan.Managed {
		t.Errorf("lan ipv6 = %+v", lan)
	}
	guest := c.Interface("guest").IPv6
	if guest == nil || guest.RA || guest.DHCPv6 || guest.Other || guest.Subnet != SubnetAuto {
		t.Errorf("guest ipv6 = %+v", guest)
	}
	// Defaults of an interface without ipv6:.
	c.Interface("wan").IPv6 = nil
	if d := c.Interface("wan").IPv6OrDefault(); !d.AcceptRA || d.RA || d.PD != 0 {
		t.Errorf("wan default = %+v", d)
	}
	c.Interface("lan").IPv6 = nil
	if d := c.Interface("lan").IPv6OrDefault(); d.AcceptRA || !d.RA || !d.DHCPv6 || !d.Other || d.Subnet != SubnetAuto {
		t.Errorf("lan default = %+v", d)
	}
}

func TestIPv6Errors(t *testing.T) {
	tests := []struct {
		name, from, to, want string
	}{
		{"pd too short", "pd: 56", "pd: 40", `v6.yaml:21:16: interface "wan": ipv6: pd 40 out of range 48..64`},
		{"pd too long", "pd: 56", "pd: 65", "pd 65 out of range 48..64"},
		{"pd not int", "pd: 56", "pd: big", "pd"},
		{"lan key on wan", "pd: 56, address: on", "pd: 56, subnet: 2", `v6.yaml:21:28: interface "wan": ipv6: subnet is for lan interfaces (this one is "wan")`},
		{"wan key on lan", "ipv6: {subnet: 1}", "ipv6: {subnet: 1, pd: 60}", `interface "lan": ipv6: pd is for wan interfaces (this one is "lan")`},
		{"subnet too big", "ipv6: {subnet: 1}", "ipv6: {subnet: 256}", `v6.yaml:9:20: interface "lan": ipv6: subnet 256 does not fit a /56 delegation (0..255)`},
		{"subnet negative", "ipv6: {subnet: 1}", "ipv6: {subnet: -2}", "subnet -2: want 0 or more"},
		{"subnet twice", "ipv6: {ra: off, dhcpv6: off}", "ipv6: {subnet: 1}", `interface "guest": ipv6: subnet 1 is interface "lan"'s too`},
		{"subnet without pd", "    ipv6: {pd: 56, address: on}\n", "", "ipv6: subnet: no wan interface asks for a delegated prefix"},
		{"ra word", "ra: off", "ra: maybe", "ra: want on or off"},
		{"release without pd", "    ipv6: {pd: 56, address: on}\n", "    ipv6: {release: on}\n", `interface "wan": ipv6: release: there is no delegation to release without pd`},
		{"release on lan", "ipv6: {subnet: 1}", "ipv6: {subnet: 1, release: on}", `interface "lan": ipv6: release is for wan interfaces`},
		{"unknown key", "ipv6: {subnet: 1}", "ipv6: {subnet: 1, slaac: on}", "slaac"},
	}
	allServices(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(ipv6Base, tt.from) {
				t.Fatalf("base has no %q", tt.from)
			}
			in := strings.Replace(ipv6Base, tt.from, tt.to, 1)
			_, err := Parse("v6.yaml", []byte(in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// Two delegating wans.
	in := ipv6Base + "  - name: wan2\n    port: eth0\n    vlan: 4\n    role: wan\n    ipv6: {pd: 60}\n"
	if _, err := Parse("v6.yaml", []byte(in)); err == nil || !strings.Contains(err.Error(), `interface "wan" already asks for a delegated prefix (line 21); only one wan may`) {
		t.Errorf("two delegating wans: Parse = %v", err)
	}
}

func TestSubnetOf(t *testing.T) {
	for _, tt := range []struct {
		del  string
		n    int
		want string
	}{
		{"2001:db8:a00::/56", 0, "2001:db8:a00::/64"},
		{"2001:db8:a00::/56", 1, "2001:db8:a00:1::/64"},
		{"2001:db8:a00::/56", 255, "2001:db8:a00:ff::/64"},
		{"2001:db8:a00::/56", 256, ""},
		{"2001:db8:a0::/48", 0x1234, "2001:db8:a0:1234::/64"},
		{"2001:db8:a00:10::/60", 15, "2001:db8:a00:1f::/64"},
		{"2001:db8:a00:10::/60", 16, ""},
		{"2001:db8:a00:7::/64", 0, "2001:db8:a00:7::/64"},
		{"2001:db8:a00:7::/64", 1, ""},
		{"2001:db8:a00::/56", -1, ""},
		{"192.168.0.0/16", 0, ""},
		{"2001:db8::/96", 0, ""},
	} {
		got, ok := SubnetOf(netip.MustParsePrefix(tt.del), tt.n)
		if tt.want == "" {
			if ok {
				t.Errorf("SubnetOf(%s, %d) = %v, want none", tt.del, tt.n, got)
			}
			continue
		}
		if !ok || got != netip.MustParsePrefix(tt.want) {
			t.Errorf("SubnetOf(%s, %d) = %v %v, want %s", tt.del, tt.n, got, ok, tt.want)
		}
	}
}

// TestParseIPv6Release: release: on on the delegating wan is kept.
func TestParseIPv6Release(t *testing.T) {
	allServices(t)
	c, err := Parse("v6.yaml", []byte(strings.Replace(ipv6Base, "pd: 56, address: on", "pd: 56, address: on, release: on", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Interface("wan").IPv6; !v.Release || v.PD != 56 {
		t.Errorf("wan ipv6 = %+v, want release on with pd 56", v)
	}
}
