package dhcp6client

import (
	"math/bits"
	mrand "math/rand/v2"
	"time"
)

// Transmission and retransmission parameters of RFC 8415 §7.6.
const (
	solMaxDelay = 1 * time.Second    // SOL_MAX_DELAY: most the first Solicit waits
	solTimeout  = 1 * time.Second    // SOL_TIMEOUT: Solicit IRT
	solMaxRT    = 3600 * time.Second // SOL_MAX_RT: Solicit MRT (default; option 82 changes it)
	reqTimeout  = 1 * time.Second    // REQ_TIMEOUT: Request IRT
	reqMaxRT    = 30 * time.Second   // REQ_MAX_RT: Request MRT
	reqMaxRC    = 10                 // REQ_MAX_RC: Request MRC
	cnfTimeout  = 1 * time.Second    // CNF_TIMEOUT: IRT of the Rebind that confirms a saved lease (§18.2.12)
	cnfMaxRT    = 4 * time.Second    // CNF_MAX_RT
	cnfMaxRD    = 10 * time.Second   // CNF_MAX_RD
	renTimeout  = 10 * time.Second   // REN_TIMEOUT: Renew IRT
	renMaxRT    = 600 * time.Second  // REN_MAX_RT: Renew MRT
	rebTimeout  = 10 * time.Second   // REB_TIMEOUT: Rebind IRT
	rebMaxRT    = 600 * time.Second  // REB_MAX_RT: Rebind MRT
	relTimeout  = 1 * time.Second    // REL_TIMEOUT: Release IRT
	relMaxRC    = 4                  // REL_MAX_RC: Release MRC

	// releaseMaxWait bounds the Release exchange of a stopping client:
	// REL_MAX_RC alone lets it take 15 s, more than a router that is
	// being stopped or reloaded can wait. A Release that goes unanswered
	// costs the server only a binding that expires by itself.
	releaseMaxWait = 3 * time.Second

	// minSolMaxRT and maxSolMaxRT bound an SOL_MAX_RT option (RFC 8415
	// §21.24: values outside are ignored).
	minSolMaxRT = 60 * time.Second
	maxSolMaxRT = 86400 * time.Second
)

// params are the retransmission parameters of one exchange (RFC 8415
// §15): IRT, MRT, MRC and the end of MRD as a time.
type params struct {
	irt, mrt time.Duration
	mrc      int       // 0: no limit
	end      time.Time // zero: no limit (MRD 0)
	// positive makes the first RAND strictly positive, as §18.2.1 asks
	// of Solicit, so that the first RT is greater than IRT.
	positive bool
}

// exchange is the retransmission state of the message in flight.
type exchange struct {
	params
	start    time.Time     // first transmission: Elapsed Time counts from it
	lastSent time.Time     // latest transmission: lease times count from it
	rt       time.Duration // the current RT
	sent     int           // transmissions so far
	next     time.Time     // the next transmission, or when the exchange fails
}

// failed reports whether the exchange is over at now without an answer:
// MRC transmissions made and the last RT passed, or MRD reached.
func (e *exchange) failed(now time.Time) bool {
	if now.Before(e.next) {
		return false
	}
	return (e.mrc > 0 && e.sent >= e.mrc) || (!e.end.IsZero() && !now.Before(e.end))
}

// sentAt records a transmission at now and sets the next one by RFC 8415
// §15: RT = IRT + RAND*IRT for the first, RT = 2*RTprev + RAND*RTprev
// after, and MRT + RAND*MRT once RT would pass MRT, RAND uniform in
// [-0.1, 0.1]; never past MRD.
func (e *exchange) sentAt(now time.Time, src mrand.Source) {
	if e.sent == 0 {
		e.start = now
		e.rt = e.irt + jitter(src, e.irt, e.positive)
	} else {
		e.rt = 2*e.rt + jitter(src, e.rt, false)
	}
	if e.mrt > 0 && e.rt > e.mrt {
		e.rt = e.mrt + jitter(src, e.mrt, false)
	}
	e.sent++
	e.lastSent = now
	e.next = now.Add(e.rt)
	if !e.end.IsZero() && e.next.After(e.end) {
		e.next = e.end
	}
}

// elapsed is the Elapsed Time of a transmission at now (RFC 8415 §21.9:
// hundredths of a second since the exchange's first message, which
// carries 0; 0xffff for anything longer).
func (e *exchange) elapsed(now time.Time) time.Duration {
	if e.sent == 0 {
		return 0
	}
	return min(now.Sub(e.start), 0xffff*10*time.Millisecond)
}

// jitter is RAND*d for RAND uniform in [-0.1, 0.1], or in (0, 0.1] when
// positive, drawn with one call of src.
func jitter(src mrand.Source, d time.Duration, positive bool) time.Duration {
	tenth := uint64(d / 10)
	if positive {
		return time.Duration(1 + uniform(src, tenth))
	}
	return time.Duration(uniform(src, 2*tenth+1)) - time.Duration(tenth)
}

// uniform draws from [0, n) with one draw of src: the high word of
// src×n, whose bias (under 2⁻³² for the n used here) does not matter
// for jitter, and which maps the extremes of src to those of the range.
func uniform(src mrand.Source, n uint64) uint64 {
	hi, _ := bits.Mul64(src.Uint64(), n)
	return hi
}
