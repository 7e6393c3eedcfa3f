package macsec

// Transmit pipeline. Stages and locking (compare wireguard-go
// device/send.go):
//
//  1. Protect (any goroutine, shared closeMu) puts up to s.batch
//     frames into a pooled container: each slot points at the caller's
//     frame and gets pooled storage for the protected frame, in which
//     Protect writes only the MAC addresses. Runts and frames that would
//     exceed the lower MTU are dropped.
//  2. Under txMu it takes the encoding SA, assigns consecutive PNs (one
//     SA per frame, stored in the slot, so a key rollover while frames are
//     in flight is safe), writes each SecTAG, locks the container and
//     queues it on txOrdered, all before releasing txMu: the order of
//     txOrdered is PN order. PNs are never assigned concurrently. It then
//     queues the container on the shared work channel. Both sends block
//     when full: that is the back-pressure.
//  3. A worker (routineWorker) seals every frame (GCM: AAD = DA..SecTAG
//     and the Secure Data encrypted from the caller's frame into the
//     storage, or, integrity only, the frame copied and AAD = all of it)
//     and unlocks the container. With one worker the caller does this
//     itself, right after queueing (dispatch).
//  4. routineTXSequential takes containers from txOrdered, locks each (so
//     it waits for the oldest), counts, hands the frames to Config.TX in
//     order and signals the container's done channel.
//  5. Protect waits for the done signal of each of its containers (so the
//     caller's frames need only live for the call) and returns them to
//     the pool. It keeps at most maxPending containers in flight.

// Protect protects frames (each starting at the destination MAC address,
// no FCS) and hands them to Config.TX in the same order, from the
// transmit goroutine. It returns once all of them were handed to
// Config.TX (or dropped), so it does not keep the frames and never
// modifies them; Config.TX must therefore not wait for this call. With
// Protect off it calls Config.TX directly with the frames unchanged.
// Frames that cannot be sent are dropped and counted; after Close all
// frames are dropped.
func (s *SecY) Protect(frames [][]byte) {
	if !s.cfg.Protect {
		s.stats.OutPktsUntagged.Add(uint64(len(frames)))
		s.cfg.TX(frames)
		return
	}
	if !s.enter() {
		return
	}
	defer s.closeMu.RUnlock()
	s.protect(frames, false)
}

// Headroom and Tailroom are the room ProtectInPlace needs around each
// frame: the SecTAG (at most 16 octets) goes in front, the ICV behind.
const (
	Headroom = SecTAGSCILen
	Tailroom = ICVLen
)

// ProtectInPlace is Protect without copies, for callers that build frames
// in their own buffers: each element of bufs holds Headroom octets of
// scratch followed by the frame (destination MAC address first, no FCS),
// and its capacity leaves Tailroom octets after it. The protected frame
// is built in place (the MAC addresses move into the headroom, the SecTAG
// follows, the Secure Data is encrypted in place, the ICV goes into the
// tailroom), so the frames handed to Config.TX are views of bufs. Like
// Protect it returns once every frame was handed to Config.TX or dropped;
// the buffers are then the caller's again. With Protect off it replaces
// each element of bufs by the frame without headroom and calls Config.TX
// with them. Elements too short or without tailroom are dropped and
// counted as OutPktsRunt.
func (s *SecY) ProtectInPlace(bufs [][]byte) {
	if !s.cfg.Protect {
		k := 0
		for _, b := range bufs {
			if len(b) >= Headroom {
				bufs[k] = b[Headroom:]
				k++
			}
		}
		s.stats.OutPktsUntagged.Add(uint64(k))
		s.stats.OutPktsRunt.Add(uint64(len(bufs) - k))
		s.cfg.TX(bufs[:k])
		return
	}
	if !s.enter() {
		return
	}
	defer s.closeMu.RUnlock()
	s.protect(bufs, true)
}

func (s *SecY) protect(frames [][]byte, inPlace bool) {
	var p pending
	for len(frames) > 0 {
		k := min(len(frames), s.batch)
		if c := s.protectChunk(frames[:k], inPlace, &p); c != nil {
			p.add(s, c)
		}
		frames = frames[k:]
	}
	p.wait(s)
}

