package natengine

// flowMap is one shard's key → flow map, keyed by the key's 64-bit hash
// (Tuple.key) instead of the 38-byte Tuple. On 32-bit ARM the runtime
// hashes a uint64 map key in a few dozen instructions where a Tuple key
// took memhashFallback and a byte-by-byte memeqbody compare; the tuple
// itself is compared once, against the flow's own copy of it (a ref's
// role names which: orig, mid or reply), so the map stores no tuples.
//
// Two different keys may share a hash. The one inserted second goes to
// spill, a map keyed by the whole Tuple, which stays empty (and costs a
// length check per lookup) until that happens: with a random seed and 64
// bits, never in practice. A key in spill stays there until it is
// removed, even after the byHash entry that pushed it there is gone, so
// every key is in exactly one of the two maps.
//
// The caller holds the shard's mu for every method.
type flowMap struct {
	byHash map[uint64]ref
	spill  map[Tuple]ref // nil until the first hash collision
}

func newFlowMap(hint int) flowMap { return flowMap{byHash: make(map[uint64]ref, hint)} }

// tuple returns the key r was stored under: its flow's tuple of r's role.
func (r ref) tuple() *Tuple {
	switch r.dir {
	case dirReply:
		return &r.c.reply
	case dirMid:
		return &r.c.mid
	}
	return &r.c.orig
}

// get returns the flow stored under k, whose hash is h.
func (m *flowMap) get(h uint64, k *Tuple) (ref, bool) {
	if r, ok := m.byHash[h]; ok && r.tuple().equal(k) {
		return r, true
	}
	if len(m.spill) != 0 {
		r, ok := m.spill[*k]
		return r, ok
	}
	return ref{}, false
}

// put stores r under k (hash h), replacing what k held. The key r names
// (r.tuple()) must equal k.
func (m *flowMap) put(h uint64, k *Tuple, r ref) {
	if cur, ok := m.byHash[h]; ok {
		if cur.tuple().equal(k) {
			m.byHash[h] = r
			return
		}
	} else if _, ok := m.spill[*k]; !ok {
		m.byHash[h] = r
		return
	}
	if m.spill == nil {
		m.spill = make(map[Tuple]ref)
	}
	m.spill[*k] = r
}

// remove deletes k (hash h) if it is c's.
func (m *flowMap) remove(h uint64, k *Tuple, c *conn) {
	if r, ok := m.byHash[h]; ok && r.c == c && r.tuple().equal(k) {
		delete(m.byHash, h)
		return
	}
	if r, ok := m.spill[*k]; ok && r.c == c {
		delete(m.spill, *k)
	}
}

// each calls fn for every entry.
func (m *flowMap) each(fn func(r ref)) {
	for _, r := range m.byHash {
		fn(r)
	}
	for _, r := range m.spill {
		fn(r)
	}
}
