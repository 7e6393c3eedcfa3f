package dhcp6server

import (
	"net/netip"
	"sync"
	"time"
)

// Rate limits on Replies (see the package doc, "Floods").
const (
	// sourceBurst is how many Replies one source gets at once. A client
	// retransmits an Information-request no faster than every second
	// (INF_TIMEOUT 1 s, doubling, RFC 8415 §7.6, §15) and starts over
	// when its link flaps; 10 covers a few restarts in a row.
	sourceBurst = 10
	// sourceRate is how many Replies per second one source earns back:
	// one a second is the fastest a well-behaved client asks.
	sourceRate = 1.0
	// globalBurst and globalRate bound the Replies of the whole server, so
	// that a flood from ever-new (spoofed) sources costs at most this many
	// Replies a second. A LAN of a few hundred hosts that all come up
	// together is served within seconds, their retransmissions filling
	// in.
	globalBurst = 200
	globalRate  = 200.0
	// maxSources bounds the table of per-source buckets, far above the
	// hosts of a home or office LAN. When it is full, idle buckets
	// (refilled to sourceBurst) are forgotten, at most every pruneEvery;
	// a new source that still finds no room is refused until then.
	maxSources = 1024
	pruneEvery = 100 * time.Millisecond
)

// bucket is a token bucket.
type bucket struct {
	tokens float64
	last   time.Time
}

// fill adds what was earned since last, up to burst.
func (b *bucket) fill(now time.Time, rate, burst float64) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(burst, b.tokens+d.Seconds()*rate)
		b.last = now
	}
}

// limiter decides which sources get a Reply. mu protects every field.
type limiter struct {
	mu        sync.Mutex
	sources   map[netip.Addr]*bucket
	all       bucket
	lastPrune time.Time
}

func newLimiter(now time.Time) *limiter {
	return &limiter{sources: map[netip.Addr]*bucket{}, all: bucket{tokens: globalBurst, last: now}}
}

// allow takes one token from src's bucket and one from the server's, or
// reports that either is empty (and takes none).
func (l *limiter) allow(src netip.Addr, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.sources[src]
	if b == nil {
		if len(l.sources) >= maxSources {
			l.pruneLocked(now)
			if len(l.sources) >= maxSources {
				return false
			}
		}
		b = &bucket{tokens: sourceBurst, last: now}
		l.sources[src] = b
	}
	b.fill(now, sourceRate, sourceBurst)
	l.all.fill(now, globalRate, globalBurst)
	if b.tokens < 1 || l.all.tokens < 1 {
		return false
	}
	b.tokens--
	l.all.tokens--
	return true
}

// pruneLocked forgets the buckets that are full again, at most every
// pruneEvery.
func (l *limiter) pruneLocked(now time.Time) {
	if now.Sub(l.lastPrune) < pruneEvery {
		return
	}
	l.lastPrune = now
	for a, b := range l.sources {
		if b.fill(now, sourceRate, sourceBurst); b.tokens >= sourceBurst {
			delete(l.sources, a)
		}
	}
}

// size is the number of tracked sources.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sources)
}
