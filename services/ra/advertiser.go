package ra

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/ndp"
)

// Link sends an interface's Ethernet frames (the router's
// stack.Interface, or a packet socket in tests).
type Link interface {
	WriteFrame(frame []byte) error
	HardwareAddr() net.HardwareAddr
}

// RFC 4861 §10 router constants and radvd's prefix lifetime defaults.
const (
	DefaultMaxInterval     = 600 * time.Second
	MinMaxInterval         = 4 * time.Second
	MaxMaxInterval         = 1800 * time.Second
	maxInitialInterval     = 16 * time.Second
	maxInitialAdverts      = 3
	minDelayBetweenRAs     = 3 * time.Second
	maxRADelay             = 500 * time.Millisecond
	DefaultValidLifetime   = 24 * time.Hour
	DefaultPreferredLife   = 4 * time.Hour
	withdrawnValidLifetime = 2 * time.Hour // RFC 7084 L-13 / RFC 4862 §5.5.3 e
)

// Prefix is one /64 announced with the A and L flags. Its lifetimes are
// ValidUntil and PreferredUntil when set (a delegated prefix: they count
// down with the delegation), else Valid and Preferred (0: a day and four
// hours, radvd's defaults), the same in every RA.
type Prefix struct {
	Prefix                     netip.Prefix
	ValidUntil, PreferredUntil time.Time
	Valid, Preferred           time.Duration
}

