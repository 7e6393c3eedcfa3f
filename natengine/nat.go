package natengine

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// NAT mappings (RFC 4787 section 4.1).
//
// A mapping binds an internal endpoint (address, port or ICMP identifier,
// protocol) leaving through one interface to one external endpoint. It is
// endpoint-independent (REQ-1, RFC 5382 REQ-1): every flow from the internal
// endpoint through that interface reuses it, whatever the destination. An
// external endpoint belongs to exactly one internal endpoint: no port
// overloading (REQ-3, RFC 5382 REQ-7). A mapping lives while a flow uses it,
// so its lifetime is its flows' idle timeouts, refreshed by outbound packets
// (REQ-6) and inbound ones (allowed by REQ-6).

type intKey struct {
	addr  [16]byte
	port  uint16
	proto uint8
	out   Iface
}

type extKey struct {
	addr  [16]byte
	port  uint16
	proto uint8
}

type mapping struct {
	ik    intKey
	ek    extKey
	refs  int   // flows using the mapping; protected by nat.mu
	conns *conn // flows using the mapping, linked by mapNext/mapPrev; protected by nat.mu
}

type natTable struct {
	mu    sync.Mutex
	byInt map[intKey]*mapping // protected by mu
	byExt map[extKey]*mapping // protected by mu
	// releases counts deleted mappings and released reservations;
	// exhausted records its value when a range's full search failed, so a
	// flood against a full range costs one map lookup per new flow instead
	// of a 64k-port scan. Protected by mu.
	releases  uint64
	exhausted map[exhaustKey]exhaustMark
	// resv and resvAny count the router's port reservations (reserve.go)
	// on one address and on every address; nil until the first one.
	// Protected by mu.
	resv    map[extKey]int32
	resvAny map[anyKey]int32
	// hostPorts counts the mappings of each inside IPv4 address, none at
	// 0, when maxHostPorts (> 0) bounds them (limits.go). Protected by mu.
	hostPorts    map[[16]byte]int32
	maxHostPorts int32
	// pms is the set of port mappings (portmapping.go), never nil;
	// replaced whole under mu, read without it.
	pms atomic.Pointer[pmSet]
}

// exhaustMark is when a range's search failed: the release count and time.
type exhaustMark struct {
	releases uint64
	at       int64
}

// exhaustedFor is how long a failed search is trusted when nothing was
// released: the router's own sockets (Reserved) and rules may free ports
// without a mapping release.
const exhaustedFor = int64(time.Second)

// newNATTable sizes the mapping maps for min(max, preallocFlows) flows,
// each with its own mapping (the worst case), for the reason
// preallocFlows gives; past that they grow with use.
func newNATTable(max int) *natTable {
	n := min(max, preallocFlows)
	t := &natTable{byInt: make(map[intKey]*mapping, n), byExt: make(map[extKey]*mapping, n), exhausted: make(map[exhaustKey]exhaustMark)}
	t.pms.Store(&pmSet{})
	return t
}

// Port ranges searched when the internal port is not free (RFC 4787 REQ-3a:
// ports 0-1023 map into 0-1023).
const (
	lowPortFirst  = 1
	lowPortLast   = 1023
	highPortFirst = 1024
	highPortLast  = 65535
)

