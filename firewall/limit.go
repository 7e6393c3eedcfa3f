package firewall

import "sync"

// Reject answers are limited like Linux limits ICMP errors
// (net.ipv4.icmp_msgs_per_sec = 1000, icmp_msgs_burst = 50): a flood of
// refused flows must not turn the router into a packet generator.
const (
	RejectRate  = 1000
	RejectBurst = 50
)

// limiter is a token bucket over the caller's clock (ns). It is taken
// only for new flows, so a mutex costs nothing that matters.
type limiter struct {
	mu     sync.Mutex
	perNs  float64 // tokens per ns
	burst  float64
	tokens float64 // protected by mu
	last   int64   // protected by mu
	primed bool    // protected by mu: the bucket was filled
}

func (l *limiter) init(perSecond float64, burst int) {
	l.perNs = perSecond / 1e9
	l.burst = float64(max(burst, 1))
}

// allow takes a token at time now if there is one.
func (l *limiter) allow(now int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.primed {
		l.tokens, l.last, l.primed = l.burst, now, true
	}
	if now > l.last {
		l.tokens = min(l.burst, l.tokens+float64(now-l.last)*l.perNs)
		l.last = now
	}
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	return false
}

// RejectAllowed reports whether a reject answer may be sent at time now
// (ns, any monotonic clock); when not, the flow is only dropped.
func (rs *Ruleset) RejectAllowed(now int64) bool { return rs.reject.allow(now) }
