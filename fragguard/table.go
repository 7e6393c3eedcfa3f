package fragguard

// track records f's range in its datagram's entry and reports whether it
// overlaps.
func (g *Guard) track(f *frag, now int64) Reason {
	s := &g.shards[shardOf(&f.k)]
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[f.k]
	if e != nil && now >= e.expires {
		*e = entry{}
	}
	if e == nil {
		if s.m == nil {
			s.m = make(map[key]*entry)
		}
		if len(s.m) >= maxEntries/numShards {
			s.evictLocked(now, &g.Stats)
		}
		e = new(entry)
		s.m[f.k] = e
	}
	if e.n == 0 && !e.bad {
		e.expires = now + f.timeout
	}
	if e.bad {
		return AfterOverlap
	}
	if e.overlaps(f) {
		e.bad = true
		return Overlap
	}
	if !e.insert(span{f.off, f.end}) {
		e.bad = true
		return TooManyHoles
	}
	if !f.more {
		e.hasEnd, e.end = true, f.end
	}
	if e.hasEnd && e.n == 1 && e.spans[0] == (span{0, e.end}) {
		delete(s.m, f.k) // complete: the destination has it all
	}
	return Pass
}

// overlaps reports whether f overlaps a remembered range, or disagrees
// with the datagram's known end.
func (e *entry) overlaps(f *frag) bool {
	if e.hasEnd && (f.end > e.end || !f.more && f.end != e.end) {
		return true
	}
	if !f.more {
		for _, s := range e.spans[:e.n] {
			if s.hi > f.end {
				return true
			}
		}
	}
	for _, s := range e.spans[:e.n] {
		// An empty fragment overlaps a range it lies strictly inside.
		if f.off < s.hi && s.lo < f.end || f.off == f.end && s.lo < f.off && f.off < s.hi {
			return true
		}
	}
	return false
}

// insert adds the non-overlapping range r, merging it with adjacent
// ones, and reports false if that needs more than maxSpans ranges.
func (e *entry) insert(r span) bool {
	if r.lo == r.hi {
		return true
	}
	i := 0
	for i < int(e.n) && e.spans[i].hi < r.lo {
		i++
	}
	// spans[i] is the first that ends at or after r.lo; with no overlap
	// it is adjacent to r (hi == r.lo) or lies after it.
	if i < int(e.n) && e.spans[i].hi == r.lo {
		e.spans[i].hi = r.hi
		if i+1 < int(e.n) && e.spans[i+1].lo == r.hi {
			e.spans[i].hi = e.spans[i+1].hi
			copy(e.spans[i+1:], e.spans[i+2:e.n])
			e.n--
		}
		return true
	}
	if i < int(e.n) && e.spans[i].lo == r.hi {
		e.spans[i].lo = r.lo
		return true
	}
	if int(e.n) == maxSpans {
		return false
	}
	copy(e.spans[i+1:e.n+1], e.spans[i:e.n])
	e.spans[i] = r
	e.n++
	return true
}

// evictLocked makes room in a full shard: it removes the expired entries
// (at most once per sweepInterval), and if that freed nothing, one entry
// not found overlapping, else any one.
func (s *shard) evictLocked(now int64, st *Stats) {
	if now >= s.nextSweep {
		s.nextSweep = now + sweepInterval
		for k, e := range s.m {
			if now >= e.expires {
				delete(s.m, k)
			}
		}
		if len(s.m) < maxEntries/numShards {
			return
		}
	}
	var victim key
	found := false
	for k, e := range s.m { // map order is random: a random victim
		victim, found = k, true
		if !e.bad {
			break
		}
	}
	if found {
		delete(s.m, victim)
		st.Evicted.Add(1)
	}
}

func shardOf(k *key) int {
	h := k.id*0x9e3779b1 ^ uint32(k.src[15])<<8 ^ uint32(k.src[3]) ^ uint32(k.dst[15])<<16 ^ uint32(k.dst[3])<<24
	return int(h>>28) % numShards
}
