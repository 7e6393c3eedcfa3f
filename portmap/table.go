package portmap

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
)

// Owner is the protocol that made a mapping.
type Owner string

// Owners.
const (
	NATPMP Owner = "natpmp"
	PCP    Owner = "pcp"
	UPnP   Owner = "upnp"
)

// NonceLen is the length of a PCP mapping nonce (RFC 6887 section 11.1).
const NonceLen = 12

// Mapping is one port mapping: external port Port on the WAN address to
// Internal, for Proto.
type Mapping struct {
	Proto    uint8          `json:"proto"`    // natengine.ProtoTCP or ProtoUDP
	Internal netip.AddrPort `json:"internal"` // e.g. 192.168.1.10:3074
	External uint16         `json:"external"` // e.g. 3074
	// Peers restrict a PCP PEER mapping to these remote endpoints; empty
	// for MAP, NAT-PMP and UPnP.
	Peers       []netip.AddrPort `json:"peers,omitempty"`
	Owner       Owner            `json:"owner"`  // the protocol that made it
	Client      netip.Addr       `json:"client"` // the address that asked, e.g. 192.168.1.10
	Nonce       [NonceLen]byte   `json:"nonce"`  // PCP's mapping nonce; zero otherwise
	Description string           `json:"description,omitempty"`
	Created     time.Time        `json:"created"`
	Expires     time.Time        `json:"expires"`
}

// Lifetime returns the time left at now, never negative.
func (m *Mapping) Lifetime(now time.Time) time.Duration { return max(m.Expires.Sub(now), 0) }

// LifetimeSecs is Lifetime in whole seconds, rounded to the nearest: the
// answer to a request that just made or renewed a mapping says the
// lifetime granted (3600, not the 3599 truncation would give once a
// microsecond has passed).
func (m *Mapping) LifetimeSecs(now time.Time) uint32 {
	return uint32(m.Lifetime(now).Round(time.Second) / time.Second)
}

// Request asks for a mapping (or its renewal).
type Request struct {
	Owner    Owner
	Client   netip.Addr     // the request's source address, e.g. 192.168.1.10
	Proto    uint8          // natengine.ProtoTCP or ProtoUDP
	Internal netip.AddrPort // the endpoint to map to, e.g. 192.168.1.10:3074
	// External is the external port suggested, e.g. 3074; 0 means the
	// internal port.
	External uint16
	// Exact: only External will do (PCP PREFER_FAILURE, UPnP
	// AddPortMapping); otherwise another permitted free port is chosen.
	Exact bool
	// ByExternal: the mapping is named by its external port (UPnP),
	// not by its internal endpoint (NAT-PMP, PCP).
	ByExternal  bool
	Lifetime    time.Duration // asked for; clamped by the policy
	Nonce       [NonceLen]byte
	Peer        netip.AddrPort // PCP PEER: the remote peer; invalid for MAP
	Description string
}

// Errors a request is refused with; each is counted in Stats. The
// protocol servers map them to their result codes.
var (
	ErrInvalid      = errors.New("portmap: invalid request")
	ErrSecureMode   = errors.New("portmap: secure mode: a host maps only to itself")
	ErrNotPermitted = errors.New("portmap: no permission rule allows this mapping")
	ErrHostLimit    = errors.New("portmap: host holds its limit of mappings")
	ErrTotalLimit   = errors.New("portmap: mapping table full")
	ErrNoPort       = errors.New("portmap: no permitted external port free")
	ErrConflict     = errors.New("portmap: external port mapped to another host")
	ErrNonce        = errors.New("portmap: nonce does not match the mapping's")
	ErrNotOwner     = errors.New("portmap: mapping belongs to another host")
	ErrNotFound     = errors.New("portmap: no such mapping")
	ErrNoExternal   = errors.New("portmap: no external address")
	// ErrZone: the request comes from an inside zone that may not map
	// ports (a guest zone; config port_mapping: zones:).
	ErrZone = errors.New("portmap: the host's zone may not map ports")
)

// NAT is the NAT engine as the table uses it (natengine.Engine).
type NAT interface {
	AddPortMapping(m natengine.PortMapping) error
	RemovePortMapping(proto uint8, in natengine.Iface, port uint16) bool
}

