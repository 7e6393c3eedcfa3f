package natengine

import "time"

// Sweep removes expired flows and stale fragment state; the integration
// calls it periodically (every few seconds; nf_conntrack's GC runs about
// every second). It returns the number of flows removed.
func (e *Engine) Sweep() int {
	now := e.now()
	n := 0
	e.tab.each(func(c *conn) {
		if now >= c.expires.Load() && e.kill(c) {
			e.stats.Expired.Add(1)
			n++
		}
	})
	e.frags.sweep(now, &e.stats)
	return n
}

// StateCounts returns a census of the table (walks every shard).
func (e *Engine) StateCounts() StateCounts {
	var sc StateCounts
	e.tab.each(func(c *conn) {
		sc.Total++
		if c.assured.Load() {
			sc.Assured++
		}
		if c.fp[0].Load() != nil || c.fp[1].Load() != nil {
			sc.Offloaded++
		}
		c.mu.Lock()
		st, replied := c.tcp.state, c.replied
		c.mu.Unlock()
		switch c.proto() {
		case ProtoTCP:
			sc.TCP[st]++
		case ProtoUDP:
			if replied {
				sc.UDPStream++
			} else {
				sc.UDPUnreplied++
			}
		case ProtoICMP, ProtoICMPv6:
			sc.ICMP++
		default:
			sc.Other++
		}
	})
	return sc
}

// Flow describes one tracked flow for the status page and tests.
type Flow struct {
	Orig, Reply Tuple // Reply is zero until confirmed
	TCPState    TCPState
	Assured     bool
	Offloaded   [2]bool
	Packets     [2]uint64 // original, reply
	Bytes       [2]uint64
	Expires     time.Duration // from now
}

// Flows returns a snapshot of the tracked flows.
func (e *Engine) Flows() []Flow {
	now := e.now()
	var out []Flow
	e.tab.each(func(c *conn) {
		f := Flow{Orig: c.orig, Assured: c.assured.Load(), Expires: time.Duration(c.expires.Load() - now)}
		if c.confirmed.Load() {
			f.Reply = c.reply
		}
		c.mu.Lock()
		f.TCPState = c.tcp.state
		c.mu.Unlock()
		for d := 0; d < 2; d++ {
			f.Offloaded[d] = c.fp[d].Load() != nil
			f.Packets[d] = c.pkts[d].Load()
			f.Bytes[d] = c.bytes[d].Load()
		}
		out = append(out, f)
	})
	return out
}

// ifaceOf returns the interface that owns local address a.
func (s *snapshot) ifaceOf(a *[16]byte) Iface {
	for i := range s.local {
		if !s.local[i].v6 && s.local[i].a == *a {
			return s.local[i].iface
		}
	}
	return NoIface
}

// isWAN reports whether id is a known WAN interface.
func (s *snapshot) isWAN(id Iface) bool {
	ic := s.iface(id)
	return ic != nil && ic.wan
}

// isSNATAddr reports whether a is in some interface's SNAT pool.
func (s *snapshot) isSNATAddr(a *[16]byte) bool {
	for i := range s.ifaces {
		for _, x := range s.ifaces[i].snat {
			if x == *a {
				return true
			}
		}
	}
	return false
}
