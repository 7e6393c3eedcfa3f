package dhcp4server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/services/internal/tokenbucket"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

// Transport carries the server's UDP datagrams: it receives every IPv4 UDP
// datagram to port 67 on the LAN (broadcast or unicast to the server) and
// sends whole datagrams with the Ethernet destination given, so that a
// reply reaches a client that cannot answer ARP yet. *rawudp.Conn on port
// 67 is one. Send must be safe to call from several goroutines.
type Transport interface {
	// Send sends one datagram; a nil DstMAC means broadcast.
	Send(rawudp.Packet) error
	// Recv returns the next datagram received, or an error when ctx is
	// done or the transport is closed.
	Recv(ctx context.Context) (rawudp.Packet, error)
}

// ErrRunning is returned by Run when another Run is in progress.
var ErrRunning = errors.New("dhcp4server: already running")

// Ports of RFC 2131 §4.1.
const (
	ServerPort = 67
	ClientPort = 68
)

// maxPending bounds the ACKs waiting for the lease file; beyond it an ACK
// is dropped (DropBacklog) and the client's retransmission gets it.
const maxPending = 1024

// sweepInterval is how often Run forgets expired offers and quarantines,
// notices expired leases (OnChange) and retries a failed lease write.
const sweepInterval = 5 * time.Second

// Server is one LAN interface's DHCPv4 server. Its methods are safe for
// concurrent use.
type Server struct {
	cfg   Config
	t     Transport
	log   *slog.Logger
	stats Stats
	opts  encodedOptions

	first, last uint32 // the range
	size        int

	running atomic.Bool

	mu       sync.Mutex
	byAddr   map[netip.Addr]*binding // every binding: range, statics, quarantines
	byClient map[string]*binding     // the range's bindings owned by a client
	statics  map[string]*binding     // static bindings by string(MAC)
	inRange  int                     // bindings in the range
	cursor   uint32                  // offset in the range where the search for a never-used address resumes
	reuseAt  time.Time               // no range binding becomes reusable before this (a lower bound)
	gen      uint64                  // bumped by every change the lease file must record
	durable  uint64                  // the gen the lease file holds
	fileErr  string
	problem  string
	lastFull time.Time // last pool-exhausted log line

	newLeases tokenbucket.Bucket          // the interface's new leases (Config.NewLeaseBurst, NewLeaseRate)
	leaseRate tokenbucket.Rate            // newLeases' rate
	clients   *tokenbucket.Table[[6]byte] // messages by sender MAC (clientBurst, clientRate)

	cmu     sync.Mutex
	pending []result // replies waiting for the lease file
	kick    chan struct{}

	changeMu sync.Mutex // serializes OnChange
}

// binding is what the server knows of one address: the client it is
// offered or leased to, or a quarantine.
type binding struct {
	key      string // client identity (clientKey); "" for a quarantine
	mac      net.HardwareAddr
	clientID []byte
	addr     netip.Addr
	hostname string       // option 12 sanitized, as last sent
	static   *StaticLease // non-nil: a fixed lease

	expiry      time.Time // lease end; zero = never bound
	released    bool
	offerUntil  time.Time
	quarantine  time.Time // a declined address: unusable until then
	expiredSeen bool      // Expired counted for this expiry
}

// busyUntil is when the binding stops holding its address; a static one
// always holds it.
func (b *binding) busyUntil() time.Time {
	t := b.offerUntil
	if !b.released && b.expiry.After(t) {
		t = b.expiry
	}
	if b.quarantine.After(t) {
		t = b.quarantine
	}
	return t
}

func (b *binding) busy(now time.Time) bool { return b.static != nil || b.busyUntil().After(now) }

// bound reports an acknowledged, unreleased, unexpired lease.
func (b *binding) bound(now time.Time) bool { return !b.released && b.expiry.After(now) }

// client is who sent a message.
type client struct {
	key      string
	mac      net.HardwareAddr
	clientID []byte
	static   *StaticLease
}

// clientKey is a client's identity: the client identifier when it sends
// one (RFC 2131 §4.2: "the combination of 'client identifier' or
// 'chaddr'"), else its hardware address; a static lease is by MAC only.
func clientKey(mac net.HardwareAddr, clientID []byte, static bool) string {
	switch {
	case static:
		return "s" + string(mac)
	case clientID != nil:
		return "i" + string(clientID)
	default:
		return "m" + string(mac)
	}
}

