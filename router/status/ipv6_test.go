package status_test

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/dhcp6client"
	"github.com/gvrouter/gvrouter/services/dhcp6server"
	"github.com/gvrouter/gvrouter/services/hwaddr"
	"github.com/gvrouter/gvrouter/services/ra"
)

// ipv6Snapshot is servicesSnapshot with every IPv6 section filled.
func ipv6Snapshot() status.Snapshot {
	snap := servicesSnapshot()
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	now := sampled
	snap.IPv6 = &status.IPv6{
		Delegation: &status.DHCPv6Client{
			Interface: "wan",
			Status: dhcp6client.Status{
				State: "bound",
				Lease: &dhcp6client.Lease{
					Prefixes: []status.DelegatedPrefix{{Prefix: p("2001:db8:aa00::/56"), PreferredUntil: now.Add(time.Hour), ValidUntil: now.Add(2 * time.Hour)}},
					T1:       now.Add(30 * time.Minute), T2: now.Add(48 * time.Minute),
					DNS: []netip.Addr{a("2001:db8::53")}, Domains: []string{"isp.example"},
				},
				Server: dhcp6client.DUID{0, 3, 0, 1, 2, 0, 0, 0, 0, 0xaa}, DUID: dhcp6client.DUID{0, 3, 0, 1, 2, 0, 0, 0, 0, 1},
				Counters: map[string]uint64{"solicit": 1, "reply": 2}, Drops: map[string]uint64{"wrong_xid": 3},
			},
		},
		LANPrefixes: map[string]netip.Prefix{"lan": p("2001:db8:aa00:1::/64")},
		WANRA: []status.RALearner{{
			Interface: "wan",
			LearnerStatus: ra.LearnerStatus{
				State: ra.State{
					Routers:  []status.RARouter{{Addr: a("fe80::1"), MAC: hwaddr.MAC{2, 0, 0, 0, 0, 1}, Preference: ra.PreferenceMedium, Reachability: ra.Reachable, Expires: now.Add(30 * time.Minute)}},
					Prefixes: []ra.LearnedPrefix{{Prefix: p("2001:db8:ffff::/64"), OnLink: true, Autonomous: true, ValidUntil: now.Add(time.Hour)}},
					RDNSS:    []ra.DNSServer{{Addr: a("2001:db8:ffff::53")}},
					MTU:      1500,
				},
				Counters: map[string]uint64{"ra": 4, "router_unreachable": 2}, Drops: map[string]uint64{"hop_limit": 1},
			},
		}},
		LANRA: []status.RAAdvertiser{{
			Interface: "lan",
			Status: ra.Status{
				Prefixes: []ra.AnnouncedPrefix{
					{Prefix: p("2001:db8:aa00:1::/64"), PreferredUntil: now.Add(time.Hour), ValidUntil: now.Add(2 * time.Hour)},
					{Prefix: p("2001:db8:bb00:1::/64"), Withdrawn: true, ValidUntil: now.Add(2 * time.Hour)},
				},
				RDNSS: []netip.Addr{a("2001:db8:aa00:1::1")}, DNSSL: []string{"<lan>"}, Other: true,
				RouterLifetime: 30 * time.Minute, MTU: 1500,
				Counters: map[string]uint64{"sent": 7, "solicited_sent": 2, "rs_received": 3}, Drops: map[string]uint64{"option_length_zero": 5},
			},
		}},
		DHCPv6Servers: []status.DHCPv6Server{{Interface: "lan", Status: dhcp6server.Status{DNS: []netip.Addr{a("2001:db8:aa00:1::1")}, Domains: []string{"lan"},
			Counters: map[string]uint64{"information_request": 9}, Drops: map[string]uint64{"stateful_ignored": 1}}}},
	}
	return snap
}

// TestIPv6Status: the IPv6 section survives the JSON round trip, shows on
// the page with its text escaped and a withdrawn prefix marked, and is in
// the metrics under gvrouter_ names.
func TestIPv6Status(t *testing.T) {
	want := ipv6Snapshot()
	s, _, _ := newServer(t, want)
	raw := body(t, get(t, s.Handler(), "GET", "/api/status"))
	for _, key := range []string{`"ipv6": {`, `"delegation": {`, `"prefix": "2001:db8:aa00::/56"`, `"server_duid": "000300010200000000aa"`,
		`"lan_prefixes": {`, `"wan_ra": [`, `"lan_ra": [`, `"dhcpv6_servers": [`, `"deprecated": true`, `"rs_received": 3`,
		`"reachability": "reachable"`, `"router_unreachable": 2`} {
		if !strings.Contains(raw, key) {
			t.Errorf("JSON does not contain %s", key)
		}
	}
	var got status.Snapshot
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	if got.IPv6 == nil || !reflect.DeepEqual(got.IPv6.Delegation.Prefixes, want.IPv6.Delegation.Prefixes) ||
		!reflect.DeepEqual(got.IPv6.LANRA[0].Prefixes[1], want.IPv6.LANRA[0].Prefixes[1]) ||
		got.IPv6.LANPrefixes["lan"] != want.IPv6.LANPrefixes["lan"] {
		t.Errorf("decoded ipv6 = %+v\nwant %+v", got.IPv6, want.IPv6)
	}
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, w := range []string{
		"<h2>IPv6 delegation wan</h2>", `<span class="badge up">bound</span>`, "2001:db8:aa00::/56 preferred",
		"<h2>IPv6 router advertisements heard on wan</h2>", "fe80::1 02:00:00:00:00:01 medium reachable",
		"<h2>IPv6 router advertisements sent on lan</h2>", `2001:db8:bb00:1::/64 <span class="badge down">withdrawn</span>`,
		"&lt;lan&gt;", "<h2>Stateless DHCPv6 on lan</h2>",
	} {
		if !strings.Contains(page, w) {
			t.Errorf("page does not contain %q", w)
		}
	}
	if strings.Contains(page, "<lan>") {
		t.Errorf("page has the DNSSL unescaped")
	}
	fams := scrape(t, s)
	for _, name := range []string{
		"gvrouter_dhcpv6_client_prefix_info", "gvrouter_dhcpv6_client_prefix_valid_until_seconds", "gvrouter_dhcpv6_client_events_total",
		"gvrouter_ra_learned_routers", "gvrouter_ra_learner_drops_total", "gvrouter_ra_advertised_prefixes",
		"gvrouter_ra_advertiser_events_total", "gvrouter_dhcpv6_server_drops_total",
	} {
		if fams[name] == nil {
			t.Errorf("metrics lack %s", name)
		}
	}
	if f := fams["gvrouter_ra_advertised_prefixes"]; f != nil && f.Metric[0].GetGauge().GetValue() != 2 {
		t.Errorf("gvrouter_ra_advertised_prefixes = %v, want 2", f.Metric[0].GetGauge().GetValue())
	}
}
