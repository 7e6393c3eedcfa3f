package config

import (
	"fmt"
	"strings"
	"testing"
)

// portMapZonesConfig is a config with firewall zones lan, guest
// (input reject) and wan, and port_mapping: pm on line 23.
func portMapZonesConfig(pm string) string {
	return `ports:
  - name: eth0
interfaces:
  - name: lan
    port: eth0
    vlan: 1
    role: lan
    addresses: [192.168.1.1/24]
  - name: guest
    port: eth0
    vlan: 3
    role: lan
    addresses: [192.168.2.1/24]
  - name: wan
    port: eth0
    vlan: 2
    role: wan
firewall:
  zones:
    - {name: lan, interfaces: [lan], input: accept, forward: accept}
    - {name: guest, interfaces: [guest], input: reject, forward: drop}
    - {name: wan, interfaces: [wan], input: drop, forward: drop, masquerade: on}
port_mapping: ` + pm + `
`
}

// TestPortMapZones: which interfaces the servers listen on and whose
// hosts may map, by default (the inside zones whose input is accept)
// and with zones:; the wan zone is never among them.
func TestPortMapZones(t *testing.T) {
	for _, tc := range []struct {
		cfg  string
		want string // name/zone/permitted of each interface
	}{
		{portMapZonesConfig("{natpmp: on}"), "lan/lan/true guest/guest/false"},
		{portMapZonesConfig("{natpmp: on, zones: [lan]}"), "lan/lan/true guest/guest/false"},
		{portMapZonesConfig("{natpmp: on, zones: [guest, lan]}"), "lan/lan/true guest/guest/true"},
		{portMapZonesConfig("{natpmp: on, zones: [guest]}"), "lan/lan/false guest/guest/true"},
		{portMapConfig("{upnp: on}"), "lan/lan/true"},
		{portMapConfig("{upnp: on, zones: [lan]}"), "lan/lan/true"},
	} {
		c, err := Parse("pm.yaml", []byte(tc.cfg))
		if err != nil {
			t.Fatalf("%s: %v", tc.cfg[strings.Index(tc.cfg, "port_mapping"):], err)
		}
		var got []string
		for _, pi := range c.PortMapIfaces() {
			got = append(got, fmt.Sprintf("%s/%s/%v", pi.Name, pi.Zone, pi.Permitted))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: PortMapIfaces = %v, want %s", tc.cfg[strings.Index(tc.cfg, "port_mapping"):], got, tc.want)
		}
	}
}

func TestPortMapZonesErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  string
		want string
	}{
		{portMapZonesConfig("{natpmp: on, zones: [wan]}"), `pm.yaml:23:36: port_mapping: zones: zone "wan" is WAN-side (it masquerades or holds a wan interface)`},
		{portMapZonesConfig("{natpmp: on, zones: [lan, gest]}"), `pm.yaml:23:41: port_mapping: zones: unknown zone "gest"; did you mean "guest"?`},
		{portMapZonesConfig("{natpmp: on, zones: [lan, lan]}"), `pm.yaml:23:41: port_mapping: zones: zone "lan" listed twice`},
		{portMapZonesConfig("{natpmp: on, zones: []}"), `pm.yaml:23:35: port_mapping: zones: an empty list permits no zone`},
		{portMapZonesConfig("{natpmp: on, zones: [{lan: 1}]}"), `pm.yaml:23:36: port_mapping: zones: want a zone name, got a mapping`},
		{portMapZonesConfig("{natpmp: on, zones: lan}"), `pm.yaml:23:35: port_mapping: zones: want a list`},
		{portMapConfig("{pcp: on, zones: [wan]}"), `pm.yaml:13:33: port_mapping: zones: zone "wan" is WAN-side`},
		{portMapConfig("{pcp: on, zones: [guest]}"), `pm.yaml:13:33: port_mapping: zones: unknown zone "guest"; want one of: lan, wan`},
	} {
		pm := tc.cfg[strings.Index(tc.cfg, "port_mapping"):]
		t.Run(pm, func(t *testing.T) {
			_, err := Parse("pm.yaml", []byte(tc.cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%s) = %v, want error containing %q", pm, err, tc.want)
			}
		})
	}
}
