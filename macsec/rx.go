package macsec

// Receive path. Each Verify call takes its frames, in chunks of up to
// maxBatchFrames, through these steps (compare wireguard-go
// device/receive.go):
//
//  1. Classify (any goroutine, shared closeMu): parse each frame's SecTAG
//     (802.1AE 9.12), look up the receive SC by SCI in the immutable SC
//     table and the SA by AN, recover the 64-bit PN (XPN) from the SA's
//     published nextPN and pre-check replay against its lowestPN. Bad
//     frames are dropped and counted; frames that need no crypto
//     (untagged, or no SA, when validateFrames allows) keep their place in
//     the chunk, stripped in place. The chunk takes a ticket of rxTurn.
//  2. Open (run): the caller and up to Workers-1 helper goroutines
//     claim runs of slots and verify/decrypt them in place, storing each
//     verdict in the container's ok array and moving each frame's MAC
//     addresses up against its Secure Data.
//  3. Judge and deliver: when every earlier ticket was served, the caller
//     runs the replay check and updates nextPN/lowestPN in arrival order
//     (only after ICV success, and only here, so in order), counts, cuts
//     SecTAG and ICV off (the worker that opened a frame already moved its
//     MAC addresses up against the Secure Data) and hands the accepted
//     frames to Config.RX.
//
// With one worker (Config.Workers = 1) the caller takes each frame
// through all steps at once under rxInlineMu (verifyInline).
//
// An rxSA's nextPN is only touched by the holder of rxTurn (rxInlineMu);
// classification only reads the atomically published copies (lowestPN,
// stats.NextPN).

// rxFront is Verify's first stage for one call: the SC table, a cache of
// the last lookup, the parse scratch and the frames it drops or passes
// without crypto, counted once per call.
type rxFront struct {
	tbl     map[SCI]*rxSC
	strict  bool
	lastSC  *rxSC
	lastSCI SCI
	p       Parsed

	noTag, untagged, badTag, noSA, noSAErr uint64
}

// What classify found a frame needs.
const (
	rxDrop   = iota // dropped and counted
	rxDirect        // delivered without crypto
	rxCrypto        // verified by the SA's key
)

// classify parses frame f (into fr.p), looks up its SC and SA and
// pre-checks replay against the SA's published lowestPN. It returns
// rxCrypto with the SC, SA and recovered PN; rxDirect with the frame to
// deliver (stripped if it has a SecTAG); or rxDrop, having counted why.
func (s *SecY) classify(fr *rxFront, f []byte) (kind int, out []byte, sc *rxSC, sa *rxSA, pn uint64) {
	p := &fr.p
	isMACsec, ok := parseFrame(f, s.xpn, p)
	if !isMACsec {
		if fr.strict {
			fr.noTag++
			return rxDrop, nil, nil, nil, 0
		}
		fr.untagged++
		return rxDirect, f, nil, nil, 0
	}
	if !ok {
		fr.badTag++
		return rxDrop, nil, nil, nil, 0
	}
	changed := p.Tag.TCI()&TCIChanged != 0
	sc = fr.lastSC
	if sc == nil || p.SCI != fr.lastSCI {
		sc = fr.tbl[p.SCI]
		fr.lastSC, fr.lastSCI = sc, p.SCI
	}
	if sc == nil {
		if fr.strict || changed {
			fr.noSAErr++
			return rxDrop, nil, nil, nil, 0
		}
		fr.noSA++
		return rxDirect, strip(f, p), nil, nil, 0
	}
	sa = sc.sas[p.Tag.AN()].Load()
	if sa == nil || !sa.active.Load() {
		if fr.strict || changed {
			sc.stats.InPktsNoSAError.Add(1)
			if sa != nil {
				sa.stats.InPktsNotUsingSA.Add(1)
			}
			return rxDrop, nil, nil, nil, 0
		}
		sc.stats.InPktsNoSA.Add(1)
		if sa != nil {
			sa.stats.InPktsUnusedSA.Add(1)
		}
		return rxDirect, strip(f, p), nil, nil, 0
	}
	pn = uint64(p.Tag.PN())
	if s.xpn {
		pn = recoverPN(p.Tag.PN(), sa.stats.NextPN.Load())
	}
	if s.cfg.ReplayProtect && pn < sa.lowestPN.Load() {
		sc.stats.InPktsLate.Add(1)
		return rxDrop, nil, nil, nil, 0
	}
	return rxCrypto, nil, sc, sa, pn
}