// Config configures an Advertiser.
type Config struct {
	Link Link
	// SrcAddr is the interface's link-local address, the RAs' source
	// (§4.2: it must be link-local). Required.
	SrcAddr netip.Addr
	// MTU, if not 0, is announced in an MTU option (≥ 1280).
	MTU int
	// HopLimit is the Cur Hop Limit announced; 0 = unspecified (hosts
	// keep their own).
	HopLimit uint8
	// Managed and Other are the M and O flags.
	Managed, Other bool
	// RDNSS and DNSSL are the DNS servers and search domains announced
	// (RFC 8106), with DNSLifetime (0: 3 × MaxInterval).
	RDNSS       []netip.Addr
	DNSSL       []string
	DNSLifetime time.Duration
	// MaxInterval and MinInterval bound the unsolicited RAs' interval
	// (§6.2.1: 4 s ≤ Max ≤ 1800 s, 3 s ≤ Min ≤ 0.75 × Max); 0 = 600 s and
	// 0.33 × Max.
	MaxInterval, MinInterval time.Duration
	// RouterLifetime is the router lifetime announced; 0 = 3 × Max.
	RouterLifetime time.Duration
	Prefixes       []Prefix
	// Now is the clock (nil: time.Now); Logger may be nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// Stats counts what an Advertiser did. Read with Load.
type Stats struct {
	Sent          atomic.Uint64 // RAs sent, final ones included
	SolicitedSent atomic.Uint64 // of Sent, those answering an RS
	RSReceived    atomic.Uint64 // valid RSs
	RSCoalesced   atomic.Uint64 // valid RSs answered by an RA already scheduled or rate-limited (§6.2.6)
	OtherRA       atomic.Uint64 // RAs from another router on the link (§6.2.7), left to netstack
	SendErrors    atomic.Uint64
	Drops         [numDrops]atomic.Uint64
}

// DropReason is why an RS was dropped (§6.1.1).
type DropReason int

// Drop reasons.
const (
	DropMalformed  DropReason = iota // truncated IPv6 or ICMPv6, bad payload length
	DropChecksum                     // ICMPv6 checksum wrong
	DropHopLimit                     // hop limit not 255: not from this link
	DropCode                         // ICMP code not 0
	DropOptionZero                   // an option of length 0
	DropUnspecSLLA                   // source :: with a source link-layer address option
	numDrops
)

// NumDrops is the number of drop reasons.
const NumDrops = int(numDrops)

var dropNames = [...]string{"malformed", "checksum", "hop_limit", "code", "option_length_zero", "unspecified_with_slla"}

func (r DropReason) String() string {
	if r < 0 || r >= numDrops {
		return fmt.Sprintf("DropReason(%d)", int(r))
	}
	return dropNames[r]
}

// Status is what the Advertiser announces now.
type Status struct {
	Prefixes       []AnnouncedPrefix
	RDNSS          []netip.Addr
	DNSSL          []string
	Managed, Other bool
	RouterLifetime time.Duration
	MTU            int
	LastSent       time.Time
}

// AnnouncedPrefix is a prefix with the ends of the lifetimes announced.
type AnnouncedPrefix struct {
	Prefix                     netip.Prefix
	ValidUntil, PreferredUntil time.Time
	Withdrawn                  bool
}

// Advertiser sends one lan interface's RAs.
type Advertiser struct {
	cfg   Config
	stats Stats
	kick  chan struct{} // an RS or SetPrefixes wants an RA soon
	rsDue atomic.Bool   // an RS is waiting for its RA

	mu        sync.Mutex
	prefixes  []Prefix
	withdrawn []AnnouncedPrefix // removed prefixes, announced deprecated until ValidUntil
	lastMcast time.Time
	running   bool
}

// New validates cfg and returns an Advertiser.
func New(cfg Config) (*Advertiser, error) {
	if cfg.Link == nil {
		return nil, errors.New("ra: no link")
	}
	if len(cfg.Link.HardwareAddr()) != 6 {
		return nil, errors.New("ra: the link has no Ethernet address")
	}
	if !cfg.SrcAddr.Is6() || !cfg.SrcAddr.IsLinkLocalUnicast() {
		return nil, fmt.Errorf("ra: source %v is not an IPv6 link-local address (RFC 4861 §4.2)", cfg.SrcAddr)
	}
	cfg.SrcAddr = cfg.SrcAddr.WithZone("")
	if cfg.MaxInterval == 0 {
		cfg.MaxInterval = DefaultMaxInterval
	}
	if cfg.MaxInterval < MinMaxInterval || cfg.MaxInterval > MaxMaxInterval {
		return nil, fmt.Errorf("ra: max interval %v out of %v..%v (RFC 4861 §6.2.1)", cfg.MaxInterval, MinMaxInterval, MaxMaxInterval)
	}
	if cfg.MinInterval == 0 {
		cfg.MinInterval = max(cfg.MaxInterval*33/100, 3*time.Second)
	}
	if cfg.MinInterval < 3*time.Second || cfg.MinInterval > cfg.MaxInterval*3/4 {
		return nil, fmt.Errorf("ra: min interval %v out of 3s..%v (RFC 4861 §6.2.1)", cfg.MinInterval, cfg.MaxInterval*3/4)
	}
	if cfg.RouterLifetime == 0 {
		cfg.RouterLifetime = 3 * cfg.MaxInterval
	}
	if cfg.RouterLifetime > 9000*time.Second {
		return nil, fmt.Errorf("ra: router lifetime %v over 9000 s (RFC 4861 §6.2.1)", cfg.RouterLifetime)
	}
	if cfg.DNSLifetime == 0 {
		cfg.DNSLifetime = 3 * cfg.MaxInterval
	}
	if cfg.MTU != 0 && cfg.MTU < 1280 {
		return nil, fmt.Errorf("ra: MTU %d below the IPv6 minimum 1280", cfg.MTU)
	}
	for _, a := range cfg.RDNSS {
		if !a.Is6() || a.Is4In6() || a.IsMulticast() {
			return nil, fmt.Errorf("ra: RDNSS %v is not an IPv6 unicast address", a)
		}
	}
	if err := checkPrefixes(cfg.Prefixes); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Advertiser{cfg: cfg, kick: make(chan struct{}, 1), prefixes: slices.Clone(cfg.Prefixes)}
	return a, nil
}

func checkPrefixes(ps []Prefix) error {
	for _, p := range ps {
		if !p.Prefix.Addr().Is6() || p.Prefix.Addr().Is4In6() || p.Prefix.Bits() != 64 || p.Prefix.Masked() != p.Prefix {
			return fmt.Errorf("ra: prefix %v is not an IPv6 /64 (SLAAC needs one, RFC 4862 §5.5.3)", p.Prefix)
		}
		if p.Prefix.Addr().IsLinkLocalUnicast() || p.Prefix.Addr().IsMulticast() {
			return fmt.Errorf("ra: prefix %v is link-local or multicast", p.Prefix)
		}
	}
	return nil
}

// Stats returns the counters.
func (a *Advertiser) Stats() *Stats { return &a.stats }

// SetPrefixes replaces the prefixes announced and sends an RA soon (as an
// RS would, within the 3 s rate limit). A prefix no longer in ps is
// announced withdrawn: preferred lifetime 0 and a valid lifetime of what
// it had left, at most two hours (RFC 7084 L-13).
func (a *Advertiser) SetPrefixes(ps []Prefix) error {
	if err := checkPrefixes(ps); err != nil {
		return err
	}
	now := a.cfg.Now()
	a.mu.Lock()
	for _, old := range a.prefixes {
		if slices.ContainsFunc(ps, func(p Prefix) bool { return p.Prefix == old.Prefix }) {
			continue
		}
		valid, _ := lifetimes(old, now)
		w := AnnouncedPrefix{Prefix: old.Prefix, ValidUntil: now.Add(min(valid, withdrawnValidLifetime)), PreferredUntil: now, Withdrawn: true}
		a.withdrawn = slices.DeleteFunc(a.withdrawn, func(x AnnouncedPrefix) bool { return x.Prefix == old.Prefix })
		if valid > 0 {
			a.withdrawn = append(a.withdrawn, w)
		}
	}
	a.withdrawn = slices.DeleteFunc(a.withdrawn, func(x AnnouncedPrefix) bool {
		return slices.ContainsFunc(ps, func(p Prefix) bool { return p.Prefix == x.Prefix })
	})
	a.prefixes = slices.Clone(ps)
	a.mu.Unlock()
	a.poke()
	return nil
}

func (a *Advertiser) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// lifetimes returns p's valid and preferred lifetimes at now.
func lifetimes(p Prefix, now time.Time) (valid, preferred time.Duration) {
	valid, preferred = p.Valid, p.Preferred
	if valid == 0 {
		valid = DefaultValidLifetime
	}
	if preferred == 0 {
		preferred = DefaultPreferredLife
	}
	if !p.ValidUntil.IsZero() {
		valid = max(p.ValidUntil.Sub(now), 0)
	}
	if !p.PreferredUntil.IsZero() {
		preferred = max(p.PreferredUntil.Sub(now), 0)
	}
	return valid.Truncate(time.Second), min(preferred, valid).Truncate(time.Second)
}

// SetDNS replaces the RDNSS servers and DNSSL domains announced (the
// forwarder's address follows the delegation) and sends an RA soon.
func (a *Advertiser) SetDNS(rdnss []netip.Addr, dnssl []string) error {
	for _, x := range rdnss {
		if !x.Is6() || x.Is4In6() || x.IsMulticast() {
			return fmt.Errorf("ra: RDNSS %v is not an IPv6 unicast address", x)
		}
	}
	a.mu.Lock()
	same := slices.Equal(a.cfg.RDNSS, rdnss) && slices.Equal(a.cfg.DNSSL, dnssl)
	a.cfg.RDNSS, a.cfg.DNSSL = slices.Clone(rdnss), slices.Clone(dnssl)
	a.mu.Unlock()
	if !same {
		a.poke()
	}
	return nil
}

// Status returns what is announced now.
func (a *Advertiser) Status() Status {
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	st := Status{RDNSS: slices.Clone(a.cfg.RDNSS), DNSSL: slices.Clone(a.cfg.DNSSL), Managed: a.cfg.Managed,
		Other: a.cfg.Other, RouterLifetime: a.cfg.RouterLifetime, MTU: a.cfg.MTU, LastSent: a.lastMcast}
	for _, p := range a.prefixes {
		v, pr := lifetimes(p, now)
		st.Prefixes = append(st.Prefixes, AnnouncedPrefix{Prefix: p.Prefix, ValidUntil: now.Add(v), PreferredUntil: now.Add(pr)})
	}
	for _, w := range a.withdrawn {
		if w.ValidUntil.After(now) {
			st.Prefixes = append(st.Prefixes, w)
		}
	}
	return st
}

// Run sends RAs until ctx ends, then the final one (router lifetime 0,
// prefixes deprecated), and returns nil.
func (a *Advertiser) Run(ctx context.Context) error {
	a.mu.Lock()
	if a.running {
		a.mu.Unlock()
		return errors.New("ra: already running")
	}
	a.running = true
	a.mu.Unlock()
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	initial := maxInitialAdverts
	timer := time.NewTimer(0) // the first RA at once (§6.2.4 allows a random delay; none is needed here)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			a.send(true, false)
			return nil
		case <-a.kick:
			// An RS or new prefixes: a multicast RA after a random
			// delay of up to 0.5 s, and not sooner than 3 s after the
			// last one (§6.2.6).
			a.mu.Lock()
			wait := max(time.Duration(rnd.Int64N(int64(maxRADelay))), a.lastMcast.Add(minDelayBetweenRAs).Sub(a.cfg.Now()))
			a.mu.Unlock()
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(wait)
		case <-timer.C:
			solicited := a.rsDue.Swap(false)
			a.send(false, solicited)
			next := a.cfg.MinInterval + time.Duration(rnd.Int64N(int64(a.cfg.MaxInterval-a.cfg.MinInterval)+1))
			if initial > 0 {
				initial--
				next = min(next, maxInitialInterval)
			}
			timer.Reset(next)
		}
	}
}

