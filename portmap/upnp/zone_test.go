package upnp

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/portmap"
)

// TestRefusedZone: a guest zone's host reads the description (so a
// client that was given the URL finds the control URL) and every action
// is answered 606, counted in the table's refused/zone; it gets no SSDP
// answer even if its search reaches a server; an address in no zone
// still gets 403.
func TestRefusedZone(t *testing.T) {
	s, _ := newServer(t, portmap.Policy{Secure: true})
	guest := netip.MustParseAddr("192.168.2.10")
	s.Refused = []netip.Prefix{netip.MustParsePrefix("192.168.2.0/24")}
	r := httptest.NewRequest(http.MethodGet, descPath, nil)
	r.RemoteAddr = netip.AddrPortFrom(guest, 40000).String()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 200 || !strings.Contains(w.Body.String(), ipConnCtl) {
		t.Errorf("guest's description: %d %s", w.Code, w.Body)
	}
	for _, tc := range []struct {
		action string
		args   []string
	}{
		{"GetExternalIPAddress", nil},
		{"AddPortMapping", addArgs("3074", "TCP", "192.168.2.10", "3074", "3600")},
		{"GetGenericPortMappingEntry", []string{"NewPortMappingIndex", "0"}},
	} {
		if code, body := call(s, guest, tc.action, soap(tc.action, tc.args...)); code != 500 || !strings.Contains(body, "<errorCode>606</errorCode>") {
			t.Errorf("guest %s: %d %s, want 606", tc.action, code, body)
		}
	}
	if n := len(s.Table.Mappings()); n != 0 {
		t.Errorf("%d mappings after the guest's requests, want 0", n)
	}
	if got := s.HandleSearch(search("urn:schemas-upnp-org:device:InternetGatewayDevice:1"), netip.AddrPortFrom(guest, 1900)); len(got) != 0 {
		t.Errorf("guest's M-SEARCH answered: %q", got)
	}
	if code, _ := call(s, netip.MustParseAddr("10.0.0.1"), "GetExternalIPAddress", soap("GetExternalIPAddress")); code != http.StatusForbidden {
		t.Errorf("from no zone: %d, want 403", code)
	}
	if z := s.Table.Stats().Zone.Load(); z != 3 {
		t.Errorf("refused/zone %d, want 3", z)
	}
}
