package firewall

import (
	"fmt"
	"net/netip"
	"strings"
)

// Inherit gives rs the counters of prev's rules and zone policies that
// rs has unchanged, so that re-applying the rules (a reload, a new WAN
// lease, which both compile a new Ruleset) does not reset them. A rule
// is unchanged when one of rs has the same name and content (identity):
// it keeps its counters and its rate limiter's state wherever it moved
// in the list; among rules equal in both, the n-th of rs takes the n-th
// of prev's. A zone is unchanged when it has the same name and
// policies (its interfaces may differ). Anything changed starts from
// zero. The two rulesets share those counters from then on, so flows
// that prev still decides while rs is being put in place are counted
// too.
//
// Call Inherit before rs is first evaluated (it rewrites rs's counter
// pointers, unsynchronised); prev may be in use.
func (rs *Ruleset) Inherit(prev *Ruleset) {
	if prev == nil || prev == rs {
		return
	}
	old := make(map[string][]*rule, len(prev.rules))
	for i := range prev.rules {
		r := &prev.rules[i]
		old[r.key] = append(old[r.key], r)
	}
	for i := range rs.rules {
		r := &rs.rules[i]
		same := old[r.key]
		if len(same) == 0 {
			continue
		}
		r.n, r.lim, r.logLim = same[0].n, same[0].lim, same[0].logLim
		old[r.key] = same[1:]
	}
	for i := 1; i < len(rs.zones); i++ {
		z := &rs.zones[i]
		for j := 1; j < len(prev.zones); j++ {
			if pz := &prev.zones[j]; pz.name == z.name && pz.pol == z.pol {
				z.hits = pz.hits
				break
			}
		}
	}
	rs.Unzoned.Add(prev.Unzoned.Load())
}

// identity is r's name and every field that decides what it matches and
// does, as text: two rules with equal identities are the same rule.
func (r *Rule) identity() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q src=%q dest=%q family=%d protos=%v src_ip=%v dest_ip=%v",
		r.Name, r.Src, r.Dest, r.Family, r.Protos, r.SrcAddrs, r.DestAddrs)
	for _, s := range r.SrcSuffix {
		fmt.Fprintf(&b, " src_suffix=%v", netip.Addr(s))
	}
	for _, s := range r.DestSuffix {
		fmt.Fprintf(&b, " dest_suffix=%v", netip.Addr(s))
	}
	fmt.Fprintf(&b, " sports=%v dports=%v icmp=%v limit=%g/%d target=%d log=%v/%v",
		r.SrcPorts, r.DestPorts, r.ICMPTypes, r.Limit, r.Burst, r.Target, r.Log, r.LogCapture)
	return b.String()
}
