package ra

import (
	"bytes"
	"context"
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

// ErrRunning is returned by Run when another Run of the same Advertiser
// or Learner is in progress.
var ErrRunning = errors.New("ra: already running")

const (
	// otherRACheckEvery spaces the comparisons of other routers' RAs
	// with ours (§6.2.7): one parse per 100 ms at most, whatever a host
	// floods; routers advertise every few minutes.
	otherRACheckEvery = 100 * time.Millisecond
	// logEvery spaces the warnings about inconsistent routers.
	logEvery = 10 * time.Second
	// lifetimeSkew is how far another router's prefix lifetimes may be
	// from ours before they count as inconsistent: §6.2.7 asks for some
	// skew, for propagation delay and clocks, when lifetimes count down.
	lifetimeSkew = 10 * time.Second
)

// Status is a snapshot of an Advertiser for the status page.
type Status struct {
	// Prefixes are the prefixes announced now, the withdrawn ones
	// (Withdrawn) last.
	Prefixes []AnnouncedPrefix `json:"prefixes"`
	// RDNSS and DNSSL are the DNS servers and search domains announced.
	RDNSS []netip.Addr `json:"rdnss"`
	DNSSL []string     `json:"dnssl"`
	// Managed, Other and HopLimit are the M and O flags and the Cur Hop
	// Limit announced.
	Managed  bool  `json:"managed"`
	Other    bool  `json:"other"`
	HopLimit uint8 `json:"hop_limit"`
	// RouterLifetime is the Router Lifetime announced, 0 with
	// NotDefaultRouter.
	RouterLifetime time.Duration `json:"router_lifetime_ns"`
	// MTU is the MTU option announced; 0 for none.
	MTU int `json:"mtu"`
	// MinInterval and MaxInterval bound the unsolicited RAs' interval.
	MinInterval time.Duration `json:"min_interval_ns"`
	MaxInterval time.Duration `json:"max_interval_ns"`
	// Running reports whether Run is in progress.
	Running bool `json:"running"`
	// LastSent is when the last RA went; zero before the first.
	LastSent time.Time `json:"last_sent,omitzero"`
	// NextSend is when the next one is due; zero when not running.
	NextSend time.Time `json:"next_send,omitzero"`
	// Counters are Stats.Counters: "sent", "solicited_sent",
	// "rs_received" and the like; Drops are Stats.DropCounts, the RSs
	// and RAs refused by reason.
	Counters map[string]uint64 `json:"counters"`
	Drops    map[string]uint64 `json:"drops"`
}

// AnnouncedPrefix is a prefix with the ends of the lifetimes announced
// for it now.
type AnnouncedPrefix struct {
	Prefix netip.Prefix `json:"prefix"`
	// ValidUntil and PreferredUntil are now plus the lifetimes announced;
	// zero for Infinity.
	ValidUntil     time.Time `json:"valid_until,omitzero"`
	PreferredUntil time.Time `json:"preferred_until,omitzero"`
	// Withdrawn: removed by SetPrefixes and announced deprecated until
	// ValidUntil (see the package doc, "Renumbering").
	Withdrawn bool `json:"deprecated"`
}

// Advertiser sends one LAN interface's Router Advertisements and answers
// its Router Solicitations. Its methods are safe for concurrent use;
// Deliver is the link's frame tap.
type Advertiser struct {
	cfg   Config
	clock Clock
	log   *slog.Logger
	mac   net.HardwareAddr
	stats Stats
	// kick wakes Run for an RS or a change; rsWaiting counts the valid
	// RSs Run has not yet scheduled an answer for; changed says that
	// SetPrefixes or SetDNS changed what is announced.
	kick      chan struct{}
	rsWaiting atomic.Uint64
	changed   atomic.Bool
	running   atomic.Bool
	lastCheck atomic.Int64 // unix ns of the last comparison of another router's RA
	lastLog   atomic.Int64 // unix ns of the last inconsistency warning

	// mu protects the fields below.
	mu        sync.Mutex
	prefixes  []Prefix
	withdrawn []AnnouncedPrefix // oldest first; PreferredUntil unused
	rdnss     []netip.Addr
	dnssl     []string
	lastSent  time.Time
	nextSend  time.Time
}

// New returns an Advertiser for cfg, or the errors Validate found. Run
// starts it.
func New(cfg Config) (*Advertiser, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := &Advertiser{
		cfg: cfg, clock: cfg.Clock, log: cfg.Logger, mac: slices.Clone(cfg.Link.HardwareAddr()),
		kick: make(chan struct{}, 1), prefixes: cfg.Prefixes, rdnss: cfg.RDNSS, dnssl: cfg.DNSSL,
	}
	return a, nil
}

// Stats returns the Advertiser's counters.
func (a *Advertiser) Stats() *Stats { return &a.stats }

// SetPrefixes replaces the prefixes announced (each checked as
// Config.Prefixes is; on an error nothing changes) and, if they changed,
// sends an RA at once, or 3 s after the last one (§6.2.6), followed by
// two more at most 16 s apart (§6.2.4). A prefix no longer in ps is
// announced withdrawn: preferred lifetime 0 and a valid lifetime of what
// it had left, at most two hours, counting down (RFC 7084 L-13 b), until
// that ends.
func (a *Advertiser) SetPrefixes(ps []Prefix) error {
	if errs := checkPrefixes(ps); len(errs) > 0 {
		return errors.Join(errs...)
	}
	now := a.clock.Now()
	a.mu.Lock()
	if slices.EqualFunc(a.prefixes, ps, samePrefix) {
		a.mu.Unlock()
		return nil
	}
	for _, old := range a.prefixes {
		if !slices.ContainsFunc(ps, func(p Prefix) bool { return p.Prefix == old.Prefix }) {
			valid, _ := lifetimes(old, now)
			a.withdrawLocked(old.Prefix, valid, now)
		}
	}
	a.withdrawn = slices.DeleteFunc(a.withdrawn, func(w AnnouncedPrefix) bool {
		return slices.ContainsFunc(ps, func(p Prefix) bool { return p.Prefix == w.Prefix })
	})
	a.prefixes = slices.Clone(ps)
	a.mu.Unlock()
	a.log.Info("ra: prefixes changed", "prefixes", prefixList(ps))
	a.changed.Store(true)
	a.poke()
	return nil
}

// samePrefix reports whether p and q announce the same.
func samePrefix(p, q Prefix) bool {
	return p.Prefix == q.Prefix && p.ValidUntil.Equal(q.ValidUntil) && p.PreferredUntil.Equal(q.PreferredUntil) &&
		p.Valid == q.Valid && p.Preferred == q.Preferred
}

func prefixList(ps []Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Prefix)
	}
	return out
}

