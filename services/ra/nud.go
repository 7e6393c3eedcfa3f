package ra

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/mdlayher/ndp"
)

// Router reachability. A host sends its packets to routers it knows to
// be reachable before the others (RFC 4861 §6.3.6, RFC 4191 §3.2), so
// that an RA from an address that never answers — a dead router, or a
// neighbour's forgery — does not become the default route. The Learner
// runs neighbour unreachability detection (§7.3) for each router it
// keeps, on Run's goroutine: Neighbor Solicitations to the solicited-node
// group of the router's address, as address resolution sends them
// (§7.2.2), up to maxProbes of them retransTimer apart. Multicast, not
// unicast to the MAC the RA named: netstack resolves the next hop that
// way too, and whoever owns the address answers, so an RA that names a
// wrong MAC for a real router's address cannot make it look dead. A solicited Neighbor Advertisement for the router,
// sent to the Learner's address, makes it Reachable until the next round
// reachableTime later; a round without an answer makes it Unreachable,
// counted, and it is asked again only a minute later (RFC 4191 §3.5).
// An RA confirms nothing (§7.3.1: it only shows that the path from the
// router works). Every router is probed, not only when a packet would
// have gone to it (RFC 4191 §3.5): a router forwards for a whole LAN, so
// there is such traffic, and a dead default router is found before the
// LAN notices; the cost is bounded by maxRouters rounds at a time.
//
// Deliver hands Run the NAs whose target is a router with a round in
// progress (an atomic list, so that other NAs cost a load) and leaves
// every NA to netstack as well.

// Neighbour unreachability detection timing (RFC 4861 §10).
const (
	// retransTimer and maxProbes are RETRANS_TIMER (1 s) and
	// MAX_UNICAST_SOLICIT (3): a router that answers none of three NSs,
	// 1 s apart, is unreachable 1 s after the third.
	retransTimer = time.Second
	maxProbes    = 3
	// reachableTime is REACHABLE_TIME (30 s): a reachable router is
	// asked again after it, so one that died stops being preferred
	// within about 33 s.
	reachableTime = 30 * time.Second
	// unreachableRecheck is how long an unreachable router waits before
	// it is asked again: RFC 4191 §3.5 allows one probe a minute.
	unreachableRecheck = time.Minute
	// naQueue is how many NAs for probed routers may wait for Run: at
	// most maxRouters are probed at a time, each answering once a round.
	naQueue = 2 * maxRouters
)

// NDP message types and the NA's Solicited flag (RFC 4861 §4.3, §4.4).
const (
	typeNS      = 135
	typeNA      = 136
	naMinLen    = 24 // ICMP header, flags and target
	naSolicited = 0x40
)

// Reachability is what neighbour unreachability detection knows of a
// router (RFC 4861 §7.3).
type Reachability int8

// Reachabilities, in the order a router is preferred.
const (
	// Probing: learnt, and not yet answered (or not yet asked).
	Probing Reachability = iota
	// Reachable: it answered the last round of solicitations.
	Reachable
	// Unreachable: a round of maxProbes solicitations went unanswered.
	Unreachable
)

// MarshalText implements encoding.TextMarshaler: String.
func (r Reachability) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, the inverse of
// MarshalText.
func (r *Reachability) UnmarshalText(b []byte) error {
	for _, x := range []Reachability{Probing, Reachable, Unreachable} {
		if x.String() == string(b) {
			*r = x
			return nil
		}
	}
	return fmt.Errorf("ra: unknown reachability %q", b)
}

// String returns "probing", "reachable" or "unreachable".
func (r Reachability) String() string {
	switch r {
	case Reachable:
		return "reachable"
	case Unreachable:
		return "unreachable"
	}
	return "probing"
}

// rank orders reachabilities for router selection: reachable first,
// then those whose reachability is not known yet, unreachable last.
func (r Reachability) rank() int {
	switch r {
	case Reachable:
		return 0
	case Probing:
		return 1
	}
	return 2
}

// solicitedNode is the solicited-node multicast address of a (RFC 4291
// §2.7.1): ff02::1:ff and its last 24 bits.
func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 11: 1, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// probe is the detection state of one router; Run's goroutine only.
type probe struct {
	// sent is the NSs of the current round not yet answered; 0 between
	// rounds.
	sent int
	// due is when the next NS is sent, or the round ended unanswered
	// (sent == maxProbes).
	due time.Time
}