// New returns a server for cfg, which Validate must accept, on t. It
// reads cfg.LeaseFile; a lease file that is missing starts an empty table,
// and one that is corrupt is reported (Status, Stats.LeaseFileCorrupt),
// kept beside as LeaseFile+".corrupt" and replaced: neither is an error.
func New(cfg Config, t Transport) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:      cfg,
		t:        t,
		log:      cfg.Log,
		first:    u32(cfg.RangeStart),
		last:     u32(cfg.RangeEnd),
		byAddr:   map[netip.Addr]*binding{},
		byClient: map[string]*binding{},
		statics:  map[string]*binding{},
		kick:     make(chan struct{}, 1),
	}
	s.leaseRate = tokenbucket.Rate{Burst: float64(cfg.NewLeaseBurst), PerSecond: cfg.NewLeaseRate}
	s.newLeases = tokenbucket.Full(s.leaseRate, cfg.Clock.Now())
	s.clients = tokenbucket.NewTable[[6]byte](tokenbucket.Rate{Burst: clientBurst, PerSecond: clientRate}, maxClients)
	s.size = int(s.last-s.first) + 1
	s.cursor = uint32(cfg.Rand.IntN(s.size))
	s.opts = encodeOptions(&s.cfg)
	for i := range s.cfg.Static {
		st := &s.cfg.Static[i]
		b := &binding{key: clientKey(st.MAC, nil, true), mac: st.MAC, addr: st.Addr, static: st}
		s.byAddr[st.Addr] = b
		s.statics[string(st.MAC)] = b
	}
	if cfg.LeaseFile != "" {
		s.load()
	}
	return s, nil
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Run serves until ctx is done (returning nil) or the transport fails.
// ACKs wait for their lease to be written by a second goroutine, which
// commits together every change made while it was writing. Only one Run
// may be in progress (ErrRunning); a Server may be run again after Run
// returns.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer s.running.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// The committer stops only after the last datagram was handled, so
	// that its final write covers every change.
	stopCommitter := make(chan struct{})
	defer wg.Wait()
	defer close(stopCommitter)
	defer cancel()
	if s.cfg.LeaseFile != "" {
		wg.Go(func() { s.committer(stopCommitter) })
	}
	wg.Go(func() {
		tk := time.NewTicker(sweepInterval)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				s.sweep()
			}
		}
	})
	for {
		p, err := s.t.Recv(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dhcp4server: receive: %w", err)
		}
		s.serve(p)
	}
}

// serve handles one datagram and sends its reply, through the committer
// when the reply must wait for the lease file.
func (s *Server) serve(p rawudp.Packet) {
	r := s.handle(p)
	if r.durable && s.cfg.LeaseFile != "" {
		s.enqueue(r)
		return
	}
	if r.send {
		s.send(r)
	}
	if r.changed {
		s.onChange()
	}
}

// result is what handle decided.
type result struct {
	reply   rawudp.Packet
	typ     byte // the reply's message type
	send    bool
	durable bool   // the reply must wait until the lease file holds gen
	changed bool   // the lease table changed
	gen     uint64 // the change's generation
}

func (s *Server) send(r result) {
	if err := s.t.Send(r.reply); err != nil {
		s.stats.SendErrors.Add(1)
		s.log.Debug("dhcp4server: send", "to", r.reply.Dst, "err", err)
		return
	}
	switch r.typ {
	case msgOffer:
		s.stats.Offer.Add(1)
	case msgAck:
		s.stats.Ack.Add(1)
	case msgNak:
		s.stats.Nak.Add(1)
	}
}

// onChange calls OnChange, one call at a time.
func (s *Server) onChange() {
	if s.cfg.OnChange != nil {
		s.changeMu.Lock()
		defer s.changeMu.Unlock()
		s.cfg.OnChange()
	}
}

// sweep forgets offers and quarantines that ran out, counts the leases
// that expired since the last sweep (calling OnChange when one did) and
// retries a lease write that failed.
func (s *Server) sweep() {
	now := s.cfg.Clock.Now()
	changed := false
	s.mu.Lock()
	for _, b := range s.byAddr {
		if b.static == nil && b.expiry.IsZero() && !b.busyUntil().After(now) {
			s.remove(b) // an offer never taken, or a quarantine over
			continue
		}
		if !b.expiry.IsZero() && !b.released && !b.expiry.After(now) && !b.expiredSeen {
			b.expiredSeen = true
			s.stats.Expired.Add(1)
			changed = true
		}
	}
	retry := s.gen != s.durable && s.cfg.LeaseFile != ""
	s.mu.Unlock()
	if retry {
		s.poke()
	}
	if changed {
		s.onChange()
	}
}