// acquire returns the mapping for the internal endpoint (proto, addr, port)
// leaving through out, creating one on an address of pool if needed, and
// links c to it. It fails with DropHostPorts when addr holds its limit of
// mappings, DropNoPort when no external port is free.
func (n *natTable) acquire(s *snapshot, c *conn, proto uint8, addr [16]byte, port uint16, out Iface, pool [][16]byte, rnd uint32, now int64) (*mapping, DropReason, bool) {
	ik := intKey{addr: addr, port: port, proto: proto, out: out}
	n.mu.Lock()
	defer n.mu.Unlock()
	if m := n.byInt[ik]; m != nil {
		for _, a := range pool {
			if a == m.ek.addr {
				n.linkLocked(m, c)
				return m, 0, true
			}
		}
		// The interface's address changed; the old mapping ages out with its flows.
	}
	if len(pool) == 0 {
		return nil, DropNoPort, false
	}
	if n.maxHostPorts > 0 && n.hostPorts[addr] >= n.maxHostPorts {
		return nil, DropHostPorts, false
	}
	// Paired pooling (RFC 4787 REQ-2): an internal address prefers one pool address.
	first := (&Tuple{Src: addr}).hash(0) % uint32(len(pool))
	for i := 0; i < len(pool); i++ {
		ext := pool[(first+uint32(i))%uint32(len(pool))]
		p, ok := n.mappedPortLocked(s, proto, ext, addr, port, out)
		if !ok {
			p, ok = n.findPortLocked(s, proto, ext, port, rnd, now)
		}
		if ok {
			m := &mapping{ik: ik, ek: extKey{addr: ext, port: p, proto: proto}}
			n.byInt[ik] = m
			n.byExt[m.ek] = m
			n.linkLocked(m, c)
			if n.maxHostPorts > 0 {
				n.hostPorts[addr]++
			}
			return m, 0, true
		}
	}
	return nil, DropNoPort, false
}

// mappedPortLocked returns the external port of a port mapping
// (portmapping.go) whose target is the internal endpoint (proto, addr,
// port) on out, listening on ext, if no NAT mapping holds it yet: the
// mapping's own outbound flows leave from its port.
func (n *natTable) mappedPortLocked(s *snapshot, proto uint8, ext, addr [16]byte, port uint16, out Iface) (uint16, bool) {
	p, ok := n.outboundPort(proto, addr, port, out)
	if !ok {
		return 0, false
	}
	if is := s.iface(out); is == nil || !is.has4 || is.addr4 != ext {
		return 0, false
	}
	if _, used := n.byExt[extKey{addr: ext, port: p, proto: proto}]; used {
		return 0, false
	}
	return p, true
}

// findPortLocked picks a free external port on ext: the internal port if
// free (port preservation, RFC 4787 section 4.2.1), else the first free one
// of the internal port's range from a random offset.
func (n *natTable) findPortLocked(s *snapshot, proto uint8, ext [16]byte, want uint16, rnd uint32, now int64) (uint16, bool) {
	if n.freeLocked(s, proto, ext, want) {
		return want, true
	}
	lo, hi := uint32(highPortFirst), uint32(highPortLast)
	switch {
	case proto == ProtoICMP:
		lo, hi = 0, 65535
	case want <= lowPortLast:
		lo, hi = lowPortFirst, lowPortLast
	}
	size := hi - lo + 1
	ek := exhaustKey{addr: ext, proto: proto, lo: lo}
	if m, ok := n.exhausted[ek]; ok && m.releases == n.releases && now-m.at < exhaustedFor {
		return 0, false // nothing was released since the last full search failed
	}
	// Visit every port of the range once, in a scattered order: i*portStride
	// mod size is a permutation because the stride is coprime to the range
	// sizes (64512 = 2^10*3^2*7, 1023 = 3*11*31, 65536 = 2^16).
	off := rnd % size
	for i := uint32(0); i < size; i++ {
		p := uint16(lo + (off+i*portStride)%size)
		if n.freeLocked(s, proto, ext, p) {
			return p, true
		}
	}
	if len(n.exhausted) > maxExhausted {
		clear(n.exhausted)
	}
	n.exhausted[ek] = exhaustMark{releases: n.releases, at: now}
	return 0, false
}

// portStride scatters the port search (a prime coprime to every range size).
const portStride = 7919

// maxExhausted bounds the exhausted-range cache.
const maxExhausted = 1024

// exhaustKey names a port range of one external address that had no free
// port at the last search.
type exhaustKey struct {
	addr  [16]byte
	proto uint8
	lo    uint32
}

func (n *natTable) freeLocked(s *snapshot, proto uint8, ext [16]byte, p uint16) bool {
	if _, used := n.byExt[extKey{addr: ext, port: p, proto: proto}]; used {
		return false
	}
	if proto == ProtoICMP {
		return true
	}
	if p == 0 || s.forwarded(proto, &ext, p) || n.reservedLocked(proto, ext, p) {
		return false
	}
	if _, _, ok := n.portMapped(s, proto, &ext, p); ok {
		return false
	}
	return s.reserved == nil || !s.reserved(proto, netip.AddrFrom4([4]byte(ext[:4])), p)
}

