// Package natstatus translates the NAT engine's counters, table and
// mappings into the status page's conntrack section and flow table.
package natstatus

import (
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/firewall"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/status"
)

// CensusInterval is how often the status sampler walks the conntrack
// table and the NAT mappings. The sampler runs every second; a full table
// takes about 15 ms to walk on a server core and several times that on the
// BCM47094, so the census is reused for a few samples. Counters are read
// at every sample.
const CensusInterval = 5 * time.Second

// Census is what walking the table and the mappings finds.
type Census struct {
	assured, offloaded int
	states             []status.FlowCount
	natPorts           []status.NATPorts
}

// Cache keeps the last census for CensusInterval.
type Cache struct {
	mu  sync.Mutex
	at  time.Time
	val Census
}

// Get returns a census of e no older than CensusInterval at now.
func (cc *Cache) Get(e *natengine.Engine, now time.Time) Census {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.at.IsZero() || now.Sub(cc.at) >= CensusInterval || now.Before(cc.at) {
		cc.val, cc.at = takeCensus(e), now
	}
	return cc.val
}

// Status is the status page's conntrack section, read from e
// with a fresh census.
func Status(e *natengine.Engine, maxConns int) *status.Conntrack {
	c := Counters(e, maxConns)
	takeCensus(e).Apply(c)
	return c
}

// Counters reads e's counters (atomics only: cheap).
func Counters(e *natengine.Engine, maxConns int) *status.Conntrack {
	st := e.Stats()
	c := &status.Conntrack{
		Max:           maxConns,
		Flows:         e.Len(),
		RouterFlows:   e.RouterFlows(),
		RouterReserve: e.RouterReserve(),
		FastPathHits:  st.FastPathHits.Load(),
		SlowPath:      make(map[string]uint64, len(st.Slow)),
		Drops:         make(map[string]uint64, len(st.Drops)),
		Events: map[string]uint64{
			"created":              st.Created.Load(),
			"early_dropped":        st.EarlyDropped.Load(),
			"expired":              st.Expired.Load(),
			"offloaded":            st.Offloaded.Load(),
			"icmp_translated":      st.ICMPTranslated.Load(),
			"frags_held":           st.FragsHeld.Load(),
			"mss_clamped":          st.MSSClamped.Load(),
			"untracked":            st.Untracked.Load(),
			"flushed_address_gone": st.FlushedAddressGone.Load(),
			"reserve_refused":      st.ReserveRefused.Load(),
			"firewall_rejects":     st.FirewallRejects.Load(),
			"flushed_firewall":     st.FlushedFirewall.Load(),
		},
	}
	if fw := e.Firewall(); fw != nil {
		c.Firewall = firewallCounters(fw)
	}
	for i := range st.Slow {
		c.SlowPath[natengine.SlowReason(i).String()] = st.Slow[i].Load()
	}
	for i := range st.Drops {
		c.Drops[natengine.DropReason(i).String()] = st.Drops[i].Load()
	}
	return c
}

// takeCensus walks e's table and mappings.
func takeCensus(e *natengine.Engine) Census {
	sc := e.StateCounts()
	cs := Census{assured: sc.Assured, offloaded: sc.Offloaded}
	// Every state, zero or not, so metric series do not come and go.
	for i, n := range sc.TCP {
		if s := natengine.TCPState(i); s != natengine.TCPNone {
			cs.states = append(cs.states, status.FlowCount{Proto: "tcp", State: s.String(), Flows: n})
		}
	}
	cs.states = append(cs.states,
		status.FlowCount{Proto: "udp", State: "UNREPLIED", Flows: sc.UDPUnreplied},
		status.FlowCount{Proto: "udp", State: "REPLIED", Flows: sc.UDPStream},
		status.FlowCount{Proto: "icmp", State: "ACTIVE", Flows: sc.ICMP},
		status.FlowCount{Proto: "other", State: "ACTIVE", Flows: sc.Other},
	)
	type key struct {
		proto string
		addr  netip.Addr
	}
	usage := make(map[key]*status.NATPorts)
	for _, m := range e.Mappings() {
		k := key{protoName(m.Proto), m.External.Addr()}
		u := usage[k]
		if u == nil {
			u = &status.NATPorts{Proto: k.proto, Address: k.addr.String()}
			usage[k] = u
		}
		u.Ports++
		u.Flows += m.Flows
	}
	for _, u := range usage {
		cs.natPorts = append(cs.natPorts, *u)
	}
	return cs
}

// Apply writes the census into c, in fresh slices (the Server keeps them).
func (cs Census) Apply(c *status.Conntrack) {
	c.Assured, c.Offloaded = cs.assured, cs.offloaded
	c.States = slices.Clone(cs.states)
	c.NATPorts = slices.Clone(cs.natPorts)
}

// Flows converts the engine's flows for the conntrack table.
func Flows(flows []natengine.Flow) []status.Flow {
	out := make([]status.Flow, 0, len(flows))
	for _, f := range flows {
		sf := status.Flow{
			Proto:          protoName(f.Orig.Proto),
			Src:            netip.AddrPortFrom(f.Orig.SrcAddr(), f.Orig.SrcPort),
			Dst:            netip.AddrPortFrom(f.Orig.DstAddr(), f.Orig.DstPort),
			Assured:        f.Assured,
			Offloaded:      f.Offloaded[0] || f.Offloaded[1],
			PacketsOrig:    f.Packets[0],
			PacketsReply:   f.Packets[1],
			BytesOrig:      f.Bytes[0],
			BytesReply:     f.Bytes[1],
			ExpiresSeconds: max(f.Expires.Seconds(), 0),
		}
		if f.Reply != (natengine.Tuple{}) {
			sf.ReplySrc = netip.AddrPortFrom(f.Reply.SrcAddr(), f.Reply.SrcPort)
			sf.ReplyDst = netip.AddrPortFrom(f.Reply.DstAddr(), f.Reply.DstPort)
		}
		switch {
		case f.Orig.Proto == natengine.ProtoTCP:
			sf.State = f.TCPState.String()
		case f.Packets[1] > 0:
			sf.State = "REPLIED"
		default:
			sf.State = "UNREPLIED"
		}
		out = append(out, sf)
	}
	return out
}

func protoName(p uint8) string {
	switch p {
	case natengine.ProtoTCP:
		return "tcp"
	case natengine.ProtoUDP:
		return "udp"
	case natengine.ProtoICMP:
		return "icmp"
	case natengine.ProtoICMPv6:
		return "icmpv6"
	}
	return strconv.Itoa(int(p))
}

// firewallCounters flattens the zone firewall's counters for the status
// page. Rules of the same name add up.
func firewallCounters(fw *firewall.Ruleset) map[string]uint64 {
	rules, zones := fw.Counters()
	out := make(map[string]uint64, 3*len(rules)+3*len(zones)+1)
	for i, r := range rules {
		name := r.Name
		if name == "" {
			name = "#" + strconv.Itoa(i)
		}
		out["rule "+name+" hits"] += r.Hits
		out["rule "+name+" logged"] += r.Logged
		out["rule "+name+" limited"] += r.Limited
		if r.LogLimited > 0 {
			out["rule "+name+" log_limited"] += r.LogLimited
		}
	}
	for _, z := range zones {
		out["zone "+z.Name+" input"] = z.Input
		out["zone "+z.Name+" forward"] = z.Forward
		out["zone "+z.Name+" output"] = z.Output
	}
	out["unzoned"] = fw.Unzoned.Load()
	return out
}
