package firewall

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
)

// Limits on a policy's size. maxIface bounds interface IDs so the zone of
// an interface is a slice index (the NAT engine's bound); maxIndexEntries
// bounds the port index (index.go), past which a chain falls back to one
// list scanned in order.
const (
	maxIface        = 4096
	maxZones        = 250
	maxRules        = 65535
	maxIndexEntries = 1 << 20
)

// ErrInvalid is wrapped by Compile's errors.
var ErrInvalid = errors.New("firewall: invalid policy")

// Ruleset is a compiled Policy: immutable but for its counters and rate
// limiters, safe for concurrent use.
type Ruleset struct {
	zoneOf []uint16 // by interface ID: zone index + 1 (0: the router); unzoned: noZone
	zones  []zone   // index 0 is the router itself
	rules  []rule
	// buckets: protocols that some rule names get a bucket of their
	// own, bucket 0 holds every other protocol.
	bucketOf [256]uint8
	buckets  int
	chains   []chain // by (src zone * len(zones) + dest zone) * buckets + bucket
	reject   limiter
	// Unzoned counts new flows from or to an interface in no zone,
	// dropped.
	Unzoned atomic.Uint64
}

// noZone marks an interface in no zone.
const noZone = 0xffff

type zone struct {
	name string
	pol  [3]Target         // by chain kind: input, forward, output
	hits *[3]atomic.Uint64 // flows the policy decided, by chain kind; shared by Inherit
}

// Chain kinds, indexing zone.pol and zone.hits.
const (
	kindInput = iota
	kindForward
	kindOutput
)

// masked is an address match: a & mask == val, as two 64-bit words
// (big-endian halves of the 16 bytes), so a rule that does not match
// costs two compares.
type masked struct{ val, mask [2]uint64 }

