package upnp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
)

// HTTP limits of the control server: small requests, short timeouts, so
// a LAN host cannot hold its connections or memory.
const (
	httpMaxHeaderBytes = 4 << 10
	httpReadTimeout    = 5 * time.Second
	httpWriteTimeout   = 5 * time.Second
	httpIdleTimeout    = 30 * time.Second
)

// Stats are the server's counters (`counter:"GROUP/NAME"`, services/svcstats).
type Stats struct {
	Searches  atomic.Uint64 `counter:"requests/search"`
	Described atomic.Uint64 `counter:"requests/description"`
	Actions   atomic.Uint64 `counter:"requests/action"`

	SearchBad      atomic.Uint64 `counter:"drops/search_malformed"` // not a well-formed M-SEARCH
	SearchOutside  atomic.Uint64 `counter:"drops/search_outside"`   // a search from outside the inside prefixes
	HTTPOutside    atomic.Uint64 `counter:"drops/http_outside"`     // an HTTP request from outside (403)
	SOAPBad        atomic.Uint64 `counter:"drops/soap_malformed"`   // a SOAP body the parser refused
	Subscribe      atomic.Uint64 `counter:"drops/subscribe"`        // SUBSCRIBE refused: eventing is not offered
	CallStranger   atomic.Uint64 `counter:"drops/callback_outside"` // ... with a callback outside the inside prefixes (CVE-2020-12695)
	ActionsRefused atomic.Uint64 `counter:"results/action_error"`   // actions answered with a UPnP error
}

// Server answers SSDP searches and control requests from inside hosts.
// It is safe for concurrent use.
type Server struct {
	Table  *portmap.Table
	Device Device
	// Inside are the prefixes requests may come from, e.g.
	// [192.168.1.0/24]; everything else is dropped (SSDP) or refused
	// (HTTP 403).
	Inside []netip.Prefix
	// Refused are the prefixes of the inside zones that may not map
	// ports (a guest zone's): their hosts may read the description, and
	// every action is answered 606 (Action not authorized) and counted
	// in the table's refused/zone. The runtime serves no SSDP on such a
	// zone's interfaces, so its hosts find the server only by its URL.
	Refused []netip.Prefix
	// Location is the description's URL on the LAN address the HTTP
	// server listens on, e.g. http://192.168.1.1:5000/rootDesc.xml.
	Location string
	stats    Stats
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

func (s *Server) inside(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.Inside {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// HandleSearch answers one SSDP datagram from from: the answers to send
// back to from, none for what is not an inside host's M-SEARCH (counted).
func (s *Server) HandleSearch(b []byte, from netip.AddrPort) [][]byte {
	if !s.inside(from.Addr()) {
		s.stats.SearchOutside.Add(1)
		return nil
	}
	q, err := ParseSearch(b)
	if err != nil {
		s.stats.SearchBad.Add(1)
		return nil
	}
	s.stats.Searches.Add(1)
	var out [][]byte
	for _, st := range s.Device.matches(q) {
		out = append(out, s.Device.searchResponse(st, s.Location))
	}
	return out
}

// ServeSSDP answers searches read from conn (bound to the SSDP group's
// port on the LAN, joined on LAN interfaces only) until ctx is done,
// then closes conn.
func (s *Server) ServeSSDP(ctx context.Context, conn net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	buf := make([]byte, maxSearchLen+1)
	for {
		n, addr, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		ua, ok := addr.(*net.UDPAddr)
		if !ok {
			continue
		}
		for _, r := range s.HandleSearch(buf[:n], ua.AddrPort()) {
			conn.WriteTo(r, addr)
		}
	}
}

// HTTPServer returns an http.Server for the description and control
// requests, with the limits above; the caller serves it on a LAN-side
// listener only.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:        s,
		MaxHeaderBytes: httpMaxHeaderBytes,
		ReadTimeout:    httpReadTimeout,
		WriteTimeout:   httpWriteTimeout,
		IdleTimeout:    httpIdleTimeout,
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	from, err := netip.ParseAddrPort(r.RemoteAddr)
	refused := err == nil && portmap.InPrefixes(s.Refused, from.Addr())
	if err != nil || !s.inside(from.Addr()) && !refused {
		s.stats.HTTPOutside.Add(1)
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	w.Header().Set("Server", serverHeader)
	switch {
	case r.Method == "SUBSCRIBE" || r.Method == "UNSUBSCRIBE":
		s.subscribe(w, r)
	case r.Method == http.MethodGet && r.URL.Path == descPath:
		s.stats.Described.Add(1)
		w.Header().Set("Content-Type", `text/xml; charset="utf-8"`)
		w.Write(s.Device.description())
	case r.Method == http.MethodPost && r.URL.Path == ipConnCtl:
		s.control(w, r, from.Addr().Unmap(), refused)
	default:
		http.NotFound(w, r)
	}
}

// subscribe refuses eventing. A callback outside the inside prefixes is
// CallStranger (CVE-2020-12695): refused with 412 and counted apart.
func (s *Server) subscribe(w http.ResponseWriter, r *http.Request) {
	s.stats.Subscribe.Add(1)
	for _, cb := range strings.Split(r.Header.Get("Callback"), ">") {
		cb = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cb), "<"))
		if cb == "" {
			continue
		}
		host := ""
		if i := strings.Index(cb, "://"); i >= 0 {
			host = cb[i+3:]
			if j := strings.IndexAny(host, "/?#"); j >= 0 {
				host = host[:j]
			}
		}
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		a, err := netip.ParseAddr(strings.Trim(host, "[]"))
		if err != nil || !s.inside(a) {
			s.stats.CallStranger.Add(1)
			http.Error(w, "callback outside the LAN", http.StatusPreconditionFailed)
			return
		}
	}
	http.Error(w, "eventing not offered", http.StatusNotImplemented)
}