// fillRX points slot sl at frame f, which classify found needs crypto
// with sa and PN pn.
func (s *SecY) fillRX(sl *slot, f []byte, p *Parsed, sa *rxSA, pn uint64) {
	changed := p.Tag.TCI()&TCIChanged != 0
	sl.buf = f[:p.End]
	sl.rxsa = sa
	sl.sci = p.SCI
	sl.pn = pn
	sl.dataOff = p.DataOff
	sl.dataLen = p.DataLen
	sl.enc = changed
	sl.skip = !changed && s.cfg.Validate == ValidateDisabled
	sl.pass = false
}

// count adds the call's drops and direct deliveries to the SecY counters.
func (fr *rxFront) count(s *SecY) {
	addNZ(&s.stats.InPktsNoTag, fr.noTag)
	addNZ(&s.stats.InPktsUntagged, fr.untagged)
	addNZ(&s.stats.InPktsBadTag, fr.badTag)
	addNZ(&s.stats.InPktsNoSA, fr.noSA)
	addNZ(&s.stats.InPktsNoSAError, fr.noSAErr)
}

// Verify checks received frames (each starting at the destination MAC
// address, no FCS; anything after the ICV is ignored as padding) and hands
// the accepted ones, SecTAG and ICV removed, to Config.RX: the frames of
// each receive SC in the order Verify got them. It decrypts and strips in
// place, so it modifies the frames' bytes and the elements of frames; it
// returns once every frame was delivered or dropped and does not keep
// them (ring memory valid only for the call is fine). The frames must not
// overlap. Config.RX must not wait for this call. Rejected frames are
// dropped and counted.
func (s *SecY) Verify(frames [][]byte) {
	if !s.enter() {
		return
	}
	defer s.closeMu.RUnlock()
	fr := rxFront{tbl: *s.rxSCs.Load(), strict: s.cfg.Validate == ValidateStrict}
	if s.inline {
		s.verifyInline(frames, &fr)
	} else {
		s.verifyChunks(frames, &fr)
	}
	fr.count(s)
}

// classifyAhead is how many frames ahead verifyChunks prefetches headers:
// classifying a frame takes tens of nanoseconds, a miss to memory more
// than a hundred, so one frame ahead would leave most of each miss to
// wait for (the inline path, where each frame's crypto runs between,
// prefetches one ahead).
const classifyAhead = 4

