package ra

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/gvrouter/gvrouter/services/hwaddr"
)

// Learner bounds and RFC 4861 §10 host constants.
const (
	// maxRouters bounds the routers a Learner keeps: a WAN link has one
	// ISP router, or a redundant pair; the rest is a misconfigured or
	// hostile neighbour, which must not buy memory. When it is reached
	// an unreachable router makes room for a new one (RoutersReplaced),
	// so a flood of dead ones cannot keep a real router out.
	maxRouters = 8
	// maxLearnedPrefixes bounds the prefixes kept, maxDNS the RDNSS
	// servers and, apart, the DNSSL domains.
	maxLearnedPrefixes = 16
	maxDNS             = 8
	// learnerQueue is how many valid RAs may wait for Run: routers send
	// one every few seconds at the most, so a full queue is a flood.
	learnerQueue = 16
	// twoHours is the floor RFC 4862 §5.5.3 e) puts under an
	// autonomous prefix's remaining valid lifetime.
	twoHours = 2 * time.Hour
	// maxMTU is the largest MTU option taken: the largest IPv6 packet
	// without a jumbo payload (RFC 8200 §3, RFC 2675).
	maxMTU = 65535 + ipv6HeaderLen
	// MinOnLinkBits is the shortest prefix a Learner takes: an ISP's
	// link has a /64 (RFC 7421), and a /48 is the most a whole site is
	// given (RFC 6177); a shorter "on-link" prefix would move the
	// Internet's routes onto the link (::/1 and 8000::/1 cover all of
	// it).
	MinOnLinkBits = 48

	// maxRtrSolicitationDelay, rtrSolicitationInterval and
	// maxRtrSolicitations are MAX_RTR_SOLICITATION_DELAY (1 s),
	// RTR_SOLICITATION_INTERVAL (4 s) and MAX_RTR_SOLICITATIONS (3):
	// the first RS after a random delay up to 1 s, then up to two more,
	// 4 s apart, until an RA with a router comes (§6.3.7).
	maxRtrSolicitationDelay = time.Second
	rtrSolicitationInterval = 4 * time.Second
	maxRtrSolicitations     = 3
)

// Preference is a Default Router Preference (RFC 4191 §2.1), ordered:
// PreferenceHigh > PreferenceMedium > PreferenceLow.
type Preference int8

// Default Router Preferences. The reserved value 10 reads as medium (RFC
// 4191 §2.2).
const (
	PreferenceLow    Preference = -1
	PreferenceMedium Preference = 0
	PreferenceHigh   Preference = 1
)

// MarshalText implements encoding.TextMarshaler: String.
func (p Preference) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, the inverse of
// MarshalText.
func (p *Preference) UnmarshalText(b []byte) error {
	for _, x := range []Preference{PreferenceLow, PreferenceMedium, PreferenceHigh} {
		if x.String() == string(b) {
			*p = x
			return nil
		}
	}
	return fmt.Errorf("ra: unknown router preference %q", b)
}

// String returns "low", "medium" or "high".
func (p Preference) String() string {
	switch p {
	case PreferenceLow:
		return "low"
	case PreferenceHigh:
		return "high"
	}
	return "medium"
}

func preference(p ndp.Preference) Preference {
	switch p {
	case ndp.High:
		return PreferenceHigh
	case ndp.Low:
		return PreferenceLow
	}
	return PreferenceMedium
}

// Router is a default router learnt from its RAs (RFC 4861 §6.3.4).
type Router struct {
	// Addr is its link-local address, e.g. fe80::1, the next hop of a
	// default route through it.
	Addr netip.Addr `json:"address"`
	// MAC is its Ethernet address: the RA's Source Link-Layer Address
	// option, else the frame's source.
	MAC hwaddr.MAC `json:"mac"`
	// Preference is the RA's Default Router Preference.
	Preference Preference `json:"preference"`
	// Expires is when its Router Lifetime ends, unless a later RA
	// renews it.
	Expires time.Time `json:"expires,omitzero"`
	// Reachability is whether it answers neighbor solicitations (see
	// nud.go).
	Reachability Reachability `json:"reachability"`
}

