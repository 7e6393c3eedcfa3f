package dhcp6client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/services/internal/leasefile"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// Transport carries the client's UDP datagrams on port 546 as frames.
// A *rawudp.Conn from rawudp.New6 on port 546 satisfies it.
type Transport interface {
	// Send sends one datagram; a nil DstMAC with a multicast Dst is the
	// group's MAC (RFC 2464 §7).
	Send(rawudp.Packet) error
	// Recv returns the next datagram to port 546, or ctx's error.
	Recv(ctx context.Context) (rawudp.Packet, error)
}

// State is a state of the client (see the package doc).
type State int

// The client's states.
const (
	Init       State = iota // waiting the random delay before the first Solicit, or a back-off
	Soliciting              // Solicit sent, collecting Advertises
	Requesting              // Request sent to the chosen server
	Bound                   // lease applied, waiting for T1
	Renewing                // after T1: Renew to the lease's server
	Rebinding               // after T2: Rebind to any server
	Confirming              // at start: Rebind for a saved lease, not yet applied (RFC 8415 §18.2.12)
	Releasing               // stopping: Release sent (Config.ReleaseOnStop)
	Stopped                 // Run has returned
)

var stateNames = [...]string{"init", "solicit", "request", "bound", "renew", "rebind", "confirming", "release", "stopped"}

// String is the state's name, e.g. "bound".
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// Ports and addresses of RFC 8415 §7.1, §7.2.
const (
	ClientPort = 546
	ServerPort = 547
)

// AllAgents is All_DHCP_Relay_Agents_and_Servers (ff02::1:2, RFC 8415
// §7.1), where the client sends every message.
var AllAgents = netip.AddrFrom16([16]byte{0xff, 0x02, 13: 1, 15: 2})

// optSolMaxRT is the SOL_MAX_RT option (RFC 8415 §21.24), which the
// client requests in Solicit as §18.2.1 requires.
const optSolMaxRT dhcpv6.OptionCode = 82

// requested is the Option Request option: DNS servers (23), domain
// search list (24), SOL_MAX_RT (82).
var requested = []dhcpv6.OptionCode{dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionDomainSearchList, optSolMaxRT}

// Config configures a Client.
type Config struct {
	// Transport sends and receives the client's datagrams. Required.
	Transport Transport
	// HWAddr is the interface's MAC, e.g. 02:00:00:00:00:01: the DUID's
	// link-layer address, the default IAID and SrcAddr. Required.
	HWAddr net.HardwareAddr
	// SrcAddr is the source of every message, the interface's
	// link-local address (RFC 8415 §13.1), e.g. fe80::ff:fe00:1. The
	// zero value is fe80:: with the EUI-64 of HWAddr (RFC 4291 appendix
	// A), the address netstack gives the interface.
	SrcAddr netip.Addr
	// PDLength is the delegated prefix length asked for as a hint (RFC
	// 8415 §18.2.1: an IA Prefix option with the prefix ::), e.g. 56; 0
	// sends no hint.
	PDLength int
	// WantAddress also asks for an address (IA_NA).
	WantAddress bool
	// IAID is the IAID of the IA_PD and of the IA_NA (RFC 8415 §12; it
	// must stay the same across restarts). 0 means the last four octets
	// of HWAddr.
	IAID uint32
	// DUIDFile keeps the client's DUID across restarts (hex, written
	// atomically), e.g. /var/lib/gvrouter/dhcp6/wan.duid: a DUID-LLT made
	// the first time (RFC 8415 §11.2). A corrupt file is reported and
	// replaced. "" uses the DUID-LL of HWAddr (§11.4). Its directory
	// must exist.
	DUIDFile string
	// LeaseFile is where the lease is saved (JSON, written atomically),
	// so that after a restart it is confirmed with Rebind instead of
	// solicited afresh; "" keeps none. Its directory must exist.
	LeaseFile string
	// ReleaseOnStop makes a clean stop (Run's ctx done) withdraw the
	// lease and send Release (RFC 8415 §18.2.7).
	ReleaseOnStop bool
	// Clock is the time source; nil is SystemClock.
	Clock Clock
	// Rand draws the transaction ids, the initial delay and the
	// retransmission jitter; nil is a ChaCha8 seeded from crypto/rand.
	Rand mrand.Source
	// OnChange is called from Run's goroutine whenever the lease changes:
	// bound, renewed or rebound (new lifetimes count as a change),
	// confirmed, a prefix withdrawn at its expiry; with nil when the
	// lease is lost (every prefix expired, released) and its prefixes
	// must be removed. The lease is a copy the callee may keep.
	OnChange func(*Lease)
	// Logger receives state changes and errors; nil discards them.
	Logger *slog.Logger
}

