package status

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// Who may read the page, against DNS rebinding. A page on evil.example
// whose name an attacker makes resolve to the router's address is, to a LAN
// user's browser, the same origin as the router's answers: its script could
// read every flow, lease and MAC. Its requests carry Host: evil.example, so
// the server answers only Host headers that name the router: a loopback
// name or address (a browser behind an SSH tunnel or the lab's proxy), the
// address the connection reached, an address of one of the router's
// interfaces, or one of the configured names (SetHosts). The data endpoints
// (/api/..., /metrics) also refuse a read from another origin: an Origin
// header that names none of these, or Sec-Fetch-Site cross-site (a no-cors
// request, which has no Origin). No answer carries CORS headers, so a
// browser never shares one with another origin.

// The 403 answers' texts.
const (
	errForbiddenHost   = "status: forbidden: the Host header names no address or name of this router (add it to status.hosts)"
	errForbiddenOrigin = "status: forbidden: cross-origin read"
)

// SetHosts sets the names and addresses, besides the router's own
// addresses and loopback, that requests may name in Host and Origin,
// e.g. ["gvrouter.lan", "203.0.113.7"]: lowercase, no port, no final
// dot, IPv6 without brackets (config.Status.Hosts). It is safe to call
// while serving.
func (s *Server) SetHosts(hosts []string) {
	h := slices.Clone(hosts)
	s.hosts.Store(&h)
}

// guard answers 403 to a request whose Host does not name the router
// and, on a data endpoint, to a cross-origin read; it counts both.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local := localAddr(r)
		if !s.allowedHost(r.Host, local) {
			s.forbiddenHost.Add(1)
			http.Error(w, errForbiddenHost, http.StatusForbidden)
			return
		}
		if isDataPath(r.URL.Path) && !s.sameOrigin(r, local) {
			s.forbiddenOrigin.Add(1)
			http.Error(w, errForbiddenOrigin, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isDataPath reports whether path is one of the endpoints whose answer
// is data a script could read (JSON, metrics, a capture).
func isDataPath(path string) bool {
	return strings.HasPrefix(path, "/api/") || path == "/metrics"
}

// sameOrigin reports whether r is not a read from another origin: its
// Origin, if any, names the router, and Sec-Fetch-Site, if sent, is
// same-origin, none (typed in the address bar), or same-site with such
// an Origin.
func (s *Server) sameOrigin(r *http.Request, local netip.Addr) bool {
	origin := r.Header.Get("Origin")
	okOrigin := false
	if origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Opaque != "" ||
			u.User != nil || u.Path != "" || !s.allowedHost(u.Host, local) {
			return false // also "null": a sandboxed frame or a file
		}
		okOrigin = true
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	case "same-site":
		return okOrigin
	}
	return false // cross-site, or a value a browser does not send
}

// localAddr is the address the request's connection reached, invalid if
// the server does not say.
func localAddr(r *http.Request) netip.Addr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if a == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

// allowedHost reports whether hostport, a Host header or an Origin's
// host (name or address, with or without a port, IPv6 in brackets),
// names the router for a connection that reached local.
func (s *Server) allowedHost(hostport string, local netip.Addr) bool {
	host, ok := splitHost(hostport)
	if !ok {
		return false
	}
	var hosts []string
	if p := s.hosts.Load(); p != nil {
		hosts = *p
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host == "localhost" || slices.Contains(hosts, host)
	}
	a = a.Unmap()
	if a.IsLoopback() || a == local {
		return true
	}
	for _, h := range hosts {
		if b, err := netip.ParseAddr(h); err == nil && b.Unmap() == a {
			return true
		}
	}
	return s.ownAddr(a)
}

// ownAddr reports whether a is an address of one of the router's
// interfaces in the latest sample: it follows DHCP leases and delegated
// prefixes within a second.
func (s *Server) ownAddr(a netip.Addr) bool {
	for _, ifc := range s.current().Interfaces {
		for _, p := range ifc.Addresses {
			if pfx, err := netip.ParsePrefix(p); err == nil && pfx.Addr().Unmap() == a {
				return true
			}
		}
	}
	return false
}

// splitHost returns the host of a Host header value, lowercase without
// a final dot: "Router.lan.:8080" -> "router.lan", "[fd00::1]:80" ->
// "fd00::1". ok is false for an empty host, a bad port, an IPv6
// address without brackets or one with a zone.
func splitHost(hostport string) (host string, ok bool) {
	host, port := hostport, ""
	if rest, found := strings.CutPrefix(hostport, "["); found {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", false
		}
		host, port = rest[:end], rest[end+1:]
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() || a.Zone() != "" {
			return "", false
		}
		if port != "" {
			p, found := strings.CutPrefix(port, ":")
			if !found {
				return "", false
			}
			port = p
		}
	} else if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
	}
	if !strings.HasPrefix(hostport, "[") && strings.ContainsAny(host, ":%[]") {
		return "", false // IPv6 without brackets, or a zone
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return "", false
	}
	return host, true
}
