package hw

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// txBatch is the sendmmsg argument for one batch. Each message points at
// its own iovecs once, when the batch is made: one (the frame), or on a
// port with vnet headers two (its virtio-net header, then the frame).
type txBatch struct {
	msgs [TxBatchSize]unix.Mmsghdr
	iovs [2 * TxBatchSize]unix.Iovec
	// vnet holds the headers of the batch's superframes and frames with
	// a partial checksum; plain frames point at vnetPlain.
	vnet [TxBatchSize][VnetHdrLen]byte
}

// vnetPlain is the virtio-net header of a frame of wire size with a
// complete checksum: all zero. hdr_len 0 lets the kernel choose the
// skb's linear part (packet_alloc_skb: all of it below a page).
var vnetPlain [VnetHdrLen]byte

func newTxBatchPool(vnet bool) *sync.Pool {
	return &sync.Pool{New: func() any {
		b := new(txBatch)
		for i := range b.msgs {
			if vnet {
				b.msgs[i].Hdr.Iov = &b.iovs[2*i]
				b.msgs[i].Hdr.SetIovlen(2)
				b.iovs[2*i].SetLen(VnetHdrLen)
			} else {
				b.msgs[i].Hdr.Iov = &b.iovs[2*i+1]
				b.msgs[i].Hdr.SetIovlen(1)
			}
		}
		return b
	}}
}

var (
	txBatchPool     = newTxBatchPool(false)
	txBatchVnetPool = newTxBatchPool(true)
)

// WriteFrames implements FrameWriter: it sends frames with sendmmsg, up to
// TxBatchSize per call, or with TxRing copies them into the TX ring and
// sends it (txring_linux.go). It does not keep the slices, so frames may
// point into a receive ring. A frame the kernel refuses is dropped and
// counted ("tx_nobufs" or "tx_error"; on the ring also "tx_ring_full"
// and "tx_oversize"); WriteFrames returns the number sent and an error
// only when the port cannot send at all (closed, or the interface went
// away or down).
func (p *Port) WriteFrames(frames [][]byte) (int, error) {
	return p.WriteFramesGSO(frames, nil)
}

var _ GSOWriter = (*Port)(nil)

// GSOMaxSize implements GSOWriter: MaxGSOFrameLen on a port with vnet
// headers that sends with sendmmsg, else 0 (TX ring slots hold one
// MTU-sized frame).
func (p *Port) GSOMaxSize() int {
	if p.vnet && p.txMode == TxSendmmsg {
		return MaxGSOFrameLen
	}
	return 0
}

// WriteFramesGSO implements GSOWriter. On a port with vnet headers each
// frame goes with its header, built from gso[i] (a nil gso sends plain
// frames); the kernel cuts a superframe into segments only where the
// device cannot take it whole (a veth hands it on as it is). A
// superframe, or a frame with a partial checksum, that the port cannot
// send is a "tx_error" drop.
func (p *Port) WriteFramesGSO(frames [][]byte, gso []GSO) (int, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.stats.drops[dropTxError].Add(uint64(len(frames)))
		return 0, ErrClosed
	}
	if gso != nil && (len(gso) != len(frames) || p.GSOMaxSize() == 0) {
		var refused uint64
		frames, refused = plainOnly(frames, gso)
		gso = nil
		if refused != 0 {
			p.stats.drops[dropTxError].Add(refused)
		}
	}
	if p.tx != nil {
		return p.tx.write(p, frames)
	}
	pool := txBatchPool
	if p.vnet {
		pool = txBatchVnetPool
	}
	b := pool.Get().(*txBatch)
	defer func() {
		for i := range b.iovs {
			b.iovs[i].Base = nil
		}
		pool.Put(b)
	}()

	sent, sentBytes := 0, uint64(0)
	var nobufs, txerr uint64
	var fatal error
	for len(frames) > 0 && fatal == nil {
		n := min(len(frames), TxBatchSize)
		for i, f := range frames[:n] {
			iov := &b.iovs[2*i+1]
			if len(f) == 0 {
				iov.Base = nil
			} else {
				iov.Base = &f[0]
			}
			iov.SetLen(len(f))
			if !p.vnet {
				continue
			}
			if gso == nil || gso[i] == (GSO{}) {
				b.iovs[2*i].Base = &vnetPlain[0]
			} else {
				VnetHdr(b.vnet[i][:]).Encode(&gso[i])
				b.iovs[2*i].Base = &b.vnet[i][0]
			}
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
			if gso != nil {
				gso = gso[k:]
			}
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
		if gso != nil {
			gso = gso[1:]
		}
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

// plainOnly returns frames without the superframes and partial-checksum
// frames of gso, which a port that cannot send them drops, and how many
// it dropped; a gso of the wrong length drops everything. It allocates
// only when it drops something, which the stack never asks of it (it
// checks GSOMaxSize first).
func plainOnly(frames [][]byte, gso []GSO) ([][]byte, uint64) {
	if len(gso) != len(frames) {
		return nil, uint64(len(frames))
	}
	var refused uint64
	for i := range gso {
		if gso[i].Type != GSONone || gso[i].NeedsCsum {
			refused++
		}
	}
	if refused == 0 {
		return frames, 0
	}
	out := make([][]byte, 0, len(frames)-int(refused))
	for i, f := range frames {
		if gso[i].Type == GSONone && !gso[i].NeedsCsum {
			out = append(out, f)
		}
	}
	return out, refused
}
