package status_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/portmap"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
)

// portMapSnapshot is a port mapping section with a mapping of each
// protocol, a PEER one and counters of every server.
func portMapSnapshot() *status.PortMapping {
	a := netip.MustParseAddrPort
	return &status.PortMapping{
		Protocols: []string{"natpmp", "pcp", "upnp"},
		WAN:       "wan",
		Listen:    []string{"udp 192.168.1.1:5351", "tcp 192.168.1.1:5000", "udp 0.0.0.0:1900 on lan (239.255.255.250)"},
		Status: portmap.Status{
			External: "198.51.100.2",
			Epoch:    3725,
			Mappings: []portmap.MappingStatus{
				{Owner: portmap.NATPMP, Protocol: "udp", External: 3074, Internal: a("192.168.1.10:3074"), Client: netip.MustParseAddr("192.168.1.10"), Remaining: 3599},
				{Owner: portmap.PCP, Protocol: "tcp", External: 40000, Internal: a("192.168.1.11:4000"), Peers: []netip.AddrPort{a("203.0.113.9:5000")}, Client: netip.MustParseAddr("192.168.1.11"), Remaining: 118},
				{Owner: portmap.UPnP, Protocol: "tcp", External: 8080, Internal: a("192.168.1.12:8080"), Client: netip.MustParseAddr("192.168.1.12"), Description: "console <open NAT>", Remaining: 86400},
			},
			Events:  map[string]uint64{"created": 3, "renewed": 7, "expired": 0},
			Refused: map[string]uint64{"secure_mode": 2, "permission": 0},
			Errors:  map[string]uint64{"state_file_save": 0},
		},
		Servers: []status.PortMapServer{
			{Name: "natpmp", Counters: map[string]uint64{"requests/map": 4, "results/success": 4}},
			{Name: "pcp", Counters: map[string]uint64{"requests/map": 2, "results/success": 1, "results/not_authorized": 1}},
			{Name: "upnp", Counters: map[string]uint64{"requests/action": 5, "drops/callback_outside": 1}},
			{Name: "listener", Counters: map[string]uint64{"events/announcements": 20}},
		},
	}
}

// TestPortMapSection: the page lists each mapping with owner, protocol
// and expiry and the counters; /api/status has them under port_mapping;
// the metrics name PCP's results.
func TestPortMapSection(t *testing.T) {
	snap := statustest.Example(started)
	snap.PortMapping = portMapSnapshot()
	s := status.New(statustest.New(snap), nil)
	s.Sample()
	page := body(t, get(t, s.Handler(), "GET", "/"))
	api := body(t, get(t, s.Handler(), "GET", "/api/status"))
	metrics := body(t, get(t, s.Handler(), "GET", "/metrics"))
	for _, want := range []string{
		"<h2>Port mapping</h2>",
		`<td>upnp</td><td class="mono">tcp</td><td class="num">8080</td><td class="mono">192.168.1.12:8080</td>`,
		"console &lt;open NAT&gt;",
		`peer 203.0.113.9:5000`,
		`<span class="mono">refused/secure_mode</span> 2`,
		`<span class="mono">results/not_authorized</span> 1`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	var got struct {
		PortMapping struct {
			External string `json:"external"`
			Mappings []struct {
				Owner     string `json:"owner"`
				Remaining int64  `json:"remaining_s"`
			} `json:"mappings"`
			Refused map[string]uint64 `json:"refused"`
		} `json:"port_mapping"`
	}
	if err := json.Unmarshal([]byte(api), &got); err != nil {
		t.Fatal(err)
	}
	if got.PortMapping.External != "198.51.100.2" || len(got.PortMapping.Mappings) != 3 || got.PortMapping.Mappings[1].Owner != "pcp" ||
		got.PortMapping.Mappings[1].Remaining != 118 || got.PortMapping.Refused["secure_mode"] != 2 {
		t.Errorf("/api/status port_mapping = %+v", got.PortMapping)
	}
	for _, want := range []string{
		`gvrouter_portmap_mappings{owner="upnp",protocol="tcp"} 1`,
		`gvrouter_portmap_refused_total{reason="secure_mode"} 2`,
		`gvrouter_portmap_results_total{result="not_authorized",server="pcp"} 1`,
		`gvrouter_portmap_drops_total{reason="callback_outside",server="upnp"} 1`,
		`gvrouter_portmap_server_events_total{event="announcements",server="listener"} 20`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	bare := status.New(statustest.New(statustest.Example(started)), nil)
	bare.Sample()
	if p := body(t, get(t, bare.Handler(), "GET", "/")); strings.Contains(p, "Port mapping") {
		t.Error("page without port_mapping shows the section")
	}
}