// withdrawLocked starts announcing p withdrawn, valid having been its
// valid lifetime; the oldest withdrawn prefix is forgotten when
// maxWithdrawn already are. a.mu must be held.
func (a *Advertiser) withdrawLocked(p netip.Prefix, valid time.Duration, now time.Time) {
	a.withdrawn = slices.DeleteFunc(a.withdrawn, func(w AnnouncedPrefix) bool { return w.Prefix == p })
	if valid <= 0 {
		return // already invalid: nothing to tell
	}
	a.withdrawn = append(a.withdrawn, AnnouncedPrefix{
		Prefix: p, ValidUntil: now.Add(min(valid, withdrawnValidLifetime)), PreferredUntil: now, Withdrawn: true,
	})
	if n := len(a.withdrawn) - maxWithdrawn; n > 0 {
		a.withdrawn = slices.Delete(a.withdrawn, 0, n)
		a.stats.WithdrawnForgotten.Add(uint64(n))
	}
}

// SetDNS replaces the RDNSS servers and DNSSL domains announced (each
// checked as Config's are; on an error nothing changes) and, if they
// changed, sends an RA as SetPrefixes does.
func (a *Advertiser) SetDNS(rdnss []netip.Addr, dnssl []string) error {
	if errs := checkDNS(rdnss, dnssl); len(errs) > 0 {
		return errors.Join(errs...)
	}
	dnssl = normDomains(dnssl)
	a.mu.Lock()
	same := slices.Equal(a.rdnss, rdnss) && slices.Equal(a.dnssl, dnssl)
	a.rdnss, a.dnssl = slices.Clone(rdnss), dnssl
	a.mu.Unlock()
	if !same {
		a.log.Info("ra: DNS changed", "rdnss", rdnss, "dnssl", dnssl)
		a.changed.Store(true)
		a.poke()
	}
	return nil
}