// Config configures a Table.
type Config struct {
	Policy Policy
	NAT    NAT             // where mappings become DNAT entries
	WAN    natengine.Iface // the interface the mappings listen on
	// ExternalAddr returns the WAN's IPv4 address, invalid while there
	// is none (no DHCP lease yet).
	ExternalAddr func() netip.Addr
	// StateFile, when set, is where the mappings are saved on every
	// change (statedir atomic write) and read back by Restore, e.g.
	// /var/lib/gvrouter/portmap.json.
	StateFile string
	Now       func() time.Time // nil: time.Now
	Logf      func(format string, args ...any)
}

// Table holds the port mappings. It is safe for concurrent use.
type Table struct {
	cfg   Config
	stats Stats

	// mu protects byExt, start and dirty.
	mu    sync.Mutex
	byExt map[extKey]*Mapping
	start time.Time // the epoch's start (RFC 6886 section 3.6, RFC 6887 section 8.5)
	dirty bool      // renewals not yet saved
}

type extKey struct {
	port  uint16
	proto uint8
}

// New returns an empty table whose epoch starts now.
func New(cfg Config) (*Table, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.NAT == nil || cfg.ExternalAddr == nil {
		return nil, errors.New("portmap: config needs NAT and ExternalAddr")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Table{cfg: cfg, byExt: map[extKey]*Mapping{}, start: cfg.Now()}, nil
}

// Stats returns the table's counters.
func (t *Table) Stats() *Stats { return &t.stats }

// Policy returns the table's policy.
func (t *Table) Policy() *Policy { return &t.cfg.Policy }

// Now returns the table's clock's time.
func (t *Table) Now() time.Time { return t.cfg.Now() }

// External returns the external IPv4 address, invalid while none.
func (t *Table) External() netip.Addr { return t.cfg.ExternalAddr() }

// Epoch returns the seconds since the epoch's start (RFC 6886 section
// 3.6 "Seconds Since Start of Epoch", RFC 6887 section 8.5 epoch time).
func (t *Table) Epoch() uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return uint32(max(t.cfg.Now().Sub(t.start), 0) / time.Second)
}

// ResetEpoch starts a new epoch, as after the loss of the mappings
// (clients then renew theirs).
func (t *Table) ResetEpoch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = t.cfg.Now()
}

// Map creates the mapping r asks for or renews the one it names, and
// returns a copy of it. Refusals wrap one of the Err values above.
func (t *Table) Map(r Request) (Mapping, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, err := t.mapLocked(&r)
	if err != nil {
		return Mapping{}, err
	}
	return m.clone(), nil
}

func (t *Table) refuse(c interface{ Add(uint64) uint64 }, err error, r *Request) error {
	c.Add(1)
	return fmt.Errorf("%s %s %s from %s: %w", r.Owner, protoName(r.Proto), r.Internal, r.Client, err)
}