func (s *Server) control(w http.ResponseWriter, r *http.Request, client netip.Addr, refused bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSOAPBody))
	if err != nil {
		s.stats.SOAPBad.Add(1)
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	a, err := ParseAction(body)
	if err != nil {
		s.stats.SOAPBad.Add(1)
		s.fault(w, errInvalidAction)
		return
	}
	// The SOAPACTION header names the same action (UDA 1.1 section 3.2.1).
	hdr := strings.Trim(r.Header.Get("SOAPAction"), `" `)
	if _, name, ok := strings.Cut(hdr, "#"); !ok || name != a.Name {
		s.stats.SOAPBad.Add(1)
		s.fault(w, errInvalidAction)
		return
	}
	s.stats.Actions.Add(1)
	if refused {
		s.Table.RefuseZone()
		s.fault(w, errNotAuthorized)
		return
	}
	out, code := s.act(&a, client)
	if code != 0 {
		s.fault(w, code)
		return
	}
	w.Header().Set("Content-Type", `text/xml; charset="utf-8"`)
	w.Write(actionResponse(serviceIPv1, a.Name, out...))
}

func (s *Server) fault(w http.ResponseWriter, code int) {
	s.stats.ActionsRefused.Add(1)
	w.Header().Set("Content-Type", `text/xml; charset="utf-8"`)
	w.WriteHeader(http.StatusInternalServerError)
	w.Write(faultResponse(code))
}

// act runs a WANIPConnection:1 action, returning its output arguments
// or a UPnP error code.
func (s *Server) act(a *Action, client netip.Addr) ([]string, int) {
	t := s.Table
	switch a.Name {
	case "GetExternalIPAddress":
		ext := ""
		if e := t.External(); e.Is4() {
			ext = e.String()
		}
		return []string{"NewExternalIPAddress", ext}, 0
	case "GetConnectionTypeInfo":
		return []string{"NewConnectionType", "IP_Routed", "NewPossibleConnectionTypes", "IP_Routed"}, 0
	case "GetStatusInfo":
		status := "Connected"
		if !t.External().Is4() {
			status = "Disconnected"
		}
		return []string{"NewConnectionStatus", status, "NewLastConnectionError", "ERROR_NONE", "NewUptime", strconv.FormatUint(uint64(t.Epoch()), 10)}, 0
	case "AddPortMapping":
		return nil, s.add(a, client)
	case "DeletePortMapping":
		proto, port, code := portArgs(a)
		if code != 0 {
			return nil, code
		}
		err := t.DeleteExternal(portmap.UPnP, client, proto, port)
		switch {
		case errors.Is(err, portmap.ErrNotFound):
			return nil, errNoSuchEntry
		case err != nil:
			return nil, errNotAuthorized
		}
		return nil, 0
	case "GetSpecificPortMappingEntry":
		proto, port, code := portArgs(a)
		if code != 0 {
			return nil, code
		}
		m, ok := t.LookupExternal(proto, port)
		if !ok {
			return nil, errNoSuchEntry
		}
		return s.entry(&m, false), 0
	case "GetGenericPortMappingEntry":
		i, err := strconv.ParseUint(a.Args["NewPortMappingIndex"], 10, 16)
		if err != nil {
			return nil, errInvalidArgs
		}
		ms := t.Mappings()
		if i >= uint64(len(ms)) {
			return nil, errArrayIndexInvalid
		}
		return s.entry(&ms[i], true), 0
	}
	return nil, errInvalidAction
}

