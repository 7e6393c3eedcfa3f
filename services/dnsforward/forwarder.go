package dnsforward

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Forwarder is a caching DNS forwarder. It is safe for concurrent use:
// Serve and ServeTCP may run on several sockets at once, and
// SetUpstreams, SetHosts, SetLocalPrefixes and SetListen may be called
// at any time.
type Forwarder struct {
	cfg    Config
	policy ttlPolicy
	cache  *cache
	stats  Stats

	zones     atomic.Pointer[zones]
	upstreams atomic.Pointer[[]netip.AddrPort]
	preferred atomic.Uint32 // index into upstreams of the last one that answered
	hosts     atomic.Pointer[hostTable]

	randMu sync.Mutex // randMu protects cfg.Rand

	mu       sync.Mutex       // mu protects inflight
	inflight map[string]*call // by cache key

	// listenMu protects listeners and listenOrder (SetListen's sockets).
	listenMu    sync.Mutex
	listeners   map[netip.AddrPort]*listener
	listenOrder []netip.AddrPort // the keys of listeners, in SetListen's order

	// ctx ends the upstream queries when Run returns; wg counts the
	// goroutines that resolve them (routineResolve).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// call is one question in flight to the upstreams and the clients that
// wait for its answer. Its fields other than waiters are immutable;
// Forwarder.mu protects waiters.
type call struct {
	key     string
	q       query // the first client's question; qname is a copy
	waiters []waiter
}

// waiter is one client waiting for a call's answer: its question (qname
// copied, in the client's case) and where its reply goes.
type waiter struct {
	q  query
	to replyTo
}

// replyTo is where a reply goes: a UDP client (pc with ap or addr) or a
// TCP connection (tc). Serve and ServeTCP reuse one per goroutine; a
// waiter keeps a copy.
type replyTo struct {
	pc   net.PacketConn
	fast addrPortConn // pc, when it has the allocation-free methods
	ap   netip.AddrPort
	addr net.Addr // when fast is nil
	tc   *tcpClient
}

// addrPortConn is implemented by *net.UDPConn: reading and writing
// without a net.Addr allocation per datagram.
type addrPortConn interface {
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

// limit is the largest reply to q: the client's UDP size, or on TCP
// what a two-byte length can say (RFC 1035 §4.2.2).
func (t *replyTo) limit(q *query) int {
	if t.tc != nil {
		return 65535
	}
	return q.udpLimit()
}

// send writes one reply; errors are the client's problem (it retries).
func (t *replyTo) send(b []byte) {
	switch {
	case t.tc != nil:
		t.tc.write(b)
	case t.fast != nil:
		t.fast.WriteToUDPAddrPort(b, t.ap)
	default:
		t.pc.WriteTo(b, t.addr)
	}
}

// scratch is one serving goroutine's buffers, so that the hot path
// allocates nothing.
type scratch struct {
	key   []byte
	out   []byte
	qname [256]byte // a slow-path question's name
}

func newScratch() *scratch {
	return &scratch{key: make([]byte, 0, 256+5), out: make([]byte, 0, 2048)}
}

// New returns a forwarder for cfg, or the problems Config.Validate and
// the checks of its funcs found.
func New(cfg Config) (*Forwarder, error) {
	if err := errors.Join(cfg.Validate(), cfg.checkFuncs()); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	f := &Forwarder{
		cfg: cfg,
		policy: ttlPolicy{
			min:    uint32(cfg.MinTTL / time.Second),
			max:    uint32(min(cfg.MaxTTL/time.Second, 1<<31-1)),
			negMax: uint32(min(cfg.NegativeMaxTTL/time.Second, 1<<31-1)),
		},
		cache:     newCache(cfg.MaxEntries, cfg.MaxBytes),
		inflight:  make(map[string]*call),
		listeners: make(map[netip.AddrPort]*listener),
	}
	f.zones.Store(newZones(&cfg))
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.SetUpstreams(cfg.Upstreams)
	f.hosts.Store(&hostTable{byName: map[string][]netip.Addr{}, byAddr: map[netip.Addr][]string{}})
	return f, nil
}

// SetUpstreams replaces the upstream resolvers, e.g. when the WAN DHCP
// lease brings new ones. Questions in flight finish with the old ones.
func (f *Forwarder) SetUpstreams(ups []netip.AddrPort) {
	u := make([]netip.AddrPort, 0, len(ups))
	for _, a := range ups {
		if !a.IsValid() || a.Port() == 0 {
			f.cfg.Log.Warn("dnsforward: upstream skipped (not an address and port)", "upstream", a)
			continue
		}
		u = append(u, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
	}
	f.upstreams.Store(&u)
	f.preferred.Store(0)
}

// SetHosts replaces the local names: each host name (a single label,
// e.g. "laptop", or that label under Config.Domain) with its addresses,
// answered as HOST.DOMAIN (and as the bare HOST) for A and AAAA, and by
// PTR for the addresses. Invalid names are skipped and logged.
func (f *Forwarder) SetHosts(hosts map[string][]netip.Addr) {
	t, skipped := newHostTable(hosts, f.cfg.Domain)
	if len(skipped) > 0 {
		f.cfg.Log.Warn("dnsforward: host names skipped (not a single label)", "names", skipped)
	}
	f.hosts.Store(t)
}

// SetLocalPrefixes replaces Config.LocalPrefixes, e.g. when a new
// delegated prefix numbers a LAN: their reverse names are answered
// locally from then on. The cache stays. Invalid prefixes are skipped
// and logged.
func (f *Forwarder) SetLocalPrefixes(ps []netip.Prefix) {
	c := f.cfg
	c.LocalPrefixes = make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if !p.IsValid() {
			f.cfg.Log.Warn("dnsforward: local prefix skipped (not a prefix)", "prefix", p)
			continue
		}
		c.LocalPrefixes = append(c.LocalPrefixes, p)
	}
	f.zones.Store(newZones(&c))
}

// FlushCache empties the cache.
func (f *Forwarder) FlushCache() { f.cache.flush() }

// purgeInterval is how often Run drops expired answers, so that the
// cache's size on the status page counts live answers.
const purgeInterval = time.Minute

// Run drops expired cache entries every minute until ctx ends; then it
// closes the sockets of SetListen, ends the questions in flight to the
// upstreams (their clients get SERVFAIL) and waits for them. Serve,
// ServeTCP and SetListen work without Run, but only Run bounds the
// lifetime of the upstream goroutines and SetListen's sockets.
func (f *Forwarder) Run(ctx context.Context) error {
	t := time.NewTicker(purgeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			f.cancel()
			f.closeListeners()
			f.wg.Wait()
			return nil
		case <-t.C:
			f.stats.CacheExpired.Add(uint64(f.cache.purge(f.cfg.Clock.Now())))
		}
	}
}

// handle answers one client message b (which it may modify) from to.
func (f *Forwarder) handle(b []byte, to *replyTo, s *scratch) {
	var q query
	if !parseQuery(b, &q) && !f.slowQuery(b, &q, to, s) {
		return
	}
	now := f.cfg.Clock.Now()
	s.key = appendKey(s.key[:0], &q)
	if f.local(&q, to, s, now) {
		return
	}
	e, expired := f.cache.get(s.key, now)
	if expired {
		f.stats.CacheExpired.Add(1)
	}
	if e != nil {
		f.stats.CacheHits.Add(1)
		f.reply(e, &q, to, s, now)
		return
	}
	f.stats.CacheMisses.Add(1)
	f.forward(&q, s.key, to)
}

// reply sends e's answer to q.
func (f *Forwarder) reply(e *entry, q *query, to *replyTo, s *scratch, now time.Time) {
	var truncated bool
	s.out, truncated = e.appendReply(s.out[:0], q, now, to.limit(q))
	if truncated {
		f.stats.Truncated.Add(1)
	}
	to.send(s.out)
}

// local answers q if its name is local and reports whether it did.
func (f *Forwarder) local(q *query, to *replyTo, s *scratch, now time.Time) bool {
	lname := s.key[:len(s.key)-5]
	ht := f.hosts.Load()
	z := f.zones.Load()
	k, rev, apex := z.classify(lname, ht)
	if k == notLocal {
		return false
	}
	f.stats.LocalAnswers.Add(1)
	name, _, err := dns.UnpackDomainName(q.qname, 0)
	if err != nil {
		return true // cannot happen: parsed before
	}
	m := z.localAnswer(name, lname, q.qtype, k, rev, apex, ht)
	f.replyMsg(m, q, to, s, now)
	return true
}

// replyMsg sends m, an answer to q built here, with q's ID and flags.
func (f *Forwarder) replyMsg(m *dns.Msg, q *query, to *replyTo, s *scratch, now time.Time) {
	e, err := newEntry(m, ttlPolicy{max: ^uint32(0), negMax: ^uint32(0)}, now)
	if err != nil {
		f.cfg.Log.Debug("dnsforward: pack local answer", "err", err)
		return
	}
	f.reply(e, q, to, s, now)
}

// replyRcode answers q with rcode and no records (for rcodes above 15,
// q must have EDNS).
func (f *Forwarder) replyRcode(q *query, rcode int, to *replyTo, s *scratch) {
	name, _, err := dns.UnpackDomainName(q.qname, 0)
	if err != nil {
		return
	}
	m := new(dns.Msg)
	m.Response, m.RecursionAvailable, m.Rcode = true, true, rcode
	m.Question = []dns.Question{{Name: name, Qtype: q.qtype, Qclass: q.qclass}}
	f.replyMsg(m, q, to, s, f.cfg.Clock.Now())
}

// forward makes q wait for its answer from an upstream, joining the call
// for the same question if there is one (coalescing).
func (f *Forwarder) forward(q *query, key []byte, to *replyTo) {
	f.mu.Lock()
	if c := f.inflight[string(key)]; c != nil {
		if len(c.waiters) >= maxWaiters {
			f.mu.Unlock()
			f.stats.InFlightDrops.Add(1)
			return
		}
		c.waiters = append(c.waiters, newWaiter(q, to))
		f.mu.Unlock()
		f.stats.Coalesced.Add(1)
		return
	}
	if len(f.inflight) >= f.cfg.MaxInFlight {
		f.mu.Unlock()
		f.stats.InFlightDrops.Add(1)
		return
	}
	w := newWaiter(q, to)
	c := &call{key: string(key), q: w.q, waiters: []waiter{w}}
	f.inflight[c.key] = c
	f.wg.Add(1)
	f.mu.Unlock()
	go f.routineResolve(c)
}

func newWaiter(q *query, to *replyTo) waiter {
	w := waiter{q: *q, to: *to}
	w.q.qname = slices.Clone(q.qname)
	return w
}

// routineResolve asks the upstreams c's question, caches the answer if
// it may, and replies to every waiter. It runs once per call, counted in
// f.wg.
func (f *Forwarder) routineResolve(c *call) {
	defer f.wg.Done()
	e := f.resolve(c)
	if e.cacheable() {
		e.key = c.key
		e.size += len(e.key)
		f.stats.CacheEvictions.Add(uint64(f.cache.put(e)))
		f.stats.CacheInserts.Add(1)
	}
	f.mu.Lock()
	delete(f.inflight, c.key)
	ws := c.waiters
	c.waiters = nil
	f.mu.Unlock()
	now := f.cfg.Clock.Now()
	var out []byte
	for i := range ws {
		w := &ws[i]
		var truncated bool
		out, truncated = e.appendReply(out[:0], &w.q, now, w.to.limit(&w.q))
		if truncated {
			f.stats.Truncated.Add(1)
		}
		w.to.send(out)
	}
}

// servfail returns the SERVFAIL answer to q (RFC 1035 §4.1.1: the
// upstreams failed).
func (f *Forwarder) servfail(q *query) *entry {
	f.stats.ServFail.Add(1)
	name, _, _ := dns.UnpackDomainName(q.qname, 0)
	m := new(dns.Msg)
	m.Response, m.RecursionAvailable, m.Rcode = true, true, dns.RcodeServerFailure
	m.Question = []dns.Question{{Name: name, Qtype: q.qtype, Qclass: q.qclass}}
	e, err := newEntry(m, f.policy, f.cfg.Clock.Now())
	if err != nil { // cannot happen: the name was packed before
		e = &entry{msg: make([]byte, headerLen), flags: flagQR | flagRA | dns.RcodeServerFailure}
		e.qEnd, e.preAdd = headerLen, headerLen
	}
	return e
}

// slowQuery handles what parseQuery did not take: it unpacks b with
// miekg/dns, answers errors (FORMERR, NOTIMP, REFUSED, BADVERS) or drops,
// and returns true with q filled for a question to answer as usual.
func (f *Forwarder) slowQuery(b []byte, q *query, to *replyTo, s *scratch) bool {
	if len(b) < headerLen {
		f.stats.Malformed.Add(1)
		return false
	}
	flags := binary.BigEndian.Uint16(b[2:])
	if flags&flagQR != 0 {
		// A response sent as a query: never answered, so that two
		// servers cannot loop (RFC 5452 §9.1 ignores it likewise).
		f.stats.Malformed.Add(1)
		return false
	}
	*q = query{id: binary.BigEndian.Uint16(b), flags: flags &^ flagTC}
	var m dns.Msg
	err := checkCounts(b)
	if err == nil {
		err = m.Unpack(b)
	}
	var qend int
	if err == nil && len(m.Question) == 1 {
		if _, qend, err = dns.UnpackDomainName(b, headerLen); err == nil && qend+4 > len(b) {
			err = errName // miekg takes a question without its type or class
		}
	}
	if err != nil || len(m.Question) != 1 {
		// RFC 1035 §4.1.1 FORMERR; RFC 9619: QDCOUNT must be 1.
		f.stats.Malformed.Add(1)
		f.stats.FormErr.Add(1)
		f.replyHeaderOnly(q, dns.RcodeFormatError, to)
		return false
	}
	qq := m.Question[0]
	n, err := dns.PackDomainName(qq.Name, s.qname[:], 0, nil, false)
	if err != nil {
		f.stats.Malformed.Add(1)
		f.stats.FormErr.Add(1)
		f.replyHeaderOnly(q, dns.RcodeFormatError, to)
		return false
	}
	q.qname, q.qtype, q.qclass = s.qname[:n], qq.Qtype, qq.Qclass
	var opts int
	var opt *dns.OPT
	for _, rr := range m.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			opts++
			opt = o
		}
	}
	if opt != nil {
		q.edns, q.udpSize, q.do = true, opt.UDPSize(), opt.Do()
	}
	switch {
	case opts > 1 || (opt != nil && opt.Hdr.Name != "."):
		// RFC 6891 §6.1.1: one OPT at most, owned by the root.
		f.stats.Malformed.Add(1)
		f.stats.FormErr.Add(1)
		f.replyRcode(q, dns.RcodeFormatError, to, s)
		return false
	case m.Opcode != dns.OpcodeQuery:
		// RFC 1035 §4.1.1 "Not Implemented": NOTIFY, UPDATE, IQUERY.
		f.stats.NotImplemented.Add(1)
		q.flags &^= opcodeMask
		f.replyOpcode(q, m.Opcode, dns.RcodeNotImplemented, to, s)
		return false
	case opt != nil && opt.Version() != 0:
		// RFC 6891 §6.1.3: BADVERS, with our version (0).
		f.stats.BadVersion.Add(1)
		f.replyRcode(q, dns.RcodeBadVers, to, s)
		return false
	case qq.Qclass != dns.ClassINET || !forwardableType(qq.Qtype):
		// Zone transfers, meta-types and other classes are not
		// served by a forwarder.
		f.stats.Refused.Add(1)
		f.replyRcode(q, dns.RcodeRefused, to, s)
		return false
	}
	return true
}

// replyHeaderOnly answers a message that could not be read with a bare
// header: q's ID, opcode and RD, QR and rcode.
func (f *Forwarder) replyHeaderOnly(q *query, rcode int, to *replyTo) {
	var b [headerLen]byte
	binary.BigEndian.PutUint16(b[:], q.id)
	binary.BigEndian.PutUint16(b[2:], q.flags&(opcodeMask|flagRD)|flagQR|flagRA|uint16(rcode))
	to.send(b[:])
}

// replyOpcode answers q, of an opcode other than QUERY, with rcode.
func (f *Forwarder) replyOpcode(q *query, opcode, rcode int, to *replyTo, s *scratch) {
	name, _, err := dns.UnpackDomainName(q.qname, 0)
	if err != nil {
		return
	}
	m := new(dns.Msg)
	m.Response, m.Opcode, m.Rcode = true, opcode, rcode
	m.Question = []dns.Question{{Name: name, Qtype: q.qtype, Qclass: q.qclass}}
	e, err := newEntry(m, f.policy, f.cfg.Clock.Now())
	if err != nil {
		return
	}
	f.reply(e, q, to, s, f.cfg.Clock.Now())
}
