package dhcp4client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/services/internal/dhcpopts"
	"github.com/gvrouter/gvrouter/services/internal/leasefile"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// Transport carries the client's UDP datagrams on port 68 as frames.
// *rawudp.Conn on port 68 satisfies it.
type Transport interface {
	// Send sends one datagram; a nil DstMAC is Ethernet broadcast.
	Send(rawudp.Packet) error
	// Recv returns the next datagram to port 68, or ctx's error.
	Recv(ctx context.Context) (rawudp.Packet, error)
}

// Prober checks whether an address is already in use on the link before
// the client takes it (RFC 2131 §4.4.1, RFC 5227). ARPProber is one.
type Prober interface {
	// InUse reports whether another host answers for addr. An error
	// means the probe could not be made.
	InUse(ctx context.Context, addr netip.Addr) (bool, error)
}

// State is a state of the client in RFC 2131 §4.4, Figure 5.
type State int

// The client's states. InitReboot is passed through on the way to
// Rebooting; Stopped is after Run returns.
const (
	Init       State = iota // no lease; waiting to send DHCPDISCOVER
	Selecting               // DHCPDISCOVER sent, waiting for an offer
	Requesting              // DHCPREQUEST for an offer sent (broadcast)
	Bound                   // lease applied, waiting for T1
	Renewing                // after T1: DHCPREQUEST unicast to the server
	Rebinding               // after T2: DHCPREQUEST broadcast to any server
	InitReboot              // a saved lease found at start
	Rebooting               // DHCPREQUEST for the saved address sent (broadcast)
	Stopped                 // Run has returned
)

var stateNames = [...]string{"INIT", "SELECTING", "REQUESTING", "BOUND", "RENEWING", "REBINDING", "INIT-REBOOT", "REBOOTING", "STOPPED"}

// String is the state's name as RFC 2131 writes it.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// Defaults for Config's zero fields.
const (
	// DefaultMinMTU is the smallest option 26 taken: the IPv4 minimum
	// (RFC 791: every host must take 576-octet datagrams). On an
	// interface with IPv6 the router passes 1280 (RFC 8200 §5).
	DefaultMinMTU = 576
	// DefaultDeclineWait is how long the client waits after a
	// DHCPDECLINE before it starts again (RFC 2131 §3.1.5: "a minimum of
	// ten seconds").
	DefaultDeclineWait = 10 * time.Second
	// DefaultRebootTimeout is how long REBOOTING asks for the saved
	// address before the client gives the lease up and discovers: a
	// server that lost its lease database stays silent (RFC 2131
	// §4.3.2), and dhcpcd waits 5 s for the same reason.
	DefaultRebootTimeout = 10 * time.Second
)

// Ports of RFC 2131 §4.1.
const (
	ClientPort = 68
	ServerPort = 67
)

// Protocol constants.
const (
	// maxRequestTries is how many DHCPREQUESTs REQUESTING sends, 4 s to
	// 64 s apart, before it goes back to INIT (RFC 2131 §4.4.1: "after
	// employing the retransmission algorithm").
	maxRequestTries = 5
	// minRenewRetransmit is the shortest wait between DHCPREQUESTs in
	// RENEWING and REBINDING (RFC 2131 §4.4.5).
	minRenewRetransmit = 60 * time.Second
	// infiniteLease stands for a lease time of 0xffffffff (RFC 2131
	// §3.3).
	infiniteLease = 100 * 365 * 24 * time.Hour
)

// requested is the parameter request list (option 55): subnet mask,
// classless routes (RFC 3442), routers, DNS, domain name, interface MTU,
// lease time, server identifier, T1, T2.
var requested = []dhcpv4.OptionCode{
	dhcpv4.OptionSubnetMask, dhcpv4.OptionClasslessStaticRoute, dhcpv4.OptionRouter,
	dhcpv4.OptionDomainNameServer, dhcpv4.OptionDomainName, dhcpv4.OptionInterfaceMTU,
	dhcpv4.OptionIPAddressLeaseTime, dhcpv4.OptionServerIdentifier,
	dhcpv4.OptionRenewTimeValue, dhcpv4.OptionRebindingTimeValue,
}

