package wireguard

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"sync/atomic"
	"time"
)

// Tunables of the handshake flood filter.
const (
	// floodTableSize is how many sources the filter remembers at once;
	// a power of two for the index mask. 4096 slots of 16 bytes (64
	// KiB) hold every source of a flood from a few hosts many times
	// over; a flood from more sources than that churns the table, and
	// what it forgets reaches the device.
	floodTableSize = 4096
	// floodQuiet is how long a source that was sent a cookie reply must
	// stay quiet before its handshake messages reach the device again.
	// wireguard-go stays under load for UnderLoadAfterTime (1 s) after
	// its queue was full, and a peer that got a cookie reply retries
	// only after REKEY_TIMEOUT (5 s, plus up to 333 ms of jitter), so a
	// peer never sends within it.
	floodQuiet = time.Second
)

// floodFilter keeps a handshake flood from one source address from
// starving other peers' handshakes. wireguard-go hands every handshake
// message to one queue of QueueHandshakeSize (1024) with a
// non-blocking send and drops what does not fit, uncounted: under a
// saturating flood the queue is full nearly always, and another peer's
// initiation gets in only as often as a slot frees between the
// flood's datagrams. Under load the device answers a handshake message
// that lacks a valid MAC2 with a cookie reply (whitepaper §5.3), and a
// peer that gets one keeps the cookie for 120 s and retries after
// REKEY_TIMEOUT. So the Bind watches its Send for cookie replies and
// drops, before they reach the queue, the initiations and responses
// of a source that was sent one less than floodQuiet ago; each drop
// restarts that source's quiet time, so a flood stays out for as long
// as it lasts and a peer's retry (5 s later) goes through. Sources are
// IP:port: peers behind one NAT share an IP.
//
// Limits: a flood from many source addresses (spoofed, or more
// sources than floodTableSize) still reaches the device, whose cookie
// mechanism and rate limiter are then what protects it, as in the
// kernel's WireGuard. An attacker who can spoof a peer's exact IP:port
// while the device is under load can keep that peer's handshakes out;
// the same attacker could fill the device's queue with spoofed sources
// anyway.
//
// The table is fixed: a slot per hash of IP:port, holding that hash in
// full, so a source that shares a slot with another is never dropped
// for it (the last cookie reply's source owns the slot). Its fields
// are atomics: the receive functions (one per socket) and Send (the
// device's handshake workers) use it without a lock, and a torn slot
// costs at most one wrong decision. Nothing allocates.
type floodFilter struct {
	seed  maphash.Seed
	epoch time.Time // the monotonic clock's zero for the slots' times
	slots [floodTableSize]floodSlot
}

// floodSlot is one source's state.
type floodSlot struct {
	key   atomic.Uint64 // the source's hash (0: none)
	until atomic.Int64  // time since epoch until which it is dropped
}

func newFloodFilter() *floodFilter {
	return &floodFilter{seed: maphash.MakeSeed(), epoch: time.Now()}
}

// now is the filter's clock: monotonic, immune to wall clock steps.
func (f *floodFilter) now() time.Duration { return time.Since(f.epoch) }

// key hashes ap with a seed of the filter's own, so a remote host
// cannot pick a port that shares a peer's slot.
func (f *floodFilter) key(ap netip.AddrPort) uint64 {
	var b [18]byte
	a := ap.Addr().Unmap().As16()
	copy(b[:], a[:])
	binary.BigEndian.PutUint16(b[16:], ap.Port())
	k := maphash.Bytes(f.seed, b[:])
	if k == 0 {
		k = 1
	}
	return k
}

// cookieReplySent records that the device sent ap a cookie reply at now.
func (f *floodFilter) cookieReplySent(ap netip.AddrPort, now time.Duration) {
	k := f.key(ap)
	s := &f.slots[k&(floodTableSize-1)]
	s.until.Store(int64(now + floodQuiet))
	s.key.Store(k)
}

// drop reports whether a handshake message from ap at now is to be
// dropped, and if so restarts ap's quiet time.
func (f *floodFilter) drop(ap netip.AddrPort, now time.Duration) bool {
	k := f.key(ap)
	s := &f.slots[k&(floodTableSize-1)]
	if s.key.Load() != k || int64(now) >= s.until.Load() {
		return false
	}
	s.until.Store(int64(now + floodQuiet))
	return true
}