func words(b *[16]byte) [2]uint64 {
	return [2]uint64{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

type rule struct {
	name           string
	family         uint8
	protos         [4]uint64 // bitmap; all ones when every protocol
	src4, dst4     []masked
	src6, dst6     []masked
	hasSrc, hasDst bool
	sports, dports []PortRange
	icmp           []ICMPType
	lim            *limiter // shared by Inherit
	logLim         *limiter // Rule.LogCapture's LogRate; shared by Inherit
	target         Target
	log            bool
	n              *ruleCounters // shared by Inherit
	key            string        // identity for Inherit: name and content
}

// ruleCounters are a rule's counters, behind a pointer so that a
// re-applied ruleset can take over those of an unchanged rule (Inherit).
type ruleCounters struct {
	hits, logged, limits, logLimited atomic.Uint64
}

// Compile checks p and builds its Ruleset. Every problem is reported at
// once.
func Compile(p Policy) (*Ruleset, error) {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...))
	}
	if len(p.Zones) > maxZones {
		bad("%d zones, at most %d", len(p.Zones), maxZones)
		return nil, errors.Join(errs...)
	}
	if len(p.Rules) > maxRules {
		bad("%d rules, at most %d", len(p.Rules), maxRules)
		return nil, errors.Join(errs...)
	}
	rs := &Ruleset{zones: make([]zone, len(p.Zones)+1)}
	for i := range rs.zones {
		rs.zones[i].hits = new([3]atomic.Uint64)
	}
	rs.zones[0].name = "router"
	rs.reject.init(RejectRate, RejectBurst)
	index := map[string]int{}
	for i, z := range p.Zones {
		zi := i + 1
		if _, dup := index[z.Name]; dup || z.Name == "" || z.Name == Any {
			bad("zone %d: name %q empty, reserved or used twice", i, z.Name)
		}
		index[z.Name] = zi
		rs.zones[zi].name = z.Name
		rs.zones[zi].pol = [3]Target{z.Input, z.Forward, z.Output}
		for _, t := range rs.zones[zi].pol {
			if t > Reject {
				bad("zone %q: policy %d", z.Name, t)
			}
		}
		for _, id := range z.Ifaces {
			if id <= 0 || id >= maxIface {
				bad("zone %q: interface id %d out of range 1..%d", z.Name, id, maxIface-1)
				continue
			}
			for int(id) >= len(rs.zoneOf) {
				rs.zoneOf = append(rs.zoneOf, noZone)
			}
			if rs.zoneOf[id] != noZone {
				bad("zone %q: interface %d is in zone %q too", z.Name, id, rs.zones[rs.zoneOf[id]].name)
			}
			rs.zoneOf[id] = uint16(zi)
		}
	}
	rs.rules = make([]rule, len(p.Rules))
	for i := range p.Rules {
		r := &p.Rules[i]
		if why := r.NeverMatches(); why != "" {
			bad("rule %d (%s): never matches: %s", i, r.Name, why)
		}
		for _, z := range []string{r.Src, r.Dest} {
			if _, ok := index[z]; !ok && z != "" && z != Any {
				bad("rule %d (%s): unknown zone %q", i, r.Name, z)
			}
		}
		rs.rules[i].compile(r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	rs.buildChains(p.Rules, index)
	return rs, nil
}

// NeverMatches says why r can match no flow, or "" if it can.
func (r *Rule) NeverMatches() string {
	if r.Src == "" && r.Dest == "" {
		return "neither src nor dest: a rule names at least one zone"
	}
	if r.Family != 0 && r.Family != 4 && r.Family != 6 {
		return fmt.Sprintf("family %d", r.Family)
	}
	if r.Target > Reject {
		return fmt.Sprintf("target %d", r.Target)
	}
	// The families the rule can still match, narrowed by each field.
	can4, can6 := r.Family != 6, r.Family != 4
	narrow := func(has4, has6 bool) {
		can4, can6 = can4 && has4, can6 && has6
	}
	for _, as := range [][]netip.Prefix{r.SrcAddrs, r.DestAddrs} {
		if len(as) > 0 {
			narrow(slices.ContainsFunc(as, func(p netip.Prefix) bool { return p.Addr().Is4() }),
				slices.ContainsFunc(as, func(p netip.Prefix) bool { return p.Addr().Is6() }))
		}
	}
	if len(r.SrcSuffix) > 0 || len(r.DestSuffix) > 0 {
		narrow(false, true)
	}
	if len(r.ICMPTypes) > 0 {
		narrow(slices.ContainsFunc(r.ICMPTypes, func(t ICMPType) bool { return !t.V6 }),
			slices.ContainsFunc(r.ICMPTypes, func(t ICMPType) bool { return t.V6 }))
		if len(r.Protos) > 0 {
			narrow(slices.Contains(r.Protos, 1), slices.Contains(r.Protos, 58))
		}
	}
	if !can4 && !can6 {
		return "its family, addresses and ICMP types have no IP version in common"
	}
	if len(r.SrcPorts)+len(r.DestPorts) > 0 && len(r.Protos) > 0 && !slices.ContainsFunc(r.Protos, hasPorts) {
		return "ports, but no protocol with ports (tcp, udp, sctp, udplite)"
	}
	for _, pr := range append(slices.Clip(r.SrcPorts), r.DestPorts...) {
		if pr.First > pr.Last {
			return fmt.Sprintf("port range %d-%d is empty", pr.First, pr.Last)
		}
	}
	if r.Limit < 0 || r.Burst < 0 {
		return "a negative limit or burst"
	}
	return ""
}

func (c *rule) compile(r *Rule) {
	c.name, c.family, c.target, c.log = r.Name, r.Family, r.Target, r.Log
	c.n, c.key = new(ruleCounters), r.identity()
	if r.Log && r.LogCapture {
		c.logLim = new(limiter)
		c.logLim.init(LogRate, LogBurst)
	}
	if len(r.Protos) == 0 {
		c.protos = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	}
	for _, p := range r.Protos {
		c.protos[p/64] |= 1 << (p % 64)
	}
	if len(r.ICMPTypes) > 0 && len(r.Protos) == 0 {
		c.protos = [4]uint64{}
		c.protos[0] = 1<<1 | 1<<58 // ICMP types imply ICMP and ICMPv6
	}
	c.src4, c.src6 = maskPrefixes(r.SrcAddrs, r.SrcSuffix)
	c.dst4, c.dst6 = maskPrefixes(r.DestAddrs, r.DestSuffix)
	c.hasSrc = len(r.SrcAddrs)+len(r.SrcSuffix) > 0
	c.hasDst = len(r.DestAddrs)+len(r.DestSuffix) > 0
	c.sports = slices.Clone(r.SrcPorts)
	c.dports = slices.Clone(r.DestPorts)
	c.icmp = slices.Clone(r.ICMPTypes)
	if r.Limit > 0 {
		c.lim = new(limiter)
		burst := r.Burst
		if burst == 0 {
			burst = DefaultBurst
		}
		c.lim.init(r.Limit, burst)
	}
}

// LogRate and LogBurst bound, per rule, the packets a rule with
// LogCapture hands to the capture: enough to see what the rule catches
// (a capture is read by a person), few enough that a flood the rule
// refuses costs the data path no more than a counter, and that the
// capture's queue (capture's queueLen, 512) keeps room for other rules.
const (
	LogRate  = 10
	LogBurst = 20
)

// DefaultBurst is a limit's burst when none is given (nft's default of
// 5 packets).
const DefaultBurst = 5

func maskPrefixes(ps []netip.Prefix, sfx []Suffix) (v4, v6 []masked) {
	for _, p := range ps {
		var val, mask [16]byte
		a := p.Masked().Addr()
		if a.Is4() {
			b := a.As4()
			copy(val[:], b[:])
		} else {
			val = a.As16()
		}
		for i := 0; i < p.Bits(); i++ {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		m := masked{words(&val), words(&mask)}
		if a.Is4() {
			v4 = append(v4, m)
		} else {
			v6 = append(v6, m)
		}
	}
	for _, s := range sfx {
		var val, mask [16]byte
		b := netip.Addr(s).As16()
		copy(val[8:], b[8:])
		for i := 8; i < 16; i++ {
			mask[i] = 0xff
		}
		v6 = append(v6, masked{words(&val), words(&mask)})
	}
	return v4, v6
}