// LearnedPrefix is a prefix learnt from the Prefix Information options
// of RAs (see the package doc, "Learner").
type LearnedPrefix struct {
	// Prefix is the prefix, e.g. 2001:db8:1::/64; never link-local.
	Prefix netip.Prefix `json:"prefix"`
	// OnLink and Autonomous are the L and A flags of the latest option;
	// Autonomous only for a /64 (RFC 4862 §5.5.3 d).
	OnLink     bool `json:"on_link"`
	Autonomous bool `json:"autonomous"`
	// ValidUntil and PreferredUntil are when it stops being valid and
	// preferred; zero for Infinity.
	ValidUntil     time.Time `json:"valid_until,omitzero"`
	PreferredUntil time.Time `json:"preferred_until,omitzero"`
}

// DNSServer is a recursive DNS server learnt from RDNSS options (RFC
// 8106 §5.1).
type DNSServer struct {
	Addr netip.Addr `json:"address"`
	// Expires is when its lifetime ends; zero for Infinity.
	Expires time.Time `json:"expires,omitzero"`
}

// SearchDomain is a domain learnt from DNSSL options (RFC 8106 §5.2).
type SearchDomain struct {
	// Domain is the name, lower case, without a final dot, e.g.
	// "isp.example".
	Domain string `json:"domain"`
	// Expires is when its lifetime ends; zero for Infinity.
	Expires time.Time `json:"expires,omitzero"`
}

// State is what a Learner knows of its link.
type State struct {
	// Routers are the default routers in the order they are to be used
	// (RFC 4861 §6.3.6, RFC 4191 §3.2): reachable ones first, then
	// those being probed, unreachable ones last; within each, most
	// preferred first, then by address.
	Routers []Router `json:"routers"`
	// Prefixes are the prefixes, ordered by address.
	Prefixes []LearnedPrefix `json:"prefixes"`
	// RDNSS and DNSSL are the DNS servers and search domains, in the
	// order first learnt.
	RDNSS []DNSServer    `json:"rdnss"`
	DNSSL []SearchDomain `json:"dnssl"`
	// MTU is the last MTU option of 1280 or more; 0 for none. The
	// caller caps it by the link's own MTU.
	MTU int `json:"mtu"`
	// HopLimit is the last Cur Hop Limit that was not 0; 0 for none.
	HopLimit uint8 `json:"hop_limit"`
	// Managed and Other are the M and O flags of the last RA: whether
	// DHCPv6 offers addresses, or other configuration.
	Managed bool `json:"managed"`
	Other   bool `json:"other"`
}

// OnLinkPrefixes returns the prefixes with the L flag: the routes on the
// link (§6.3.4), e.g. for the router's WAN routing table.
func (s State) OnLinkPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s.Prefixes {
		if p.OnLink {
			out = append(out, p.Prefix)
		}
	}
	return out
}

// DNSServers returns the RDNSS addresses, in the order first learnt.
func (s State) DNSServers() []netip.Addr {
	var out []netip.Addr
	for _, d := range s.RDNSS {
		out = append(out, d.Addr)
	}
	return out
}

// clone returns a deep copy of s.
func (s State) clone() State {
	s.Routers = slices.Clone(s.Routers)
	for i := range s.Routers {
		s.Routers[i].MAC = slices.Clone(s.Routers[i].MAC)
	}
	s.Prefixes = slices.Clone(s.Prefixes)
	s.RDNSS = slices.Clone(s.RDNSS)
	s.DNSSL = slices.Clone(s.DNSSL)
	return s
}