// verifyChunks is Verify with helpers, chunk by chunk (see the steps
// above).
func (s *SecY) verifyChunks(frames [][]byte, fr *rxFront) {
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
		crypto := 0
		for i := range min(classifyAhead, len(chunk)) {
			prefetchFrame(chunk[i])
		}
		for i, f := range chunk {
			if i+classifyAhead < len(chunk) {
				prefetchFrame(chunk[i+classifyAhead])
			}
			kind, out, sc, sa, pn := s.classify(fr, f)
			sl := &c.s[c.n]
			switch kind {
			case rxDrop:
				continue
			case rxDirect:
				sl.buf, sl.pass = out, true
			default:
				s.fillRX(sl, f, &fr.p, sa, pn)
				sl.rxsc = sc
				crypto++
			}
			c.n++
		}
		if c.n == 0 {
			c.release()
			continue
		}
		ticket := s.rxTurn.take()
		if crypto == 0 {
			c.noCrypto()
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

// verifyInline is Verify with one worker: under rxInlineMu, so that
// concurrent callers' frames of an SC are judged one call after another,
// it takes each frame through every stage at once (classify, open, replay
// check, strip) while its header is in cache, and delivers all accepted
// frames, in arrival order, in one Config.RX call. No container, channel
// or goroutine is involved (BenchmarkRatioVsBare).
func (s *SecY) verifyInline(frames [][]byte, fr *rxFront) {
	s.rxInlineMu.Lock()
	defer s.rxInlineMu.Unlock()
	if s.cfg.workerHook != nil {
		s.cfg.workerHook()
	}
	var sl slot
	var t rxTally
	var acc saAcc
	var cur *rxSC
	var opened uint64
	k := 0
	for i, f := range frames {
		if i+1 < len(frames) {
			prefetchWhole(frames[i+1], 0)
		}
		kind, out, sc, sa, pn := s.classify(fr, f)
		if kind == rxDrop {
			continue
		}
		if kind == rxCrypto {
			if sc != cur {
				t.flush(s, cur)
				cur = sc
			}
			s.fillRX(&sl, f, &fr.p, sa, pn)
			_, ok := s.rxWorker.openSlot(&sl)
			opened++
			if !acc.accept(&sl, ok, &t) && !s.judge(&sl, ok, &acc, &t) {
				continue
			}
			out = sl.delivered()
		}
		frames[k] = out
		k++
	}
	acc.flush(s.window)
	t.flush(s, cur)
	sl = slot{}
	s.workerCnt[len(s.workerCnt)-1].v.Add(opened)
	if k > 0 {
		s.cfg.RX(frames[:k])
	}
}

// strip removes the SecTAG and ICV of a frame in place (the MAC addresses
// move forward) and returns DA SA SecureData.
func strip(f []byte, p *Parsed) []byte {
	copy(f[p.TagLen:p.TagLen+addrsLen], f[:addrsLen])
	return f[p.TagLen : p.DataOff+p.DataLen]
}

// recoverPN returns the 64-bit PN of an XPN frame whose SecTAG carries
// low, given the SA's nextPN (802.1AEbw): the high half of nextPN, plus one
// if low is below nextPN's low half and in the other half of the 32-bit
// space (the low half wrapped). Like Linux (macsec_decrypt, pn_same_half),
// a PN just below nextPN stays in the same epoch, so a replayed frame is
// counted InPktsLate rather than failing its ICV.
func recoverPN(low uint32, nextPN uint64) uint64 {
	pn := nextPN&^0xffffffff | uint64(low)
	if nl := uint32(nextPN); low < nl && (low^nl)&0x80000000 != 0 {
		pn += 1 << 32
	}
	return pn
}

// deliverRX judges the opened frames of c in arrival order (replay
// check, nextPN), counts, cuts SecTAG and ICV off and hands the accepted
// frames, with those that needed no crypto, to Config.RX. The caller
// holds rxTurn.
func (s *SecY) deliverRX(c *container) {
	var t rxTally
	var acc saAcc
	var cur *rxSC
	k := 0
	for i := range c.n {
		sl := &c.s[i]
		if sl.pass {
			c.out[k] = sl.buf
			k++
			continue
		}
		if sl.rxsc != cur {
			t.flush(s, cur)
			cur = sl.rxsc
		}
		if ok := c.ok[i]; acc.accept(sl, ok, &t) || s.judge(sl, ok, &acc, &t) {
			c.out[k] = sl.delivered()
			k++
		}
	}
	acc.flush(s.window)
	t.flush(s, cur)
	if k > 0 {
		s.cfg.RX(c.out[:k])
	}
}

// rxTally accumulates one receive SC's counters over a run of frames, so
// that atomics are touched once per run, not per frame.
type rxTally struct {
	ok, late, invalid, notValid, unchecked, delayed, octV, octD uint64
}

// flush adds the tally to sc's and the SecY's counters and resets it.
func (t *rxTally) flush(s *SecY, sc *rxSC) {
	if sc == nil {
		return
	}
	st := &sc.stats
	addNZ(&st.InPktsOK, t.ok)
	addNZ(&st.InPktsLate, t.late)
	addNZ(&st.InPktsInvalid, t.invalid)
	addNZ(&st.InPktsNotValid, t.notValid)
	addNZ(&st.InPktsUnchecked, t.unchecked)
	addNZ(&st.InPktsDelayed, t.delayed)
	addNZ(&st.InOctetsValidated, t.octV)
	addNZ(&st.InOctetsDecrypted, t.octD)
	addNZ(&s.stats.InOctetsValidated, t.octV)
	addNZ(&s.stats.InOctetsDecrypted, t.octD)
	*t = rxTally{}
}

// delivered returns the opened frame stripped (DA SA Secure Data):
// openSlot moved the addresses up against the Secure Data.
func (sl *slot) delivered() []byte {
	return sl.buf[sl.dataOff-addrsLen : sl.dataOff+sl.dataLen]
}

// accept is judge's common case, small enough to be inlined into the
// loops that judge every frame: an ICV-verified frame of the SA judged
// just before, at or above its nextPN, is counted and advances nextPN.
// For any other frame it changes nothing and reports false.
func (a *saAcc) accept(sl *slot, ok bool, t *rxTally) bool {
	if sl.rxsa != a.sa || !ok || sl.skip || sl.pn < a.nextPN {
		return false
	}
	a.nextPN, a.advanced = sl.pn+1, true
	a.ok++
	t.ok++
	if sl.enc {
		t.octD += uint64(sl.dataLen)
	} else {
		t.octV += uint64(sl.dataLen)
	}
	return true
}

// judge applies the replay check and validateFrames to an opened slot, in
// order (802.1AE 10.6.5): it advances the SA's nextPN after ICV success,
// counts into t and acc, and reports whether the frame is to be
// delivered (sl.delivered). The caller holds rxTurn (rxInlineMu).
func (s *SecY) judge(sl *slot, ok bool, acc *saAcc, t *rxTally) bool {
	sa := sl.rxsa
	if sa != acc.sa {
		acc.flush(s.window)
		acc.sa, acc.nextPN = sa, sa.nextPN
	}
	lowestPN := lowest(acc.nextPN, s.window)
	if s.cfg.ReplayProtect && sl.pn < lowestPN {
		t.late++
		return false
	}
	if !sl.skip {
		if sl.enc {
			t.octD += uint64(sl.dataLen)
		} else {
			t.octV += uint64(sl.dataLen)
		}
	}
	switch {
	case sl.skip:
		if sl.pn < lowestPN {
			t.delayed++
		} else {
			t.unchecked++
		}
	case !ok && (sl.enc || s.cfg.Validate == ValidateStrict):
		t.notValid++
		acc.notValid++
		return false
	case !ok:
		t.invalid++
		acc.invalid++
	case sl.pn < lowestPN:
		t.delayed++
	default:
		t.ok++
		acc.ok++
		if sl.pn >= acc.nextPN {
			acc.nextPN = sl.pn + 1
			acc.advanced = true
		}
	}
	return true
}

// saAcc accumulates one receive SA's counters over a run of frames of a
// container, so that atomics are touched once per run, not per frame. It
// also advances a copy of the SA's nextPN, stored back by flush: the
// SA's first cache line, which nextPN shares with the key and salt every
// opening worker reads, is then written once per run instead of once
// per frame.
type saAcc struct {
	sa                    *rxSA
	ok, invalid, notValid uint64
	nextPN                uint64 // sa.nextPN as judged so far
	advanced              bool   // nextPN moved: store and publish it
}

// flush adds the accumulated counts to the SA, publishes its nextPN and
// lowestPN if they moved, and resets the accumulator.
func (a *saAcc) flush(window uint64) {
	if a.sa == nil {
		return
	}
	addNZ(&a.sa.stats.InPktsOK, a.ok)
	addNZ(&a.sa.stats.InPktsInvalid, a.invalid)
	addNZ(&a.sa.stats.InPktsNotValid, a.notValid)
	if a.advanced {
		a.sa.nextPN = a.nextPN
		a.sa.lowestPN.Store(lowest(a.nextPN, window))
		a.sa.stats.NextPN.Store(a.nextPN)
	}
	*a = saAcc{}
}