func (a *Advertiser) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// lifetimes returns p's valid and preferred lifetimes at now, in whole
// seconds (rounded down), at most Infinity, the preferred one at most
// the valid one.
func lifetimes(p Prefix, now time.Time) (valid, preferred time.Duration) {
	valid, preferred = p.Valid, p.Preferred
	if valid == 0 {
		valid = DefaultValidLifetime
	}
	if preferred == 0 {
		preferred = DefaultPreferredLifetime
	}
	if !p.ValidUntil.IsZero() {
		valid = max(p.ValidUntil.Sub(now), 0)
	}
	if !p.PreferredUntil.IsZero() {
		preferred = max(p.PreferredUntil.Sub(now), 0)
	}
	valid = wire(valid)
	return valid, min(wire(preferred), valid)
}

// wire is d as a lifetime field carries it: whole seconds, Infinity at
// most.
func wire(d time.Duration) time.Duration {
	if d >= Infinity {
		return Infinity
	}
	return d.Truncate(time.Second)
}

// until is now+d, or zero for Infinity.
func until(now time.Time, d time.Duration) time.Time {
	if d == Infinity {
		return time.Time{}
	}
	return now.Add(d)
}

// routerLifetime is the Router Lifetime announced outside the final RA.
func (a *Advertiser) routerLifetime() time.Duration {
	if a.cfg.NotDefaultRouter {
		return 0
	}
	return a.cfg.RouterLifetime
}

// Status returns a snapshot of the Advertiser.
func (a *Advertiser) Status() Status {
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	st := Status{
		RDNSS: slices.Clone(a.rdnss), DNSSL: slices.Clone(a.dnssl), Managed: a.cfg.Managed, Other: a.cfg.Other,
		HopLimit: a.cfg.HopLimit, RouterLifetime: a.routerLifetime(), MTU: a.cfg.MTU,
		MinInterval: a.cfg.MinInterval, MaxInterval: a.cfg.MaxInterval,
		Running: a.running.Load(), LastSent: a.lastSent, NextSend: a.nextSend,
		Counters: a.stats.Counters(), Drops: a.stats.DropCounts(),
	}
	for _, p := range a.prefixes {
		if v, pr := lifetimes(p, now); v > 0 {
			st.Prefixes = append(st.Prefixes, AnnouncedPrefix{Prefix: p.Prefix, ValidUntil: until(now, v), PreferredUntil: until(now, pr)})
		}
	}
	for _, w := range a.withdrawn {
		if w.ValidUntil.After(now) {
			st.Prefixes = append(st.Prefixes, w)
		}
	}
	return st
}

// schedule is when Run sends. It is owned by Run's goroutine.
type schedule struct {
	next      time.Time // the next unsolicited RA
	soon      time.Time // an earlier RA, for an RS or a change; zero for none
	answering bool      // the next RA answers an RS
	last      time.Time // the last multicast RA; zero before the first
	initial   int       // RAs sent since start or the last change, up to maxInitialAdverts
}

// due is when the next RA goes.
func (s *schedule) due() time.Time {
	if !s.soon.IsZero() && s.soon.Before(s.next) {
		return s.soon
	}
	return s.next
}

func (s *schedule) setSoon(at time.Time) {
	if s.soon.IsZero() || at.Before(s.soon) {
		s.soon = at
	}
}

