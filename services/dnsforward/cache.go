package dnsforward

import (
	"hash/maphash"
	"sync"
	"time"
)

// cache holds answers by question in shards, each a map and an LRU list
// under its own mutex, bounded in entries and bytes. A hit locks one
// shard for a map lookup and a move to the list's front; the caller then
// copies the (immutable) entry without the lock.
type cache struct {
	seed   maphash.Seed
	shards []shard
	mask   uint64
}

// shard is one part of the cache. mu protects m, head, tail, n, bytes
// and every entry's prev and next.
type shard struct {
	mu         sync.Mutex
	m          map[string]*entry
	head, tail *entry
	bytes      int
	maxEntries int
	maxBytes   int
	_          [40]byte // keep neighbouring shards' mutexes off one cache line
}

// cacheShards is the shard count of a large cache: enough that the
// readers of all cores rarely meet on one mutex. A cache below
// smallCache entries has one shard, so that its bounds are exact.
const (
	cacheShards = 16
	smallCache  = 1024
)

func newCache(maxEntries, maxBytes int) *cache {
	n := 1
	if maxEntries >= smallCache {
		n = cacheShards
	}
	c := &cache{seed: maphash.MakeSeed(), shards: make([]shard, n), mask: uint64(n - 1)}
	for i := range c.shards {
		s := &c.shards[i]
		s.m = make(map[string]*entry)
		s.maxEntries = max(1, (maxEntries+n-1)/n)
		s.maxBytes = max(1, (maxBytes+n-1)/n)
	}
	return c
}

func (c *cache) shard(key []byte) *shard {
	return &c.shards[maphash.Bytes(c.seed, key)&c.mask]
}

// shardOf is shard for a string key (maphash.String and maphash.Bytes
// agree on the same bytes).
func (c *cache) shardOf(key string) *shard {
	return &c.shards[maphash.String(c.seed, key)&c.mask]
}

// get returns the live entry for key at now, or nil. An expired entry is
// removed (expired reports it).
func (c *cache) get(key []byte, now time.Time) (e *entry, expired bool) {
	s := c.shard(key)
	s.mu.Lock()
	e = s.m[string(key)]
	if e == nil {
		s.mu.Unlock()
		return nil, false
	}
	if !now.Before(e.expires) {
		s.removeLocked(e)
		s.mu.Unlock()
		return nil, true
	}
	s.moveToFrontLocked(e)
	s.mu.Unlock()
	return e, false
}

// put stores e (with e.key set) in place of any entry for its key, and
// evicts the least recently used entries while the shard is over its
// bounds. It returns how many it evicted.
func (c *cache) put(e *entry) (evicted int) {
	s := c.shardOf(e.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[e.key]; old != nil {
		s.removeLocked(old)
	}
	if e.size > s.maxBytes {
		return 0 // larger than the shard: not kept
	}
	s.m[e.key] = e
	s.bytes += e.size
	e.prev, e.next = nil, s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
	for len(s.m) > s.maxEntries || s.bytes > s.maxBytes {
		s.removeLocked(s.tail)
		evicted++
	}
	return evicted
}

// purge removes the entries expired at now and returns how many.
func (c *cache) purge(now time.Time) (n int) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if !now.Before(e.expires) {
				s.removeLocked(e)
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// flush empties the cache.
func (c *cache) flush() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.head, s.tail, s.bytes = nil, nil, 0
		s.mu.Unlock()
	}
}

// len returns the number of entries and their bytes.
func (c *cache) len() (entries, bytes int) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		entries += len(s.m)
		bytes += s.bytes
		s.mu.Unlock()
	}
	return entries, bytes
}

func (s *shard) removeLocked(e *entry) {
	delete(s.m, e.key)
	s.bytes -= e.size
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (s *shard) moveToFrontLocked(e *entry) {
	if s.head == e {
		return
	}
	e.prev.next = e.next
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, s.head
	s.head.prev = e
	s.head = e
}