// LearnerConfig is one WAN interface's Learner.
type LearnerConfig struct {
	// Link sends the RSs. Required.
	Link Link
	// SrcAddr is the source of the RSs: the interface's link-local
	// address, e.g. fe80::ff:fe00:1, or :: (netip.IPv6Unspecified())
	// before it has one, in which case no SLLA option is sent (§4.1).
	// The zero Addr is LinkLocal of the link's MAC.
	SrcAddr netip.Addr
	// Solicit sends Router Solicitations when Run starts (§6.3.7) instead
	// of waiting up to MaxRtrAdvInterval for an unsolicited RA.
	Solicit bool
	// PointToPoint is for a link with one peer and no link-layer
	// addresses (PPP, RFC 5072): routers are Reachable as soon as
	// learnt, with no neighbour solicitations (nothing resolves
	// addresses there, and a PPP peer need not answer them; the link's
	// own keepalive, LCP echo, finds a dead peer), and RSs carry no
	// Source Link-Layer Address option (§4.1: only on links that have
	// addresses).
	PointToPoint bool
	// Owned returns the prefixes the router holds elsewhere, e.g.
	// fd77:1::/64 on a LAN and the delegated 2001:db8:aa00::/56: its
	// other interfaces' prefixes and the delegation with its subnets. A
	// Prefix Information option that overlaps one of them (equal, inside
	// or around it) is ignored and counted (PrefixOverlapIgnored), so
	// that no RA can route a LAN or a LAN host out of this link. It is
	// called from Run's goroutine once per RA and must not block; nil is
	// none.
	Owned func() []netip.Prefix
	// OnChange is called from Run's goroutine when the State changes in
	// what it holds (a router, prefix or DNS entry added, removed or
	// changed, a router's reachability included, a prefix deprecated, the MTU, hop limit or flags), not
	// when an RA only renews lifetimes. It gets a copy it may keep. It
	// must not call Run.
	OnChange func(State)
	// Clock is the time source; nil is SystemClock.
	Clock Clock
	// Rand draws the RS delay; nil is a ChaCha8 seeded from crypto/rand.
	Rand rand.Source
	// Logger receives events; nil discards them.
	Logger *slog.Logger
}

// learnedRA is a valid RA waiting for Run.
type learnedRA struct {
	src  netip.Addr
	mac  net.HardwareAddr
	icmp []byte
}

// Learner learns a WAN link's routers, prefixes, DNS and MTU from the
// RAs it receives, as a host does (RFC 4861 §6.3.4), for a router that
// forwards (Linux's accept_ra=2). Its methods are safe for concurrent
// use; Deliver is the link's frame tap.
type Learner struct {
	cfg       LearnerConfig
	clock     Clock
	log       *slog.Logger
	mac       net.HardwareAddr
	src       netip.Addr
	stats     LearnerStats
	queue     chan learnedRA
	running   atomic.Bool
	sawRouter atomic.Bool // an RA with a non-zero Router Lifetime came: stop soliciting
	naq       chan netip.Addr
	awaited   atomic.Pointer[[]netip.Addr] // routers with a round of NSs in progress (nud.go)

	// mu protects st, which only Run's goroutine changes.
	mu sync.Mutex
	st State

	// Run's goroutine only.
	published   State
	publishedAt time.Time
	probes      map[netip.Addr]*probe
}

// NewLearner returns a Learner for cfg. Run starts it.
func NewLearner(cfg LearnerConfig) (*Learner, error) {
	var errs errorList
	var mac net.HardwareAddr
	if cfg.Link == nil {
		errs.add("no link")
	} else if mac = slices.Clone(cfg.Link.HardwareAddr()); len(mac) != 6 || mac[0]&1 != 0 {
		errs.add("link address %v is not a unicast Ethernet address", mac)
	} else if !cfg.SrcAddr.IsValid() {
		cfg.SrcAddr = LinkLocal(mac)
	}
	if a := cfg.SrcAddr; a.IsValid() && (!a.Is6() || a.Is4In6() || !a.IsLinkLocalUnicast() && !a.IsUnspecified()) {
		errs.add("source %v is neither link-local nor :: (RFC 4861 §4.1)", a)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = newSource()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Learner{
		cfg: cfg, clock: cfg.Clock, log: cfg.Logger, mac: mac, src: cfg.SrcAddr.WithZone(""),
		queue: make(chan learnedRA, learnerQueue), naq: make(chan netip.Addr, naQueue),
		probes: make(map[netip.Addr]*probe),
	}, nil
}

// Stats returns the Learner's counters.
func (l *Learner) Stats() *LearnerStats { return &l.stats }

// State returns a copy of what the Learner knows now.
func (l *Learner) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.clone()
}

// LearnerStatus is a snapshot of a Learner: the status page shows it and
// /api/status encodes it as it is (router/status RALearner), so a new
// field or counter needs no glue in the router.
type LearnerStatus struct {
	State
	// Counters are LearnerStats.Counters: "ra", "router_unreachable" and
	// the like; Drops are LearnerStats.DropCounts, by reason.
	Counters map[string]uint64 `json:"counters"`
	Drops    map[string]uint64 `json:"drops"`
}