// advert is an Advertise the client may request from.
type advert struct {
	serverID   []byte
	preference uint8
	prefixes   []netip.Prefix // hints for the Request
	addr       netip.Addr     // IA_NA hint, if any
	srcAddr    netip.Addr
	srcMAC     net.HardwareAddr
}

// Client is a DHCPv6 client on one interface. Its state is owned by the
// goroutine that calls Run; Status and Stats may be called from any.
type Client struct {
	cfg   Config
	clock Clock
	rnd   mrand.Source
	log   *slog.Logger
	stats Stats
	duid  []byte
	iaid  [4]byte

	// Owned by Run's goroutine.
	state    State
	since    time.Time
	xid      dhcpv6.TransactionID
	ex       exchange
	next     time.Time // when timeout acts; zero for never
	adverts  []advert  // SOLICIT: usable Advertises in the first RT
	chosen   *advert   // REQUEST
	lease    *Lease    // applied
	saved    *Lease    // CONFIRMING: the saved lease being confirmed
	solMaxRT time.Duration
	refused  int // Requests refused in a row: the back-off before the next Solicit

	mu     sync.Mutex
	status Status
}

// New returns a Client for cfg; Run starts it. The DUID is loaded (or
// made and saved) here.
func New(cfg Config) (*Client, error) {
	if cfg.Transport == nil {
		return nil, errors.New("dhcp6client: no Transport")
	}
	if len(cfg.HWAddr) != 6 {
		return nil, fmt.Errorf("dhcp6client: HWAddr %v is not an Ethernet MAC", cfg.HWAddr)
	}
	if !cfg.SrcAddr.IsValid() {
		cfg.SrcAddr = LinkLocal(cfg.HWAddr)
	}
	if !cfg.SrcAddr.Is6() || !cfg.SrcAddr.IsLinkLocalUnicast() {
		return nil, fmt.Errorf("dhcp6client: SrcAddr %v is not an IPv6 link-local address (RFC 8415 §13.1)", cfg.SrcAddr)
	}
	cfg.SrcAddr = cfg.SrcAddr.WithZone("")
	if cfg.PDLength < 0 || cfg.PDLength > 128 {
		return nil, fmt.Errorf("dhcp6client: PDLength %d, want 0 (no hint) to 128", cfg.PDLength)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Rand == nil {
		var seed [32]byte
		rand.Read(seed[:])
		cfg.Rand = mrand.NewChaCha8(seed)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{cfg: cfg, clock: cfg.Clock, rnd: cfg.Rand, log: log, solMaxRT: solMaxRT}
	if cfg.IAID != 0 {
		binary.BigEndian.PutUint32(c.iaid[:], cfg.IAID)
	} else {
		copy(c.iaid[:], cfg.HWAddr[2:])
	}
	duid, fileErr, writeErr := loadDUID(cfg.DUIDFile, cfg.HWAddr, c.clock.Now())
	c.duid = duid
	for _, err := range []error{fileErr, writeErr} {
		if err != nil {
			c.stats.DUIDFileErrors.Add(1)
			c.logError("DUID file "+cfg.DUIDFile, err)
			c.status.DUIDFileError = err.Error()
		}
	}
	c.status.State = Init.String()
	c.status.DUID = duid
	return c, nil
}

// LinkLocal is the link-local address with the modified EUI-64 interface
// identifier of an Ethernet MAC (RFC 4291 §2.5.6 and appendix A): fe80::,
// the MAC with ff:fe in its middle and the universal/local bit flipped.
func LinkLocal(mac net.HardwareAddr) netip.Addr {
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]})
}

// Stats returns the client's counters.
func (c *Client) Stats() *Stats { return &c.stats }

// DUID returns the client's DUID.
func (c *Client) DUID() []byte { return append([]byte(nil), c.duid...) }

// Status returns a snapshot of the client's state and lease.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Lease = s.Lease.clone()
	s.DUID = append(DUID(nil), s.DUID...)
	s.Server = append(DUID(nil), s.Server...)
	s.Counters, s.Drops = c.stats.Counters(), c.stats.DropCounts()
	return s
}