// inbound returns the mapping that owns external endpoint (proto, ext, port)
// if filtering f admits a packet from remote (RFC 4787 section 5), taking a
// reference for a new inbound flow. found reports whether a mapping exists.
// mapped reports whether a mapping holds the external address and port.
func (n *natTable) mapped(proto uint8, ext [16]byte, port uint16) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byExt[extKey{addr: ext, port: port, proto: proto}] != nil
}

func (n *natTable) inbound(proto uint8, ext [16]byte, port uint16, remote [16]byte, rport uint16, f Filtering) (m *mapping, found bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m = n.byExt[extKey{addr: ext, port: port, proto: proto}]
	if m == nil {
		return nil, false
	}
	ok := f == EndpointIndependent
	for o := m.conns; o != nil && !ok; o = o.mapNext {
		ra, rp := o.remote()
		ok = ra == remote && (f == AddressDependent || rp == rport)
	}
	if !ok {
		return nil, true
	}
	m.refs++ // inbound flows hold the mapping but do not widen its filter
	return m, true
}

// remote returns the far endpoint of a flow that uses a mapping, as the
// mapping's filter sees it: the destination of an outbound flow, the
// source of an inbound one. A hairpinned flow's is the external endpoint
// its sender addressed (a peer's mapping or a port forward), not the LAN
// host behind it: the send counts as the sender's outbound packet to that
// endpoint. nat.mu is held.
func (c *conn) remote() ([16]byte, uint16) {
	switch {
	case c.hairpin:
		return c.orig.Dst, c.orig.DstPort
	case c.mapIn:
		return c.orig.Src, c.orig.SrcPort
	}
	return c.mid.Dst, c.mid.DstPort
}

func (n *natTable) linkLocked(m *mapping, c *conn) {
	m.refs++
	c.mapPrev, c.mapNext = nil, m.conns
	if m.conns != nil {
		m.conns.mapPrev = c
	}
	m.conns = c
}

// release drops c's hold on m (unlinking c if linked, i.e. if m is c's SNAT
// mapping) and deletes m when no flow uses it.
func (n *natTable) release(m *mapping, c *conn, linked bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !linked {
		n.dropRefLocked(m)
		return
	}
	if c.mapPrev != nil {
		c.mapPrev.mapNext = c.mapNext
	} else if m.conns == c {
		m.conns = c.mapNext
	}
	if c.mapNext != nil {
		c.mapNext.mapPrev = c.mapPrev
	}
	c.mapPrev, c.mapNext = nil, nil
	n.dropRefLocked(m)
}

func (n *natTable) dropRefLocked(m *mapping) {
	m.refs--
	if m.refs == 0 {
		n.releases++
		if n.maxHostPorts > 0 {
			if n.hostPorts[m.ik.addr]--; n.hostPorts[m.ik.addr] <= 0 {
				delete(n.hostPorts, m.ik.addr)
			}
		}
		if n.byInt[m.ik] == m {
			delete(n.byInt, m.ik)
		}
		if n.byExt[m.ek] == m {
			delete(n.byExt, m.ek)
		}
	}
}

// Mapping describes one NAT mapping for the status page.
type Mapping struct {
	Proto    uint8
	Internal netip.AddrPort
	External netip.AddrPort
	Out      Iface
	Flows    int
}

// Mappings returns a snapshot of the NAT mappings.
func (e *Engine) Mappings() []Mapping {
	n := e.nat
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Mapping, 0, len(n.byInt))
	for _, m := range n.byExt {
		out = append(out, Mapping{
			Proto:    m.ik.proto,
			Internal: netip.AddrPortFrom(toAddr(m.ik.addr, false), m.ik.port),
			External: netip.AddrPortFrom(toAddr(m.ek.addr, false), m.ek.port),
			Out:      m.ik.out,
			Flows:    m.refs,
		})
	}
	return out
}
