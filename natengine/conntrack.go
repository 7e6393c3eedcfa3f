package natengine

import (
	"sync"
	"sync/atomic"
)

// Conntrack table.
//
// Each flow (conn) is reachable under up to three keys: its original tuple
// (as the first packet arrived), its mid tuple (the original tuple after DNAT;
// only stored when DNAT changed it) and its reply tuple (as replies arrive,
// i.e. after SNAT; stored when the flow is confirmed at postrouting). Keys are
// spread over numShards shards by a 32-bit hash; each shard has its own mutex
// and map.
//
// Lock order (take them in this order, skip any):
//  1. conn.mu, of one flow at a time;
//  2. nat.mu, the mapping table;
//  3. shard.mu, several at once only in ascending shard index.
// No lock is taken while a shard.mu is held except other shard locks in
// ascending order; frags.mu and hosts.mu (limits.go) are leaves. Table removal (sweep, early drop)
// takes only shard locks, then nat.mu after releasing them.

// numShards is the number of table shards. 256 keeps ~256 keys per shard at
// the default limit (cheap early-drop scans) and costs 32 KB.
const numShards = 256

// preallocFlows is how many flows the conntrack and NAT maps are sized for
// when the engine starts, if the limit is at least that; past it they grow
// with use. Sizing up front, as Linux allocates its conntrack hash buckets
// at start, means a table that fills under a SYN flood costs the flows
// and nothing for map growth: growing maps leave the tables they outgrew
// as garbage, which took the RSS of 65,536 flows from 58 to 70 MB. Sizing
// for the whole limit made the limit itself cost memory: 436 MB of heap
// at start for 1,048,576 flows (6.36 GB for 16,777,216), on boards with
// 256 MB. The default limit is the common case and costs ~13 MB.
const preallocFlows = DefaultMaxConns

// evictionRange is how many shards a full table searches for an unassured
// flow to early-drop, from the new flow's own shard (Linux
// NF_CT_EVICTION_RANGE = 8 buckets).
const evictionRange = 8

// Directions of a packet relative to its flow.
const (
	dirOrig  = 0 // same direction as the flow's first packet
	dirReply = 1 // the opposite direction
	dirMid   = 2 // key role only: the original direction after DNAT
)

// ref is a table value: a flow and the role of the key that found it.
type ref struct {
	c   *conn
	dir uint8
}

type shard struct {
	mu sync.Mutex
	// m maps keys to flows. Protected by mu.
	m flowMap
	// unassured lists the unassured flows whose original key lives in this
	// shard, oldest first: the early-drop candidates, forwarded flows
	// (classFwd) apart from the router's own (classRouter). Protected by mu.
	unassured [2]connList
	// Pad to 128 bytes: two cache lines, so a shard's lock and map share
	// no line with another shard's and never straddle two.
	_ [128 - 56]byte
}

type connList struct{ head, tail *conn }