// Config configures a Client.
type Config struct {
	// Transport sends and receives the client's datagrams. Required.
	Transport Transport
	// HWAddr is the interface's MAC, the chaddr of every message.
	// Required.
	HWAddr net.HardwareAddr
	// ClientID is option 61 (RFC 2132 §9.14), e.g. 0x01 and the MAC;
	// nil sends none.
	ClientID []byte
	// Hostname is option 12 (RFC 2132 §3.14); "" sends none.
	Hostname string
	// LeaseFile is where the lease is saved (JSON, written atomically)
	// for INIT-REBOOT after a restart; "" keeps none. Its directory must
	// exist.
	LeaseFile string
	// Release makes a clean stop (Run's ctx done) send DHCPRELEASE and
	// drop the lease (RFC 2131 §4.4.6).
	Release bool
	// MinMTU is the smallest option 26 applied; smaller ones are ignored
	// and counted. 0 means DefaultMinMTU.
	MinMTU int
	// Prober checks an address before it is applied; nil skips the
	// check.
	Prober Prober
	// DeclineWait is the wait after a DHCPDECLINE; 0 means
	// DefaultDeclineWait.
	DeclineWait time.Duration
	// RebootTimeout bounds REBOOTING; 0 means DefaultRebootTimeout.
	RebootTimeout time.Duration
	// Clock is the time source; nil is SystemClock.
	Clock Clock
	// Rand draws the xids and the retransmission jitter; nil is a
	// ChaCha8 seeded from crypto/rand.
	Rand mrand.Source
	// OnLease is called from Run's goroutine whenever the applied lease
	// changes: a new address, other routes, DNS, domain or MTU (not
	// merely new times). old is the lease before, nil if there was
	// none; new nil means the lease is lost (expired, NAKed, declined,
	// released) and its address and routes must be removed. The leases
	// are copies the callee may keep.
	OnLease func(old, new *Lease)
	// Logger receives state changes and errors; nil discards them.
	Logger *slog.Logger
}

// offer is the DHCPOFFER the client is requesting.
type offer struct {
	server netip.Addr
	addr   netip.Addr
}

// Client is a DHCPv4 client on one interface. Its state is owned by the
// goroutine that calls Run; Status and Stats may be called from any.
type Client struct {
	cfg   Config
	clock Clock
	rnd   mrand.Source
	log   *slog.Logger
	stats Stats

	// Owned by Run's goroutine.
	state     State
	since     time.Time
	xid       dhcpv4.TransactionID
	tries     int       // messages sent in this exchange
	started   time.Time // when the exchange began, for secs
	reqStart  time.Time // when its first DHCPREQUEST went out: lease times count from it
	next      time.Time // when timeout acts; zero for never
	offer     offer     // REQUESTING
	want      netip.Addr
	rebootEnd time.Time
	lease     *Lease // applied
	naks      int    // DHCPNAKs since the last DHCPACK

	mu     sync.Mutex
	status Status
}

