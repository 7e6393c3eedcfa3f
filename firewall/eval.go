package firewall

// Decision is the outcome of Eval.
type Decision struct {
	Target Target
	// Rule is the index of the rule that decided, or -1 for a zone
	// policy (or an unzoned interface, or a redirect's accept).
	Rule int
	// Capture says the rule logs to the capture (Rule.LogCapture) and
	// its log rate allows this packet: the caller hands the packet that
	// made the decision to the capture.
	Capture bool
}

// Eval decides the new flow f at time now (ns, for rate limits) and
// counts the decision. It does not allocate.
func (rs *Ruleset) Eval(f *Flow, now int64) Decision { return rs.eval(f, now, true) }

// Recheck decides an existing flow f again, after a reload: like Eval,
// but it counts nothing and a rate-limited rule matches (the flow was
// admitted within its limit).
func (rs *Ruleset) Recheck(f *Flow) Decision { return rs.eval(f, 0, false) }

func (rs *Ruleset) eval(f *Flow, now int64, count bool) Decision {
	src, dst := 0, 0
	kind := kindInput
	if f.In != 0 {
		if src = rs.zoneIndex(f.In); src == noZone {
			rs.countUnzoned(count)
			return Decision{Target: Drop, Rule: -1}
		}
	}
	if f.Out != 0 {
		if dst = rs.zoneIndex(f.Out); dst == noZone {
			rs.countUnzoned(count)
			return Decision{Target: Drop, Rule: -1}
		}
		kind = kindForward
		if f.In == 0 {
			kind = kindOutput
		}
	}
	if src == 0 && dst == 0 {
		return Decision{Target: Accept, Rule: -1} // the router to itself: loopback
	}
	ch := &rs.chains[rs.chainIndex(src, dst, rs.bucketOf[f.Proto])]
	rl := ch.list(f.DstPort)
	if rl == nil {
		rl = &emptyList
	}
	// With a host index, the flow's own host's rules and the others,
	// merged by position; else every rule.
	var mine []uint16
	if rl.byHost != nil {
		mine = rl.byHost[hostKey{f.Src, f.V6}]
	}
	for n, a, b := 0, 0, 0; ; n++ {
		var i uint16
		switch {
		case rl.byHost == nil:
			if n >= len(rl.rules) {
				goto policy
			}
			i = rl.rules[n]
		case a < len(mine) && (b >= len(rl.others) || mine[a] < rl.others[b]):
			i = rl.rules[mine[a]]
			a++
		case b < len(rl.others):
			i = rl.rules[rl.others[b]]
			b++
		default:
			goto policy
		}
		r := &rs.rules[i]
		if !r.matches(f) {
			continue
		}
		if !count {
			return Decision{Target: r.target, Rule: int(i)}
		}
		if r.lim != nil && !r.lim.allow(now) {
			r.n.limits.Add(1)
			continue
		}
		r.n.hits.Add(1)
		d := Decision{Target: r.target, Rule: int(i)}
		if r.log {
			r.n.logged.Add(1)
			if r.logLim != nil {
				if d.Capture = r.logLim.allow(now); !d.Capture {
					r.n.logLimited.Add(1)
				}
			}
		}
		return d
	}
policy:
	if kind == kindForward && f.DNAT {
		return Decision{Target: Accept, Rule: -1}
	}
	z := src
	if kind == kindOutput {
		z = dst
	}
	if count {
		rs.zones[z].hits[kind].Add(1)
	}
	return Decision{Target: rs.zones[z].pol[kind], Rule: -1}
}

func (rs *Ruleset) countUnzoned(count bool) {
	if count {
		rs.Unzoned.Add(1)
	}
}

var emptyList ruleList

// zoneIndex returns the zone index of interface id, or noZone.
func (rs *Ruleset) zoneIndex(id int32) int {
	if id <= 0 || int(id) >= len(rs.zoneOf) {
		return noZone
	}
	return int(rs.zoneOf[id])
}

// Zone returns the name of interface id's zone, or "".
func (rs *Ruleset) Zone(id int32) string {
	z := rs.zoneIndex(id)
	if z == noZone || z == 0 {
		return ""
	}
	return rs.zones[z].name
}

func (r *rule) matches(f *Flow) bool {
	switch {
	case r.family == 4 && f.V6, r.family == 6 && !f.V6:
		return false
	case r.protos[f.Proto/64]&(1<<(f.Proto%64)) == 0:
		return false
	}
	if len(r.sports)+len(r.dports) > 0 {
		if !hasPorts(f.Proto) || !portsMatch(r.sports, f.SrcPort) || !portsMatch(r.dports, f.DstPort) {
			return false
		}
	}
	if r.hasSrc && !addrMatch(r.src4, r.src6, &f.Src, f.V6) {
		return false
	}
	if r.hasDst && !addrMatch(r.dst4, r.dst6, &f.Dst, f.V6) {
		return false
	}
	if len(r.icmp) > 0 {
		if f.Proto != 1 && f.Proto != 58 {
			return false
		}
		ok := false
		for _, t := range r.icmp {
			if t.V6 == f.V6 && t.Type == f.ICMPType && (t.AnyCode || t.Code == f.ICMPCode) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func addrMatch(v4, v6 []masked, a *[16]byte, isV6 bool) bool {
	l := v4
	if isV6 {
		l = v6
	}
	w := words(a)
	for i := range l {
		m := &l[i]
		if w[0]&m.mask[0] == m.val[0] && w[1]&m.mask[1] == m.val[1] {
			return true
		}
	}
	return false
}

// RuleCount is one rule's counters.
type RuleCount struct {
	Name    string
	Hits    uint64 // flows the rule decided
	Logged  uint64 // of those, counted for its log option
	Limited uint64 // flows that matched but were over the rate limit
	// LogLimited counts logged decisions whose packet was not handed to
	// the capture: over the rule's LogRate (Rule.LogCapture).
	LogLimited uint64
}

// ZoneCount is one zone's policy counters: flows its policies decided.
type ZoneCount struct {
	Name                   string
	Input, Forward, Output uint64
}

// Counters returns the rule and zone policy counters.
func (rs *Ruleset) Counters() ([]RuleCount, []ZoneCount) {
	rules := make([]RuleCount, len(rs.rules))
	for i := range rs.rules {
		r := &rs.rules[i]
		rules[i] = RuleCount{Name: r.name, Hits: r.n.hits.Load(), Logged: r.n.logged.Load(), Limited: r.n.limits.Load(), LogLimited: r.n.logLimited.Load()}
	}
	zones := make([]ZoneCount, 0, len(rs.zones)-1)
	for i := 1; i < len(rs.zones); i++ {
		z := &rs.zones[i]
		zones = append(zones, ZoneCount{z.name, z.hits[kindInput].Load(), z.hits[kindForward].Load(), z.hits[kindOutput].Load()})
	}
	return rules, zones
}