// Run sends RAs until ctx is done, then sends the final one (§6.2.5:
// router lifetime 0, every prefix deprecated, DNS lifetimes 0) and
// returns nil. The first RA goes at once. Only one Run may be in
// progress (ErrRunning); an Advertiser may be run again after Run
// returns.
func (a *Advertiser) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer a.running.Store(false)
	a.log.Debug("ra: routineAdvertise started", "src", a.cfg.SrcAddr)
	defer a.log.Debug("ra: routineAdvertise stopped", "src", a.cfg.SrcAddr)
	rnd := rand.New(a.cfg.Rand)
	wake := make(chan struct{}, 1)
	a.changed.Store(false) // the first RA carries everything
	s := schedule{next: a.clock.Now()}
	for {
		now := a.clock.Now()
		a.takeRequests(&s, now, rnd)
		due := s.due()
		a.mu.Lock()
		a.nextSend = due
		a.mu.Unlock()
		if !due.After(now) {
			a.send(now, s.answering, false)
			s.last, s.soon, s.answering = now, time.Time{}, false
			s.initial = min(s.initial+1, maxInitialAdverts)
			iv := a.cfg.MinInterval + time.Duration(rnd.Int64N(int64(a.cfg.MaxInterval-a.cfg.MinInterval)+1))
			if s.initial < maxInitialAdverts {
				iv = min(iv, maxInitialInterval)
			}
			// Every multicast RA, solicited or not, restarts the
			// interval (§6.2.4, §6.2.6).
			s.next = now.Add(iv)
			continue
		}
		t := a.clock.AfterFunc(due.Sub(now), func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		select {
		case <-ctx.Done():
			t.Stop()
			a.send(a.clock.Now(), false, true)
			a.mu.Lock()
			a.nextSend = time.Time{}
			a.mu.Unlock()
			return nil
		case <-a.kick:
		case <-wake:
		}
		t.Stop()
	}
}

// takeRequests schedules the RA that answers the RSs received since the
// last call, and the one a change asks for.
func (a *Advertiser) takeRequests(s *schedule, now time.Time, rnd *rand.Rand) {
	if n := a.rsWaiting.Swap(0); n > 0 {
		if s.answering {
			a.stats.RSCoalesced.Add(n)
		} else {
			// §6.2.6: a random delay up to MAX_RA_DELAY_TIME, after
			// MIN_DELAY_BETWEEN_RAS from the last multicast RA if that
			// was sooner; an RA already due earlier answers instead.
			a.stats.RSCoalesced.Add(n - 1)
			s.answering = true
			r := time.Duration(rnd.Int64N(int64(maxRADelay) + 1))
			at := now.Add(r)
			if !s.last.IsZero() && now.Sub(s.last) < minDelayBetweenRAs {
				at = s.last.Add(minDelayBetweenRAs + r)
			}
			if at.After(s.next) {
				at = s.next
			}
			s.setSoon(at)
		}
	}
	if a.changed.Swap(false) {
		at := now
		if !s.last.IsZero() && now.Sub(s.last) < minDelayBetweenRAs {
			at = s.last.Add(minDelayBetweenRAs)
		}
		s.setSoon(at)
		s.initial = 0
	}
}

// send builds and writes one multicast RA to all-nodes; final is the one
// of §6.2.5.
func (a *Advertiser) send(now time.Time, solicited, final bool) {
	m := a.message(now, final)
	icmp, err := ndp.MarshalMessageChecksum(m, a.cfg.SrcAddr, AllNodes)
	if err != nil {
		a.stats.SendErrors.Add(1)
		a.log.Error("ra: building an RA", "err", err)
		return
	}
	frame := buildFrame(MulticastMAC(AllNodes), a.mac, a.cfg.SrcAddr, AllNodes, icmp)
	if err := a.cfg.Link.WriteFrame(frame); err != nil {
		a.stats.SendErrors.Add(1)
		a.log.Warn("ra: sending an RA", "err", err)
		return
	}
	a.mu.Lock()
	a.lastSent = now
	a.mu.Unlock()
	a.stats.Sent.Add(1)
	if solicited {
		a.stats.SolicitedSent.Add(1)
	}
}