// Run runs the client until ctx is done (then, with
// Config.ReleaseOnStop, it withdraws the lease and releases it, and
// returns nil) or the Transport fails. Call it once.
func (c *Client) Run(ctx context.Context) error {
	// The receiver outlives ctx by the Release exchange.
	rctx, cancel := context.WithCancel(context.Background())
	rx := make(chan rawudp.Packet)
	rxErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			p, err := c.cfg.Transport.Recv(rctx)
			if err != nil {
				rxErr <- err
				return
			}
			select {
			case rx <- p:
			case <-rctx.Done():
				return
			}
		}
	}()
	defer wg.Wait()
	defer cancel()

	wake := make(chan struct{}, 1)
	done := ctx.Done()
	c.start(c.clock.Now())
	c.publish()
	for {
		if done != nil && ctx.Err() != nil {
			done = nil // from now on only the Release exchange, if any, runs
			c.stop(c.clock.Now())
		}
		if c.state == Stopped {
			c.publish()
			return nil
		}
		var t Timer
		if !c.next.IsZero() {
			d := c.next.Sub(c.clock.Now())
			if d <= 0 {
				c.timeout(c.clock.Now())
				c.publish()
				continue
			}
			t = c.clock.AfterFunc(d, func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			})
		}
		select {
		case p := <-rx:
			c.handle(p, c.clock.Now())
		case <-wake:
			c.timeout(c.clock.Now())
		case err := <-rxErr:
			if t != nil {
				t.Stop()
			}
			c.setState(Stopped, c.clock.Now())
			c.publish()
			if done == nil {
				return nil // stopping: the Release exchange is cut short
			}
			return fmt.Errorf("dhcp6client: receive: %w", err)
		case <-done:
		}
		if t != nil {
			t.Stop()
		}
		c.publish()
	}
}

// publish copies the loop's state into the Status snapshot.
func (c *Client) publish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status.State = c.state.String()
	c.status.Since = c.since
	c.status.Lease = c.lease.clone()
	c.status.Next = c.next
	c.status.Server = nil
	switch {
	case c.state == Requesting && c.chosen != nil:
		c.status.Server = append([]byte(nil), c.chosen.serverID...)
	case c.lease != nil:
		c.status.Server = append([]byte(nil), c.lease.ServerID...)
	case c.state == Confirming && c.saved != nil:
		c.status.Server = append([]byte(nil), c.saved.ServerID...)
	}
}

// logError logs err and keeps it for Status.
func (c *Client) logError(msg string, err error) {
	c.log.Warn("dhcp6client: "+msg, "err", err)
	c.mu.Lock()
	c.status.LastError = msg + ": " + err.Error()
	c.mu.Unlock()
}

// leaseFileError counts and reports a lease file error.
func (c *Client) leaseFileError(err error) {
	c.stats.LeaseFileErrors.Add(1)
	c.logError("lease file "+c.cfg.LeaseFile, err)
	c.mu.Lock()
	c.status.LeaseFileError = err.Error()
	c.mu.Unlock()
}

func (c *Client) setState(s State, now time.Time) {
	if s != c.state {
		c.log.Debug("dhcp6client: state", "from", c.state, "to", s)
	}
	c.state, c.since = s, now
}

// start begins: CONFIRMING with an unexpired saved lease (RFC 8415
// §18.2.12), else INIT with the random delay of §18.2.1 before the first
// Solicit.
func (c *Client) start(now time.Time) {
	c.setState(Init, now)
	if c.cfg.LeaseFile != "" {
		saved, err := readLeaseFile(c.cfg.LeaseFile, c.duid, binary.BigEndian.Uint32(c.iaid[:]))
		switch {
		case errors.Is(err, leasefile.ErrForeign):
			c.log.Info("dhcp6client: saved lease is for another DUID or IAID; not asking for it", "file", c.cfg.LeaseFile)
		case err != nil:
			c.leaseFileError(fmt.Errorf("ignored: %w", err))
		case saved != nil:
			saved.expire(now)
			if len(saved.Prefixes) > 0 {
				c.saved = saved
				c.setState(Confirming, now)
				// CNF_MAX_RD bounds it, and the lease's own end.
				c.begin(params{irt: cnfTimeout, mrt: cnfMaxRT, end: earliest(now.Add(cnfMaxRD), saved.validUntil())}, now)
				return
			}
		}
	}
	c.next = now.Add(time.Duration(uniform(c.rnd, uint64(solMaxDelay)+1)))
}

// earliest is the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// begin starts a new exchange in the current state with p (RFC 8415
// §15): a new transaction id and the first transmission.
func (c *Client) begin(p params, now time.Time) {
	x := c.rnd.Uint64()
	c.xid = dhcpv6.TransactionID{byte(x >> 16), byte(x >> 8), byte(x)}
	c.ex = exchange{params: p}
	c.transmit(now)
}