func (t *Table) mapLocked(r *Request) (*Mapping, error) {
	now := t.cfg.Now()
	r.Internal = netip.AddrPortFrom(r.Internal.Addr().Unmap(), r.Internal.Port())
	r.Client = r.Client.Unmap()
	if (r.Proto != natengine.ProtoTCP && r.Proto != natengine.ProtoUDP) || !r.Internal.Addr().Is4() ||
		r.Internal.Port() == 0 || r.Internal.Addr().IsUnspecified() || r.Lifetime <= 0 {
		return nil, t.refuse(&t.stats.Invalid, ErrInvalid, r)
	}
	if t.cfg.Policy.Secure && r.Internal.Addr() != r.Client {
		return nil, t.refuse(&t.stats.Secure, ErrSecureMode, r)
	}
	ext := r.External
	if ext == 0 {
		ext = r.Internal.Port()
	}
	var old *Mapping
	if r.ByExternal {
		old = t.byExt[extKey{port: ext, proto: r.Proto}]
		switch {
		case old == nil || old.Internal == r.Internal:
		case old.Internal.Addr() == r.Internal.Addr() && old.Client == r.Client:
			// The same host moves its port to another internal port
			// (UPnP AddPortMapping overwrites its own entry): replace it.
			t.cfg.NAT.RemovePortMapping(old.Proto, t.cfg.WAN, old.External)
			delete(t.byExt, extKey{port: ext, proto: r.Proto})
			old = nil
		default:
			return nil, t.refuse(&t.stats.Conflict, ErrConflict, r)
		}
	} else {
		old = t.findLocked(r.Proto, r.Internal)
	}
	if old != nil {
		if old.Owner == PCP && r.Owner == PCP && old.Nonce != r.Nonce {
			return nil, t.refuse(&t.stats.Nonce, ErrNonce, r)
		}
		if r.Exact && r.External != 0 && old.External != r.External {
			return nil, t.refuse(&t.stats.Conflict, ErrConflict, r)
		}
		if r.Peer.IsValid() && len(old.Peers) > 0 && !containsPeer(old.Peers, r.Peer) {
			peers := append(append([]netip.AddrPort(nil), old.Peers...), r.Peer)
			if err := t.install(old, peers); err != nil {
				return nil, t.refuse(&t.stats.NATError, err, r)
			}
			old.Peers = peers
		}
		old.Expires = now.Add(t.cfg.Policy.Clamp(r.Lifetime))
		if r.Description != "" {
			old.Description = r.Description
		}
		t.dirty = true
		t.stats.Renewed.Add(1)
		return old, nil
	}
	if len(t.byExt) >= t.cfg.Policy.maxTotal() {
		return nil, t.refuse(&t.stats.TotalLimit, ErrTotalLimit, r)
	}
	if t.countLocked(r.Internal.Addr()) >= t.cfg.Policy.maxPerHost() {
		return nil, t.refuse(&t.stats.HostLimit, ErrHostLimit, r)
	}
	ranges := t.cfg.Policy.permitted(r.Internal.Addr(), r.Internal.Port())
	if len(ranges) == 0 || (r.Exact && !t.cfg.Policy.Permits(r.Internal.Addr(), r.Internal.Port(), ext)) {
		return nil, t.refuse(&t.stats.Permission, ErrNotPermitted, r)
	}
	m := &Mapping{
		Proto: r.Proto, Internal: r.Internal, Owner: r.Owner, Client: r.Client, Nonce: r.Nonce,
		Description: r.Description, Created: now, Expires: now.Add(t.cfg.Policy.Clamp(r.Lifetime)),
	}
	if r.Peer.IsValid() {
		m.Peers = []netip.AddrPort{r.Peer}
	}
	try := func(p uint16) (bool, error) {
		if p == 0 || t.byExt[extKey{port: p, proto: r.Proto}] != nil || !t.cfg.Policy.Permits(r.Internal.Addr(), r.Internal.Port(), p) {
			return false, nil
		}
		m.External = p
		err := t.install(m, m.Peers)
		if errors.Is(err, natengine.ErrPortInUse) {
			return false, nil
		}
		return err == nil, err
	}
	ok, err := try(ext)
	if err == nil && !ok {
		if r.Exact {
			return nil, t.refuse(&t.stats.Conflict, ErrConflict, r)
		}
		ok, err = t.searchLocked(ranges, ext, try)
	}
	switch {
	case err != nil:
		return nil, t.refuse(&t.stats.NATError, err, r)
	case !ok:
		return nil, t.refuse(&t.stats.NoPort, ErrNoPort, r)
	}
	t.byExt[extKey{port: m.External, proto: m.Proto}] = m
	t.stats.Created.Add(1)
	t.saveLocked()
	return m, nil
}

// maxSearch bounds the external ports one request tries after its own:
// each try is a NAT engine call, and a request that finds nothing in
// this many is refused (ErrNoPort) rather than stalling the server.
const maxSearch = 256

// searchLocked tries the ports of ranges after want (or, outside a
// range, from a place derived from it), up to maxSearch of them.
func (t *Table) searchLocked(ranges []PortRange, want uint16, try func(uint16) (bool, error)) (bool, error) {
	n := 0
	for _, rg := range ranges {
		size := uint32(rg.Last) - uint32(rg.First) + 1
		off := uint32(want) % size
		if rg.Contains(want) {
			off = uint32(want-rg.First) + 1 // the ports after the one asked for
		}
		for i := uint32(0); i < size && n < maxSearch; i, n = i+1, n+1 {
			p := uint16(uint32(rg.First) + (off+i)%size)
			if ok, err := try(p); ok || err != nil {
				return ok, err
			}
		}
	}
	return false, nil
}

func (t *Table) install(m *Mapping, peers []netip.AddrPort) error {
	return t.cfg.NAT.AddPortMapping(natengine.PortMapping{Proto: m.Proto, In: t.cfg.WAN, Port: m.External, To: m.Internal, Peers: peers})
}

func (t *Table) findLocked(proto uint8, internal netip.AddrPort) *Mapping {
	for _, m := range t.byExt {
		if m.Proto == proto && m.Internal == internal {
			return m
		}
	}
	return nil
}

func (t *Table) countLocked(host netip.Addr) int {
	n := 0
	for _, m := range t.byExt {
		if m.Internal.Addr() == host {
			n++
		}
	}
	return n
}

