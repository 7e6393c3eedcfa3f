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
//     stores a verdict per frame and unlocks the container. With one
//     worker the caller does this itself, right after queueing (dispatch).
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
// An rxSA's nextPN is owned by its SC's sequential goroutine; producers
// only read the atomically published copies (lowestPN, stats.NextPN).

// openC is a container being filled for one SC inside Verify.
type openC struct {
	sc *rxSC
	c  *container
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
	tbl := *s.rxSCs.Load()
	strict := s.cfg.Validate == ValidateStrict
	var open [4]openC
	var pend pending
	var lastSC *rxSC // cache of the last SC table lookup
	var lastSCI SCI
	k := 0 // frames[:k] are delivered directly
	var noTag, untagged, badTag, noSA, noSAErr uint64
	var p Parsed
	for _, f := range frames {
		isMACsec, ok := parseFrame(f, s.xpn, &p)
		if !isMACsec {
			if strict {
				noTag++
			} else {
				untagged++
				frames[k] = f
				k++
			}
			continue
		}
		if !ok {
			badTag++
			continue
		}
		changed := p.Tag.TCI()&TCIChanged != 0
		sc := lastSC
		if sc == nil || p.SCI != lastSCI {
			sc = tbl[p.SCI]
			lastSC, lastSCI = sc, p.SCI
		}
		if sc == nil {
			if strict || changed {
				noSAErr++
			} else {
				noSA++
				frames[k] = strip(f, &p)
				k++
			}
			continue
		}
		sa := sc.sas[p.Tag.AN()].Load()
		if sa == nil || !sa.active.Load() {
			if strict || changed {
				sc.stats.InPktsNoSAError.Add(1)
				if sa != nil {
					sa.stats.InPktsNotUsingSA.Add(1)
				}
			} else {
				sc.stats.InPktsNoSA.Add(1)
				if sa != nil {
					sa.stats.InPktsUnusedSA.Add(1)
				}
				frames[k] = strip(f, &p)
				k++
			}
			continue
		}
		lowestPN := sa.lowestPN.Load()
		pn := uint64(p.Tag.PN())
		if s.xpn {
			pn = recoverPN(p.Tag.PN(), sa.stats.NextPN.Load())
		}
		if s.cfg.ReplayProtect && pn < lowestPN {
			sc.stats.InPktsLate.Add(1)
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
				s.queueRX(open[0].c, &pend)
				pend.add(s, open[0].c)
				copy(open[:], open[1:])
				oc = &open[len(open)-1]
			}
			oc.sc = sc
			oc.c = getContainer()
			oc.c.tx = false
			oc.c.sc = sc
		}
		c := oc.c
		sl := &c.s[c.n]
		sl.buf = f[:p.End]
		sl.rxsa = sa
		sl.sci = p.SCI
		sl.pn = pn
		sl.dataOff = p.DataOff
		sl.dataLen = p.DataLen
		sl.enc = changed
		sl.skip = !changed && s.cfg.Validate == ValidateDisabled
		sl.ok = false
		c.n++
		if c.n == s.batch {
			s.queueRX(c, &pend)
			pend.add(s, c)
			*oc = openC{}
		}
	}
	for i := range open {
		if open[i].c != nil {
			s.queueRX(open[i].c, &pend)
			pend.add(s, open[i].c)
		}
	}
	if noTag != 0 {
		s.stats.InPktsNoTag.Add(noTag)
	}
	if untagged != 0 {
		s.stats.InPktsUntagged.Add(untagged)
	}
	if badTag != 0 {
		s.stats.InPktsBadTag.Add(badTag)
	}
	if noSA != 0 {
		s.stats.InPktsNoSA.Add(noSA)
	}
	if noSAErr != 0 {
		s.stats.InPktsNoSAError.Add(noSAErr)
	}
	if k > 0 {
		s.cfg.RX(frames[:k])
	}
	pend.wait(s)
}

// queueRX locks c and queues it for its SC's sequential goroutine and for
// the workers (see dispatch). closeMu is held shared.
func (s *SecY) queueRX(c *container, p *pending) {
	c.mu.Lock()
	c.sc.ordered <- c
	s.dispatch(c, p)
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
	replay := s.cfg.ReplayProtect
	mode := s.cfg.Validate
	for c := range sc.ordered {
		c.mu.Lock()
		var ok, late, invalid, notValid, unchecked, delayed, octV, octD uint64
		var acc saAcc
		k := 0
		for i := range c.n {
			sl := &c.s[i]
			sa := sl.rxsa
			if sa != acc.sa {
				acc.flush(s.window)
				acc.sa = sa
			}
			lowestPN := lowest(sa.nextPN, s.window)
			if replay && sl.pn < lowestPN {
				late++
				continue
			}
			if !sl.skip {
				if sl.enc {
					octD += uint64(sl.dataLen)
				} else {
					octV += uint64(sl.dataLen)
				}
			}
			switch {
			case sl.skip:
				if sl.pn < lowestPN {
					delayed++
				} else {
					unchecked++
				}
			case !sl.ok && (sl.enc || mode == ValidateStrict):
				notValid++
				acc.notValid++
				continue
			case !sl.ok:
				invalid++
				acc.invalid++
			case sl.pn < lowestPN:
				delayed++
			default:
				ok++
				acc.ok++
				if sl.pn >= sa.nextPN {
					sa.nextPN = sl.pn + 1
					acc.advanced = true
				}
			}
			b := sl.buf
			tl := sl.dataOff - addrsLen
			copy(b[tl:tl+addrsLen], b[:addrsLen])
			c.out[k] = b[tl : sl.dataOff+sl.dataLen]
			k++
		}
		acc.flush(s.window)
		st := &sc.stats
		addNZ(&st.InPktsOK, ok)
		addNZ(&st.InPktsLate, late)
		addNZ(&st.InPktsInvalid, invalid)
		addNZ(&st.InPktsNotValid, notValid)
		addNZ(&st.InPktsUnchecked, unchecked)
		addNZ(&st.InPktsDelayed, delayed)
		addNZ(&st.InOctetsValidated, octV)
		addNZ(&st.InOctetsDecrypted, octD)
		addNZ(&s.stats.InOctetsValidated, octV)
		addNZ(&s.stats.InOctetsDecrypted, octD)
		if k > 0 {
			s.cfg.RX(c.out[:k])
		}
		c.mu.Unlock()
		c.done <- struct{}{}
	}
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