// message is the RA to send at now.
func (a *Advertiser) message(now time.Time, final bool) *ndp.RouterAdvertisement {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := &ndp.RouterAdvertisement{
		CurrentHopLimit:      a.cfg.HopLimit,
		ManagedConfiguration: a.cfg.Managed,
		OtherConfiguration:   a.cfg.Other,
		RouterLifetime:       a.routerLifetime(),
	}
	if final {
		m.RouterLifetime = 0
	}
	m.Options = append(m.Options, &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: a.mac})
	if a.cfg.MTU != 0 {
		m.Options = append(m.Options, ndp.NewMTU(uint32(a.cfg.MTU)))
	}
	for _, p := range a.prefixes {
		v, pr := lifetimes(p, now)
		if v == 0 {
			continue // its delegation ended: nothing left to announce
		}
		if final {
			v, pr = min(v, withdrawnValidLifetime), 0
		}
		m.Options = append(m.Options, prefixOption(p.Prefix, v, pr))
	}
	a.withdrawn = slices.DeleteFunc(a.withdrawn, func(w AnnouncedPrefix) bool { return !w.ValidUntil.After(now) })
	for _, w := range a.withdrawn {
		if v := wire(w.ValidUntil.Sub(now)); v > 0 {
			m.Options = append(m.Options, prefixOption(w.Prefix, v, 0))
		}
	}
	lt := a.cfg.DNSLifetime
	if final {
		lt = 0 // the forwarder stops with the router (RFC 8106 §5.1)
	}
	if len(a.rdnss) > 0 {
		m.Options = append(m.Options, &ndp.RecursiveDNSServer{Lifetime: lt, Servers: slices.Clone(a.rdnss)})
	}
	if len(a.dnssl) > 0 {
		m.Options = append(m.Options, &ndp.DNSSearchList{Lifetime: lt, DomainNames: slices.Clone(a.dnssl)})
	}
	return m
}

func prefixOption(p netip.Prefix, valid, preferred time.Duration) *ndp.PrefixInformation {
	return &ndp.PrefixInformation{
		PrefixLength: uint8(p.Bits()), OnLink: true, AutonomousAddressConfiguration: true,
		ValidLifetime: valid, PreferredLifetime: preferred, Prefix: p.Addr(),
	}
}

// Deliver is the link's tap (it implements the router's stack.Tap): it
// is offered the ICMPv6 frames the interface receives for this host and
// reports whether it consumed one. It consumes Router Solicitations,
// valid (answered, see Run) or not (counted under their DropReason), and
// leaves everything else to the caller; RAs from other routers are
// counted and compared with ours first (§6.2.7). It does not block, keep
// or modify frame, and may be called concurrently.
func (a *Advertiser) Deliver(frame []byte) bool {
	typ, ok := icmpType(frame)
	if !ok {
		return false
	}
	switch typ {
	case typeRS:
		a.handleRS(frame)
		return true
	case typeRA:
		a.watchRA(frame)
	}
	return false
}

// handleRS checks an RS (§6.1.1) and asks Run for its answer.
func (a *Advertiser) handleRS(frame []byte) {
	m, r, ok := checkND(frame, rsMinLen)
	if ok && m.src.IsUnspecified() && m.hasSLLA {
		r, ok = DropUnspecifiedWithSLLA, false
	}
	if !ok {
		a.stats.Drops[r].Add(1)
		return
	}
	a.stats.RSReceived.Add(1)
	a.rsWaiting.Add(1)
	a.poke()
}

