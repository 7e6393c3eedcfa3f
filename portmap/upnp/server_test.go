package upnp

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

const testUUID = "5c3c7a2e-0b1d-4c8e-9f00-0123456789ab"

func newServer(t testing.TB, p portmap.Policy) (*Server, *natengine.Engine) {
	tb, e, _ := pt.Table(t, p)
	return &Server{Table: tb, Device: Device{UUID: testUUID, FriendlyName: "gvrouter"}, Inside: []netip.Prefix{pt.LANNet},
		Location: "http://192.168.1.1:5000/rootDesc.xml"}, e
}

func search(st string) []byte {
	return []byte("M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nMAN: \"ssdp:discover\"\r\nMX: 2\r\nST: " + st + "\r\n\r\n")
}

// TestSearch: an inside host's M-SEARCH for the gateway gets one answer
// with the description's location; ssdp:all one per target; other
// targets, malformed searches and searches from outside get nothing.
func TestSearch(t *testing.T) {
	s, _ := newServer(t, portmap.Policy{})
	lan := netip.AddrPortFrom(pt.HostA, 50000)
	got := s.HandleSearch(search("urn:schemas-upnp-org:device:InternetGatewayDevice:1"), lan)
	if len(got) != 1 || !strings.Contains(string(got[0]), "LOCATION: http://192.168.1.1:5000/rootDesc.xml\r\n") ||
		!strings.HasPrefix(string(got[0]), "HTTP/1.1 200 OK\r\n") ||
		!strings.Contains(string(got[0]), "USN: uuid:"+testUUID+"::urn:schemas-upnp-org:device:InternetGatewayDevice:1\r\n") {
		t.Errorf("answer %q", got)
	}
	if got := s.HandleSearch(search("ssdp:all"), lan); len(got) != len(searchTargets)+1 {
		t.Errorf("ssdp:all: %d answers, want %d", len(got), len(searchTargets)+1)
	}
	for name, tc := range map[string]struct {
		b    []byte
		from netip.AddrPort
	}{
		"other target":  {search("urn:schemas-upnp-org:device:MediaServer:1"), lan},
		"from the WAN":  {search("ssdp:all"), netip.AddrPortFrom(pt.Remote, 1900)},
		"NOTIFY":        {[]byte("NOTIFY * HTTP/1.1\r\nNT: upnp:rootdevice\r\n\r\n"), lan},
		"no MAN":        {[]byte("M-SEARCH * HTTP/1.1\r\nST: ssdp:all\r\n\r\n"), lan},
		"bad MX":        {[]byte("M-SEARCH * HTTP/1.1\r\nMAN: \"ssdp:discover\"\r\nMX: -1\r\nST: ssdp:all\r\n\r\n"), lan},
		"many headers":  {[]byte("M-SEARCH * HTTP/1.1\r\n" + strings.Repeat("X: y\r\n", 40) + "MAN: \"ssdp:discover\"\r\nST: ssdp:all\r\n\r\n"), lan},
		"too long":      {append(search("ssdp:all"), make([]byte, 1500)...), lan},
		"header no ':'": {[]byte("M-SEARCH * HTTP/1.1\r\nMAN \"ssdp:discover\"\r\nST: ssdp:all\r\n\r\n"), lan},
	} {
		if got := s.HandleSearch(tc.b, tc.from); got != nil {
			t.Errorf("%s: answered %q", name, got)
		}
	}
	if s.Stats().SearchOutside.Load() != 1 || s.Stats().SearchBad.Load() != 6 {
		t.Errorf("drops: outside %d malformed %d, want 1 6", s.Stats().SearchOutside.Load(), s.Stats().SearchBad.Load())
	}
}

