package dhcp6server

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/services/internal/tokenbucket"
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
	// hostBurst and hostRate are one sending host's budget, by its
	// Ethernet source address, whatever source addresses it uses: five
	// sources' worth, for a host whose containers or VMs share its MAC
	// (ipvlan) and each ask. A host that spoofs ever-new link-local
	// sources spends this, not the whole server's budget: with only a
	// per-source and a global limit, a client got 10 of 25 answers while
	// one host sent 2,000 a second from new sources.
	hostBurst = 5 * sourceBurst
	hostRate  = 5 * sourceRate
	// globalBurst and globalRate bound the Replies of the whole server, so
	// that a flood from ever-new (spoofed) sources and MACs costs at most
	// this many Replies a second. A LAN of a few hundred hosts that all
	// come up together is served within seconds, their retransmissions
	// filling in.
	globalBurst = 200
	globalRate  = 200.0
	// maxSources bounds the tables of per-source and per-host buckets,
	// far above the hosts of a home or office LAN. When one is full, idle
	// buckets (refilled to their burst) are forgotten, at most every
	// 100 ms; a new source that still finds no room is refused until then.
	maxSources = 1024
)

var (
	sourceLimit = tokenbucket.Rate{Burst: sourceBurst, PerSecond: sourceRate}
	hostLimit   = tokenbucket.Rate{Burst: hostBurst, PerSecond: hostRate}
	globalLimit = tokenbucket.Rate{Burst: globalBurst, PerSecond: globalRate}
)

// limiter decides which sources get a Reply. mu protects every field.
type limiter struct {
	mu      sync.Mutex
	sources *tokenbucket.Table[netip.Addr]
	hosts   *tokenbucket.Table[[6]byte]
	all     tokenbucket.Bucket
}

func newLimiter(now time.Time) *limiter {
	return &limiter{
		sources: tokenbucket.NewTable[netip.Addr](sourceLimit, maxSources),
		hosts:   tokenbucket.NewTable[[6]byte](hostLimit, maxSources),
		all:     tokenbucket.Full(globalLimit, now),
	}
}

// allow takes one token from src's bucket, one from its host's (by mac;
// none when the transport cannot tell the MAC, mac nil) and one from the
// server's, or reports that one is empty (and takes none).
func (l *limiter) allow(src netip.Addr, mac net.HardwareAddr, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.sources.Get(src, now)
	if b == nil || !b.Ready() {
		return false
	}
	var h *tokenbucket.Bucket
	if len(mac) == 6 {
		if h = l.hosts.Get([6]byte(mac), now); h == nil || !h.Ready() {
			return false
		}
	}
	if l.all.Fill(now, globalLimit); !l.all.Ready() {
		return false
	}
	b.Take()
	if h != nil {
		h.Take()
	}
	l.all.Take()
	return true
}

// size is the number of tracked sources.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sources.Len()
}
