package firewall

import "slices"

// The rule index. Rules are split by chain (source zone, destination
// zone) and by protocol bucket, keeping their order; a bucket of a
// protocol with ports is cut further into destination port intervals,
// each holding the rules whose destination ports cover it. A new flow
// so scans only the rules that could match its zones, protocol and
// port: with a thousand port rules in one chain it reads a handful.

// chain is one bucket of one chain: bounds[i] is the first port of
// interval i (bounds[0] == 0), lists[i] its rules in order.
type chain struct {
	bounds []uint16
	lists  []ruleList
}

// ruleList is the rules of one port interval in order. A long list of
// host rules (each matching a few source addresses exactly, a block
// list) is split: byHost holds, per source address, the positions in
// rules of the host rules that name it, others the positions of the
// rest, both ascending; a flow then reads its own host's rules and the
// others, merged in order, instead of every host rule.
type ruleList struct {
	rules  []uint16
	byHost map[hostKey][]uint16 // nil: scan rules
	others []uint16
}

// hostKey is an exact source address (IPv4 in the first 4 bytes).
type hostKey struct {
	a  [16]byte
	v6 bool
}

// minHostIndex is how many host rules a list needs before it gets a
// host index: below it a scan costs less than a map lookup.
const minHostIndex = 16

func (rs *Ruleset) chainIndex(src, dst int, bucket uint8) int {
	return (src*len(rs.zones)+dst)*rs.buckets + int(bucket)
}

func (rs *Ruleset) buildChains(rules []Rule, index map[string]int) {
	nb := 1
	for _, r := range rules {
		for _, p := range r.Protos {
			if rs.bucketOf[p] == 0 {
				rs.bucketOf[p] = uint8(nb)
				nb++
			}
		}
		if len(r.Protos) == 0 && len(r.ICMPTypes) > 0 {
			for _, p := range []uint8{1, 58} {
				if rs.bucketOf[p] == 0 {
					rs.bucketOf[p] = uint8(nb)
					nb++
				}
			}
		}
		if nb > 255 {
			break // every protocol has a bucket; the rest is unreachable
		}
	}
	rs.buckets = nb
	nz := len(rs.zones)
	rs.chains = make([]chain, nz*nz*nb)
	// protoOfBucket is a protocol in each bucket, for the rule test.
	protoOfBucket := make([]int, nb)
	protoOfBucket[0] = -1 // the protocols no rule names
	for p := 0; p < 256; p++ {
		if b := rs.bucketOf[p]; b != 0 {
			protoOfBucket[b] = p
		}
	}
	zonesOf := func(name string) []int {
		switch name {
		case "":
			return []int{0}
		case Any:
			out := make([]int, 0, nz-1)
			for z := 1; z < nz; z++ {
				out = append(out, z)
			}
			return out
		}
		return []int{index[name]}
	}
	lists := make([][]uint16, len(rs.chains))
	for i := range rules {
		c := &rs.rules[i]
		for _, src := range zonesOf(rules[i].Src) {
			for _, dst := range zonesOf(rules[i].Dest) {
				for b := 0; b < nb; b++ {
					inBucket := c.protos == [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
					if p := protoOfBucket[b]; p >= 0 {
						inBucket = c.protos[p/64]&(1<<(p%64)) != 0
					}
					if inBucket {
						k := rs.chainIndex(src, dst, uint8(b))
						lists[k] = append(lists[k], uint16(i))
					}
				}
			}
		}
	}
	for k, l := range lists {
		if len(l) == 0 {
			continue
		}
		p := protoOfBucket[k%nb]
		if p < 0 || !hasPorts(uint8(p)) {
			rs.chains[k] = chain{bounds: []uint16{0}, lists: []ruleList{rs.listOf(l, rules)}}
			continue
		}
		rs.chains[k] = rs.portIndex(l, rules)
	}
}

// portIndex cuts the rule list l (of a protocol with ports) into
// destination port intervals.
func (rs *Ruleset) portIndex(l []uint16, rules []Rule) chain {
	cuts := []int{0}
	for _, i := range l {
		for _, pr := range rs.rules[i].dports {
			cuts = append(cuts, int(pr.First), int(pr.Last)+1)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	if cuts[len(cuts)-1] == 65536 {
		cuts = cuts[:len(cuts)-1]
	}
	var ch chain
	entries := 0
	for _, start := range cuts {
		var list []uint16
		for _, i := range l {
			if portsMatch(rs.rules[i].dports, uint16(start)) {
				list = append(list, i)
			}
		}
		entries += len(list)
		if entries > maxIndexEntries {
			return chain{bounds: []uint16{0}, lists: []ruleList{rs.listOf(l, rules)}}
		}
		ch.bounds = append(ch.bounds, uint16(start))
		ch.lists = append(ch.lists, rs.listOf(list, rules))
	}
	return ch
}

// hostAddrs returns the exact source addresses of a host rule: one whose
// source match is only whole addresses (/32, /128), or nil.
func hostAddrs(r *Rule) []hostKey {
	if len(r.SrcAddrs) == 0 || len(r.SrcSuffix) > 0 {
		return nil
	}
	var out []hostKey
	for _, p := range r.SrcAddrs {
		if !p.IsSingleIP() {
			return nil
		}
		var k hostKey
		if a := p.Addr(); a.Is4() {
			b := a.As4()
			copy(k.a[:], b[:])
		} else {
			k.a, k.v6 = a.As16(), true
		}
		out = append(out, k)
	}
	return out
}

// listOf builds the rule list l, with a host index if it has enough
// host rules.
func (rs *Ruleset) listOf(l []uint16, rules []Rule) ruleList {
	rl := ruleList{rules: l}
	hosts := 0
	for _, i := range l {
		if hostAddrs(&rules[i]) != nil {
			hosts++
		}
	}
	if hosts < minHostIndex {
		return rl
	}
	rl.byHost = make(map[hostKey][]uint16)
	for pos, i := range l {
		ks := hostAddrs(&rules[i])
		if ks == nil {
			rl.others = append(rl.others, uint16(pos))
			continue
		}
		for _, k := range ks {
			if ps := rl.byHost[k]; len(ps) == 0 || ps[len(ps)-1] != uint16(pos) {
				rl.byHost[k] = append(ps, uint16(pos))
			}
		}
	}
	return rl
}

// list returns the rules of ch that may match destination port port.
func (ch *chain) list(port uint16) *ruleList {
	lo, hi := 0, len(ch.bounds)
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if ch.bounds[mid] <= port {
			lo = mid
		} else {
			hi = mid
		}
	}
	if len(ch.lists) == 0 {
		return nil
	}
	return &ch.lists[lo]
}

func portsMatch(rs []PortRange, p uint16) bool {
	if len(rs) == 0 {
		return true
	}
	for _, r := range rs {
		if p >= r.First && p <= r.Last {
			return true
		}
	}
	return false
}