func soap(action string, args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><u:%s xmlns:u="%s">`, action, serviceIPv1)
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, "<%s>", args[i])
		xml.EscapeText(&b, []byte(args[i+1]))
		fmt.Fprintf(&b, "</%s>", args[i])
	}
	fmt.Fprintf(&b, "</u:%s></s:Body></s:Envelope>", action)
	return b.String()
}

func call(s *Server, from netip.Addr, action, body string) (int, string) {
	r := httptest.NewRequest(http.MethodPost, ipConnCtl, strings.NewReader(body))
	r.RemoteAddr = netip.AddrPortFrom(from, 40000).String()
	r.Header.Set("SOAPAction", `"`+serviceIPv1+"#"+action+`"`)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

func addArgs(ext, proto, client string, in, lease string) []string {
	return []string{"NewRemoteHost", "", "NewExternalPort", ext, "NewProtocol", proto, "NewInternalPort", in,
		"NewInternalClient", client, "NewEnabled", "1", "NewPortMappingDescription", "game <&>", "NewLeaseDuration", lease}
}

// TestActions: the five WANIPConnection actions, secure mode, the error
// codes, from outside refused.
func TestActions(t *testing.T) {
	s, e := newServer(t, portmap.Policy{Secure: true})
	a := pt.HostA
	for _, tc := range []struct {
		name, action string
		from         netip.Addr
		args         []string
		code         int
		want         string
	}{
		{"external address", "GetExternalIPAddress", a, nil, 200, "<NewExternalIPAddress>203.0.113.2</NewExternalIPAddress>"},
		{"add tcp", "AddPortMapping", a, addArgs("3074", "TCP", "192.168.1.10", "3074", "3600"), 200, "AddPortMappingResponse"},
		{"add udp", "AddPortMapping", a, addArgs("3075", "UDP", "192.168.1.10", "3075", "0"), 200, "AddPortMappingResponse"},
		{"secure mode: another host", "AddPortMapping", a, addArgs("4000", "TCP", "192.168.1.20", "4000", "3600"), 500, "<errorCode>606</errorCode>"},
		{"taken by another host", "AddPortMapping", pt.HostB, addArgs("3074", "TCP", "192.168.1.20", "3074", "3600"), 500, "<errorCode>718</errorCode>"},
		{"port below 1024", "AddPortMapping", a, addArgs("80", "TCP", "192.168.1.10", "80", "3600"), 500, "<errorCode>606</errorCode>"},
		{"wildcard port", "AddPortMapping", a, addArgs("0", "TCP", "192.168.1.10", "80", "3600"), 500, "<errorCode>716</errorCode>"},
		{"remote host", "AddPortMapping", a, append(addArgs("5000", "TCP", "192.168.1.10", "5000", "3600")[2:], "NewRemoteHost", "1.2.3.4"), 500, "<errorCode>726</errorCode>"},
		{"bad protocol", "AddPortMapping", a, addArgs("5000", "SCTP", "192.168.1.10", "5000", "3600"), 500, "<errorCode>402</errorCode>"},
		{"specific", "GetSpecificPortMappingEntry", a, []string{"NewRemoteHost", "", "NewExternalPort", "3074", "NewProtocol", "TCP"}, 200,
			"<NewInternalPort>3074</NewInternalPort><NewInternalClient>192.168.1.10</NewInternalClient><NewEnabled>1</NewEnabled><NewPortMappingDescription>game &lt;&amp;&gt;</NewPortMappingDescription><NewLeaseDuration>3600</NewLeaseDuration>"},
		{"specific, none", "GetSpecificPortMappingEntry", a, []string{"NewRemoteHost", "", "NewExternalPort", "9999", "NewProtocol", "TCP"}, 500, "<errorCode>714</errorCode>"},
		{"generic 1: udp (by protocol, port)", "GetGenericPortMappingEntry", a, []string{"NewPortMappingIndex", "1"}, 200,
			"<NewExternalPort>3075</NewExternalPort><NewProtocol>UDP</NewProtocol>"},
		{"generic 2: past the end", "GetGenericPortMappingEntry", a, []string{"NewPortMappingIndex", "2"}, 500, "<errorCode>713</errorCode>"},
		{"delete another's", "DeletePortMapping", pt.HostB, []string{"NewRemoteHost", "", "NewExternalPort", "3074", "NewProtocol", "TCP"}, 500, "<errorCode>606</errorCode>"},
		{"delete", "DeletePortMapping", a, []string{"NewRemoteHost", "", "NewExternalPort", "3074", "NewProtocol", "TCP"}, 200, "DeletePortMappingResponse"},
		{"delete again", "DeletePortMapping", a, []string{"NewRemoteHost", "", "NewExternalPort", "3074", "NewProtocol", "TCP"}, 500, "<errorCode>714</errorCode>"},
		{"unknown action", "ForceTermination", a, nil, 500, "<errorCode>401</errorCode>"},
		{"status", "GetStatusInfo", a, nil, 200, "<NewConnectionStatus>Connected</NewConnectionStatus>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call(s, tc.from, tc.action, soap(tc.action, tc.args...))
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%s: %d %s, want %d and %q", tc.action, code, body, tc.code, tc.want)
			}
		})
	}
	if !pt.Installed(e, natengine.ProtoUDP, 3075, netip.AddrPortFrom(a, 3075)) || pt.Installed(e, natengine.ProtoTCP, 3074, netip.AddrPortFrom(a, 3074)) {
		t.Errorf("NAT engine mappings %+v, want only udp 3075", e.PortMappings())
	}
	m, _ := s.Table.LookupExternal(natengine.ProtoUDP, 3075)
	if got := m.Lifetime(s.Table.Now()); got != portmap.DefaultMaxLifetime {
		t.Errorf("lease 0 gave lifetime %v, want the longest, %v", got, portmap.DefaultMaxLifetime)
	}
	if code, _ := call(s, pt.Remote, "GetExternalIPAddress", soap("GetExternalIPAddress")); code != http.StatusForbidden {
		t.Errorf("from the WAN: %d, want 403", code)
	}
	// SOAPACTION naming another action than the body.
	r := httptest.NewRequest(http.MethodPost, ipConnCtl, strings.NewReader(soap("GetExternalIPAddress")))
	r.RemoteAddr = "192.168.1.10:4000"
	r.Header.Set("SOAPAction", `"`+serviceIPv1+`#DeletePortMapping"`)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 500 {
		t.Errorf("mismatched SOAPAction: %d, want 500", w.Code)
	}
}

