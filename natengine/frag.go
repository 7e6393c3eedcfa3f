package natengine

import (
	"sync"
	"sync/atomic"
	"time"
)

// Fragments through NAT (RFC 4787 REQ-14, RFC 5508 section 6).
//
// Only the first fragment carries ports. When it passes prerouting its
// flow (or "untracked") is recorded under (src, dst, protocol, ID) as it
// arrived; later fragments look that up and get the same address rewrite.
// Fragments that arrive before their first fragment are copied and held
// (bounded) until it comes, then handed back through DrainHeld; held
// fragments whose first fragment never comes are dropped by Sweep. At
// postrouting the first fragment of an SNAT flow records a second key (its
// pre-SNAT addresses) so later fragments get the same source rewrite.

// Fragment tunables.
const (
	fragTimeout    = int64(30 * time.Second) // Linux ipfrag_time: how long fragment state and held fragments live
	maxFragEntries = 4096                    // fragment flows remembered; beyond this new ones are not recorded
	maxHeldFrags   = 64                      // out-of-order fragments held at once (≤ 64 × 64 KiB worst case)
)

type fragKey struct {
	src, dst [16]byte
	id       uint32
	proto    uint8
	v6, post bool
}

type fragEntry struct {
	c       *conn // nil: untracked, pass untouched
	dir     uint8
	expires int64
}

type heldFrag struct {
	key     fragKey
	pkt     []byte
	in      Iface
	expires int64
}

// fragCache holds fragment state. mu is a leaf lock.
type fragCache struct {
	mu    sync.Mutex
	m     map[fragKey]fragEntry // protected by mu
	held  []heldFrag            // waiting for their first fragment; protected by mu
	ready []heldFrag            // translated, waiting for DrainHeld; protected by mu
	// nReady is len(ready), so that DrainHeld, called after every receive
	// batch, costs one atomic load when nothing waits.
	nReady atomic.Int32
}

func (f *fragCache) init() { f.m = make(map[fragKey]fragEntry) }

func fragKeyOf(b []byte, p *Parsed, post bool) fragKey {
	t := p.tuple(b)
	return fragKey{src: t.Src, dst: t.Dst, id: p.FragID, proto: p.Proto, v6: p.V6, post: post}
}

// fragFirst records the flow of a first fragment (b as it arrived, before
// translation: the caller passes the key source) and releases held fragments.
// b has already been translated, so the key is rebuilt from the flow.
func (e *Engine) fragFirst(b []byte, p *Parsed, c *conn, dir int, now int64) {
	k := fragKeyOf(b, p, false)
	if c != nil {
		// b is translated; key on the addresses the fragments arrive with.
		t := &c.orig
		if dir == dirReply {
			t = &c.reply
		}
		k.src, k.dst = t.Src, t.Dst
	}
	f := &e.frags
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.m) < maxFragEntries {
		f.m[k] = fragEntry{c: c, dir: uint8(dir), expires: now + fragTimeout}
	}
	for i := 0; i < len(f.held); {
		h := f.held[i]
		if h.key != k {
			i++
			continue
		}
		var hp Parsed
		if parse(h.pkt, &hp, true) && c != nil {
			preTranslate(h.pkt, &hp, c, dir)
		}
		f.ready = append(f.ready, h)
		f.nReady.Store(int32(len(f.ready)))
		f.held = append(f.held[:i], f.held[i+1:]...)
	}
}

func (e *Engine) preFragment(b []byte, p *Parsed, in Iface, now int64) (Verdict, CTState) {
	k := fragKeyOf(b, p, false)
	f := &e.frags
	f.mu.Lock()
	ent, ok := f.m[k]
	if ok && now < ent.expires {
		f.mu.Unlock()
		if c := ent.c; c != nil && !c.dead.Load() {
			c.pkts[ent.dir].Add(1)
			c.bytes[ent.dir].Add(uint64(p.Len))
			preTranslate(b, p, c, int(ent.dir))
			return Accept, CTEstablished
		}
		return Accept, CTUntracked
	}
	if len(f.held) >= maxHeldFrags {
		f.mu.Unlock()
		return e.drop(DropFragNoFlow), CTUntracked
	}
	f.held = append(f.held, heldFrag{key: k, pkt: append([]byte(nil), b...), in: in, expires: now + fragTimeout})
	f.mu.Unlock()
	e.stats.FragsHeld.Add(1)
	return Stolen, CTUntracked
}

// fragPost records the pre-SNAT key t of a first fragment at postrouting.
func (e *Engine) fragPost(t *Tuple, p *Parsed, c *conn) {
	k := fragKey{src: t.Src, dst: t.Dst, id: p.FragID, proto: p.Proto, v6: p.V6, post: true}
	f := &e.frags
	f.mu.Lock()
	if len(f.m) < maxFragEntries {
		f.m[k] = fragEntry{c: c, dir: dirOrig, expires: e.now() + fragTimeout}
	}
	f.mu.Unlock()
}

// postFragment applies SNAT to a non-first fragment and reports whether
// its first fragment's flow was found.
func (e *Engine) postFragment(b []byte, p *Parsed) bool {
	k := fragKeyOf(b, p, true)
	f := &e.frags
	f.mu.Lock()
	ent, ok := f.m[k]
	f.mu.Unlock()
	if ok && ent.c != nil && ent.c.snat {
		to := ent.c.reply.Invert()
		rewrite(b, p, &to, true, false)
		return true
	}
	return false
}

// HeldReady reports whether DrainHeld has fragments to pass on. It is one
// atomic load.
func (e *Engine) HeldReady() bool { return e.frags.nReady.Load() > 0 }

// DrainHeld passes each held fragment whose first fragment has arrived,
// already translated, to fn, which continues it as if Prerouting had
// returned Accept for it (pkt starts at the IP header; fn owns it). Call it
// after each receive batch.
func (e *Engine) DrainHeld(fn func(pkt []byte, in Iface)) {
	f := &e.frags
	if f.nReady.Load() == 0 {
		return
	}
	f.mu.Lock()
	ready := f.ready
	f.ready = nil
	f.nReady.Store(0)
	f.mu.Unlock()
	for _, h := range ready {
		fn(h.pkt, h.in)
	}
}

func (f *fragCache) sweep(now int64, st *Stats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, ent := range f.m {
		if now >= ent.expires {
			delete(f.m, k)
		}
	}
	kept := f.held[:0]
	for _, h := range f.held {
		if now >= h.expires {
			st.Drops[DropFragNoFlow].Add(1)
			continue
		}
		kept = append(kept, h)
	}
	clear(f.held[len(kept):])
	f.held = kept
}
