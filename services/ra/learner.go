package ra

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/ndp"
)

// Learner takes what the ISP's router advertisements on a wan interface
// say — default routers, on-link prefixes, RDNSS — as Linux's accept_ra=2
// does on a forwarding interface (RFC 4861 §6.3.4), honouring their
// lifetimes, and reports each change. It never configures anything
// itself: the router applies the State by its reload path.
type Learner struct {
	cfg   LearnerConfig
	stats LearnerStats
	kick  chan struct{}

	mu      sync.Mutex
	routers map[netip.Addr]*Router
	onLink  map[netip.Prefix]time.Time // prefix → valid until
	rdnss   map[netip.Addr]time.Time
	mtu     int
}

// LearnerConfig configures a Learner.
type LearnerConfig struct {
	// OnChange is called from Run's goroutine with the new State after
	// every change (a router or prefix learned, changed, expired).
	OnChange func(State)
	// Now is the clock (nil: time.Now); Logger may be nil.
	Now    func() time.Time
	Logger *slog.Logger
}

// Bounds on what one link can make the learner keep: more is counted and
// ignored, so a flood of RAs from spoofed routers costs bounded memory.
const (
	maxRouters  = 8
	maxPrefixes = 16
	maxRDNSS    = 8
)

// Router is a default router learned from its RAs.
type Router struct {
	Addr       netip.Addr // link-local source of its RAs
	MAC        net.HardwareAddr
	Preference ndp.Preference
	Expires    time.Time
}

// State is what the learner knows now.
type State struct {
	// Routers are the default routers, the most preferred first (RFC
	// 4191 §2.2: high, medium, low), then by address.
	Routers []Router
	// OnLink are the prefixes with the L flag, by address.
	OnLink []netip.Prefix
	// RDNSS are the DNS servers announced (RFC 8106).
	RDNSS []netip.Addr
	// MTU is the last MTU option of at least 1280; 0 = none.
	MTU int
}

// LearnerStats counts what the Learner did. Read with Load.
type LearnerStats struct {
	RAs          atomic.Uint64 // valid RAs taken
	Expired      atomic.Uint64 // routers and prefixes removed at the end of their lifetime
	TooMany      atomic.Uint64 // routers, prefixes or servers ignored over the bounds
	MTUIgnored   atomic.Uint64 // MTU options below 1280
	DropsSource  atomic.Uint64 // RAs not from a link-local address (§6.1.2)
	DropsHop     atomic.Uint64 // hop limit not 255
	DropsCode    atomic.Uint64 // ICMP code not 0
	DropsSum     atomic.Uint64 // checksum wrong
	DropsOption  atomic.Uint64 // an option of length 0
	DropsInvalid atomic.Uint64 // truncated or unparsable
}

// NewLearner returns a Learner.
func NewLearner(cfg LearnerConfig) *Learner {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Learner{cfg: cfg, kick: make(chan struct{}, 1), routers: map[netip.Addr]*Router{},
		onLink: map[netip.Prefix]time.Time{}, rdnss: map[netip.Addr]time.Time{}}
}

// Stats returns the counters.
func (l *Learner) Stats() *LearnerStats { return &l.stats }

// Deliver takes a received Ethernet frame; it consumes nothing (netstack
// still sees every ICMPv6 frame, and ignores RAs as a forwarding stack)
// and returns false. A valid RA updates the state; an invalid one is
// counted.
func (l *Learner) Deliver(frame []byte) bool {
	if len(frame) < 14+40+16 || binary.BigEndian.Uint16(frame[12:]) != 0x86dd {
		return false
	}
	ip := frame[14:]
	if ip[0]>>4 != 6 || ip[6] != 58 || ip[40] != typeRA {
		return false
	}
	plen := int(binary.BigEndian.Uint16(ip[4:]))
	if plen < 16 || 40+plen > len(ip) {
		l.stats.DropsInvalid.Add(1)
		return false
	}
	icmp := ip[40 : 40+plen]
	src := netip.AddrFrom16([16]byte(ip[8:24]))
	switch {
	case !src.IsLinkLocalUnicast():
		l.stats.DropsSource.Add(1)
		return false
	case ip[7] != 255:
		l.stats.DropsHop.Add(1)
		return false
	case icmp[1] != 0:
		l.stats.DropsCode.Add(1)
		return false
	case checksum(ip[8:24], ip[24:40], icmp) != 0:
		l.stats.DropsSum.Add(1)
		return false
	}
	for opts := icmp[16:]; len(opts) > 0; {
		if len(opts) < 2 || int(opts[1])*8 > len(opts) {
			l.stats.DropsInvalid.Add(1)
			return false
		}
		if opts[1] == 0 {
			l.stats.DropsOption.Add(1)
			return false
		}
		opts = opts[int(opts[1])*8:]
	}
	m, err := ndp.ParseMessage(icmp)
	ra, ok := m.(*ndp.RouterAdvertisement)
	if err != nil || !ok {
		l.stats.DropsInvalid.Add(1)
		return false
	}
	l.take(src, net.HardwareAddr(frame[6:12]), ra)
	return false
}

