package xsk

import "golang.org/x/sys/unix"

// Zero-copy forwarding.
//
// A frame received on one socket of a Umem may leave through any socket
// of the same Umem, which with XDP_SHARED_UMEM may sit on another
// interface. Send takes frames as byte slices, the form the router's
// stack forwards them in, and tells a view of a received frame from
// other memory by its address (Umem.Locate): such a frame is lent to the
// TX ring, its descriptor naming the bytes where they are, so the frame
// leaves from the buffer it arrived in, rewritten in place, with no
// copy. Anything else is copied into a free frame, as a frame from
// another Umem, an AF_PACKET ring or the stack's own buffers must be.
//
// A lent frame has two owners until both let go: the caller's receive
// batch, which may still read it (a capture, a second writer copying
// it), and the TX ring. Whichever is done last puts it on the free list:
// Release hands a lent frame on to the ring (Lent → TX), a completion
// hands it back to the batch (Lent → Sent → Release frees it). A frame
// is lent once: a second Send of it, on this socket or another, copies
// it, so only one TX ring ever owns it. Closing the socket whose TX ring
// holds a lent frame gives it back to its holder the same way.

// SendResult says what Send did with the frames it was given: Queued +
// Bad + NoFrame + RingFull is their number.
type SendResult struct {
	// Queued frames went onto the TX ring: Lent of them from the frame
	// they were received in, the rest copied into a free frame.
	Queued, Lent int
	// Bytes is the length of the queued frames.
	Bytes uint64
	// Bad frames were empty, or too long to be copied into a frame
	// (more than FrameSize - DataOffset bytes).
	Bad int
	// NoFrame frames found no free frame to be copied into.
	NoFrame int
	// RingFull frames, the last ones given, found no room on the TX
	// ring.
	RingFull int
}

// sendCopy is a frame Send copies once the Umem lock is dropped: frame
// index i of the call to UMEM address addr.
type sendCopy struct {
	i    int
	addr uint64
}

// Send puts frames on the TX ring, in order, and wakes the kernel to send
// them. A frame that is a view of a Held frame of the Umem (received and
// not yet released, on any socket of it) is lent: sent from where it
// lies, with no copy, and freed once both the kernel has completed it
// and the caller has released it (Umem.Release), in either order. Every
// other frame is copied into a free frame, which the kernel's completion
// frees. Frames that find no room on the ring, no free frame or are bad
// are not sent and are counted in the result; nothing of theirs stays
// behind. Send does not keep frames and does not allocate.
func (s *Socket) Send(frames [][]byte) SendResult {
	var r SendResult
	s.txMu.Lock()
	defer s.txMu.Unlock()
	s.completeLocked()
	u := s.umem
	maxCopy := int(u.frameSize) - u.DataOffset()
	dataOff := u.headroom + unix.XDP_PACKET_HEADROOM
	queued := uint32(0)
	i := 0
	kicked := false
	for i < len(frames) {
		room := s.tx.free(uint32(min(len(frames)-i, len(s.copies))))
		if room == 0 {
			if kicked {
				break
			}
			// The kernel may not have been told of what fills the ring
			// (a wakeup that failed while the link was down): tell it,
			// recycle what it sent, and look again once.
			s.kickLocked()
			s.completeLocked()
			kicked = true
			continue
		}
		prod := s.tx.cachedProd
		q := uint32(0)
		ncopy := 0
		u.mu.Lock()
		for ; i < len(frames) && q < room; i++ {
			f := frames[i]
			d := unix.XDPDesc{Len: uint32(len(f))}
			if addr, ok := u.Locate(f); ok && u.state[addr>>u.shift] == stateHeld {
				u.moveLocked(addr, stateHeld, stateLent, s.id)
				d.Addr = addr
				r.Lent++
			} else if len(f) == 0 || len(f) > maxCopy {
				r.Bad++
				continue
			} else {
				base, ok := u.popFreeLocked(stateTX, s.id)
				if !ok {
					r.NoFrame++
					continue
				}
				d.Addr = base + dataOff
				s.copies[ncopy] = sendCopy{i: i, addr: d.Addr}
				ncopy++
			}
			s.tx.descs[(prod+q)&s.tx.mask] = d
			r.Bytes += uint64(len(f))
			q++
		}
		u.mu.Unlock()
		// The copies' frames are this socket's (TX) and the kernel sees
		// none of them before submit: no lock needed.
		for _, c := range s.copies[:ncopy] {
			copy(u.mem[c.addr:c.addr+uint64(maxCopy)], frames[c.i])
		}
		if q > 0 {
			s.tx.submit(q)
			queued += q
		}
	}
	r.Queued = int(queued)
	r.RingFull = len(frames) - i
	if queued > 0 {
		s.txPackets.Add(uint64(queued))
		s.txBytes.Add(r.Bytes)
		s.txLent.Add(uint64(r.Lent))
	}
	s.kickLocked()
	return r
}

// popFreeLocked takes one frame off the free list into place to on
// behalf of socket id and returns its base address.
func (u *Umem) popFreeLocked(to uint8, id uint16) (uint64, bool) {
	top := len(u.free)
	if top == 0 {
		return 0, false
	}
	a := u.free[top-1]
	u.free = u.free[:top-1]
	idx := a >> u.shift
	u.state[idx] = to
	u.holder[idx] = id
	u.count[stateFree]--
	u.count[to]++
	return a, true
}