// protectChunk queues up to s.batch frames and returns their
// container, or nil if none was queued.
func (s *SecY) protectChunk(frames [][]byte, inPlace bool, p *pending) *container {
	c := getContainer()
	c.tx = true
	tl := s.tagLen
	var runt, tooLong uint64
	for _, f := range frames {
		off := 0
		if inPlace {
			off = Headroom
		}
		if len(f) < off+addrsLen+2 || (inPlace && cap(f)-len(f) < Tailroom) {
			runt++
			continue
		}
		dataLen := len(f) - off - addrsLen
		total := addrsLen + tl + dataLen + ICVLen
		if total > s.maxFrame {
			tooLong++
			continue
		}
		sl := &c.s[c.n]
		if inPlace {
			sl.buf = f[Headroom-tl : len(f)+Tailroom]
			copy(sl.buf[:addrsLen], f[Headroom:Headroom+addrsLen])
			sl.src = nil
		} else {
			sl.buf = sl.grow(total)
			copy(sl.buf[:addrsLen], f[:addrsLen])
			sl.src = f
		}
		sl.dataOff = addrsLen + tl
		sl.dataLen = dataLen
		sl.sci = s.cfg.SCI
		sl.enc = s.cfg.Encrypt
		c.n++
	}
	if runt != 0 {
		s.stats.OutPktsRunt.Add(runt)
	}
	if tooLong != 0 {
		s.stats.OutPktsTooLong.Add(tooLong)
	}
	if c.n == 0 {
		putContainer(c)
		return nil
	}

	s.txMu.Lock()
	sa := s.txSAs[s.encodingSA]
	n := 0
	if sa != nil {
		f := SecTAGFields{TCI: s.tci, AN: sa.an, SCI: s.cfg.SCI}
		for ; n < c.n; n++ {
			pn, ok := s.nextPNLocked(sa)
			if !ok {
				break
			}
			sl := &c.s[n]
			sl.txsa = sa
			sl.pn = pn
			f.PN = uint32(pn)
			f.SL = 0
			if sl.dataLen < ShortLenLimit {
				f.SL = uint8(sl.dataLen)
			}
			SecTAG(sl.buf[addrsLen:]).Encode(&f)
		}
		sa.stats.NextPN.Store(sa.nextPN)
		if n < c.n && sa.exhausted {
			sa.stats.OutPktsPNExhausted.Add(uint64(c.n - n))
		}
	}
	if n < c.n {
		s.stats.OutPktsNoActiveSA.Add(uint64(c.n - n))
		c.n = n
	}
	if n == 0 {
		s.txMu.Unlock()
		putContainer(c)
		return nil
	}
	c.mu.Lock()
	s.txOrdered <- c
	s.txMu.Unlock()
	s.dispatch(c, p)
	return c
}

// routineTXSequential delivers sealed containers in PN order. Owner: SecY;
// stop: txOrdered closed by Close.
func (s *SecY) routineTXSequential() {
	defer s.wg.Done()
	s.log.Debug("routineTXSequential started")
	defer s.log.Debug("routineTXSequential stopped")
	for c := range s.txOrdered {
		c.mu.Lock()
		var octets uint64
		for i := range c.n {
			sl := &c.s[i]
			c.out[i] = sl.buf[:sl.dataOff+sl.dataLen+ICVLen]
			octets += uint64(sl.dataLen)
		}
		// All frames of a container share the SA's mode; count once.
		n := uint64(c.n)
		if c.s[0].enc {
			s.txStats.OutPktsEncrypted.Add(n)
			s.txStats.OutOctetsEncrypted.Add(octets)
			s.stats.OutOctetsEncrypted.Add(octets)
		} else {
			s.txStats.OutPktsProtected.Add(n)
			s.txStats.OutOctetsProtected.Add(octets)
			s.stats.OutOctetsProtected.Add(octets)
		}
		s.countTXSAs(c)
		s.cfg.TX(c.out[:c.n])
		c.mu.Unlock()
		c.done <- struct{}{}
	}
}

// countTXSAs adds per-SA packet counts; frames of one container have one
// SA (they were numbered under one txMu section).
func (s *SecY) countTXSAs(c *container) {
	sa := c.s[0].txsa
	if c.s[0].enc {
		sa.stats.OutPktsEncrypted.Add(uint64(c.n))
	} else {
		sa.stats.OutPktsProtected.Add(uint64(c.n))
	}
}