// Status returns the learnt State with the counters.
func (l *Learner) Status() LearnerStatus {
	return LearnerStatus{State: l.State(), Counters: l.stats.Counters(), Drops: l.stats.DropCounts()}
}

// Deliver is the link's tap (it implements the router's stack.Tap): it
// is offered the ICMPv6 frames the interface receives for this host and
// consumes the Router Advertisements, valid (queued for Run) or not
// (counted under their DropReason, §6.1.2); it watches the Neighbor
// Advertisements that answer its probes of routers (nud.go) and leaves
// them, and everything else, to the caller. It does not block, keep or
// modify frame, and may be called concurrently.
func (l *Learner) Deliver(frame []byte) bool {
	typ, ok := icmpType(frame)
	if ok && typ == typeNA {
		l.takeNA(frame)
	}
	if !ok || typ != typeRA {
		return false
	}
	m, r, ok := checkND(frame, raMinLen)
	switch {
	case !ok:
	case !m.src.IsLinkLocalUnicast():
		r, ok = DropSourceNotLinkLocal, false
	case m.src == l.src || bytes.Equal(m.srcMAC, l.mac):
		r, ok = DropOwn, false
	}
	if !ok {
		l.stats.Drops[r].Add(1)
		return true
	}
	mac := m.slla
	if mac == nil {
		mac = m.srcMAC
	}
	select {
	case l.queue <- learnedRA{src: m.src, mac: slices.Clone(mac), icmp: slices.Clone(m.icmp)}:
		l.stats.Received.Add(1)
	default:
		l.stats.Drops[DropQueueFull].Add(1)
	}
	return true
}

// Run applies the RAs Deliver queues, ends lifetimes and, with
// Config.Solicit, solicits, until ctx is done; then it returns nil,
// leaving the State as it is. Only one Run may be in progress
// (ErrRunning).
func (l *Learner) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer l.running.Store(false)
	l.log.Debug("ra: routineLearn started", "src", l.src)
	defer l.log.Debug("ra: routineLearn stopped", "src", l.src)
	rnd := rand.New(l.cfg.Rand)
	wake := make(chan struct{}, 1)
	rsLeft := 0
	var rsAt time.Time
	if l.cfg.Solicit {
		rsLeft = maxRtrSolicitations
		rsAt = l.clock.Now().Add(time.Duration(rnd.Int64N(int64(maxRtrSolicitationDelay) + 1)))
	}
	l.publishedAt = l.clock.Now()
	for {
		now := l.clock.Now()
		l.expire(now)
		l.probeRouters(now)
		l.publish(now)
		if rsLeft > 0 && l.sawRouter.Load() {
			rsLeft = 0
		}
		if rsLeft > 0 && !rsAt.After(now) {
			l.solicit()
			rsLeft--
			rsAt = now.Add(rtrSolicitationInterval)
			continue
		}
		due := l.nextEvent(now)
		if p := l.nextProbe(); !p.IsZero() && (due.IsZero() || p.Before(due)) {
			due = p
		}
		if rsLeft > 0 && (due.IsZero() || rsAt.Before(due)) {
			due = rsAt
		}
		var t Timer
		if !due.IsZero() {
			t = l.clock.AfterFunc(due.Sub(now), func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			})
		}
		select {
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return nil
		case r := <-l.queue:
			l.apply(r, l.clock.Now())
		case a := <-l.naq:
			l.confirm(a, l.clock.Now())
		case <-wake:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// solicit sends one RS to all-routers.
func (l *Learner) solicit() {
	m := &ndp.RouterSolicitation{}
	if !l.src.IsUnspecified() && !l.cfg.PointToPoint {
		m.Options = []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: l.mac}}
	}
	icmp, err := ndp.MarshalMessageChecksum(m, l.src, AllRouters)
	if err == nil {
		err = l.cfg.Link.WriteFrame(buildFrame(MulticastMAC(AllRouters), l.mac, l.src, AllRouters, icmp))
	}
	if err != nil {
		l.stats.SendErrors.Add(1)
		l.log.Warn("ra: sending a router solicitation", "err", err)
		return
	}
	l.stats.RSSent.Add(1)
}

