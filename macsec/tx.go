package macsec

// Transmit path. Each Protect call takes its frames, in chunks of up to
// maxBatchFrames, through these steps (compare wireguard-go
// device/send.go, which keeps order the same way but queues every batch
// to separate goroutines):
//
//  1. Fill (any goroutine, shared closeMu): a pooled container gets a slot
//     per frame pointing at the caller's frame, with storage for the
//     protected frame (ProtectInPlace: the caller's buffer). Runts and
//     frames that would exceed the lower MTU are dropped and counted.
//     Only slice headers are read: the frames themselves are first
//     touched in step 3, spread over the cores.
//  2. Number, under txMu: the encoding SA, consecutive PNs (the SA is
//     stored per slot, so a key rollover while frames are in flight is
//     safe), and a ticket of txTurn, so that ticket order is PN order.
//     PNs are never assigned concurrently.
//  3. Seal (run): the caller and up to Workers-1 helper goroutines
//     claim runs of slots, write their MAC addresses and SecTAGs and
//     seal them (GCM: AAD = DA..SecTAG and the
//     Secure Data encrypted from the caller's frame into the storage, or,
//     integrity only, the frame copied and AAD = all of it). The caller
//     starts at once and helpers join as they wake.
//  4. Deliver: when every earlier ticket was served, the caller counts and
//     hands the chunk to Config.TX, so chunks of concurrent callers leave
//     in PN order while their crypto overlaps.
//
// Protect returns once its frames were handed on, so the caller's frames
// need only live for the call. With one worker (Config.Workers = 1)
// there are no helpers and no containers: the caller fills, numbers and
// seals frame by frame under txInlineMu (protectInline).

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
	if s.inline {
		s.protectInline(frames, inPlace)
		return
	}
	var f inflight
	f.help, f.spin = s.help.worth(octets(frames))
	var start int64 // traceOn
	if traceOn && f.help {
		start = nanotime()
		defer traceCall(start)
	}
	for len(frames) > 0 {
		chunk := frames[:min(len(frames), maxBatchFrames)]
		frames = frames[len(chunk):]
		c := getContainer()
		s.fillTX(c, chunk, inPlace)
		ticket, ok := s.numberTX(c)
		if !ok {
			c.release()
			continue
		}
		if traceOn && start != 0 {
			timeline.fillNs.Add(nanotime() - start)
			start = 0
		}
		s.post(&f, c, ticket)
		if f.n == maxInflight {
			s.run(&f)
		}
	}
	if f.n > 0 {
		s.run(&f)
	}
}

// protectInline is protect with one worker: the caller takes each frame
// through every stage at once (fill, number, seal) while its header is in
// cache and delivers each chunk of up to s.batch frames itself. It holds
// txInlineMu from numbering to delivery, so that concurrent callers still
// deliver in PN order, and txMu while it numbers and seals a chunk. No
// goroutine handoff, channel or pool is involved (BenchmarkRatioVsBare).
func (s *SecY) protectInline(frames [][]byte, inPlace bool) {
	s.txInlineMu.Lock()
	defer s.txInlineMu.Unlock()
	if s.cfg.workerHook != nil {
		s.cfg.workerHook()
	}
	c := s.txInline
	w := &s.txWorker
	var runt, tooLong, noSA uint64
	for len(frames) > 0 {
		chunk := frames[:min(len(frames), maxBatchFrames)]
		frames = frames[len(chunk):]
		s.txMu.Lock()
		sa := s.txSAs[s.encodingSA]
		stopped := false
		for i, fr := range chunk {
			if i+1 < len(chunk) {
				prefetchFrame(chunk[i+1])
			}
			sl := &c.s[c.n]
			if !s.fillTXSlot(sl, fr, inPlace, &runt, &tooLong) {
				continue
			}
			if sa != nil && !stopped {
				if pn, ok := s.nextPNLocked(sa); ok {
					numberTXSlot(sl, sa, pn)
					w.sealSlot(sl)
					c.n++
					continue
				}
				stopped = true // as protectChunk: the rest of the chunk is dropped
			}
			noSA++
			if sa != nil && sa.exhausted {
				sa.stats.OutPktsPNExhausted.Add(1)
			}
		}
		if sa != nil {
			sa.stats.NextPN.Store(sa.nextPN)
		}
		s.txMu.Unlock()
		if c.n < len(c.s) { // a dropped frame's slot may point at it
			c.s[c.n].src, c.s[c.n].buf = nil, nil
		}
		if c.n == 0 {
			continue
		}
		s.workerCnt[len(s.workerCnt)-1].v.Add(uint64(c.n))
		s.deliverTX(c)
		c.reset()
	}
	addNZ(&s.stats.OutPktsRunt, runt)
	addNZ(&s.stats.OutPktsTooLong, tooLong)
	addNZ(&s.stats.OutPktsNoActiveSA, noSA)
}