// entry is a mapping as GetSpecific/GetGenericPortMappingEntry give it.
func (s *Server) entry(m *portmap.Mapping, generic bool) []string {
	proto := "UDP"
	if m.Proto == natengine.ProtoTCP {
		proto = "TCP"
	}
	var out []string
	if generic {
		out = []string{"NewRemoteHost", "", "NewExternalPort", strconv.Itoa(int(m.External)), "NewProtocol", proto}
	}
	return append(out,
		"NewInternalPort", strconv.Itoa(int(m.Internal.Port())),
		"NewInternalClient", m.Internal.Addr().String(),
		"NewEnabled", "1",
		"NewPortMappingDescription", m.Description,
		"NewLeaseDuration", strconv.Itoa(int(m.Lifetime(s.Table.Now())/time.Second)))
}

// portArgs reads NewProtocol and NewExternalPort; NewRemoteHost must be
// the wildcard (remote-host mappings are not offered).
func portArgs(a *Action) (uint8, uint16, int) {
	if a.Args["NewRemoteHost"] != "" {
		return 0, 0, errRemoteHostWildcard
	}
	var proto uint8
	switch strings.ToUpper(a.Args["NewProtocol"]) {
	case "TCP":
		proto = natengine.ProtoTCP
	case "UDP":
		proto = natengine.ProtoUDP
	default:
		return 0, 0, errInvalidArgs
	}
	p, err := strconv.ParseUint(a.Args["NewExternalPort"], 10, 16)
	if err != nil {
		return 0, 0, errInvalidArgs
	}
	if p == 0 {
		return 0, 0, errWildCardExtPort
	}
	return proto, uint16(p), 0
}

// add is AddPortMapping (WANIPConnection:1 section 2.4.16) in secure
// mode when the table's policy says so: NewInternalClient must be the
// requester.
func (s *Server) add(a *Action, client netip.Addr) int {
	proto, ext, code := portArgs(a)
	if code != 0 {
		return code
	}
	in, err := strconv.ParseUint(a.Args["NewInternalPort"], 10, 16)
	if err != nil || in == 0 {
		return errInvalidArgs
	}
	host, err := netip.ParseAddr(a.Args["NewInternalClient"])
	if err != nil || !host.Is4() {
		return errInvalidArgs
	}
	lease, err := strconv.ParseUint(a.Args["NewLeaseDuration"], 10, 32)
	if err != nil {
		return errInvalidArgs
	}
	if en := a.Args["NewEnabled"]; en == "0" {
		return errInvalidArgs // disabled entries are not kept
	}
	life := time.Duration(lease) * time.Second
	if lease == 0 {
		life = s.Table.Policy().Clamp(1 << 62) // IGD v1: 0 is "permanent"; the policy's longest
	}
	_, err = s.Table.Map(portmap.Request{
		Owner: portmap.UPnP, Client: client, Proto: proto, Internal: netip.AddrPortFrom(host, uint16(in)),
		External: ext, Exact: true, ByExternal: true, Lifetime: life, Description: a.Args["NewPortMappingDescription"],
	})
	switch {
	case err == nil:
		return 0
	case errors.Is(err, portmap.ErrConflict):
		return errConflict
	case errors.Is(err, portmap.ErrHostLimit), errors.Is(err, portmap.ErrTotalLimit), errors.Is(err, portmap.ErrNoPort):
		return errNoPortMapsAvailable
	case errors.Is(err, portmap.ErrInvalid):
		return errInvalidArgs
	}
	return errNotAuthorized // secure mode, permission rules
}