func (l *connList) pushBack(c *conn) {
	c.unPrev, c.unNext = l.tail, nil
	if l.tail != nil {
		l.tail.unNext = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *connList) remove(c *conn) {
	if c.unPrev != nil {
		c.unPrev.unNext = c.unNext
	} else if l.head == c {
		l.head = c.unNext
	}
	if c.unNext != nil {
		c.unNext.unPrev = c.unPrev
	} else if l.tail == c {
		l.tail = c.unPrev
	}
	c.unPrev, c.unNext = nil, nil
}

// conn is one tracked flow.
type conn struct {
	// Set before the flow is published and never changed.
	orig    Tuple
	mid     Tuple // orig after DNAT (== orig without DNAT)
	created int64 // engine clock, ns
	owner   uint32
	dnat    bool
	mapIn   bool     // the flow entered through a NAT mapping (its DNAT is the mapping's)
	class   uint8    // classFwd or classRouter (limits.go)
	host    bool     // counted in its inside source address's flows (table.hosts)
	inMap   *mapping // the mapping; valid iff mapIn
	// redirected: a port forward from its own interface or a NAT
	// mapping from a wan interface opened the flow (firewall.go).
	redirected         bool
	icmpType, icmpCode uint8 // an ICMP query flow's first packet's, for the rules

	// Protected by the owner shard's mu.
	inTable        bool
	unNext, unPrev *conn

	// assured is written under the owner shard's mu and read without lock.
	// Assured flows are never early-dropped.
	assured atomic.Bool
	// confirmed is set under the owner shard's mu when the reply key is
	// inserted. reply and snat are written (under mu) before it, snatMap
	// with it; none changes after, so a reader that loads confirmed == true
	// may read them.
	confirmed atomic.Bool
	reply     Tuple
	snat      bool
	// hairpin says the SNAT is a hairpin's: to the flow's own
	// destination address (RFC 4787 REQ-9a). Written under mu before the
	// flow joins its SNAT mapping's list, read under nat.mu (remote).
	hairpin bool
	snatMap *mapping // the SNAT mapping, set with confirmed; valid iff snat
	out     Iface    // the interface the flow left by, set with confirmed

	// mu serializes confirmation and protects tcp and replied.
	mu      sync.Mutex
	tcp     tcpTrack
	replied bool // a reply-direction packet was seen

	// Protected by nat.mu: membership in snatMap.conns.
	mapNext, mapPrev *conn

	expires atomic.Int64               // engine clock, ns
	in      [2]atomic.Int32            // ingress Iface seen per direction
	fp      [2]atomic.Pointer[offload] // fast-path rewrite per direction; nil: not offloaded
	pkts    [2]atomic.Uint64           // packets per direction (slow and fast path)
	bytes   [2]atomic.Uint64           // IP bytes per direction (slow and fast path)
	dead    atomic.Bool                // removed from the table
}

func (c *conn) proto() uint8 { return c.orig.Proto }

// Flow classes: who opened the flow, for the router's reserve (limits.go).
const (
	classFwd    = 0 // forwarded: a LAN host's, or a WAN host's through a forward or mapping
	classRouter = 1 // the router's own (PostroutingLocal)
)

// table is the conntrack table.
type table struct {
	seed   uint64
	max    int32        // flows of every class
	count  atomic.Int32 // flows of every class
	shards [numShards]shard
	fwdMax int32        // forwarded flows (max less the router's reserve)
	fwd    atomic.Int32 // forwarded flows
	hosts  hostCounts
}

// newTable returns an empty table for at most max flows, its shard maps
// sized for min(max, preallocFlows) of them. Forwarded flows may take
// max-reserve of them.
func newTable(max int, seed uint64) *table {
	t := &table{seed: seed, max: int32(max), fwdMax: int32(max)}
	// Two keys per flow (original and reply); 1/8 more for the uneven
	// spread of hashes over shards.
	hint := 2 * min(max, preallocFlows) / numShards
	hint += hint/8 + 8
	for i := range t.shards {
		t.shards[i].m = newFlowMap(hint)
	}
	return t
}

// shardOf returns the index of k's shard.
func (t *table) shardOf(k *Tuple) uint32 { return shardOfKey(k.key(t.seed)) }

// shardOfKey returns the shard of a key whose hash (Tuple.key) is h.
func shardOfKey(h uint64) uint32 { return uint32(h^h>>32) & (numShards - 1) }

// lookup returns the flow stored under k.
func (t *table) lookup(k *Tuple) (ref, bool) {
	h := k.key(t.seed)
	s := &t.shards[shardOfKey(h)]
	s.mu.Lock()
	r, ok := s.m.get(h, k)
	s.mu.Unlock()
	return r, ok
}

// lockSet locks the distinct shards in idx (at most 4) in ascending order.
type lockSet struct {
	idx [4]uint32
	n   int
}

func (l *lockSet) add(i uint32) {
	for j := 0; j < l.n; j++ {
		if l.idx[j] == i {
			return
		}
	}
	k := l.n
	for k > 0 && l.idx[k-1] > i {
		l.idx[k] = l.idx[k-1]
		k--
	}
	l.idx[k] = i
	l.n++
}

func (t *table) lockAll(l *lockSet) {
	for j := 0; j < l.n; j++ {
		t.shards[l.idx[j]].mu.Lock()
	}
}

func (t *table) unlockAll(l *lockSet) {
	for j := l.n - 1; j >= 0; j-- {
		t.shards[l.idx[j]].mu.Unlock()
	}
}

// reserve takes a slot for a new flow of class class, early-dropping one
// unassured flow from the shards near start if the table is full (or, for
// a forwarded flow, the forwarded flows' share of it). It reports false
// if the table is full of flows that may not be evicted.
func (t *table) reserve(class uint8, start uint32, st *Stats, unlink func(*conn)) bool {
	if class == classFwd && !t.take(&t.fwd, t.fwdMax, true, start, st, unlink) {
		return false
	}
	if !t.take(&t.count, t.max, false, start, st, unlink) {
		if class == classFwd {
			t.fwd.Add(-1)
		}
		return false
	}
	return true
}

// take increments n if it is below max, early-dropping flows (forwarded
// ones only with fwdOnly) until it is.
func (t *table) take(n *atomic.Int32, max int32, fwdOnly bool, start uint32, st *Stats, unlink func(*conn)) bool {
	for {
		v := n.Load()
		if v < max {
			if n.CompareAndSwap(v, v+1) {
				return true
			}
			continue
		}
		if !t.earlyDrop(start, fwdOnly, st, unlink) {
			return false
		}
	}
}

// earlyDrop removes one unassured flow from the evictionRange shards
// starting at start: a forwarded one, or with fwdOnly false the router's
// own where a shard has no forwarded one. Assured flows are never
// removed here.
func (t *table) earlyDrop(start uint32, fwdOnly bool, st *Stats, unlink func(*conn)) bool {
	for i := uint32(0); i < evictionRange; i++ {
		s := &t.shards[(start+i)&(numShards-1)]
		s.mu.Lock()
		victim := s.unassured[classFwd].head
		if victim == nil && !fwdOnly {
			victim = s.unassured[classRouter].head
		}
		s.mu.Unlock()
		if victim == nil {
			continue
		}
		if t.remove(victim, true) {
			st.EarlyDropped.Add(1)
			unlink(victim)
			return true
		}
	}
	return false
}

// unreserve gives back the slot of a flow that was reserved but never
// inserted (a clash).
func (t *table) unreserve(c *conn) {
	t.count.Add(-1)
	if c.class == classFwd {
		t.fwd.Add(-1)
	}
}

// insertPending publishes a new flow under its original (and mid) keys.
// The caller has reserved a slot. It reports false on a key clash.
func (t *table) insertPending(c *conn) bool {
	oh := c.orig.key(t.seed)
	c.owner = shardOfKey(oh)
	var l lockSet
	l.add(c.owner)
	mi, mh := c.owner, oh
	if c.dnat {
		mh = c.mid.key(t.seed)
		mi = shardOfKey(mh)
		l.add(mi)
	}
	t.lockAll(&l)
	defer t.unlockAll(&l)
	o := &t.shards[c.owner]
	if _, ok := o.m.get(oh, &c.orig); ok {
		return false
	}
	if c.dnat {
		if _, ok := t.shards[mi].m.get(mh, &c.mid); ok {
			return false
		}
		t.shards[mi].m.put(mh, &c.mid, ref{c, dirMid})
	}
	o.m.put(oh, &c.orig, ref{c, dirOrig})
	c.inTable = true
	o.unassured[c.class].pushBack(c)
	return true
}

// insertReply adds c's reply key, records its SNAT mapping m (may be nil) and
// marks c confirmed. The caller holds c.mu and has set c.reply and c.snat.
// It reports false if c was removed meanwhile or the key clashes.
func (t *table) insertReply(c *conn, m *mapping) bool {
	rh := c.reply.key(t.seed)
	ri := shardOfKey(rh)
	var l lockSet
	l.add(c.owner)
	l.add(ri)
	t.lockAll(&l)
	defer t.unlockAll(&l)
	if !c.inTable {
		return false
	}
	if r, ok := t.shards[ri].m.get(rh, &c.reply); ok && r.c != c {
		return false
	}
	t.shards[ri].m.put(rh, &c.reply, ref{c, dirReply})
	c.snatMap = m
	c.confirmed.Store(true)
	return true
}

// setAssured marks c assured, taking it off the early-drop list.
func (t *table) setAssured(c *conn) {
	if c.assured.Load() {
		return
	}
	s := &t.shards[c.owner]
	s.mu.Lock()
	if c.inTable && !c.assured.Load() {
		c.assured.Store(true)
		s.unassured[c.class].remove(c)
	}
	s.mu.Unlock()
}

// remove deletes c from the table. With onlyUnassured it refuses to remove an
// assured flow. It reports whether this call removed c; the caller then
// releases c's mapping.
func (t *table) remove(c *conn, onlyUnassured bool) bool {
	var l lockSet
	l.add(c.owner)
	if c.dnat {
		l.add(t.shardOf(&c.mid))
	}
	hasReply := c.confirmed.Load()
	if hasReply {
		l.add(t.shardOf(&c.reply))
	}
	t.lockAll(&l)
	if !hasReply && c.confirmed.Load() {
		// Confirmed between the load and the lock: lock the reply shard too.
		t.unlockAll(&l)
		return t.remove(c, onlyUnassured)
	}
	o := &t.shards[c.owner]
	if !c.inTable || (onlyUnassured && c.assured.Load()) {
		t.unlockAll(&l)
		return false
	}
	del := func(k *Tuple) {
		h := k.key(t.seed)
		t.shards[shardOfKey(h)].m.remove(h, k, c)
	}
	del(&c.orig)
	if c.dnat {
		del(&c.mid)
	}
	if hasReply {
		del(&c.reply)
	}
	if !c.assured.Load() {
		o.unassured[c.class].remove(c)
	}
	c.inTable = false
	c.dead.Store(true)
	c.fp[0].Store(nil)
	c.fp[1].Store(nil)
	t.unlockAll(&l)
	t.unreserve(c)
	if c.host {
		t.hosts.release(hostKey{c.orig.Src, c.orig.V6})
	}
	return true
}

// each calls fn for every flow once (under no lock). fn may remove flows.
func (t *table) each(fn func(c *conn)) {
	var batch []*conn
	for i := range t.shards {
		s := &t.shards[i]
		batch = batch[:0]
		s.mu.Lock()
		s.m.each(func(r ref) {
			if r.dir == dirOrig {
				batch = append(batch, r.c)
			}
		})
		s.mu.Unlock()
		for _, c := range batch {
			fn(c)
		}
	}
}
