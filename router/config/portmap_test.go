package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// portMapConfig is a config with a lan and a wan interface and
// port_mapping: pm on line 13.
func portMapConfig(pm string) string {
	return `ports:
  - name: eth0
interfaces:
  - name: lan
    port: eth0
    vlan: 1
    role: lan
    addresses: [192.168.1.1/24]
  - name: wan
    port: eth0
    vlan: 2
    role: wan
port_mapping: ` + pm + `
`
}

func TestParsePortMapping(t *testing.T) {
	for _, tc := range []struct {
		pm   string
		want PortMapping
	}{
		{"{natpmp: on}", PortMapping{NATPMP: true, Secure: true}},
		{"", PortMapping{Secure: true}},
		{"{natpmp: on, pcp: on, upnp: on, secure: off, max_per_host: 8, max_total: 100, min_lifetime: 5m, max_lifetime: 2h}",
			PortMapping{NATPMP: true, PCP: true, UPnP: true, MaxPerHost: 8, MaxTotal: 100, MinLifetime: 5 * time.Minute, MaxLifetime: 2 * time.Hour}},
		{`{upnp: on, allow: ["1024-65535 192.168.1.0/24 1024-65535", "deny 3074 192.168.1.7 1-65535", "allow 80 192.168.1.10/32 8080"]}`,
			PortMapping{UPnP: true, Secure: true, Rules: []PortMapRule{
				{Allow: true, External: [2]uint16{1024, 65535}, Inside: netip.MustParsePrefix("192.168.1.0/24"), Internal: [2]uint16{1024, 65535}},
				{External: [2]uint16{3074, 3074}, Inside: netip.MustParsePrefix("192.168.1.7/32"), Internal: [2]uint16{1, 65535}},
				{Allow: true, External: [2]uint16{80, 80}, Inside: netip.MustParsePrefix("192.168.1.10/32"), Internal: [2]uint16{8080, 8080}},
			}}},
	} {
		t.Run(tc.pm, func(t *testing.T) {
			c, err := Parse("pm.yaml", []byte(portMapConfig(tc.pm)))
			if err != nil {
				t.Fatal(err)
			}
			got := c.PortMapping
			if got == nil {
				t.Fatal("no PortMapping")
			}
			if diff := cmp.Diff(tc.want, *got, cmpopts.IgnoreUnexported(PortMapping{}), cmpopts.IgnoreFields(PortMapping{}, "Pos"), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("PortMapping (-want +got):\n%s", diff)
			}
			if got.Pos != (Pos{13, 1}) {
				t.Errorf("Pos = %v, want 13:1", got.Pos)
			}
		})
	}
	c, err := Parse("pm.yaml", []byte(strings.TrimSuffix(portMapConfig(""), "port_mapping: \n")))
	if err != nil || c.PortMapping != nil || c.PortMapping.Enabled() {
		t.Errorf("without port_mapping: PortMapping = %v, %v; want nil (off)", c.PortMapping, err)
	}
}

func TestParsePortMappingErrors(t *testing.T) {
	for _, tc := range []struct {
		pm   string
		want string
	}{
		{"{natpmp: maybe}", `pm.yaml:13:24: port_mapping: natpmp: want on or off`},
		{"{natpmp: on, igd: on}", `pm.yaml:13:28: port_mapping: unknown key "igd"`},
		{"{upnp: on, max_per_host: -1}", `pm.yaml:13:40: port_mapping: max_per_host -1 is negative`},
		{"{upnp: on, max_per_host: 10, max_total: 5}", `pm.yaml:13:40: port_mapping: max_per_host 10 is above max_total 5`},
		{"{upnp: on, max_total: x}", `pm.yaml:13:37: port_mapping: max_total: want an integer`},
		{"{pcp: on, min_lifetime: 10s}", `pm.yaml:13:39: port_mapping: min_lifetime 10s out of range 2m..24h`},
		{"{pcp: on, max_lifetime: 48h}", `pm.yaml:13:39: port_mapping: max_lifetime 48h out of range 2m..24h`},
		{"{pcp: on, min_lifetime: 2h, max_lifetime: 1h}", `pm.yaml:13:39: port_mapping: min_lifetime 2h is above max_lifetime 1h`},
		{"{pcp: on, min_lifetime: soon}", `pm.yaml:13:39: port_mapping: min_lifetime: want a positive duration`},
		{`{pcp: on, allow: ["1024-65535 192.168.1.0/24"]}`, `pm.yaml:13:33: port_mapping: allow: want a rule like`},
		{`{pcp: on, allow: ["permit 1024-65535 192.168.1.0/24 1024-65535"]}`, `pm.yaml:13:33: port_mapping: allow: want a rule like "1024-65535 192.168.1.0/24 1024-65535" (optionally after allow or deny): "permit" is neither allow nor deny`},
		{`{pcp: on, allow: ["0-10 192.168.1.0/24 1024-65535"]}`, `pm.yaml:13:33: port_mapping: allow: external ports: bad port "0-10"`},
		{`{pcp: on, allow: ["1024-65535 192.168.1.1/24 1024-65535"]}`, `pm.yaml:13:33: port_mapping: allow: inside "192.168.1.1/24" has host bits set; write 192.168.1.0/24`},
		{`{pcp: on, allow: ["1024-65535 fd00::/64 1024-65535"]}`, `pm.yaml:13:33: port_mapping: allow: inside "fd00::/64": want an IPv4 prefix`},
		{`{pcp: on, allow: ["1024-65535 192.168.1.0/24 9-2"]}`, `pm.yaml:13:33: port_mapping: allow: internal ports: bad port range "9-2"`},
		{`{pcp: on, allow: []}`, `pm.yaml:13:32: port_mapping: allow: an empty list refuses every mapping`},
		{"on", `pm.yaml:13:15: port_mapping: want a mapping`},
	} {
		t.Run(tc.pm, func(t *testing.T) {
			_, err := Parse("pm.yaml", []byte(portMapConfig(tc.pm)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(port_mapping: %s) = %v, want error containing %q", tc.pm, err, tc.want)
			}
		})
	}
}

// TestPortMappingNeedsLANAndWAN: a protocol turned on needs a wan to map
// on and a lan IPv4 address to listen on; off, it needs neither.
func TestPortMappingNeedsLANAndWAN(t *testing.T) {
	noWAN := strings.Replace(portMapConfig("{natpmp: on}"), "role: wan", "role: lan", 1)
	if _, err := Parse("pm.yaml", []byte(noWAN)); err == nil || !strings.Contains(err.Error(), "pm.yaml:13:1: port_mapping: mappings are made on the wan interface, and there is none") {
		t.Errorf("no wan: err = %v", err)
	}
	noLAN := strings.Replace(portMapConfig("{upnp: on}"), "addresses: [192.168.1.1/24]", "addresses: [fd00::1/64]", 1)
	if _, err := Parse("pm.yaml", []byte(noLAN)); err == nil || !strings.Contains(err.Error(), "pm.yaml:13:1: port_mapping: the servers listen on lan interfaces' IPv4 addresses") {
		t.Errorf("no lan IPv4: err = %v", err)
	}
	if _, err := Parse("pm.yaml", []byte(strings.Replace(noLAN, "{upnp: on}", "{upnp: off}", 1))); err != nil {
		t.Errorf("all off, no lan IPv4: err = %v, want none", err)
	}
}