// Delete removes the mapping of proto to internal on the request of
// client. owner and nonce are the deleting protocol's (a PCP delete must
// carry the mapping's nonce). A host deletes only its own mappings.
func (t *Table) Delete(owner Owner, client netip.Addr, proto uint8, internal netip.AddrPort, nonce [NonceLen]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &Request{Owner: owner, Client: client.Unmap(), Proto: proto, Internal: netip.AddrPortFrom(internal.Addr().Unmap(), internal.Port())}
	m := t.findLocked(proto, r.Internal)
	if m == nil {
		return ErrNotFound
	}
	return t.deleteLocked(m, r, nonce)
}

// DeleteExternal removes the mapping on proto/external port on the
// request of client (UPnP DeletePortMapping).
func (t *Table) DeleteExternal(owner Owner, client netip.Addr, proto uint8, external uint16) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.byExt[extKey{port: external, proto: proto}]
	if m == nil {
		return ErrNotFound
	}
	r := &Request{Owner: owner, Client: client.Unmap(), Proto: proto, Internal: m.Internal}
	return t.deleteLocked(m, r, m.Nonce)
}

// DeleteAll removes every mapping of proto (0: both) that client's own
// address is the internal host of, made by owner (NAT-PMP's delete of
// all mappings, RFC 6886 section 3.4), returning how many.
func (t *Table) DeleteAll(owner Owner, client netip.Addr, proto uint8) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	client = client.Unmap()
	n := 0
	for k, m := range t.byExt {
		if m.Owner == owner && m.Internal.Addr() == client && (proto == 0 || m.Proto == proto) {
			t.cfg.NAT.RemovePortMapping(m.Proto, t.cfg.WAN, m.External)
			delete(t.byExt, k)
			t.stats.Deleted.Add(1)
			n++
		}
	}
	if n > 0 {
		t.saveLocked()
	}
	return n
}

func (t *Table) deleteLocked(m *Mapping, r *Request, nonce [NonceLen]byte) error {
	if m.Internal.Addr() != r.Client && (t.cfg.Policy.Secure || m.Client != r.Client) {
		return t.refuse(&t.stats.NotOwner, ErrNotOwner, r)
	}
	if m.Owner == PCP && r.Owner == PCP && m.Nonce != nonce {
		return t.refuse(&t.stats.Nonce, ErrNonce, r)
	}
	t.cfg.NAT.RemovePortMapping(m.Proto, t.cfg.WAN, m.External)
	delete(t.byExt, extKey{port: m.External, proto: m.Proto})
	t.stats.Deleted.Add(1)
	t.saveLocked()
	return nil
}

// Sweep removes the mappings whose lifetime has run out and saves
// renewals not yet saved; the caller runs it about once a second.
// It returns how many expired.
func (t *Table) Sweep() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	n := 0
	for k, m := range t.byExt {
		if !now.Before(m.Expires) {
			t.cfg.NAT.RemovePortMapping(m.Proto, t.cfg.WAN, m.External)
			delete(t.byExt, k)
			t.stats.Expired.Add(1)
			n++
		}
	}
	if n > 0 || t.dirty {
		t.saveLocked()
	}
	return n
}

// Lookup returns the mapping of proto to internal.
func (t *Table) Lookup(proto uint8, internal netip.AddrPort) (Mapping, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.findLocked(proto, internal); m != nil {
		return m.clone(), true
	}
	return Mapping{}, false
}

// LookupExternal returns the mapping on proto/external port.
func (t *Table) LookupExternal(proto uint8, external uint16) (Mapping, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.byExt[extKey{port: external, proto: proto}]; m != nil {
		return m.clone(), true
	}
	return Mapping{}, false
}

// Mappings returns copies of the mappings, by protocol then external
// port (the order UPnP's GetGenericPortMappingEntry indexes).
func (t *Table) Mappings() []Mapping {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Mapping, 0, len(t.byExt))
	for _, m := range t.byExt {
		out = append(out, m.clone())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Proto != out[j].Proto {
			return out[i].Proto < out[j].Proto
		}
		return out[i].External < out[j].External
	})
	return out
}

func (m *Mapping) clone() Mapping {
	c := *m
	c.Peers = append([]netip.AddrPort(nil), m.Peers...)
	return c
}

func containsPeer(ps []netip.AddrPort, p netip.AddrPort) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func protoName(p uint8) string {
	switch p {
	case natengine.ProtoTCP:
		return "tcp"
	case natengine.ProtoUDP:
		return "udp"
	}
	return fmt.Sprintf("proto-%d", p)
}
