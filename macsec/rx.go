package macsec

// Receive pipeline. Stages and locking (compare wireguard-go
// device/receive.go):
//
//  1. Verify (any goroutine, shared closeMu) parses each frame's SecTAG
//     (802.1AE 9.12), looks up the receive SC by SCI in the immutable SC
//     table and the SA by AN, recovers the 64-bit PN (XPN) from the SA's
//     published nextPN and pre-checks replay against its lowestPN. Frames that need no crypto
//     (untagged, or no SA, when validateFrames allows) are stripped in
//     place and delivered directly; bad ones are dropped and counted.
//  2. Frames for crypto are grouped by SC into containers of up to
//     s.batch frames in arrival order; slots point at the caller's
//     frames (no copy). Each container is locked, queued on its SC's
//     ordered channel, then on the shared work channel (both sends block:
//     back-pressure).
//  3. A worker (routineWorker) verifies/decrypts every frame in place,
//     stores a verdict per frame and unlocks the container.
//  4. The SC's routineRXSequential locks containers in queue order, runs
//     the replay check and updates nextPN/lowestPN (only after ICV
//     success, only here, so in order), counts, strips SecTAG and ICV in
//     place, hands the frames to Config.RX in order and signals the
//     container's done channel.
//  5. Verify waits for the done signal of each of its containers (the
//     frames are the caller's memory, valid only for the call), then
//     returns them to the pool. It keeps at most maxPending containers in
//     flight.
//
// With one worker (Config.Workers = 1) stages 3 and 4 run in the caller,
// for each container as soon as it is full, under rxInlineMu (submitRX).
//
// An rxSA's nextPN is owned by its SC's sequential goroutine; producers
// only read the atomically published copies (lowestPN, stats.NextPN).

// openC is a container being filled for one SC inside Verify.
type openC struct {
	sc *rxSC
	c  *container
}

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
	sl.ok = false
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
		return
	}
	var open [4]openC
	var pend pending
	k := 0 // frames[:k] are delivered directly
	for _, f := range frames {
		kind, out, sc, sa, pn := s.classify(&fr, f)
		if kind == rxDrop {
			continue
		}
		if kind == rxDirect {
			frames[k] = out
			k++
			continue
		}
		var oc *openC
		for i := range open {
			if open[i].sc == sc {
				oc = &open[i]
				break
			}
		}
		if oc == nil {
			for i := range open {
				if open[i].sc == nil {
					oc = &open[i]
					break
				}
			}
			if oc == nil {
				s.submitRX(open[0].c, &pend)
				copy(open[:], open[1:])
				oc = &open[len(open)-1]
			}
			oc.sc = sc
			oc.c = getContainer()
			oc.c.tx = false
			oc.c.sc = sc
		}
		c := oc.c
		s.fillRX(&c.s[c.n], f, &fr.p, sa, pn)
		c.n++
		if c.n == s.batch {
			s.submitRX(c, &pend)
			*oc = openC{}
		}
	}
	for i := range open {
		if open[i].c != nil {
			s.submitRX(open[i].c, &pend)
		}
	}
	fr.count(s)
	if k > 0 {
		s.cfg.RX(frames[:k])
	}
	pend.wait(s)
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
			prefetchFrame(frames[i+1])
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
			s.rxWorker.openSlot(&sl)
			opened++
			var ok bool
			if out, ok = s.judge(&sl, &acc, &t); !ok {
				continue
			}
		}
		frames[k] = out
		k++
	}
	acc.flush(s.window)
	t.flush(s, cur)
	sl = slot{}
	s.workerCnt[len(s.workerCnt)-1].v.Add(opened)
	fr.count(s)
	if k > 0 {
		s.cfg.RX(frames[:k])
	}
}

// submitRX locks the filled container c, queues it for its SC's
// sequential goroutine and for the workers and records it in p. closeMu
// is held shared.
func (s *SecY) submitRX(c *container, p *pending) {
	c.mu.Lock()
	c.sc.ordered <- c
	s.work <- c
	p.add(s, c)
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

// routineRXSequential consumes sc's containers in order: replay check,
// counters, delivery. Owner: SecY; stop: sc.ordered closed by Close or
// RemoveRXSC.
func (s *SecY) routineRXSequential(sc *rxSC) {
	defer s.wg.Done()
	s.log.Debug("routineRXSequential started", "sci", sc.sci.String())
	defer s.log.Debug("routineRXSequential stopped", "sci", sc.sci.String())
	for c := range sc.ordered {
		c.mu.Lock()
		s.deliverRX(sc, c)
		c.mu.Unlock()
		c.done <- struct{}{}
	}
}

// deliverRX runs the replay check of sc's opened container c in order,
// updates nextPN, counts, strips and hands the accepted frames to
// Config.RX. Only sc's sequential goroutine calls it.
func (s *SecY) deliverRX(sc *rxSC, c *container) {
	var t rxTally
	var acc saAcc
	k := 0
	for i := range c.n {
		if out, ok := s.judge(&c.s[i], &acc, &t); ok {
			c.out[k] = out
			k++
		}
	}
	acc.flush(s.window)
	t.flush(s, sc)
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

// judge applies the replay check and validateFrames to an opened slot, in
// order (802.1AE 10.6.5): it advances the SA's nextPN after ICV success,
// counts into t and acc, and returns the stripped frame (DA SA Secure
// Data) if it is to be delivered. Only the SC's sequencer calls it.
func (s *SecY) judge(sl *slot, acc *saAcc, t *rxTally) ([]byte, bool) {
	sa := sl.rxsa
	if sa != acc.sa {
		acc.flush(s.window)
		acc.sa = sa
	}
	lowestPN := lowest(sa.nextPN, s.window)
	if s.cfg.ReplayProtect && sl.pn < lowestPN {
		t.late++
		return nil, false
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
	case !sl.ok && (sl.enc || s.cfg.Validate == ValidateStrict):
		t.notValid++
		acc.notValid++
		return nil, false
	case !sl.ok:
		t.invalid++
		acc.invalid++
	case sl.pn < lowestPN:
		t.delayed++
	default:
		t.ok++
		acc.ok++
		if sl.pn >= sa.nextPN {
			sa.nextPN = sl.pn + 1
			acc.advanced = true
		}
	}
	b := sl.buf
	tl := sl.dataOff - addrsLen
	copy(b[tl:tl+addrsLen], b[:addrsLen])
	return b[tl : sl.dataOff+sl.dataLen], true
}

// saAcc accumulates one receive SA's counters over a run of frames of a
// container, so that atomics are touched once per run, not per frame.
type saAcc struct {
	sa                    *rxSA
	ok, invalid, notValid uint64
	advanced              bool // sa.nextPN moved: publish it
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
		a.sa.lowestPN.Store(lowest(a.sa.nextPN, window))
		a.sa.stats.NextPN.Store(a.sa.nextPN)
	}
	*a = saAcc{}
}
