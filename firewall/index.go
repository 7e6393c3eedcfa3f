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
	lists  [][]uint16
}

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
			rs.chains[k] = chain{bounds: []uint16{0}, lists: [][]uint16{l}}
			continue
		}
		rs.chains[k] = rs.portIndex(l)
	}
}

// portIndex cuts the rule list l (of a protocol with ports) into
// destination port intervals.
func (rs *Ruleset) portIndex(l []uint16) chain {
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
			return chain{bounds: []uint16{0}, lists: [][]uint16{l}}
		}
		ch.bounds = append(ch.bounds, uint16(start))
		ch.lists = append(ch.lists, list)
	}
	return ch
}

// list returns the rules of ch that may match destination port port.
func (ch *chain) list(port uint16) []uint16 {
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
	return ch.lists[lo]
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