// allNodes is ff02::1 and its Ethernet group (RFC 2464 §7).
var (
	allNodes    = netip.AddrFrom16([16]byte{0xff, 0x02, 15: 1})
	allNodesMAC = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
)

// send builds and writes one multicast RA; final announces router
// lifetime 0 and every prefix deprecated.
func (a *Advertiser) send(final, solicited bool) {
	now := a.cfg.Now()
	a.mu.Lock()
	m := &ndp.RouterAdvertisement{
		CurrentHopLimit:      a.cfg.HopLimit,
		ManagedConfiguration: a.cfg.Managed,
		OtherConfiguration:   a.cfg.Other,
		RouterLifetime:       a.cfg.RouterLifetime,
	}
	if final {
		m.RouterLifetime = 0
	}
	m.Options = append(m.Options, &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: a.cfg.Link.HardwareAddr()})
	if a.cfg.MTU != 0 {
		m.Options = append(m.Options, ndp.NewMTU(uint32(a.cfg.MTU)))
	}
	for _, p := range a.prefixes {
		v, pr := lifetimes(p, now)
		if final {
			pr = 0
			v = min(v, withdrawnValidLifetime)
		}
		m.Options = append(m.Options, prefixOption(p.Prefix, v, pr))
	}
	a.withdrawn = slices.DeleteFunc(a.withdrawn, func(w AnnouncedPrefix) bool { return !w.ValidUntil.After(now) })
	for _, w := range a.withdrawn {
		m.Options = append(m.Options, prefixOption(w.Prefix, w.ValidUntil.Sub(now).Truncate(time.Second), 0))
	}
	if len(a.cfg.RDNSS) > 0 {
		lt := a.cfg.DNSLifetime
		if final {
			lt = 0
		}
		m.Options = append(m.Options, &ndp.RecursiveDNSServer{Lifetime: lt, Servers: slices.Clone(a.cfg.RDNSS)})
	}
	if len(a.cfg.DNSSL) > 0 {
		lt := a.cfg.DNSLifetime
		if final {
			lt = 0
		}
		m.Options = append(m.Options, &ndp.DNSSearchList{Lifetime: lt, DomainNames: slices.Clone(a.cfg.DNSSL)})
	}
	a.lastMcast = now
	a.mu.Unlock()

	icmp, err := ndp.MarshalMessageChecksum(m, a.cfg.SrcAddr, allNodes)
	if err != nil {
		a.stats.SendErrors.Add(1)
		a.cfg.Logger.Error("ra: building an RA", "err", err)
		return
	}
	frame := buildFrame(allNodesMAC, a.cfg.Link.HardwareAddr(), a.cfg.SrcAddr, allNodes, icmp)
	if err := a.cfg.Link.WriteFrame(frame); err != nil {
		a.stats.SendErrors.Add(1)
		a.cfg.Logger.Warn("ra: sending an RA", "err", err)
		return
	}
	a.stats.Sent.Add(1)
	if solicited {
		a.stats.SolicitedSent.Add(1)
	}
}