// watchRA counts another router's RA and compares it with ours.
func (a *Advertiser) watchRA(frame []byte) {
	if bytes.Equal(frame[6:12], a.mac) {
		return // our own, looped back
	}
	a.stats.OtherRA.Add(1)
	m, _, ok := checkND(frame, raMinLen)
	if !ok || !m.src.IsLinkLocalUnicast() {
		a.stats.OtherRAInvalid.Add(1)
		return
	}
	now := a.clock.Now()
	last := a.lastCheck.Load()
	if last != 0 && now.UnixNano()-last < int64(otherRACheckEvery) || !a.lastCheck.CompareAndSwap(last, now.UnixNano()) {
		a.stats.OtherRAUnchecked.Add(1)
		return
	}
	ra, _ := parseRA(m.icmp)
	if ra == nil {
		a.stats.OtherRAInvalid.Add(1)
		return
	}
	diffs := a.inconsistencies(ra, now)
	if len(diffs) == 0 {
		return
	}
	a.stats.Inconsistent.Add(1)
	if l := a.lastLog.Load(); (l == 0 || now.UnixNano()-l >= int64(logEvery)) && a.lastLog.CompareAndSwap(l, now.UnixNano()) {
		a.log.Warn("ra: another router advertises inconsistent information (RFC 4861 §6.2.7)",
			"router", m.src, "mac", net.HardwareAddr(m.srcMAC).String(), "differs", diffs)
	}
}

// inconsistencies lists what ra says otherwise than our RAs (§6.2.7): a
// Cur Hop Limit, an MTU, both specified and different; the M or O flag;
// the lifetimes of a prefix we announce, more than lifetimeSkew apart.
// Reachable Time and Retrans Timer we leave unspecified, so they never
// conflict, and announcing other prefixes is not an error.
func (a *Advertiser) inconsistencies(ra *ndp.RouterAdvertisement, now time.Time) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var d []string
	if ra.CurrentHopLimit != 0 && a.cfg.HopLimit != 0 && ra.CurrentHopLimit != a.cfg.HopLimit {
		d = append(d, fmt.Sprintf("cur hop limit %d, ours %d", ra.CurrentHopLimit, a.cfg.HopLimit))
	}
	if ra.ManagedConfiguration != a.cfg.Managed {
		d = append(d, fmt.Sprintf("M flag %v, ours %v", ra.ManagedConfiguration, a.cfg.Managed))
	}
	if ra.OtherConfiguration != a.cfg.Other {
		d = append(d, fmt.Sprintf("O flag %v, ours %v", ra.OtherConfiguration, a.cfg.Other))
	}
	for _, o := range ra.Options {
		switch o := o.(type) {
		case *ndp.MTU:
			if a.cfg.MTU != 0 && int64(o.MTU) != int64(a.cfg.MTU) {
				d = append(d, fmt.Sprintf("MTU %d, ours %d", o.MTU, a.cfg.MTU))
			}
		case *ndp.PrefixInformation:
			if o.PrefixLength > 128 {
				continue
			}
			p := netip.PrefixFrom(o.Prefix, int(o.PrefixLength))
			v, pr, ok := a.announcedLocked(p, now)
			if ok && (skewed(o.ValidLifetime, v) || skewed(o.PreferredLifetime, pr)) {
				d = append(d, fmt.Sprintf("prefix %v valid %v preferred %v, ours %v and %v", p, o.ValidLifetime, o.PreferredLifetime, v, pr))
			}
		}
	}
	return d
}

// announcedLocked returns the lifetimes we announce for p now, if we do.
// a.mu must be held.
func (a *Advertiser) announcedLocked(p netip.Prefix, now time.Time) (valid, preferred time.Duration, ok bool) {
	for _, q := range a.prefixes {
		if q.Prefix == p {
			valid, preferred = lifetimes(q, now)
			return valid, preferred, true
		}
	}
	for _, w := range a.withdrawn {
		if w.Prefix == p {
			return wire(max(w.ValidUntil.Sub(now), 0)), 0, true
		}
	}
	return 0, 0, false
}

// skewed reports whether two lifetimes differ by more than lifetimeSkew,
// Infinity being equal only to itself.
func skewed(x, y time.Duration) bool {
	if x == Infinity || y == Infinity {
		return x != y
	}
	return x-y > lifetimeSkew || y-x > lifetimeSkew
}