// transmit sends the current state's message and sets the next
// retransmission.
func (c *Client) transmit(now time.Time) {
	c.send(c.message(now))
	c.ex.sentAt(now, c.rnd)
	c.next = c.ex.next
	c.limitByExpiry()
}

// limitByExpiry brings c.next forward to the lease's next expiry, so that
// a prefix is withdrawn on time whatever the state waits for.
func (c *Client) limitByExpiry() {
	l := c.lease
	if c.state == Confirming {
		l = c.saved
	}
	if l == nil {
		return
	}
	if e := l.nextExpiry(); !e.IsZero() && (c.next.IsZero() || e.Before(c.next)) {
		c.next = e
	}
}

// solicit enters SOLICIT with a new exchange (RFC 8415 §18.2.1: IRT
// SOL_TIMEOUT, MRT SOL_MAX_RT, no MRC or MRD, the first RT above IRT).
func (c *Client) solicit(now time.Time) {
	c.adverts = nil
	c.chosen = nil
	c.setState(Soliciting, now)
	c.begin(params{irt: solTimeout, mrt: c.solMaxRT, positive: true}, now)
}

// request enters REQUEST for a (RFC 8415 §18.2.2: IRT REQ_TIMEOUT, MRT
// REQ_MAX_RT, MRC REQ_MAX_RC).
func (c *Client) request(a *advert, now time.Time) {
	c.chosen = a
	c.adverts = nil
	c.setState(Requesting, now)
	c.begin(params{irt: reqTimeout, mrt: reqMaxRT, mrc: reqMaxRC}, now)
}

// timeout acts on c.next once it has passed: expiries first, then the
// state's own timer.
func (c *Client) timeout(now time.Time) {
	if c.next.IsZero() || now.Before(c.next) {
		return
	}
	if c.expire(now) {
		return
	}
	switch c.state {
	case Init:
		c.solicit(now)
		return
	case Bound:
		c.leaseTimer(now)
		return
	}
	if now.Before(c.ex.next) {
		c.next = c.ex.next
		c.limitByExpiry()
		return
	}
	if !c.ex.failed(now) {
		if c.state == Soliciting && len(c.adverts) > 0 {
			// The first RT is over: request from the best Advertise
			// collected (RFC 8415 §18.2.1).
			c.request(c.best(), now)
			return
		}
		c.transmit(now)
		return
	}
	c.stats.Exhausted.Add(1)
	switch c.state {
	case Requesting:
		c.log.Info("dhcp6client: no Reply to Request; soliciting again")
		c.solicit(now) // RFC 8415 §18.2.2
	case Renewing:
		c.leaseTimer(now) // T2: REBIND
	case Rebinding:
		c.leaseTimer(now) // the lease ends with its valid lifetimes; expire has it
	case Confirming:
		// No server answered: the saved lease is used as it is while it
		// lasts (RFC 8415 §18.2.3, which §18.2.12 points to).
		c.log.Info("dhcp6client: saved lease not confirmed by any server; using it", "prefixes", prefixesOf(c.saved))
		l := c.saved
		c.saved = nil
		c.apply(l, now)
	case Releasing:
		c.setState(Stopped, now)
		c.next = time.Time{}
	}
}

// leaseTimer moves a held lease on from T1 and T2 (RFC 8415 §18.2.4,
// §18.2.5), the latest first, so that a clock that jumped lands in the
// right state.
func (c *Client) leaseTimer(now time.Time) {
	l := c.lease
	switch {
	case !now.Before(l.T2):
		if c.state != Rebinding {
			c.setState(Rebinding, now)
			c.stats.Rebindings.Add(1)
			// MRD: until the last lifetime ends.
			c.begin(params{irt: rebTimeout, mrt: rebMaxRT, end: l.validUntil()}, now)
			return
		}
		c.next = l.nextExpiry()
	case !now.Before(l.T1):
		c.setState(Renewing, now)
		c.stats.Renewals.Add(1)
		c.begin(params{irt: renTimeout, mrt: renMaxRT, end: l.T2}, now)
	default:
		c.setState(Bound, now)
		c.next = l.T1
		c.limitByExpiry()
	}
}

