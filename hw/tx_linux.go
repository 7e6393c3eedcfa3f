package hw

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// txBatch is the sendmmsg argument for one batch. Each message points at
// its own iovec once, when the batch is made.
type txBatch struct {
	msgs [TxBatchSize]unix.Mmsghdr
	iovs [TxBatchSize]unix.Iovec
}

var txBatchPool = sync.Pool{New: func() any {
	b := new(txBatch)
	for i := range b.msgs {
		b.msgs[i].Hdr.Iov = &b.iovs[i]
		b.msgs[i].Hdr.SetIovlen(1)
	}
	return b
}}

// WriteFrames implements FrameWriter: it sends frames with sendmmsg, up to
// TxBatchSize per call, or with TxRing copies them into the TX ring and
// sends it (txring_linux.go). It does not keep the slices, so frames may
// point into a receive ring. A frame the kernel refuses is dropped and
// counted ("tx_nobufs" or "tx_error"; on the ring also "tx_ring_full"
// and "tx_oversize"); WriteFrames returns the number sent and an error
// only when the port cannot send at all (closed, or the interface went
// away or down).
func (p *Port) WriteFrames(frames [][]byte) (int, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.stats.drops[dropTxError].Add(uint64(len(frames)))
		return 0, ErrClosed
	}
	if p.tx != nil {
		return p.tx.write(p, frames)
	}
	b := txBatchPool.Get().(*txBatch)
	defer func() {
		for i := range b.iovs {
			b.iovs[i].Base = nil
		}
		txBatchPool.Put(b)
	}()

	sent, sentBytes := 0, uint64(0)
	var nobufs, txerr uint64
	var fatal error
	for len(frames) > 0 && fatal == nil {
		n := min(len(frames), TxBatchSize)
		for i, f := range frames[:n] {
			if len(f) == 0 {
				b.iovs[i].Base = nil
			} else {
				b.iovs[i].Base = &f[0]
			}
			b.iovs[i].SetLen(len(f))
		}
		// A raw syscall, never blocking (MSG_DONTWAIT: a full socket
		// buffer is a full NIC ring, counted as tx_nobufs): sendmmsg on a
		// packet socket is CPU work, not a wait, and on a veth it also
		// runs the peer's receive in our softirq, often for more than
		// 20 µs. Announced to the Go scheduler (Syscall6), such a call
		// lets sysmon take the P away and start another thread, and the
		// sender must get a P back when it returns: under a SYN flood
		// that churn (sysmon polling every 20 µs, futex wakeups) took
		// ~14 % of the router's CPU.
		r, _, errno := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(p.txFD), uintptr(unsafe.Pointer(&b.msgs[0])), uintptr(n), unix.MSG_DONTWAIT, 0, 0)
		if errno == 0 {
			k := int(r)
			for _, f := range frames[:k] {
				sentBytes += uint64(len(f))
			}
			sent += k
			frames = frames[k:]
			continue
		}
		// The first frame failed: drop it and go on with the rest.
		switch errno {
		case unix.EINTR:
			continue
		case unix.ENOBUFS, unix.EAGAIN:
			nobufs++
		case unix.ENETDOWN, unix.ENXIO, unix.ENODEV, unix.EBADF:
			txerr += uint64(len(frames))
			fatal = fmt.Errorf("hw: send on %s: %w", p.name, errno)
			continue
		default:
			txerr++
		}
		frames = frames[1:]
	}
	p.stats.txPackets.Add(uint64(sent))
	p.stats.txBytes.Add(sentBytes)
	if nobufs != 0 {
		p.stats.drops[dropTxNoBufs].Add(nobufs)
	}
	if txerr != 0 {
		p.stats.drops[dropTxError].Add(txerr)
	}
	return sent, fatal
}