// New returns a Client for cfg, which Validate must accept; Run starts
// it.
func New(cfg Config) (*Client, error) {
	if cfg.Transport == nil {
		return nil, errors.New("dhcp4client: no Transport")
	}
	if len(cfg.HWAddr) != 6 {
		return nil, fmt.Errorf("dhcp4client: HWAddr %v is not an Ethernet MAC", cfg.HWAddr)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MinMTU == 0 {
		cfg.MinMTU = DefaultMinMTU
	}
	if cfg.DeclineWait == 0 {
		cfg.DeclineWait = DefaultDeclineWait
	}
	if cfg.RebootTimeout == 0 {
		cfg.RebootTimeout = DefaultRebootTimeout
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
	c := &Client{cfg: cfg, clock: cfg.Clock, rnd: cfg.Rand, log: log}
	c.status.State = strings.ToLower(Init.String())
	return c, nil
}

// Stats returns the client's counters.
func (c *Client) Stats() *Stats { return &c.stats }

// Status returns a snapshot of the client's state and lease.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.Lease = s.Lease.clone()
	s.Counters, s.Drops = c.stats.Counters(), c.stats.DropCounts()
	return s
}

// Run runs the client until ctx is done (then it releases the lease if
// Config.Release, and returns nil) or the Transport fails. Call it once.
func (c *Client) Run(ctx context.Context) error {
	rctx, cancel := context.WithCancel(ctx)
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
	c.start(c.clock.Now())
	c.publish()
	for {
		if ctx.Err() != nil {
			c.stop(c.clock.Now())
			c.publish()
			return nil
		}
		var t Timer
		if !c.next.IsZero() {
			d := c.next.Sub(c.clock.Now())
			if d <= 0 {
				c.timeout(ctx, c.clock.Now())
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
			c.handle(ctx, p, c.clock.Now())
		case <-wake:
			c.timeout(ctx, c.clock.Now())
		case err := <-rxErr:
			if ctx.Err() == nil {
				c.setState(Stopped, c.clock.Now())
				c.publish()
				return fmt.Errorf("dhcp4client: receive: %w", err)
			}
		case <-ctx.Done():
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
	c.status.State = strings.ToLower(c.state.String())
	c.status.Since = c.since
	c.status.Lease = c.lease.clone()
	c.status.Next = c.next
	c.status.Offered = netip.Addr{}
	switch c.state {
	case Requesting:
		c.status.Offered = c.offer.addr
	case Rebooting:
		c.status.Offered = c.want
	}
}

// logError logs err and keeps it for Status.
func (c *Client) logError(msg string, err error) {
	c.log.Warn("dhcp4client: "+msg, "err", err)
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
		c.log.Debug("dhcp4client: state", "from", c.state, "to", s)
	}
	c.state, c.since = s, now
}

// start leaves INIT: INIT-REBOOT with an unexpired saved lease (RFC 2131
// §3.2), else SELECTING, asking for the saved address if any.
func (c *Client) start(now time.Time) {
	c.setState(Init, now)
	if c.cfg.LeaseFile != "" {
		saved, err := readLeaseFile(c.cfg.LeaseFile, c.cfg.HWAddr, c.cfg.ClientID)
		switch {
		case errors.Is(err, leasefile.ErrForeign):
			c.log.Info("dhcp4client: saved lease is for another client; not asking for it", "file", c.cfg.LeaseFile)
		case err != nil:
			c.leaseFileError(fmt.Errorf("ignored: %w", err))
		case saved != nil && now.Before(saved.Expiry):
			c.want = saved.Addr.Addr()
			c.setState(InitReboot, now)
			c.newExchange(now)
			c.rebootEnd = now.Add(c.cfg.RebootTimeout)
			c.setState(Rebooting, now)
			c.request(now)
			return
		case saved != nil:
			c.want = saved.Addr.Addr() // RFC 2131 §4.4.1: the client MAY suggest an address
		}
	}
	c.discover(now)
}

// newExchange draws a new xid and restarts the retransmission count.
func (c *Client) newExchange(now time.Time) {
	binary.BigEndian.PutUint32(c.xid[:], uint32(c.rnd.Uint64()))
	c.tries = 0
	c.started = now
	c.reqStart = time.Time{}
}

// backoff is the wait after the n-th transmission (0-based) of RFC 2131
// §4.1: 4 s, 8 s, 16 s, 32 s, then 64 s, each ±1 s uniformly.
func (c *Client) backoff(n int) time.Duration {
	base := 4 * time.Second << min(n, 4)
	return base - time.Second + time.Duration(uniform(c.rnd, uint64(2*time.Second)+1))
}

// discover enters SELECTING with a new DHCPDISCOVER.
func (c *Client) discover(now time.Time) {
	c.newExchange(now)
	c.setState(Selecting, now)
	c.sendDiscover(now)
}

func (c *Client) sendDiscover(now time.Time) {
	m := c.message(dhcpv4.MessageTypeDiscover, now)
	m.SetBroadcast()
	if c.want.IsValid() {
		m.UpdateOption(dhcpv4.OptRequestedIPAddress(c.want.AsSlice()))
	}
	c.broadcast(m, netip.IPv4Unspecified())
	c.stats.Discovers.Add(1)
	c.next = now.Add(c.backoff(c.tries))
	c.tries++
}

// request sends the DHCPREQUEST of the current state (RFC 2131 §4.3.2,
// Table 5) and sets the next retransmission.
func (c *Client) request(now time.Time) {
	m := c.message(dhcpv4.MessageTypeRequest, now)
	if c.reqStart.IsZero() {
		c.reqStart = now
	}
	switch c.state {
	case Requesting: // broadcast, option 50 and 54 of the offer
		m.SetBroadcast()
		m.UpdateOption(dhcpv4.OptRequestedIPAddress(c.offer.addr.AsSlice()))
		m.UpdateOption(dhcpv4.OptServerIdentifier(c.offer.server.AsSlice()))
		c.broadcast(m, netip.IPv4Unspecified())
		c.next = now.Add(c.backoff(c.tries))
	case Rebooting: // broadcast, option 50, no 54
		m.SetBroadcast()
		m.UpdateOption(dhcpv4.OptRequestedIPAddress(c.want.AsSlice()))
		c.broadcast(m, netip.IPv4Unspecified())
		c.next = now.Add(c.backoff(c.tries))
		if c.next.After(c.rebootEnd) {
			c.next = c.rebootEnd
		}
	case Renewing: // unicast to the server, ciaddr set
		l := c.lease
		m.ClientIPAddr = l.Addr.Addr().AsSlice()
		c.send(m, l.Addr.Addr(), l.Server, l.ServerMAC)
		c.next = now.Add(max(minRenewRetransmit, l.T2.Sub(now)/2))
		if c.next.After(l.T2) {
			c.next = l.T2
		}
	case Rebinding: // broadcast, ciaddr set
		l := c.lease
		m.ClientIPAddr = l.Addr.Addr().AsSlice()
		c.broadcast(m, l.Addr.Addr())
		c.next = now.Add(max(minRenewRetransmit, l.Expiry.Sub(now)/2))
		if c.next.After(l.Expiry) {
			c.next = l.Expiry
		}
	}
	c.stats.Requests.Add(1)
	c.tries++
}

// message returns a BOOTREQUEST of type t with the options Table 5 of
// RFC 2131 allows for it.
func (c *Client) message(t dhcpv4.MessageType, now time.Time) *dhcpv4.DHCPv4 {
	m := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootRequest,
		HWType:        iana.HWTypeEthernet,
		TransactionID: c.xid,
		ClientIPAddr:  net.IPv4zero,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IPv4zero,
		GatewayIPAddr: net.IPv4zero,
		ClientHWAddr:  c.cfg.HWAddr,
		Options:       dhcpv4.Options{},
	}
	m.UpdateOption(dhcpv4.OptMessageType(t))
	if c.cfg.ClientID != nil {
		m.UpdateOption(dhcpv4.OptClientIdentifier(c.cfg.ClientID))
	}
	if t == dhcpv4.MessageTypeDiscover || t == dhcpv4.MessageTypeRequest {
		m.NumSeconds = uint16(min(now.Sub(c.started)/time.Second, 0xffff))
		m.UpdateOption(dhcpv4.OptParameterRequestList(requested...))
		m.UpdateOption(dhcpv4.OptMaxMessageSize(rawudp.MTU))
		if c.cfg.Hostname != "" {
			m.UpdateOption(dhcpv4.OptHostName(c.cfg.Hostname))
		}
	}
	return m
}

// broadcast sends m from src to 255.255.255.255:67 in an Ethernet
// broadcast (RFC 2131 §4.1).
func (c *Client) broadcast(m *dhcpv4.DHCPv4, src netip.Addr) {
	c.send(m, src, netip.AddrFrom4([4]byte{255, 255, 255, 255}), rawudp.Broadcast)
}

func (c *Client) send(m *dhcpv4.DHCPv4, src, dst netip.Addr, dstMAC net.HardwareAddr) {
	err := c.cfg.Transport.Send(rawudp.Packet{
		Payload: m.ToBytes(),
		Src:     netip.AddrPortFrom(src, ClientPort),
		Dst:     netip.AddrPortFrom(dst, ServerPort),
		DstMAC:  dstMAC,
	})
	if err != nil {
		c.stats.SendErrors.Add(1)
		c.logError("send "+m.MessageType().String(), err)
	}
}

// timeout acts on c.next once it has passed: a retransmission, giving up
// an exchange, T1, T2 or expiry.
func (c *Client) timeout(ctx context.Context, now time.Time) {
	if c.next.IsZero() || now.Before(c.next) {
		return
	}
	switch c.state {
	case Init:
		c.discover(now)
	case Selecting:
		c.sendDiscover(now) // RFC 2131 §4.1: DHCPDISCOVER is retransmitted with no end
	case Requesting:
		if c.tries >= maxRequestTries {
			c.log.Info("dhcp4client: no answer to DHCPREQUEST; back to INIT", "server", c.offer.server)
			c.discover(now) // RFC 2131 §4.4.1
			return
		}
		c.request(now)
	case Rebooting:
		if !now.Before(c.rebootEnd) {
			c.log.Info("dhcp4client: no answer in INIT-REBOOT; discovering", "addr", c.want)
			c.discover(now)
			return
		}
		c.request(now)
	case Bound, Renewing, Rebinding:
		c.leaseTimer(now)
	}
}

// leaseTimer handles T1, T2 and expiry (RFC 2131 §4.4.5), latest first,
// so that a clock that jumped lands in the right state.
func (c *Client) leaseTimer(now time.Time) {
	l := c.lease
	switch {
	case !now.Before(l.Expiry):
		c.stats.Expiries.Add(1)
		c.lose(now, "expired")
		c.want = l.Addr.Addr()
		c.discover(now)
	case !now.Before(l.T2):
		if c.state != Rebinding {
			if c.state == Bound {
				c.newExchange(now)
			}
			c.setState(Rebinding, now)
			c.stats.Rebinds.Add(1)
		}
		c.request(now)
	case !now.Before(l.T1):
		if c.state != Renewing {
			c.newExchange(now)
			c.setState(Renewing, now)
			c.stats.Renewals.Add(1)
		}
		c.request(now)
	default:
		c.next = l.T1
	}
}

// lose drops the applied lease, telling OnLease, and goes to INIT.
func (c *Client) lose(now time.Time, why string) {
	old := c.lease
	c.lease = nil
	c.setState(Init, now)
	c.next = time.Time{}
	if old == nil {
		return
	}
	c.log.Warn("dhcp4client: lease lost; address removed", "reason", why, "addr", old.Addr, "server", old.Server)
	c.publish() // Status, if OnLease reads it, already says so
	if c.cfg.OnLease != nil {
		c.cfg.OnLease(old.clone(), nil)
	}
}

// removeLeaseFile deletes the saved lease, which must not be asked for
// again (NAKed, declined, released).
func (c *Client) removeLeaseFile() {
	if c.cfg.LeaseFile == "" {
		return
	}
	if err := leasefile.Remove(c.cfg.LeaseFile); err != nil {
		c.leaseFileError(err)
	}
}

// stop ends Run: DHCPRELEASE if configured (RFC 2131 §4.4.6).
func (c *Client) stop(now time.Time) {
	if c.lease != nil && c.cfg.Release {
		l := c.lease
		c.newExchange(now)
		m := c.message(dhcpv4.MessageTypeRelease, now)
		m.ClientIPAddr = l.Addr.Addr().AsSlice()
		m.UpdateOption(dhcpv4.OptServerIdentifier(l.Server.AsSlice()))
		c.send(m, l.Addr.Addr(), l.Server, l.ServerMAC)
		c.stats.Releases.Add(1)
		c.removeLeaseFile()
		c.lose(now, "released")
	}
	c.setState(Stopped, now)
	c.next = time.Time{}
}

// pending reports whether the state waits for an answer.
func (c *Client) pending() bool {
	switch c.state {
	case Selecting, Requesting, Rebooting, Renewing, Rebinding:
		return true
	}
	return false
}

// handle takes one received datagram: it checks it (RFC 2131 §4.4: op,
// chaddr, xid, message type, server identifier) and counts it as a drop
// or acts on it.
func (c *Client) handle(ctx context.Context, p rawudp.Packet, now time.Time) {
	d := &c.stats.Drops
	if dhcpopts.WellFormed(p.Payload) != nil {
		d.Malformed.Add(1) // options cut short or overflowing their field
		return
	}
	m, err := dhcpv4.FromBytes(p.Payload)
	if err != nil {
		d.Malformed.Add(1)
		return
	}
	mt := m.MessageType()
	switch {
	case mt == dhcpv4.MessageTypeNone:
		d.Malformed.Add(1)
		return
	case m.OpCode != dhcpv4.OpcodeBootReply || p.Src.Port() != ServerPort:
		d.NotReply.Add(1)
		return
	case m.HWType != iana.HWTypeEthernet || string(m.ClientHWAddr) != string(c.cfg.HWAddr):
		d.HWAddr.Add(1)
		return
	case !c.pending():
		d.Unexpected.Add(1)
		return
	case m.TransactionID != c.xid:
		d.XID.Add(1)
		return
	}
	if cid := m.Options.Get(dhcpv4.OptionClientIdentifier); cid != nil && string(cid) != string(c.cfg.ClientID) {
		d.ClientID.Add(1) // RFC 6842 §3: an echoed identifier must be ours
		return
	}
	sid, ok := ip4(m.Options.Get(dhcpv4.OptionServerIdentifier))
	if c.state == Selecting {
		switch {
		case mt != dhcpv4.MessageTypeOffer:
			d.Type.Add(1)
		case !ok || !usable(sid):
			d.ServerID.Add(1) // RFC 2131 Table 3: MUST in DHCPOFFER
		case !usable(addrOf(m.YourIPAddr)):
			d.Address.Add(1)
		default:
			// The first acceptable offer wins (RFC 2131 §4.4.1 leaves the
			// choice to the client).
			c.stats.Offers.Add(1)
			c.offer = offer{server: sid, addr: addrOf(m.YourIPAddr)}
			c.setState(Requesting, now)
			c.tries = 0
			c.request(now)
		}
		return
	}
	switch {
	case mt != dhcpv4.MessageTypeAck && mt != dhcpv4.MessageTypeNak:
		d.Type.Add(1)
		return
	case !ok || !usable(sid):
		d.ServerID.Add(1) // RFC 2131 Table 3: MUST in DHCPACK and DHCPNAK
		return
	case c.state == Requesting && sid != c.offer.server, c.state == Renewing && sid != c.lease.Server:
		d.ServerID.Add(1) // not the server this exchange is with
		return
	}
	if mt == dhcpv4.MessageTypeNak {
		c.stats.Naks.Add(1)
		c.nak(now, sid, m.Message())
		return
	}
	l, drop := c.parseAck(m, p, sid)
	if drop != nil {
		drop.Add(1)
		return
	}
	c.stats.Acks.Add(1)
	c.bind(ctx, l)
}

// nak goes back to INIT (RFC 2131 §3.1.4, §3.2, §4.4.5), dropping any
// lease; repeated DHCPNAKs back off like retransmissions so that a
// server that NAKs everything is not flooded.
func (c *Client) nak(now time.Time, server netip.Addr, msg string) {
	c.log.Warn("dhcp4client: DHCPNAK", "server", server, "state", c.state, "message", msg)
	c.lose(now, "DHCPNAK from "+server.String())
	c.want = netip.Addr{}
	c.removeLeaseFile()
	c.naks++
	c.next = now
	if c.naks > 1 {
		c.next = now.Add(c.backoff(c.naks - 2))
	}
}

// parseAck builds the lease a DHCPACK gives, or names the drop counter
// for one that gives none.
func (c *Client) parseAck(m *dhcpv4.DHCPv4, p rawudp.Packet, server netip.Addr) (*Lease, *atomic.Uint64) {
	d := &c.stats.Drops
	addr := addrOf(m.YourIPAddr)
	if !usable(addr) {
		return nil, &d.Address
	}
	bits := classBits(addr)
	if mask := m.Options.Get(dhcpv4.OptionSubnetMask); mask != nil {
		ones, size := net.IPMask(mask).Size()
		if len(mask) != 4 || size != 32 || ones == 0 {
			return nil, &d.Address
		}
		bits = ones
	}
	lt := m.Options.Get(dhcpv4.OptionIPAddressLeaseTime)
	if len(lt) != 4 || binary.BigEndian.Uint32(lt) == 0 {
		return nil, &d.LeaseTime
	}
	lease := seconds(binary.BigEndian.Uint32(lt))
	t2 := lease / 8 * 7
	if v := m.Options.Get(dhcpv4.OptionRebindingTimeValue); len(v) == 4 && seconds(binary.BigEndian.Uint32(v)) < lease {
		t2 = seconds(binary.BigEndian.Uint32(v))
	}
	t1 := min(lease/2, t2)
	if v := m.Options.Get(dhcpv4.OptionRenewTimeValue); len(v) == 4 && seconds(binary.BigEndian.Uint32(v)) <= t2 {
		t1 = seconds(binary.BigEndian.Uint32(v))
	}
	acquired := c.reqStart
	if acquired.IsZero() {
		acquired = c.clock.Now()
	}
	l := &Lease{
		Addr:      netip.PrefixFrom(addr, bits),
		Server:    server,
		ServerMAC: append(net.HardwareAddr(nil), p.SrcMAC...),
		Routers:   ip4s(m.Options.Get(dhcpv4.OptionRouter)),
		DNS:       ip4s(m.Options.Get(dhcpv4.OptionDomainNameServer)),
		Domain:    domainName(m.Options.Get(dhcpv4.OptionDomainName)),
		Acquired:  acquired,
		T1:        acquired.Add(t1),
		T2:        acquired.Add(t2),
		Expiry:    acquired.Add(lease),
	}
	if len(l.ServerMAC) != 6 {
		l.ServerMAC = append(net.HardwareAddr(nil), rawudp.Broadcast...)
	}
	if v := m.Options.Get(dhcpv4.OptionClasslessStaticRoute); v != nil {
		l.Routes = classlessRoutes(v)
	}
	if l.Routes == nil && len(l.Routers) > 0 {
		l.Routes = []Route{{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Via: l.Routers[0]}}
	}
	if v := m.Options.Get(dhcpv4.OptionInterfaceMTU); len(v) == 2 {
		if mtu := int(binary.BigEndian.Uint16(v)); mtu >= c.cfg.MinMTU {
			l.MTU = mtu
		} else {
			c.stats.MTUIgnored.Add(1)
			c.log.Warn("dhcp4client: option 26 MTU below the minimum; ignored", "mtu", mtu, "min", c.cfg.MinMTU)
		}
	}
	return l, nil
}

// bind applies the lease of an accepted DHCPACK: after an ARP probe if
// the address is new (RFC 2131 §4.4.1; RFC 5227 §2.1), then BOUND, the
// lease file and OnLease.
func (c *Client) bind(ctx context.Context, l *Lease) {
	if c.cfg.Prober != nil && (c.lease == nil || c.lease.Addr.Addr() != l.Addr.Addr()) {
		inUse, err := c.cfg.Prober.InUse(ctx, l.Addr.Addr())
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.stats.ProbeErrors.Add(1)
			c.logError("ARP probe of "+l.Addr.Addr().String()+" failed; taking the address", err)
		}
		if inUse {
			c.decline(c.clock.Now(), l)
			return
		}
	}
	now := c.clock.Now()
	old := c.lease
	c.lease = l
	c.naks = 0
	c.want = l.Addr.Addr()
	c.setState(Bound, now)
	c.next = l.T1
	if old == nil || old.Addr != l.Addr {
		c.log.Info("dhcp4client: bound", "addr", l.Addr, "server", l.Server, "routes", l.Routes,
			"dns", l.DNS, "mtu", l.MTU, "expiry", l.Expiry)
	}
	if c.cfg.LeaseFile != "" {
		if err := writeLeaseFile(c.cfg.LeaseFile, l, c.cfg.HWAddr, c.cfg.ClientID); err != nil {
			c.leaseFileError(err)
		}
	}
	c.publish()
	if !old.sameConfig(l) && c.cfg.OnLease != nil {
		c.cfg.OnLease(old.clone(), l.clone())
	}
}

// decline sends DHCPDECLINE for the address of l, which another host
// answers for, and waits before starting again (RFC 2131 §3.1.5,
// §4.4.4: broadcast, options 50 and 54, ciaddr 0).
func (c *Client) decline(now time.Time, l *Lease) {
	c.log.Warn("dhcp4client: offered address is in use on the link; declining", "addr", l.Addr.Addr(), "server", l.Server)
	c.newExchange(now)
	m := c.message(dhcpv4.MessageTypeDecline, now)
	m.UpdateOption(dhcpv4.OptRequestedIPAddress(l.Addr.Addr().AsSlice()))
	m.UpdateOption(dhcpv4.OptServerIdentifier(l.Server.AsSlice()))
	c.broadcast(m, netip.IPv4Unspecified())
	c.stats.Declines.Add(1)
	c.lose(now, "declined "+l.Addr.Addr().String())
	c.removeLeaseFile()
	c.want = netip.Addr{}
	c.next = now.Add(c.cfg.DeclineWait)
}

// uniform draws from [0, n) with one draw of src: the high word of
// src×n, whose bias (under 2⁻³² for the n used here) does not matter
// for jitter, and which maps the extremes of src to those of the range.
func uniform(src mrand.Source, n uint64) uint64 {
	hi, _ := bits.Mul64(src.Uint64(), n)
	return hi
}

func seconds(s uint32) time.Duration {
	if s == 0xffffffff {
		return infiniteLease
	}
	return time.Duration(s) * time.Second
}

// addrOf converts a 4-byte net.IP (as dhcpv4 parses them); anything else
// is the zero Addr.
func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

// ip4 parses an option holding exactly one IPv4 address.
func ip4(b []byte) (netip.Addr, bool) {
	if len(b) != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(b)), true
}