func prefixOption(p netip.Prefix, valid, preferred time.Duration) *ndp.PrefixInformation {
	return &ndp.PrefixInformation{
		PrefixLength: uint8(p.Bits()), OnLink: true, AutonomousAddressConfiguration: true,
		ValidLifetime: valid, PreferredLifetime: preferred, Prefix: p.Addr(),
	}
}

// buildFrame wraps an ICMPv6 message (checksum set) in IPv6, hop limit
// 255 (§6.1.2), and Ethernet.
func buildFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, icmp []byte) []byte {
	f := make([]byte, 14+40+len(icmp))
	copy(f[0:6], dstMAC)
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:], 0x86dd)
	ip := f[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(icmp)))
	ip[6] = 58
	ip[7] = 255
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	copy(ip[40:], icmp)
	return f
}

// ICMPv6 types of RFC 4861 §4.
const (
	typeRS = 133
	typeRA = 134
)

// Deliver takes an Ethernet frame the interface received (an ICMPv6
// frame, as the router's tap offers) and reports whether it consumed it:
// a router solicitation, valid or dropped. Every other frame, RAs from
// other routers included (counted), is left to the caller. It does not
// block or keep frame.
func (a *Advertiser) Deliver(frame []byte) bool {
	if len(frame) < 14+40+4 || binary.BigEndian.Uint16(frame[12:]) != 0x86dd {
		return false
	}
	ip := frame[14:]
	if ip[0]>>4 != 6 || ip[6] != 58 {
		return false
	}
	switch ip[40] {
	case typeRS:
	case typeRA:
		a.stats.OtherRA.Add(1)
		return false
	default:
		return false
	}
	if r, ok := checkRS(ip); !ok {
		a.stats.Drops[r].Add(1)
		return true
	}
	a.stats.RSReceived.Add(1)
	if a.rsDue.Swap(true) {
		a.stats.RSCoalesced.Add(1)
	}
	a.poke()
	return true
}

