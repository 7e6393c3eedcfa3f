package xsk

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// An AF_XDP ring is a single-producer, single-consumer queue in memory
// shared with the kernel: a producer word, a consumer word, a flags word
// and a power-of-two array of entries (linux/if_xdp.h, struct
// xdp_ring_offset gives where each lies). Both indices are free-running
// uint32s; entry i lives at i & mask.
//
// Ordering: the producer writes entries, then stores the producer word; the
// consumer loads the producer word, then reads entries, then stores the
// consumer word, and only then may the producer reuse those slots. The
// kernel side uses smp_load_acquire/smp_store_release on these words
// (net/xdp/xsk_queue.h). Go's sync/atomic loads and stores are
// sequentially consistent, which is at least acquire/release, on every
// target (amd64, arm, arm64), so the entry accesses cannot move across
// them. Each side caches the other's index and reloads it only when the
// cached value says the ring is full (producer) or empty (consumer), so
// the shared cache line is touched once per batch, not once per entry.
type ring struct {
	mem      []byte
	producer *uint32
	consumer *uint32
	flags    *uint32
	mask     uint32
	size     uint32
	// cachedProd and cachedCons are this side's view of the indices:
	// its own index exactly, the kernel's as last loaded.
	cachedProd uint32
	cachedCons uint32
}

// addrRing is a fill or completion ring: entries are UMEM addresses.
type addrRing struct {
	ring
	addrs []uint64
}

// descRing is an RX or TX ring: entries are struct xdp_desc.
type descRing struct {
	ring
	descs []unix.XDPDesc
}

// mapRing mmaps the ring of size entries of entSize bytes at page offset
// pgoff of fd, laid out as off says.
func mapRing(fd int, off unix.XDPRingOffset, size, entSize int, pgoff int64) (ring, error) {
	n := int(off.Desc) + size*entSize
	mem, err := unix.Mmap(fd, pgoff, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, fmt.Errorf("mmap ring at %#x: %w", pgoff, err)
	}
	r := ring{
		mem:      mem,
		producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags:    (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		mask:     uint32(size - 1),
		size:     uint32(size),
	}
	// Start from the kernel's indices (zero on a fresh ring).
	r.cachedProd = atomic.LoadUint32(r.producer)
	r.cachedCons = atomic.LoadUint32(r.consumer)
	return r, nil
}

func (r *ring) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}

func mapAddrRing(fd int, off unix.XDPRingOffset, size int, pgoff int64) (*addrRing, error) {
	r, err := mapRing(fd, off, size, 8, pgoff)
	if err != nil {
		return nil, err
	}
	return &addrRing{ring: r, addrs: unsafe.Slice((*uint64)(unsafe.Pointer(&r.mem[off.Desc])), size)}, nil
}

func mapDescRing(fd int, off unix.XDPRingOffset, size int, pgoff int64) (*descRing, error) {
	r, err := mapRing(fd, off, size, int(unsafe.Sizeof(unix.XDPDesc{})), pgoff)
	if err != nil {
		return nil, err
	}
	return &descRing{ring: r, descs: unsafe.Slice((*unix.XDPDesc)(unsafe.Pointer(&r.mem[off.Desc])), size)}, nil
}

// free returns how many entries the producer may write, at most want;
// it reloads the consumer word only if the cached one leaves fewer.
func (r *ring) free(want uint32) uint32 {
	n := r.size - (r.cachedProd - r.cachedCons)
	if n >= want {
		return want
	}
	r.cachedCons = atomic.LoadUint32(r.consumer)
	return min(want, r.size-(r.cachedProd-r.cachedCons))
}

// submit publishes n entries written at cachedProd.
func (r *ring) submit(n uint32) {
	r.cachedProd += n
	atomic.StoreUint32(r.producer, r.cachedProd)
}

// avail returns how many entries the consumer may read, at most want; it
// reloads the producer word only if the cached one shows fewer.
func (r *ring) avail(want uint32) uint32 {
	n := r.cachedProd - r.cachedCons
	if n >= want {
		return want
	}
	r.cachedProd = atomic.LoadUint32(r.producer)
	return min(want, r.cachedProd-r.cachedCons)
}

// release hands n read entries at cachedCons back to the producer.
func (r *ring) release(n uint32) {
	r.cachedCons += n
	atomic.StoreUint32(r.consumer, r.cachedCons)
}

// pending is what the producer has published and the consumer not yet
// taken, read from both shared words (for accounting, not the data path).
func (r *ring) pending() uint32 {
	return atomic.LoadUint32(r.producer) - atomic.LoadUint32(r.consumer)
}

// needWakeup reports XDP_RING_NEED_WAKEUP: the kernel will not look at
// the ring again until a syscall (sendto for TX, recvfrom or poll for the
// fill ring) tells it to.
func (r *ring) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}