// apply updates the State from one valid RA (§6.3.4, RFC 4862 §5.5.3,
// RFC 4191 §3, RFC 8106 §5.3).
func (l *Learner) apply(r learnedRA, now time.Time) {
	ra, ignored := parseRA(r.icmp)
	if ra == nil {
		return // checkND passed the fixed part; the library takes any
	}
	l.stats.OptionsIgnored.Add(uint64(ignored))
	var owned []netip.Prefix
	if l.cfg.Owned != nil {
		owned = l.cfg.Owned()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &l.st
	if ra.CurrentHopLimit != 0 {
		st.HopLimit = ra.CurrentHopLimit
	}
	st.Managed, st.Other = ra.ManagedConfiguration, ra.OtherConfiguration
	l.applyRouterLocked(r, ra, now)
	for _, o := range ra.Options {
		switch o := o.(type) {
		case *ndp.MTU:
			if o.MTU < minLinkMTU || o.MTU > maxMTU {
				l.stats.MTUIgnored.Add(1)
				continue
			}
			st.MTU = int(o.MTU)
		case *ndp.PrefixInformation:
			l.applyPrefixLocked(o, owned, now)
		case *ndp.RecursiveDNSServer:
			for _, a := range o.Servers {
				if !a.Is6() || a.Is4In6() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
					l.stats.DNSIgnored.Add(1)
					continue
				}
				st.RDNSS = updateDNS(st.RDNSS, DNSServer{Addr: a, Expires: until(now, o.Lifetime)}, o.Lifetime == 0,
					func(x DNSServer) bool { return x.Addr == a }, &l.stats)
			}
		case *ndp.DNSSearchList:
			for _, d := range o.DomainNames {
				d = strings.ToLower(strings.TrimSuffix(d, "."))
				if d == "" {
					continue
				}
				st.DNSSL = updateDNS(st.DNSSL, SearchDomain{Domain: d, Expires: until(now, o.Lifetime)}, o.Lifetime == 0,
					func(x SearchDomain) bool { return x.Domain == d }, &l.stats)
			}
		}
	}
}

// applyRouterLocked updates the default router list from ra (§6.3.4):
// a Router Lifetime of 0 removes the router at once. l.mu must be held.
func (l *Learner) applyRouterLocked(r learnedRA, ra *ndp.RouterAdvertisement, now time.Time) {
	st := &l.st
	i := slices.IndexFunc(st.Routers, func(x Router) bool { return x.Addr == r.src })
	if ra.RouterLifetime == 0 {
		if i >= 0 {
			st.Routers = slices.Delete(st.Routers, i, i+1)
			l.log.Info("ra: router withdrew (router lifetime 0)", "router", r.src)
		}
		return
	}
	l.sawRouter.Store(true)
	e := Router{Addr: r.src, MAC: hwaddr.MAC(r.mac), Preference: preference(ra.RouterSelectionPreference), Expires: now.Add(ra.RouterLifetime)}
	if l.cfg.PointToPoint {
		e.Reachability = Reachable // no NUD: see LearnerConfig.PointToPoint
	}
	switch {
	case i >= 0:
		e.Reachability = st.Routers[i].Reachability
		st.Routers[i] = e
	case len(st.Routers) >= maxRouters && st.Routers[len(st.Routers)-1].Reachability == Unreachable:
		// Sorted: the last is the least preferred unreachable router.
		old := st.Routers[len(st.Routers)-1]
		st.Routers[len(st.Routers)-1] = e
		l.stats.RoutersReplaced.Add(1)
		l.log.Info("ra: router learnt in place of an unreachable one", "router", r.src, "mac", r.mac.String(), "replaced", old.Addr)
	case len(st.Routers) < maxRouters:
		st.Routers = append(st.Routers, e)
		l.log.Info("ra: router learnt", "router", r.src, "mac", r.mac.String(), "preference", e.Preference, "lifetime", ra.RouterLifetime)
	default:
		l.stats.RoutersFull.Add(1)
		return
	}
	sortRouters(st.Routers)
}

// sortRouters puts rs in the order routers are used: by reachability
// (Reachability.rank), then most preferred first, then by address.
func sortRouters(rs []Router) {
	slices.SortStableFunc(rs, func(a, b Router) int {
		if c := cmp.Compare(a.Reachability.rank(), b.Reachability.rank()); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Preference, a.Preference); c != 0 {
			return c
		}
		return a.Addr.Compare(b.Addr)
	})
}

