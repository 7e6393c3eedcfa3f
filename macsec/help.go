package macsec

import (
	"sync/atomic"
	"time"
)

// Helpers cost a wakeup: a goroutine parked on a channel is readied into
// the waker's run queue, and an idle core has to wake up and steal it.
// On bare metal that takes microseconds; on a 2-vCPU VM it took 100-170
// us, longer than sealing a 128-frame chunk, and in the MACsec lab
// (small batches, two routers and two hosts on two cores) waking a helper
// for every shareable chunk cost the routers ~3 us of CPU per frame
// (routers' CPU per gigabit 1,340-1,720 ms with helpers, 1,040-1,270
// ms without). So a call offers its chunks to helpers only when its
// crypto would take at least twice as long as the latest measured
// wakeups, or when the SecY is under sustained load (below); now and then
// a call that would not offers them anyway, so that the measurement
// follows the machine.

// A call that would not wake helpers does anyway, to measure the wakeup
// again, if it is a probeEvery-th such call and probeInterval has passed
// since the last probe: often enough to follow the machine, rarely enough
// that the probes' wakeups cost nothing measurable (at one in 16 calls
// they were the larger part of the MACsec lab's extra context switches).
const (
	probeEvery    = 16
	probeInterval = 100 * time.Millisecond
)

// A helper that joined a call worth waking it for does not park at once:
// it polls for more work (yielding its core to any other goroutine) for as
// long as a wakeup would take, at most maxSpin. Under load, when calls
// follow each other closely, the next call finds it awake; an idle SecY
// pays at most one wakeup's worth of polling per such call. While a
// helper polls, a call whose crypto takes at least 2 x hotPickupNs (a few
// dozen standard frames) is offered to it even if a wakeup would not pay.
const (
	maxSpin     = 200 * time.Microsecond
	hotPickupNs = 5_000
)

// Under sustained load waking helpers pays even for calls that would not
// be worth a wakeup alone: a helper that joined polls for the next call,
// so a burst of calls pays for one wakeup, and one core could not keep up
// anyway. The load is the calibrated crypto of recent calls, decaying
// linearly over loadWindow; at loadHelp or more (a quarter of a core busy
// with crypto) calls are offered to helpers. On this VM a wakeup
// sometimes measured 0.4-0.9 ms for a while, above half of a 2,048-frame
// call's crypto, and calls back to back then ran on one core. The
// calibrated cost is the bare seal's, about half of what a received
// integrity-only frame costs the SecY in all (parse, judge, delivery): at
// half a core, calls of 128 standard frames back to back sat at the
// threshold and were helped in some runs and not in others.
const (
	loadWindow = int64(time.Millisecond)
	loadHelp   = loadWindow / 4
)

// helpPolicy decides whether a call's crypto is shared with helpers.
type helpPolicy struct {
	always   bool         // Config.AlwaysParallel
	nsPerKiB int64        // one core's crypto cost, calibrated by New
	wakeNs   atomic.Int64 // moving average of a parked helper's wakeup; 0 until measured
	skipped  atomic.Uint32
	probed   atomic.Int64 // nanotime of the last probe
	spinning atomic.Int32 // helpers polling for work (spinForWork)
	load     atomic.Int64 // crypto ns of recent calls, decayed to loadAt
	loadAt   atomic.Int64 // nanotime of the last update of load
}

// epoch is the origin of monotonic timestamps (nanotime).
var epoch = time.Now()

// nanotime returns monotonic nanoseconds.
func nanotime() int64 { return int64(time.Since(epoch)) }

// worth reports whether a call with octets octets of frames should offer
// them to helpers (help), and whether it is worth a wakeup on its own, so
// that helpers joining it poll for the next call afterwards (spin).
func (h *helpPolicy) worth(octets int) (help, spin bool) {
	crypto := int64(octets) * h.nsPerKiB / 1024
	if h.addLoad(crypto) >= loadHelp || crypto >= 2*h.wakeNs.Load() {
		return true, true
	}
	if h.always || crypto >= 2*hotPickupNs && h.spinning.Load() > 0 {
		return true, false
	}
	if h.skipped.Add(1)%probeEvery != 0 {
		return false, false
	}
	now, last := nanotime(), h.probed.Load()
	return now-last >= int64(probeInterval) && h.probed.CompareAndSwap(last, now), false
}

// addLoad adds a call's crypto to the load and returns the new load.
// Concurrent callers may lose an update now and then: a heuristic.
func (h *helpPolicy) addLoad(crypto int64) int64 {
	now := nanotime()
	l := h.load.Load()
	if el := now - h.loadAt.Swap(now); el >= loadWindow {
		l = 0
	} else if el > 0 {
		l -= l * el / loadWindow
	}
	l += crypto
	h.load.Store(l)
	return l
}

// spinTime is how long a helper polls for work after joining a call worth
// a wakeup: as long as the wakeup it saves, so that polling in vain costs
// at most what parking would have cost the next call.
func (h *helpPolicy) spinTime() int64 {
	return min(h.wakeNs.Load(), int64(maxSpin))
}

// woke records the wakeup of a helper that was parked when a container
// was posted at postedAt. A sample counts at most twice the average: a
// wakeup that took milliseconds (the host descheduled the vCPU) would
// otherwise lift the average so far that calls stop waking helpers, and
// only the rare probes could bring it down again.
func (h *helpPolicy) woke(postedAt int64) {
	lat := nanotime() - postedAt
	if old := h.wakeNs.Load(); old != 0 {
		lat = old + (min(lat, 2*old)-old)/8
	}
	h.wakeNs.Store(max(lat, 1))
}

// calibrateCrypto returns what sealing costs one core of this machine
// with suite cs, in nanoseconds per KiB: a few dozen standard frames with
// a throwaway key, once per SecY with helpers.
func calibrateCrypto(cs CipherSuite, encrypt bool) int64 {
	aead, err := newAEAD(cs, NewKey(make([]byte, cs.KeyLen())))
	if err != nil {
		return 1
	}
	const frameLen, frames = 1514, 32
	b := make([]byte, frameLen+ICVLen)
	var iv [12]byte
	seal := func() {
		if encrypt {
			aead.Seal(b[16:16], iv[:], b[16:frameLen], b[:16])
		} else {
			aead.Seal(b[frameLen:frameLen], iv[:], nil, b[:frameLen])
		}
	}
	for range 4 { // warm up
		seal()
	}
	t0 := time.Now()
	for range frames {
		seal()
	}
	return max(1, int64(time.Since(t0))*1024/(frames*frameLen))
}