// checkRS validates a router solicitation as RFC 4861 §6.1.1 asks, ip
// being its IPv6 packet.
func checkRS(ip []byte) (DropReason, bool) {
	plen := int(binary.BigEndian.Uint16(ip[4:]))
	if plen < 8 || 40+plen > len(ip) {
		return DropMalformed, false
	}
	icmp := ip[40 : 40+plen]
	if ip[7] != 255 {
		return DropHopLimit, false
	}
	if icmp[1] != 0 {
		return DropCode, false
	}
	if checksum(ip[8:24], ip[24:40], icmp) != 0 {
		return DropChecksum, false
	}
	unspecified := [16]byte(ip[8:24]) == [16]byte{}
	for opts := icmp[8:]; len(opts) > 0; {
		if len(opts) < 2 {
			return DropMalformed, false
		}
		n := int(opts[1]) * 8
		if n == 0 {
			return DropOptionZero, false
		}
		if n > len(opts) {
			return DropMalformed, false
		}
		if opts[0] == 1 && unspecified { // Source Link-Layer Address
			return DropUnspecSLLA, false
		}
		opts = opts[n:]
	}
	return 0, true
}

// checksum is the ICMPv6 checksum over the pseudo-header (RFC 8200 §8.1)
// and msg, 0 when msg's checksum field is right.
func checksum(src, dst, msg []byte) uint16 {
	var s uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			s += uint32(binary.BigEndian.Uint16(b))
			b = b[2:]
		}
		if len(b) == 1 {
			s += uint32(b[0]) << 8
		}
	}
	add(src)
	add(dst)
	s += uint32(len(msg)) + 58
	add(msg)
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