// applyPrefixLocked updates the prefix list from one Prefix Information
// option (see the package doc, "Learner"), owned being Config.Owned's
// prefixes. l.mu must be held.
func (l *Learner) applyPrefixLocked(o *ndp.PrefixInformation, owned []netip.Prefix, now time.Time) {
	if o.PrefixLength > 128 || !o.Prefix.Is6() {
		l.stats.PrefixesIgnored.Add(1)
		return
	}
	p := netip.PrefixFrom(o.Prefix, int(o.PrefixLength)).Masked()
	a := p.Addr()
	if a.IsLinkLocalUnicast() || a.IsMulticast() || o.PreferredLifetime > o.ValidLifetime {
		l.stats.PrefixesIgnored.Add(1)
		return
	}
	auto := o.AutonomousAddressConfiguration && p.Bits() == 64
	if !o.OnLink && !auto {
		return // nothing a router learns from it
	}
	st := &l.st
	i := slices.IndexFunc(st.Prefixes, func(x LearnedPrefix) bool { return x.Prefix == p })
	if p.Bits() < MinOnLinkBits {
		l.stats.PrefixTooShort.Add(1)
		return
	}
	if slices.ContainsFunc(owned, p.Overlaps) {
		l.stats.PrefixOverlapIgnored.Add(1)
		if i >= 0 { // learnt before the router held it
			st.Prefixes = slices.Delete(st.Prefixes, i, i+1)
		}
		return
	}
	e := LearnedPrefix{Prefix: p, OnLink: o.OnLink, Autonomous: auto, PreferredUntil: until(now, o.PreferredLifetime)}
	switch {
	case i >= 0 && auto:
		// RFC 4862 §5.5.3 e): an RA may shorten an autonomous prefix's
		// remaining lifetime to no less than two hours, so a spoofed RA
		// cannot end the router's address in it.
		e.ValidUntil = twoHourRule(st.Prefixes[i].ValidUntil, o.ValidLifetime, now)
	case o.ValidLifetime == 0:
		// On-link only (§6.3.4): it times out at once; a new prefix with
		// lifetime 0 is not learnt.
		if i >= 0 {
			st.Prefixes = slices.Delete(st.Prefixes, i, i+1)
		}
		return
	default:
		e.ValidUntil = until(now, o.ValidLifetime)
	}
	switch {
	case i >= 0:
		st.Prefixes[i] = e
	case len(st.Prefixes) < maxLearnedPrefixes:
		st.Prefixes = append(st.Prefixes, e)
		slices.SortFunc(st.Prefixes, func(x, y LearnedPrefix) int {
			if c := x.Prefix.Addr().Compare(y.Prefix.Addr()); c != 0 {
				return c
			}
			return cmp.Compare(x.Prefix.Bits(), y.Prefix.Bits())
		})
	default:
		l.stats.PrefixesFull.Add(1)
	}
}

// twoHourRule is the new end of an autonomous prefix's valid lifetime,
// by RFC 4862 §5.5.3 e), old being its end (zero: Infinity) and received
// the lifetime an RA announces: the received one if over two hours or
// over what remains; else what remains if that is two hours or less;
// else two hours.
func twoHourRule(old time.Time, received time.Duration, now time.Time) time.Time {
	if received == Infinity {
		return time.Time{}
	}
	remaining := Infinity
	if !old.IsZero() {
		remaining = old.Sub(now)
	}
	switch {
	case received > twoHours || received > remaining:
		return now.Add(received)
	case remaining <= twoHours:
		return old
	}
	return now.Add(twoHours)
}

// updateDNS adds, renews or (remove: lifetime 0, RFC 8106 §5.1) removes
// the entry e of list that same finds, keeping at most maxDNS.
func updateDNS[T any](list []T, e T, remove bool, same func(T) bool, stats *LearnerStats) []T {
	i := slices.IndexFunc(list, same)
	switch {
	case remove:
		if i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
	case i >= 0:
		list[i] = e
	case len(list) < maxDNS:
		list = append(list, e)
	default:
		stats.DNSFull.Add(1)
	}
	return list
}