// expire withdraws what has reached its valid lifetime, telling
// OnChange, and reports whether it acted on the state (the lease was
// lost and the client solicits again).
func (c *Client) expire(now time.Time) bool {
	if c.state == Confirming && c.saved != nil {
		if c.saved.expire(now) && len(c.saved.Prefixes) == 0 {
			c.saved = nil
			c.solicit(now)
			return true
		}
		return false
	}
	l := c.lease
	if l == nil {
		return false
	}
	n := len(l.Prefixes) + btoi(l.Address != nil)
	had := prefixesOf(l)
	if !l.expire(now) {
		return false
	}
	c.stats.Expiries.Add(uint64(n - len(l.Prefixes) - btoi(l.Address != nil)))
	if len(l.Prefixes) == 0 {
		c.log.Warn("dhcp6client: valid lifetime ended", "prefixes", had)
		c.stats.Losses.Add(1)
		c.lose(now, "every prefix expired")
		c.solicit(now)
		return true
	}
	c.log.Warn("dhcp6client: prefix or address expired; withdrawn", "left", prefixesOf(l))
	c.saveLease()
	c.notify()
	return false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// prefixesOf lists l's prefixes for the log.
func prefixesOf(l *Lease) []netip.Prefix {
	if l == nil {
		return nil
	}
	var ps []netip.Prefix
	for _, p := range l.Prefixes {
		ps = append(ps, p.Prefix)
	}
	return ps
}

// lose drops the applied lease and tells OnChange.
func (c *Client) lose(now time.Time, why string) {
	old := c.lease
	c.lease = nil
	c.next = time.Time{}
	if old == nil {
		return
	}
	c.log.Warn("dhcp6client: lease lost; prefixes withdrawn", "reason", why, "prefixes", prefixesOf(old))
	c.removeLeaseFile()
	c.publish()
	if c.cfg.OnChange != nil {
		c.cfg.OnChange(nil)
	}
}

// notify publishes the lease and tells OnChange.
func (c *Client) notify() {
	c.publish()
	if c.cfg.OnChange != nil {
		c.cfg.OnChange(c.lease.clone())
	}
}

// apply makes l the applied lease: BOUND (or RENEW, REBIND by its
// times), the lease file and OnChange.
func (c *Client) apply(l *Lease, now time.Time) {
	first := c.lease == nil
	c.lease = l
	c.refused = 0
	c.chosen = nil
	c.saved = nil
	if first {
		c.log.Info("dhcp6client: bound", "prefixes", prefixesOf(l), "address", l.Address, "dns", l.DNS, "t1", l.T1, "t2", l.T2)
	}
	c.setState(Bound, now)
	c.leaseTimer(now)
	c.saveLease()
	c.notify()
}

// saveLease writes the lease file, if there is one.
func (c *Client) saveLease() {
	if c.cfg.LeaseFile == "" || c.lease == nil {
		return
	}
	if err := writeLeaseFile(c.cfg.LeaseFile, c.lease, c.duid, binary.BigEndian.Uint32(c.iaid[:])); err != nil {
		c.leaseFileError(err)
	}
}

// removeLeaseFile deletes the saved lease, which must not be asked for
// again (lost, released).
func (c *Client) removeLeaseFile() {
	if c.cfg.LeaseFile == "" {
		return
	}
	if err := leasefile.Remove(c.cfg.LeaseFile); err != nil {
		c.leaseFileError(err)
	}
}

// refusedBackoff is the wait before soliciting again after the n-th
// Request in a row that gave no prefix (NoPrefixAvail; 1-based): the
// Solicit retransmission curve of RFC 8415 §15 (SOL_TIMEOUT doubling up
// to SOL_MAX_RT, RAND ±0.1), so that a server without prefixes is asked
// no more often than a silent one would be.
func (c *Client) refusedBackoff(n int) time.Duration {
	d := solTimeout << min(n-1, 12)
	if d > c.solMaxRT {
		d = c.solMaxRT
	}
	return d + jitter(c.rnd, d, false)
}

// stop ends Run: with ReleaseOnStop and a lease, the lease is withdrawn
// (RFC 8415 §18.2.7: before the Release exchange) and RELEASE begins;
// else STOPPED.
func (c *Client) stop(now time.Time) {
	if c.lease == nil || !c.cfg.ReleaseOnStop {
		c.setState(Stopped, now)
		c.next = time.Time{}
		return
	}
	l := c.lease
	c.lose(now, "released")
	c.saved = l // what the Release names
	c.setState(Releasing, now)
	c.begin(params{irt: relTimeout, mrc: relMaxRC, end: now.Add(releaseMaxWait)}, now)
}