// remove forgets b.
func (s *Server) remove(b *binding) {
	if s.byAddr[b.addr] == b {
		delete(s.byAddr, b.addr)
		if s.inPool(b.addr) {
			s.inRange--
		}
	}
	if b.key != "" && s.byClient[b.key] == b {
		delete(s.byClient, b.key)
	}
}

// touch keeps reuseAt a lower bound after b's timers changed.
func (s *Server) touch(b *binding) {
	if bu := b.busyUntil(); bu.Before(s.reuseAt) {
		s.reuseAt = bu
	}
}

func (s *Server) inPool(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	v := u32(a)
	return v >= s.first && v <= s.last
}

// own returns c's binding: its static lease, else its current or
// previous one in the range, else nil.
func (s *Server) own(c *client) *binding {
	if c.static != nil {
		return s.statics[string(c.mac)]
	}
	return s.byClient[c.key]
}

// holdsNone reports whether c holds no address now: not static, and no
// live offer or lease. Giving it one is a new lease.
func (s *Server) holdsNone(c *client, now time.Time) bool {
	if c.static != nil {
		return false
	}
	b := s.own(c)
	return b == nil || !b.busy(now)
}

// admitLocked reports whether c may be given an address now: it holds
// one already, or the interface's new-lease budget has a token (which the
// caller takes once it gives the address). A refusal is counted
// (DropNewLeaseLimited).
func (s *Server) admitLocked(c *client, now time.Time) bool {
	if !s.holdsNone(c, now) {
		return true
	}
	if s.newLeases.Fill(now, s.leaseRate); s.newLeases.Ready() {
		return true
	}
	s.stats.drop(DropNewLeaseLimited)
	return false
}

// clientAllowLocked spends one of mac's message tokens, or reports that
// it has none left. A MAC that finds the table full (a flood of ever-new
// MACs, each sending a few messages) passes: the budget is for one MAC
// sending many, which keeps its entry, and a client whose idle entry was
// forgotten must still renew; the new-lease budget rations the flood.
func (s *Server) clientAllowLocked(mac [6]byte, now time.Time) bool {
	b := s.clients.Get(mac, now)
	switch {
	case b == nil:
		return true
	case !b.Ready():
		return false
	}
	b.Take()
	return true
}

// sender is the MAC a message's budget is kept by: the frame's Ethernet
// source, which a client cannot vary without varying its identity on the
// switch too; chaddr when the message was relayed (the frame's source is
// the relay agent's) or the transport gave no MAC.
func sender(p rawudp.Packet, m *dhcpv4.DHCPv4) [6]byte {
	if gi := ip4(m.GatewayIPAddr); len(p.SrcMAC) == 6 && (!gi.IsValid() || gi.IsUnspecified()) {
		return [6]byte(p.SrcMAC)
	}
	return [6]byte(m.ClientHWAddr)
}

// heldByOther reports whether a is a static lease's, offered or leased to
// another client, or quarantined.
func (s *Server) heldByOther(a netip.Addr, c *client, now time.Time) bool {
	b := s.byAddr[a]
	return b != nil && b.key != c.key && b.busy(now)
}

// available reports whether c may take a: in the range and not held by
// another.
func (s *Server) available(a netip.Addr, c *client, now time.Time) bool {
	return s.inPool(a) && !s.heldByOther(a, c, now)
}

// assign gives a (available to c) to c and returns its binding. c's
// binding for another address, and another client's expired record of a,
// are forgotten.
func (s *Server) assign(c *client, a netip.Addr) *binding {
	if old := s.byClient[c.key]; old != nil && old.addr != a {
		s.remove(old)
	}
	b := s.byAddr[a]
	if b != nil && b.key != c.key {
		s.remove(b)
		b = nil
	}
	if b == nil {
		b = &binding{key: c.key, addr: a}
		s.byAddr[a] = b
		s.byClient[c.key] = b
		s.inRange++
	}
	b.mac = slices.Clone(c.mac)
	b.clientID = slices.Clone(c.clientID)
	return b
}