// fillTX puts frames into the empty container c (see fillTXSlot).
func (s *SecY) fillTX(c *container, frames [][]byte, inPlace bool) {
	c.tx = true
	var runt, tooLong uint64
	for _, f := range frames {
		if s.fillTXSlot(&c.s[c.n], f, inPlace, &runt, &tooLong) {
			c.n++
		}
	}
	addNZ(&s.stats.OutPktsRunt, runt)
	addNZ(&s.stats.OutPktsTooLong, tooLong)
}

// fillTXSlot sets up sl for frame f: where the protected frame is built
// and where its parts come from. It reads only f's slice header, not the
// frame: the caller runs it for every frame, serially, and a frame's
// first touch is a cache miss best taken by whoever seals it
// (sealSlot). It reports false, counting the frame in
// runt or tooLong, for runts and frames that would exceed the lower MTU.
func (s *SecY) fillTXSlot(sl *slot, f []byte, inPlace bool, runt, tooLong *uint64) bool {
	tl := s.tagLen
	off := 0
	if inPlace {
		off = Headroom
	}
	if len(f) < off+addrsLen+2 || (inPlace && cap(f)-len(f) < Tailroom) {
		*runt++
		return false
	}
	dataLen := len(f) - off - addrsLen
	total := addrsLen + tl + dataLen + ICVLen
	if total > s.maxFrame {
		*tooLong++
		return false
	}
	if inPlace {
		sl.buf = f[Headroom-tl : len(f)+Tailroom]
		sl.src = nil
	} else {
		sl.buf = sl.grow(total)
		sl.src = f
	}
	sl.dataOff = addrsLen + tl
	sl.dataLen = dataLen
	sl.sci = s.cfg.SCI
	sl.tci = s.tci
	sl.enc = s.cfg.Encrypt
	return true
}

// numberTX numbers the filled container c (numberTXLocked) and takes its
// delivery ticket under txMu, so that ticket order is PN order. It
// reports false if no frame of c is left to send.
func (s *SecY) numberTX(c *container) (uint64, bool) {
	if c.n == 0 {
		return 0, false
	}
	s.txMu.Lock()
	defer s.txMu.Unlock()
	s.numberTXLocked(c)
	if c.n == 0 {
		return 0, false
	}
	return s.txTurn.take(), true
}

// numberTXLocked gives the frames of c consecutive PNs of the encoding SA
// and writes their SecTAGs; frames left without a PN (no SA, PN
// exhaustion) are dropped from the end of c and counted. txMu is held.
func (s *SecY) numberTXLocked(c *container) {
	sa := s.txSAs[s.encodingSA]
	n := 0
	if sa != nil {
		for ; n < c.n; n++ {
			pn, ok := s.nextPNLocked(sa)
			if !ok {
				break
			}
			numberTXSlot(&c.s[n], sa, pn)
		}
		sa.stats.NextPN.Store(sa.nextPN)
		if n < c.n && sa.exhausted {
			sa.stats.OutPktsPNExhausted.Add(uint64(c.n - n))
		}
	}
	if n < c.n {
		s.stats.OutPktsNoActiveSA.Add(uint64(c.n - n))
		for i := n; i < c.n; i++ {
			c.s[i].src, c.s[i].buf = nil, nil
		}
		c.n = n
	}
}

// numberTXSlot gives sl PN pn of sa. The SecTAG is written by sealSlot.
func numberTXSlot(sl *slot, sa *txSA, pn uint64) {
	sl.txsa = sa
	sl.pn = pn
}

// deliverTX counts the sealed frames of c and hands them to Config.TX.
func (s *SecY) deliverTX(c *container) {
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

// octets returns the total length of frames.
func octets(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		n += len(f)
	}
	return n
}