// expire removes what ended at or before now.
func (l *Learner) expire(now time.Time) {
	ended := func(t time.Time) bool { return !t.IsZero() && !t.After(now) }
	l.mu.Lock()
	st := &l.st
	n := len(st.Routers) + len(st.Prefixes) + len(st.RDNSS) + len(st.DNSSL)
	st.Routers = slices.DeleteFunc(st.Routers, func(r Router) bool { return ended(r.Expires) })
	st.Prefixes = slices.DeleteFunc(st.Prefixes, func(p LearnedPrefix) bool { return ended(p.ValidUntil) })
	st.RDNSS = slices.DeleteFunc(st.RDNSS, func(d DNSServer) bool { return ended(d.Expires) })
	st.DNSSL = slices.DeleteFunc(st.DNSSL, func(d SearchDomain) bool { return ended(d.Expires) })
	n -= len(st.Routers) + len(st.Prefixes) + len(st.RDNSS) + len(st.DNSSL)
	l.mu.Unlock()
	if n > 0 {
		l.stats.Expired.Add(uint64(n))
	}
}

// nextEvent is the earliest end of a lifetime after now (a preferred
// lifetime's too: deprecation is a change); zero for none.
func (l *Learner) nextEvent(now time.Time) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.st.Routers {
		consider(r.Expires)
	}
	for _, p := range l.st.Prefixes {
		consider(p.ValidUntil)
		consider(p.PreferredUntil)
	}
	for _, d := range l.st.RDNSS {
		consider(d.Expires)
	}
	for _, d := range l.st.DNSSL {
		consider(d.Expires)
	}
	return next
}

// publish calls OnChange if the State changed in what it holds since it
// was last published.
func (l *Learner) publish(now time.Time) {
	st := l.State()
	if sameHolding(l.published, l.publishedAt, st, now) {
		return
	}
	l.published, l.publishedAt = st, now
	l.stats.Changes.Add(1)
	l.log.Debug("ra: learnt state changed", "state", st.String())
	if l.cfg.OnChange != nil {
		l.cfg.OnChange(st.clone())
	}
}

// sameHolding reports whether a at ta and b at tb hold the same: routers
// (address, MAC, preference, reachability), prefixes (flags, and whether preferred),
// DNS, MTU, hop limit and flags; lifetimes aside.
func sameHolding(a State, ta time.Time, b State, tb time.Time) bool {
	preferred := func(p LearnedPrefix, t time.Time) bool { return p.PreferredUntil.IsZero() || p.PreferredUntil.After(t) }
	return a.MTU == b.MTU && a.HopLimit == b.HopLimit && a.Managed == b.Managed && a.Other == b.Other &&
		slices.EqualFunc(a.Routers, b.Routers, func(x, y Router) bool {
			return x.Addr == y.Addr && bytes.Equal(x.MAC, y.MAC) && x.Preference == y.Preference && x.Reachability == y.Reachability
		}) &&
		slices.EqualFunc(a.Prefixes, b.Prefixes, func(x, y LearnedPrefix) bool {
			return x.Prefix == y.Prefix && x.OnLink == y.OnLink && x.Autonomous == y.Autonomous && preferred(x, ta) == preferred(y, tb)
		}) &&
		slices.EqualFunc(a.RDNSS, b.RDNSS, func(x, y DNSServer) bool { return x.Addr == y.Addr }) &&
		slices.EqualFunc(a.DNSSL, b.DNSSL, func(x, y SearchDomain) bool { return x.Domain == y.Domain })
}

// String is a one-line summary of s for logs.
func (s State) String() string {
	var b strings.Builder
	for _, r := range s.Routers {
		fmt.Fprintf(&b, "router %v (%v, %v, %v) ", r.Addr, r.MAC, r.Preference, r.Reachability)
	}
	for _, p := range s.Prefixes {
		fmt.Fprintf(&b, "prefix %v L=%v A=%v ", p.Prefix, p.OnLink, p.Autonomous)
	}
	for _, d := range s.RDNSS {
		fmt.Fprintf(&b, "rdnss %v ", d.Addr)
	}
	for _, d := range s.DNSSL {
		fmt.Fprintf(&b, "dnssl %s ", d.Domain)
	}
	fmt.Fprintf(&b, "mtu %d hop limit %d M=%v O=%v", s.MTU, s.HopLimit, s.Managed, s.Other)
	return b.String()
}