// ip4s parses an option holding a list of IPv4 addresses, keeping the
// usable ones; a length not a multiple of 4 gives none.
func ip4s(b []byte) []netip.Addr {
	if len(b)%4 != 0 {
		return nil
	}
	var out []netip.Addr
	for ; len(b) >= 4; b = b[4:] {
		if a := netip.AddrFrom4([4]byte(b[:4])); usable(a) {
			out = append(out, a)
		}
	}
	return out
}

// classlessRoutes parses option 121 (RFC 3442 §3); a malformed option
// gives nil, so that option 3 applies, and routes via an unusable router
// are left out.
func classlessRoutes(b []byte) []Route {
	var rs dhcpv4.Routes
	if err := rs.FromBytes(b); err != nil || len(rs) == 0 {
		return nil
	}
	out := make([]Route, 0, len(rs))
	for _, r := range rs {
		dst, ok := netip.AddrFromSlice(r.Dest.IP.To4())
		ones, _ := r.Dest.Mask.Size()
		via, vok := netip.AddrFromSlice(r.Router)
		if !ok || !vok || (!via.IsUnspecified() && !usable(via)) {
			continue
		}
		out = append(out, Route{Dst: netip.PrefixFrom(dst, ones).Masked(), Via: via})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// classBits is the mask of a's class, for a DHCPACK without option 1.
func classBits(a netip.Addr) int {
	switch b := a.As4()[0]; {
	case b < 128:
		return 8
	case b < 192:
		return 16
	}
	return 24
}

// domainName returns option 15 (RFC 2132 §3.17) if it is a DNS name of
// letters, digits, hyphens and underscores (RFC 1035 §2.3.1, with the
// underscore some ISPs use), without the trailing NULs or dot some servers
// add; else "": the router must not apply a search domain it cannot
// write back.
func domainName(b []byte) string {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	s := strings.TrimSuffix(string(b), ".")
	if s == "" || len(s) > 253 {
		return ""
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return ""
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return ""
			}
		}
	}
	return s
}
