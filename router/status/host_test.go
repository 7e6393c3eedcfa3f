package status_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
)

// TestHostCheck checks which Host headers the server answers (DNS
// rebinding): the router's own addresses (statustest.Example has lan
// 192.168.1.1 and fd00:1::1, wan 198.51.100.2), the address the
// connection reached, loopback names and addresses, and the configured
// names, with or without a port, any case, a final dot; nothing else.
func TestHostCheck(t *testing.T) {
	s := status.New(statustest.New(statustest.Example(started)), nil)
	s.SetHosts([]string{"gvrouter.lan", "203.0.113.7", "2001:db8::7"})
	for _, tt := range []struct {
		name  string
		host  string
		local string // the connection's local address; "" = none known
		want  int
	}{
		{"lan address", "192.168.1.1", "192.168.1.1:80", 200},
		{"lan address and port", "192.168.1.1:80", "192.168.1.1:80", 200},
		{"wan address", "198.51.100.2:8080", "", 200},
		{"another interface's address", "192.168.1.1", "198.51.100.2:80", 200},
		{"ipv6 in brackets", "[fd00:1::1]", "", 200},
		{"ipv6 in brackets with port", "[fd00:1::1]:80", "[fd00:1::1]:80", 200},
		{"ipv4-mapped ipv6", "[::ffff:192.168.1.1]:80", "", 200},
		{"the connection's own address", "10.255.0.2:8081", "10.255.0.2:8081", 200},
		{"localhost", "localhost:8080", "127.0.0.1:8080", 200},
		{"localhost elsewhere (tunnel)", "LOCALHOST:8080", "192.168.1.1:80", 200},
		{"127.0.0.1", "127.0.0.1:8080", "127.0.0.1:8080", 200},
		{"::1", "[::1]:8080", "[::1]:8080", 200},
		{"configured name", "gvrouter.lan", "192.168.1.1:80", 200},
		{"configured name, case, dot and port", "GVRouter.LAN.:80", "192.168.1.1:80", 200},
		{"configured address", "203.0.113.7", "", 200},
		{"configured ipv6, other spelling", "[2001:db8:0:0::7]", "", 200},

		{"rebinding name", "evil.example", "192.168.1.1:80", 403},
		{"rebinding name with port", "evil.example:80", "192.168.1.1:80", 403},
		{"subdomain of a configured name", "x.gvrouter.lan", "192.168.1.1:80", 403},
		{"configured name as suffix", "evilgvrouter.lan", "192.168.1.1:80", 403},
		{"localhost subdomain", "evil.localhost", "127.0.0.1:8080", 403},
		{"foreign address", "192.168.1.2", "192.168.1.1:80", 403},
		{"the connection's address is not a name", "evil.example", "10.255.0.2:8081", 403},
		{"empty", "", "192.168.1.1:80", 403},
		{"port only", ":80", "192.168.1.1:80", 403},
		{"ipv6 without brackets", "fd00:1::1", "", 403},
		{"ipv6 with zone", "[fe80::1%25lan]", "", 403},
		{"unclosed bracket", "[fd00:1::1", "", 403},
		{"ipv4 in brackets", "[192.168.1.1]", "", 403},
		{"bad port", "192.168.1.1:http", "192.168.1.1:80", 403},
		{"junk after bracket", "[fd00:1::1]x", "", 403},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api/status", nil)
			req.Host = tt.host
			if tt.local != "" {
				ctx := context.WithValue(req.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(mustAddrPort(t, tt.local)))
				req = req.WithContext(ctx)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("GET /api/status, Host %q, local %s = %d, want %d: %s", tt.host, tt.local, rec.Code, tt.want, rec.Body)
			}
			if tt.want == 403 && (strings.Contains(rec.Body.String(), "192.168.1") || !strings.Contains(rec.Body.String(), "Host")) {
				t.Errorf("403 body %q: want the refusal only", rec.Body)
			}
		})
	}
}

// TestOriginCheck checks that the data endpoints refuse a read from
// another origin (Origin, Sec-Fetch-Site), that the page itself only
// checks Host, and that no answer carries CORS headers.
func TestOriginCheck(t *testing.T) {
	s := status.New(statustest.New(statustest.Example(started)), nil)
	s.SetHosts([]string{"gvrouter.lan"})
	for _, tt := range []struct {
		name   string
		path   string
		origin string
		site   string // Sec-Fetch-Site
		want   int
	}{
		{"no headers (curl)", "/api/status", "", "", 200},
		{"same origin", "/api/status", "http://192.168.1.1", "same-origin", 200},
		{"address bar", "/api/status", "", "none", 200},
		{"same origin, configured name", "/api/history", "http://gvrouter.lan:80", "same-origin", 200},
		{"https origin", "/api/status", "https://gvrouter.lan", "", 200},
		{"same site with own origin", "/api/status", "http://192.168.1.1:8080", "same-site", 200},
		{"metrics same origin", "/metrics", "", "same-origin", 200},
		{"page from another site (a link)", "/", "", "cross-site", 200},
		{"page with a foreign origin", "/", "http://evil.example", "", 200},

		{"foreign origin", "/api/status", "http://evil.example", "", 403},
		{"foreign origin, same-origin claimed", "/api/status", "http://evil.example", "same-origin", 403},
		{"foreign origin on conntrack", "/api/conntrack", "http://evil.example:80", "cross-site", 403},
		{"foreign origin on history", "/api/history", "http://192.168.1.2", "", 403},
		{"foreign origin on metrics", "/metrics", "http://evil.example", "", 403},
		{"foreign origin on an unknown api path", "/api/nothing", "http://evil.example", "", 403},
		{"null origin", "/api/status", "null", "", 403},
		{"file origin", "/api/status", "file://", "", 403},
		{"origin with a path", "/api/status", "http://192.168.1.1/x", "", 403},
		{"cross-site without origin (no-cors)", "/api/status", "", "cross-site", 403},
		{"same-site without origin", "/api/status", "", "same-site", 403},
		{"unknown fetch site", "/api/status", "", "bogus", 403},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tt.path, nil)
			req.Host = "192.168.1.1"
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			if tt.site != "" {
				req.Header.Set("Sec-Fetch-Site", tt.site)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if tt.path == "/api/nothing" && tt.want == 200 {
				tt.want = 404
			}
			if rec.Code != tt.want {
				t.Errorf("GET %s, Origin %q, Sec-Fetch-Site %q = %d, want %d: %s", tt.path, tt.origin, tt.site, rec.Code, tt.want, rec.Body)
			}
			for k := range rec.Header() {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("answer has CORS header %s: %q", k, rec.Header().Get(k))
				}
			}
		})
	}
	// The refusals are counted, by reason.
	snap := s.Sample()
	if snap.HTTP.ForbiddenOrigin != 12 || snap.HTTP.ForbiddenHost != 0 {
		t.Errorf("HTTP counters %+v, want 12 cross-origin refusals and no foreign Host", snap.HTTP)
	}
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}
