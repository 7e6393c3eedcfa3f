package vswitch

import (
	"encoding/binary"
	"sync"
)

// fdbRefresh is how stale an entry's last-seen time may get before a frame
// from its address rewrites it. Rewriting on every frame would take the
// write lock once per frame; a second is nothing against AgingTime.
const fdbRefresh = int64(1e9)

// fdbEntry is where an address was last seen and when (the switch clock,
// in nanoseconds).
type fdbEntry struct {
	seen int64
	port int32
}

// fdb is the filtering database: one learning table per VLAN (independent
// VLAN learning, IEEE 802.1Q-2018 8.8), keyed by VID and MAC packed in a
// uint64. It is safe for concurrent use. Lookups and the learning of a
// known address at the same port take the read lock only; the map is
// sized for FDBSize entries up front, so learning allocates only when the
// Go map must rehash after many deletions.
type fdb struct {
	aging int64 // entry lifetime in nanoseconds
	size  int   // most entries

	// mu protects entries.
	mu      sync.RWMutex
	entries map[uint64]fdbEntry
}

func newFDB(aging int64, size int) *fdb {
	return &fdb{aging: aging, size: size, entries: make(map[uint64]fdbEntry, size)}
}

// fdbKey packs a VID and a MAC address (6 bytes) into a table key.
func fdbKey(vid uint16, mac []byte) uint64 {
	_ = mac[5]
	return uint64(vid)<<48 | uint64(binary.BigEndian.Uint16(mac))<<32 | uint64(binary.BigEndian.Uint32(mac[2:]))
}

// lookup returns the port mac was learned on in vid, if the entry is
// younger than the ageing time at now.
func (t *fdb) lookup(vid uint16, mac []byte, now int64) (int, bool) {
	k := fdbKey(vid, mac)
	t.mu.RLock()
	e, ok := t.entries[k]
	t.mu.RUnlock()
	if !ok || now-e.seen > t.aging {
		return 0, false
	}
	return int(e.port), true
}

// learn records that mac was seen on port in vid at now (IEEE 802.1Q-2018
// 8.7). It reports false when the table is full of live entries and mac
// was not learned.
func (t *fdb) learn(vid uint16, mac []byte, port int, now int64) bool {
	k := fdbKey(vid, mac)
	t.mu.RLock()
	e, ok := t.entries[k]
	t.mu.RUnlock()
	if ok && int(e.port) == port && now-e.seen < fdbRefresh && now >= e.seen {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.entries[k]; !ok && len(t.entries) >= t.size {
		t.expireLocked(now)
		if len(t.entries) >= t.size {
			return false
		}
	}
	t.entries[k] = fdbEntry{seen: now, port: int32(port)}
	return true
}

// expire deletes the entries older than the ageing time at now.
func (t *fdb) expire(now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
}

func (t *fdb) expireLocked(now int64) {
	for k, e := range t.entries {
		if now-e.seen > t.aging {
			delete(t.entries, k)
		}
	}
}

// len returns the number of entries, aged ones included.
func (t *fdb) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.entries)
}

// flush deletes every entry learned on port.
func (t *fdb) flush(port int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.entries {
		if int(e.port) == port {
			delete(t.entries, k)
		}
	}
}
