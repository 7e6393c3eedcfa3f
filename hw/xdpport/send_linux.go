package xdpport

import (
	"github.com/gvrouter/gvrouter/hw"
)

// WriteFrames implements hw.FrameWriter. A frame that is a view of a
// frame received on the port's UMEM and still held by its receive batch
// (on this port or, with a shared UMEM, on any port of the Pool) goes on
// a TX ring from where it lies, with no copy (xsk.Socket.Send); the
// receive loop then leaves it to the TX ring, whose completion frees it.
// Any other frame (from netstack's buffers, an AF_PACKET ring, another
// UMEM, or a frame another writer already took) is copied into a free
// UMEM frame. One ring submission and at most one wakeup per BatchSize
// frames. A frame that cannot go is dropped and counted: xdp_umem_empty
// when no UMEM frame is free for its copy, tx_nobufs when the TX ring is
// full, xdp_invalid when it is shorter than an Ethernet header or longer
// than a UMEM frame holds. It returns how many frames went onto a TX
// ring, and an error only when the port is closed. It does not allocate.
func (p *Port) WriteFrames(frames [][]byte) (int, error) {
	slot := &p.tx[int(p.txRR.Add(1))%len(p.tx)]
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if p.closed.Load() {
		return 0, hw.ErrClosed
	}
	sent, lent := 0, 0
	var bytes, short, bad, noFrame, ringFull uint64
	for len(frames) > 0 {
		chunk := frames[:min(len(frames), BatchSize)]
		frames = frames[len(chunk):]
		ok := slot.frames[:0]
		for _, f := range chunk {
			if len(f) < hw.EthernetHeaderLen {
				short++
				continue
			}
			ok = append(ok, f)
		}
		r := slot.sock.Send(ok)
		clear(ok) // no view of a frame outlives the call
		sent += r.Queued
		lent += r.Lent
		bytes += r.Bytes
		bad += uint64(r.Bad)
		noFrame += uint64(r.NoFrame)
		ringFull += uint64(r.RingFull)
	}
	if short+bad != 0 {
		p.txInvalid.Add(short + bad)
	}
	if noFrame != 0 {
		p.noUmem.Add(noFrame)
	}
	if ringFull != 0 {
		p.txRingFull.Add(ringFull)
	}
	p.txPackets.Add(uint64(sent))
	p.txBytes.Add(bytes)
	if lent != 0 {
		p.txZeroCopy.Add(uint64(lent))
	}
	return sent, nil
}

// ExtendFrame returns frame grown by head bytes at its front, in the
// UMEM frame it lies in, if it is a view of a frame of the port's UMEM
// with that much room before it (xsk.Umem.Extend); nil otherwise. The
// stack pushes a VLAN tag or a SecTAG there, in place, and hands the
// result to WriteFrames, which sends it without a copy while the receive
// batch holds the frame. It is safe for concurrent use.
func (p *Port) ExtendFrame(frame []byte, head int) []byte {
	return p.umem.Extend(frame, head)
}