// choose picks c's address for an OFFER (RFC 2131 §4.3.1): its static
// lease; else its current or previous binding; else the requested address
// if available; else a never-used address of the range; else the one
// released or expired longest ago. nil means the range is exhausted.
func (s *Server) choose(c *client, requested netip.Addr, now time.Time) *binding {
	if b := s.own(c); b != nil {
		return b
	}
	if requested.IsValid() && s.available(requested, c, now) {
		return s.assign(c, requested)
	}
	a, ok := s.free(now)
	if !ok {
		return nil
	}
	return s.assign(c, a)
}

// free returns an address no binding holds: a never-used one first (from
// the cursor on), else the least recently busy reusable one.
func (s *Server) free(now time.Time) (netip.Addr, bool) {
	if s.inRange < s.size {
		for range s.size {
			a := addrFrom32(s.first + s.cursor)
			s.cursor++
			if int(s.cursor) == s.size {
				s.cursor = 0
			}
			if s.byAddr[a] == nil {
				return a, true
			}
		}
	}
	if now.Before(s.reuseAt) {
		return netip.Addr{}, false
	}
	var best *binding
	var bestAt time.Time
	next := now.Add(100 * 365 * 24 * time.Hour)
	for _, b := range s.byAddr {
		if b.static != nil {
			continue
		}
		bu := b.busyUntil()
		if bu.After(now) {
			if bu.Before(next) {
				next = bu
			}
			continue
		}
		if best == nil || bu.Before(bestAt) || bu.Equal(bestAt) && b.addr.Less(best.addr) {
			best, bestAt = b, bu
		}
	}
	if best == nil {
		s.reuseAt = next
		return netip.Addr{}, false
	}
	return best.addr, true
}

// Hosts returns the host names of the bound leases and of the static
// leases that name one, lower case, for the DNS forwarder's local
// answers. A static lease's name wins over a client's; between two
// clients sending the same name, the later expiry wins.
func (s *Server) Hosts() map[string]netip.Addr {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]netip.Addr{}
	exp := map[string]time.Time{}
	for _, b := range s.byAddr {
		if b.static != nil && b.static.Hostname != "" {
			continue
		}
		if b.hostname == "" || !b.bound(now) {
			continue
		}
		if e, ok := exp[b.hostname]; ok && !b.expiry.After(e) {
			continue
		}
		out[b.hostname], exp[b.hostname] = b.addr, b.expiry
	}
	for _, st := range s.cfg.Static {
		if st.Hostname != "" {
			out[strings.ToLower(st.Hostname)] = st.Addr
		}
	}
	return out
}

// Status returns a snapshot of the lease table and the pool.
func (s *Server) Status() Status {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{
		ServerAddr: s.cfg.ServerAddr, Subnet: s.cfg.Subnet,
		RangeStart: s.cfg.RangeStart, RangeEnd: s.cfg.RangeEnd,
		PoolSize: s.size, LeaseFile: s.cfg.LeaseFile,
		LeaseFileError: s.fileErr, LeaseFileProblem: s.problem,
		Counters: s.stats.Counters(), Drops: s.stats.DropCounts(),
	}
	for _, b := range s.byAddr {
		if s.inPool(b.addr) && b.busy(now) {
			st.PoolUsed++
			switch {
			case b.quarantine.After(now):
				st.Declined++
			case !b.bound(now) && b.offerUntil.After(now):
				st.Offered++
			}
		}
		if b.static == nil && b.expiry.IsZero() {
			continue
		}
		l := Lease{MAC: MAC(slices.Clone(b.mac)), ClientID: slices.Clone(b.clientID), Addr: b.addr,
			Hostname: b.hostname, Expiry: b.expiry, Static: b.static != nil}
		if b.static != nil && b.static.Hostname != "" {
			l.Hostname = strings.ToLower(b.static.Hostname)
		}
		switch {
		case b.expiry.IsZero():
			l.State = LeaseUnused
		case b.released:
			l.State = LeaseReleased
		case b.expiry.After(now):
			l.State = LeaseBound
		default:
			l.State = LeaseExpired
		}
		st.Leases = append(st.Leases, l)
	}
	slices.SortFunc(st.Leases, func(a, b Lease) int { return a.Addr.Compare(b.Addr) })
	return st
}