// take merges one valid RA into the state (RFC 4861 §6.3.4).
func (l *Learner) take(src netip.Addr, mac net.HardwareAddr, ra *ndp.RouterAdvertisement) {
	now := l.cfg.Now()
	l.stats.RAs.Add(1)
	l.mu.Lock()
	if ra.RouterLifetime == 0 {
		delete(l.routers, src)
	} else if r, ok := l.routers[src]; ok || len(l.routers) < maxRouters {
		if !ok {
			r = &Router{Addr: src}
			l.routers[src] = r
		}
		r.MAC = slices.Clone(mac)
		r.Preference = ra.RouterSelectionPreference
		r.Expires = now.Add(ra.RouterLifetime)
	} else {
		l.stats.TooMany.Add(1)
	}
	for _, o := range ra.Options {
		switch o := o.(type) {
		case *ndp.PrefixInformation:
			p := netip.PrefixFrom(o.Prefix, int(o.PrefixLength)).Masked()
			if !o.OnLink || p.Addr().IsLinkLocalUnicast() || !p.Addr().Is6() {
				continue // only on-link information here (§6.3.4)
			}
			if o.ValidLifetime == 0 {
				delete(l.onLink, p)
				continue
			}
			if _, ok := l.onLink[p]; !ok && len(l.onLink) >= maxPrefixes {
				l.stats.TooMany.Add(1)
				continue
			}
			l.onLink[p] = now.Add(o.ValidLifetime)
		case *ndp.MTU:
			if o.MTU < 1280 {
				l.stats.MTUIgnored.Add(1)
				continue
			}
			l.mtu = int(o.MTU)
		case *ndp.RecursiveDNSServer:
			for _, s := range o.Servers {
				if o.Lifetime == 0 {
					delete(l.rdnss, s)
					continue
				}
				if _, ok := l.rdnss[s]; !ok && len(l.rdnss) >= maxRDNSS {
					l.stats.TooMany.Add(1)
					continue
				}
				l.rdnss[s] = now.Add(o.Lifetime)
			}
		}
	}
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// State returns what is known now, expired entries left out.
func (l *Learner) State() State {
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var st State
	for _, r := range l.routers {
		if r.Expires.After(now) {
			st.Routers = append(st.Routers, *r)
		}
	}
	rank := func(p ndp.Preference) int { return map[ndp.Preference]int{ndp.High: 0, ndp.Medium: 1, ndp.Low: 2}[p] }
	slices.SortFunc(st.Routers, func(a, b Router) int {
		if d := rank(a.Preference) - rank(b.Preference); d != 0 {
			return d
		}
		return a.Addr.Compare(b.Addr)
	})
	for p, until := range l.onLink {
		if until.After(now) {
			st.OnLink = append(st.OnLink, p)
		}
	}
	slices.SortFunc(st.OnLink, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	for s, until := range l.rdnss {
		if until.After(now) {
			st.RDNSS = append(st.RDNSS, s)
		}
	}
	slices.SortFunc(st.RDNSS, netip.Addr.Compare)
	st.MTU = l.mtu
	return st
}

// expire removes what has run out and returns the next expiry (zero:
// none).
func (l *Learner) expire() time.Time {
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var next time.Time
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for a, r := range l.routers {
		if !r.Expires.After(now) {
			delete(l.routers, a)
			l.stats.Expired.Add(1)
		} else {
			soonest(r.Expires)
		}
	}
	for p, until := range l.onLink {
		if !until.After(now) {
			delete(l.onLink, p)
			l.stats.Expired.Add(1)
		} else {
			soonest(until)
		}
	}
	for s, until := range l.rdnss {
		if !until.After(now) {
			delete(l.rdnss, s)
		} else {
			soonest(until)
		}
	}
	return next
}

// Run reports changes through OnChange until ctx ends: after each RA
// that changed the state and at each expiry.
func (l *Learner) Run(ctx context.Context) error {
	var last State
	report := func() {
		st := l.State()
		if !stateEqual(st, last) {
			last = st
			if l.cfg.OnChange != nil {
				l.cfg.OnChange(st)
			}
		}
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := l.expire()
		report()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(l.cfg.Now()), 10*time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-l.kick:
		case <-timer.C:
		}
	}
}

// stateEqual compares what the router applies: routers by address and
// order, prefixes, servers, MTU (not the lifetimes, which change with
// every RA).
func stateEqual(a, b State) bool {
	return slices.EqualFunc(a.Routers, b.Routers, func(x, y Router) bool { return x.Addr == y.Addr }) &&
		slices.Equal(a.OnLink, b.OnLink) && slices.Equal(a.RDNSS, b.RDNSS) && a.MTU == b.MTU
}
