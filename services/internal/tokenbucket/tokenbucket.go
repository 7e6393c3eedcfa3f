// Package tokenbucket rations the DHCP servers' answers: a token bucket,
// and a bounded table of buckets by key (a source address, a MAC) for
// per-sender budgets. A flood from ever-new keys cannot grow the table
// beyond its bound; it is refused a bucket instead.
//
// Nothing here locks: the servers hold their own mutex around a Bucket
// or a Table.
package tokenbucket

import "time"

// Rate is a budget: Burst tokens at once, PerSecond earned back.
type Rate struct {
	// Burst is the most tokens a bucket holds, e.g. 10; at least 1 for
	// anything to pass.
	Burst float64
	// PerSecond is how many tokens a bucket earns a second, e.g. 1.
	PerSecond float64
}

// Bucket is a token bucket. The zero value is empty; Full gives a full
// one. It is not safe for concurrent use.
type Bucket struct {
	tokens float64
	last   time.Time
}

// Full returns a bucket holding r.Burst tokens at now.
func Full(r Rate, now time.Time) Bucket { return Bucket{tokens: r.Burst, last: now} }

// Fill adds what was earned since the last Fill, up to r.Burst. A clock
// that went back earns nothing.
func (b *Bucket) Fill(now time.Time, r Rate) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(r.Burst, b.tokens+d.Seconds()*r.PerSecond)
		b.last = now
	}
}

// Ready reports whether the bucket holds a whole token.
func (b *Bucket) Ready() bool { return b.tokens >= 1 }

// Take spends one token; the caller checked Ready.
func (b *Bucket) Take() { b.tokens-- }

// Allow fills the bucket and spends a token if it has one.
func (b *Bucket) Allow(now time.Time, r Rate) bool {
	b.Fill(now, r)
	if !b.Ready() {
		return false
	}
	b.Take()
	return true
}

// pruneEvery bounds how often a full Table looks for idle buckets to
// forget: the scan is linear in the table, and a flood of new keys must
// not make every packet pay for it.
const pruneEvery = 100 * time.Millisecond

// Table is a bounded set of buckets by key, each with the same Rate. It
// is not safe for concurrent use.
type Table[K comparable] struct {
	rate      Rate
	max       int
	m         map[K]*Bucket
	lastPrune time.Time
}

// NewTable returns a table of at most max buckets of rate r.
func NewTable[K comparable](r Rate, max int) *Table[K] {
	return &Table[K]{rate: r, max: max, m: map[K]*Bucket{}}
}

// Get returns k's bucket, filled up to now; a new key gets a full one.
// When the table is full, buckets that are full again (their senders
// went quiet) are forgotten, at most every pruneEvery; if there is still
// no room, Get returns nil and the caller refuses k.
func (t *Table[K]) Get(k K, now time.Time) *Bucket {
	b := t.m[k]
	if b == nil {
		if len(t.m) >= t.max {
			t.prune(now)
			if len(t.m) >= t.max {
				return nil
			}
		}
		fb := Full(t.rate, now)
		b = &fb
		t.m[k] = b
	}
	b.Fill(now, t.rate)
	return b
}

// Rate returns the table's rate.
func (t *Table[K]) Rate() Rate { return t.rate }

// Len is the number of keys tracked.
func (t *Table[K]) Len() int { return len(t.m) }

// prune forgets the buckets that are full again, at most every
// pruneEvery.
func (t *Table[K]) prune(now time.Time) {
	if now.Sub(t.lastPrune) < pruneEvery {
		return
	}
	t.lastPrune = now
	for k, b := range t.m {
		if b.Fill(now, t.rate); b.tokens >= t.rate.Burst {
			delete(t.m, k)
		}
	}
}