// takeNA hands Run a valid solicited NA sent to the Learner's address
// whose target is a router being probed. It is Deliver's, for a frame
// icmpType found to be an NA.
func (l *Learner) takeNA(frame []byte) {
	aw := l.awaited.Load()
	if aw == nil || len(*aw) == 0 {
		return
	}
	m, _, ok := checkND(frame, naMinLen)
	if !ok || m.dst != l.src || m.icmp[4]&naSolicited == 0 {
		return
	}
	target := netip.AddrFrom16([16]byte(m.icmp[8:24]))
	if !slices.Contains(*aw, target) {
		return
	}
	select {
	case l.naq <- target:
	default:
		l.stats.ProbeAnswersLost.Add(1)
	}
}

// probeRouters starts detection for new routers, forgets removed ones,
// sends the NSs due at now and ends unanswered rounds.
func (l *Learner) probeRouters(now time.Time) {
	if l.src.IsUnspecified() || l.cfg.PointToPoint {
		return // no address to be answered at; no NUD on a PPP link
	}
	l.mu.Lock()
	routers := slices.Clone(l.st.Routers)
	l.mu.Unlock()
	for a := range l.probes {
		if !slices.ContainsFunc(routers, func(r Router) bool { return r.Addr == a }) {
			delete(l.probes, a)
		}
	}
	var awaited []netip.Addr
	var ask []Router
	for _, r := range routers {
		p := l.probes[r.Addr]
		if p == nil {
			p = &probe{due: now}
			l.probes[r.Addr] = p
		}
		if !p.due.After(now) {
			if p.sent == maxProbes {
				l.setReachability(r.Addr, Unreachable)
				p.sent, p.due = 0, now.Add(unreachableRecheck)
			} else {
				ask = append(ask, r)
				p.sent++
				p.due = now.Add(retransTimer)
			}
		}
		if p.sent > 0 {
			awaited = append(awaited, r.Addr)
		}
	}
	l.awaited.Store(&awaited) // before the NSs: an answer may come at once
	for _, r := range ask {
		l.solicitNeighbor(r)
	}
}

// confirm records a solicited NA for router a: Reachable until the next
// round.
func (l *Learner) confirm(a netip.Addr, now time.Time) {
	p := l.probes[a]
	if p == nil {
		return
	}
	p.sent, p.due = 0, now.Add(reachableTime)
	l.setReachability(a, Reachable)
}

// setReachability sets router a's reachability, keeping the routers in
// the order of preference.
func (l *Learner) setReachability(a netip.Addr, r Reachability) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.st.Routers, func(x Router) bool { return x.Addr == a })
	if i < 0 || l.st.Routers[i].Reachability == r {
		return
	}
	l.st.Routers[i].Reachability = r
	sortRouters(l.st.Routers)
	if r == Unreachable {
		l.stats.RouterUnreachable.Add(1)
		l.log.Info("ra: router unreachable: it answers no neighbor solicitation", "router", a)
	} else {
		l.log.Debug("ra: router reachable", "router", a)
	}
}

// nextProbe is when the next NS or round end is due; zero for none.
func (l *Learner) nextProbe() time.Time {
	var next time.Time
	for _, p := range l.probes {
		if next.IsZero() || p.due.Before(next) {
			next = p.due
		}
	}
	return next
}

// solicitNeighbor sends one NS for r's address to its solicited-node
// group.
func (l *Learner) solicitNeighbor(r Router) {
	m := &ndp.NeighborSolicitation{TargetAddress: r.Addr,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: l.mac}}}
	group := solicitedNode(r.Addr)
	icmp, err := ndp.MarshalMessageChecksum(m, l.src, group)
	if err == nil {
		err = l.cfg.Link.WriteFrame(buildFrame(MulticastMAC(group), l.mac, l.src, group, icmp))
	}
	if err != nil {
		l.stats.SendErrors.Add(1)
		l.log.Warn("ra: sending a neighbor solicitation", "router", r.Addr, "err", err)
		return
	}
	l.stats.NSSent.Add(1)
}