// TestSubscribeCallStranger: SUBSCRIBE with a callback outside the LAN
// is refused with 412 and counted (CVE-2020-12695); eventing is not
// offered at all (501).
func TestSubscribeCallStranger(t *testing.T) {
	s, _ := newServer(t, portmap.Policy{})
	for _, tc := range []struct {
		cb   string
		want int
	}{
		{"<http://198.51.100.7:80/steal>", http.StatusPreconditionFailed},
		{"<http://192.168.1.10:5000/evt><http://evil.example/x>", http.StatusPreconditionFailed},
		{"<http://[2001:db8::1]:80/>", http.StatusPreconditionFailed},
		{"<http://192.168.1.10:5000/evt>", http.StatusNotImplemented},
	} {
		r := httptest.NewRequest("SUBSCRIBE", ipConnEvt, nil)
		r.RemoteAddr = "192.168.1.10:4000"
		r.Header.Set("Callback", tc.cb)
		r.Header.Set("NT", "upnp:event")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("SUBSCRIBE callback %s: %d, want %d", tc.cb, w.Code, tc.want)
		}
	}
	if got := s.Stats().CallStranger.Load(); got != 3 {
		t.Errorf("callbacks outside counted %d, want 3", got)
	}
}

// TestParseActionLimits: the SOAP parser's refusals.
func TestParseActionLimits(t *testing.T) {
	for name, b := range map[string]string{
		"doctype":    `<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><s:Envelope xmlns:s="x"><s:Body><u:A/></s:Body></s:Envelope>`,
		"deep":       `<s:Envelope xmlns:s="x"><s:Body><u:A>` + strings.Repeat("<x>", 10) + strings.Repeat("</x>", 10) + `</u:A></s:Body></s:Envelope>`,
		"many args":  soap("A", manyArgs(20)...),
		"long arg":   soap("A", "NewPortMappingDescription", strings.Repeat("x", 300)),
		"unbalanced": `<s:Envelope xmlns:s="x"><s:Body><u:A></s:Body></s:Envelope>`,
		"no action":  `<s:Envelope xmlns:s="x"><s:Body></s:Body></s:Envelope>`,
		"not soap":   `<html/>`,
		"too big":    soap("A", "B", strings.Repeat(" ", 9000)),
	} {
		if a, err := ParseAction([]byte(b)); err == nil {
			t.Errorf("%s: ParseAction = %+v, want an error", name, a)
		}
	}
	a, err := ParseAction([]byte(soap("AddPortMapping", "NewExternalPort", " 3074 ", "NewProtocol", "TCP")))
	if err != nil || a.Name != "AddPortMapping" || a.Args["NewExternalPort"] != "3074" || a.Args["NewProtocol"] != "TCP" {
		t.Errorf("ParseAction = %+v, %v", a, err)
	}
}

func manyArgs(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("A%d", i), "1")
	}
	return out
}
