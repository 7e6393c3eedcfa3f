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
// wakeups; now and then a call that would not offers them anyway, so that
// the measurement follows the machine.

// A call that would not wake helpers does anyway, to measure the wakeup
// again, if it is a probeEvery-th such call and probeInterval has passed
// since the last probe: often enough to follow the machine, rarely enough
// that the probes' wakeups cost nothing measurable (at one in 16 calls
// they were the larger part of the MACsec lab's extra context switches).
const (
	probeEvery    = 16
	probeInterval = 100 * time.Millisecond
)

// helpPolicy decides whether a call's crypto is shared with helpers.
type helpPolicy struct {
	always   bool         // Config.AlwaysParallel
	nsPerKiB int64        // one core's crypto cost, calibrated by New
	wakeNs   atomic.Int64 // moving average of a parked helper's wakeup; 0 until measured
	skipped  atomic.Uint32
	probed   atomic.Int64 // nanotime of the last probe
}

// epoch is the origin of monotonic timestamps (nanotime).
var epoch = time.Now()

// nanotime returns monotonic nanoseconds.
func nanotime() int64 { return int64(time.Since(epoch)) }

// worth reports whether a call with octets octets of frames should offer
// them to helpers.
func (h *helpPolicy) worth(octets int) bool {
	if h.always || int64(octets)*h.nsPerKiB/1024 >= 2*h.wakeNs.Load() {
		return true
	}
	if h.skipped.Add(1)%probeEvery != 0 {
		return false
	}
	now, last := nanotime(), h.probed.Load()
	return now-last >= int64(probeInterval) && h.probed.CompareAndSwap(last, now)
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
