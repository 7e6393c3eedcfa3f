package mka

import (
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/macsec"
)

// stepLocked advances the key handshake (802.1X 9.8, 9.16): the key server
// generates and distributes SAKs; every participant installs the latest
// SAK for receive on every live peer's SC first, starts transmitting with
// it once it is safe, and retires the old SAK once every live peer
// transmits with the latest.
func (p *Participant) stepLocked(now time.Time) {
	if p.liveCount() == 0 {
		p.dropKeysLocked()
		return
	}
	if p.keyServer {
		p.serveLocked(now)
	}
	k := p.latest
	if k == nil {
		return
	}
	p.ensureRXLocked(k)
	if p.old != nil {
		p.ensureRXLocked(p.old)
	}
	if !k.tx && k.rxOK && p.readyToTransmitLocked(k) {
		p.startTXLocked(k, now)
	}
	if p.old != nil && k.tx && p.allPeersLocked(func(u *SAKUse) bool { return u.Latest == k.ki && u.LatestTX }) {
		// Frames a peer protected with the old SA just before it switched
		// may still be in its transmit pipeline, on the wire or in our
		// receive pipeline behind the MKPDU that announced the switch:
		// keep the old receive SAs for RetireDelay so that they verify.
		if p.retireAt.IsZero() {
			p.retireAt = now.Add(RetireDelay)
		}
		if !now.Before(p.retireAt) {
			p.retireLocked(p.old)
			p.old = nil
			p.retireAt = time.Time{}
			p.newInfo = true
		}
	}
}

// readyToTransmitLocked: the key server transmits once every live peer
// reports receiving with the latest SAK; the others once the key server
// transmits with it (the SAK Use handshake of 9.8.2).
func (p *Participant) readyToTransmitLocked(k *sakState) bool {
	if p.keyServer && k.ki.MI == p.mi {
		return p.allPeersLocked(func(u *SAKUse) bool { return u.Latest == k.ki && u.LatestRX })
	}
	ks := p.ks
	return ks != nil && ks.hasSAKUse && ks.sakUse.Latest == k.ki && ks.sakUse.LatestTX
}

// allPeersLocked reports whether every live peer's SAK Use satisfies f.
func (p *Participant) allPeersLocked(f func(*SAKUse) bool) bool {
	for _, pr := range p.peers {
		if pr.live && (!pr.hasSAKUse || pr.sakUse.Empty || !f(&pr.sakUse)) {
			return false
		}
	}
	return true
}

// serveLocked is the key server's part: decide whether MACsec is used and
// with what confidentiality, and generate a new SAK when there is none of
// ours, the membership changed, a transmit PN nears exhaustion, or Rekey
// asked. A new SAK waits until the previous rollover has finished (latest
// in use for transmission, old retired), so that no SA in use is removed.
func (p *Participant) serveLocked(now time.Time) {
	if p.cfg.NotDesired || p.cfg.Capability == CapabilityNone {
		return
	}
	offset := IntegrityOnly
	if p.cfg.Confidentiality && p.cfg.Capability >= CapabilityConfidentiality {
		offset = Offset0
	}
	for _, pr := range p.peers {
		if !pr.live {
			continue
		}
		if !pr.desired || pr.capability == CapabilityNone {
			return // a member does not want MACsec: distribute nothing
		}
		if pr.capability == CapabilityIntegrity {
			offset = IntegrityOnly
		}
	}
	k := p.latest
	need := k == nil || k.ki.MI != p.mi || p.rekey || !p.sameMembersLocked() || p.exhaustingLocked(k)
	if !need {
		return
	}
	if k != nil && k.ki.MI == p.mi && (!k.tx || p.old != nil) {
		return // the last rollover is still under way
	}
	p.generateLocked(offset, now)
}

// sameMembersLocked reports whether the live peers are those the latest
// SAK was distributed to.
func (p *Participant) sameMembersLocked() bool {
	n := 0
	for mi, pr := range p.peers {
		if pr.live {
			if !p.members[mi] {
				return false
			}
			n++
		}
	}
	return n == len(p.members)
}

// exhaustingLocked reports whether we or a live peer have transmitted with
// k up to the PN exhaustion threshold (peers report their lowest PN in SAK
// Use, the high half in the XPN parameter set).
func (p *Participant) exhaustingLocked(k *sakState) bool {
	if k == nil || !k.tx {
		return false
	}
	limit := p.cfg.PNExhaustion
	if limit == 0 {
		limit = PNExhaustion
		if k.suite.XPN() {
			limit = PNExhaustionXPN
		}
	}
	if st := p.secy.TXSAStats(k.an); st != nil && st.NextPN.Load() >= limit {
		return true
	}
	for _, pr := range p.peers {
		if pr.live && pr.hasSAKUse && pr.sakUse.Latest == k.ki && pr.sakUse.LatestTX {
			pn := uint64(pr.sakUse.LatestLowestPN)
			if k.suite.XPN() {
				pn |= uint64(pr.xpn.LatestLowestPNHigh) << 32
			}
			if pn >= limit {
				return true
			}
		}
	}
	return false
}

// generateLocked draws a new SAK from the CSPRNG, wraps it with the KEK
// and makes it the latest (9.8.1).
func (p *Participant) generateLocked(offset ConfidentialityOffset, now time.Time) {
	if p.suite != p.cfg.CipherSuite && !p.switchSuiteLocked(p.cfg.CipherSuite) {
		return
	}
	key, err := newSAK(p.rand, p.cfg.CipherSuite.KeyLen())
	if err != nil {
		p.log.Error("sak generation failed", "err", err)
		return
	}
	defer clear(key)
	wrapped, err := wrapKey(p.kek.bytes(), key)
	if err != nil {
		p.log.Error("sak wrap failed", "err", err)
		return
	}
	k := &sakState{ki: KI{MI: p.mi, KN: p.nextKN}, an: p.nextAN, key: newSecret(key),
		suite: p.cfg.CipherSuite, offset: offset, wrapped: wrapped}
	p.nextKN++
	p.rekey = false
	p.members = map[MI]bool{}
	for mi, pr := range p.peers {
		if pr.live {
			p.members[mi] = true
		}
	}
	p.stats.SAKsGenerated.Add(1)
	p.log.Info("distributing sak", "ki", k.ki.String(), "an", k.an, "offset", offset.String())
	p.pushLocked(k, now)
}

// takeSAKLocked accepts a Distributed SAK from the key server (9.8.2). A
// SAK of another suite that we accept (Config.CipherSuites) switches the
// SecY to that suite first.
func (p *Participant) takeSAKLocked(ks *peer, d *DistributedSAK, now time.Time) {
	if d.Empty {
		return // "do not use MACsec"
	}
	ki := KI{MI: ks.mi, KN: d.KN}
	if (p.latest != nil && p.latest.ki == ki) || (p.old != nil && p.old.ki == ki) {
		return // already have it
	}
	if p.cfg.NotDesired || p.cfg.Capability == CapabilityNone || !p.acceptsSuite(d.CipherSuite) ||
		(d.Offset >= Offset30 && p.cfg.Capability < CapabilityConfidentialityOffsets) ||
		(d.Offset == Offset0 && p.cfg.Capability < CapabilityConfidentiality) {
		p.stats.SAKRejected.Add(1)
		p.log.Warn("distributed sak rejected", "suite", d.CipherSuite.String(), "offset", d.Offset.String(),
			"desired", !p.cfg.NotDesired, "capability", p.cfg.Capability)
		return
	}
	key, err := unwrapKey(p.kek.bytes(), d.WrappedKey)
	if err != nil || len(key) != d.CipherSuite.KeyLen() {
		p.stats.SAKUnwrapFailed.Add(1)
		p.log.Warn("distributed sak does not unwrap", "ki", ki.String())
		return
	}
	defer clear(key)
	if d.CipherSuite != p.suite && !p.switchSuiteLocked(d.CipherSuite) {
		return // the next MKPDU with this SAK tries again
	}
	p.stats.SAKsReceived.Add(1)
	p.log.Info("sak received", "ki", ki.String(), "an", d.AN, "offset", d.Offset.String(), "suite", d.CipherSuite.String())
	p.pushLocked(&sakState{ki: ki, an: d.AN, key: newSecret(key), suite: d.CipherSuite, offset: d.Offset}, now)
}

// acceptsSuite reports whether we use SAKs of suite cs: our SecY's
// configured suite, one of Config.CipherSuites, or the one it runs now.
func (p *Participant) acceptsSuite(cs macsec.CipherSuite) bool {
	return cs == p.cfg.CipherSuite || cs == p.suite || slices.Contains(p.cfg.CipherSuites, cs)
}

// switchSuiteLocked moves the SecY to suite (SuiteSwitcher). The SecY
// then holds no SA and no receive SC, so the SAKs of the old suite are
// forgotten without a retire and the receive SCs are added again by
// ensureRXLocked; the MI, MN and peers stay. It reports success; a
// failure is counted as a SecY error and leaves everything as it was.
func (p *Participant) switchSuiteLocked(suite macsec.CipherSuite) bool {
	sw, ok := p.secy.(SuiteSwitcher)
	if !ok {
		p.secyErr("SwitchCipherSuite", errors.New("the secy cannot change its cipher suite"))
		return false
	}
	if err := sw.SwitchCipherSuite(suite); err != nil {
		p.secyErr("SwitchCipherSuite", err)
		return false
	}
	p.log.Info("cipher suite switched", "from", p.suite.String(), "to", suite.String())
	p.stats.SuiteSwitches.Add(1)
	p.suite = suite
	p.latest, p.old, p.members = nil, nil, nil
	p.retireAt = time.Time{}
	clear(p.rxSCs)
	p.newInfo = true
	return true
}

// pushLocked makes k the latest SAK; the latest becomes the old one, and
// an old one still held (the key server did not wait for the rollover to
// finish) is retired.
func (p *Participant) pushLocked(k *sakState, now time.Time) {
	if p.old != nil {
		p.retireLocked(p.old)
	}
	p.old, p.latest = p.latest, k
	p.retireAt = time.Time{}
	p.nextAN = (k.an + 1) % 4
	p.offset = k.offset
	k.installed = now
	k.rxFor = map[macsec.SCI]bool{}
	k.ssci = p.sscisLocked()
	p.newInfo = true
	p.ensureRXLocked(k)
}

// sscisLocked assigns the XPN short SCIs: 1..n in decreasing SCI order
// over us and the live peers (802.1AE 10.7.13 as read by wpa_supplicant's
// ieee802_1x_kay.c and MKAdaemon's mka_kay_params.c: the higher SCI gets
// SSCI 1).
func (p *Participant) sscisLocked() map[macsec.SCI]uint32 {
	scis := []macsec.SCI{p.cfg.SCI}
	for _, pr := range p.peers {
		if pr.live {
			scis = append(scis, pr.sci)
		}
	}
	slices.Sort(scis)
	slices.Reverse(scis)
	m := make(map[macsec.SCI]uint32, len(scis))
	for i, s := range scis {
		m[s] = uint32(i + 1)
	}
	return m
}

// salt returns the XPN salt of k: the key server's MI with its first four
// octets XORed with the KN (as wpa_supplicant and MKAdaemon compute it).
func (k *sakState) salt() (s [12]byte) {
	s = k.ki.MI
	kn := k.ki.KN
	s[0] ^= byte(kn >> 8)
	s[1] ^= byte(kn)
	s[2] ^= byte(kn >> 24)
	s[3] ^= byte(kn >> 16)
	return s
}

// saConfig returns the SecY SA parameters of k for the SC whose SSCI is
// that of sci.
func (k *sakState) saConfig(sci macsec.SCI) macsec.SAConfig {
	c := macsec.SAConfig{AN: k.an, PN: 1, Key: macsec.NewKey(k.key.bytes())}
	c.KeyID = binary.BigEndian.AppendUint32(append([]byte(nil), k.ki.MI[:]...), k.ki.KN)
	if k.suite.XPN() {
		c.SSCI = k.ssci[sci]
		c.Salt = k.salt()
	}
	return c
}

// ensureRXLocked installs k for receive on every live peer's SC that lacks
// it, adding the SC first when needed.
func (p *Participant) ensureRXLocked(k *sakState) {
	ok := true
	for _, pr := range p.peers {
		if !pr.live || k.rxFor[pr.sci] {
			continue
		}
		if !p.rxSCs[pr.sci] {
			if err := p.secy.AddRXSC(pr.sci); err != nil {
				p.secyErr("AddRXSC", err)
			}
			p.rxSCs[pr.sci] = true
		}
		if _, has := k.ssci[pr.sci]; !has && k.suite.XPN() {
			k.ssci = p.sscisLocked() // a peer that went live after the SAK
		}
		if err := p.secy.InstallRXSA(pr.sci, k.saConfig(pr.sci)); err != nil {
			p.secyErr("InstallRXSA", err)
			ok = false
			continue
		}
		k.rxFor[pr.sci] = true
		p.newInfo = true
	}
	if ok && !k.rxOK {
		k.rxOK = true
		p.newInfo = true
	}
}

// startTXLocked installs k for transmission and switches to it.
func (p *Participant) startTXLocked(k *sakState, now time.Time) {
	if ps, ok := p.secy.(ProtectionSetter); ok {
		if err := ps.SetConfidentiality(k.offset); err != nil {
			p.secyErr("SetConfidentiality", err)
			return
		}
	}
	if err := p.secy.InstallTXSA(k.saConfig(p.cfg.SCI)); err != nil {
		p.secyErr("InstallTXSA", err)
		return
	}
	if err := p.secy.SetEncodingSA(k.an); err != nil {
		p.secyErr("SetEncodingSA", err)
		return
	}
	k.tx = true
	if p.old != nil {
		p.old.tx = false
	}
	p.lastRoll = now
	p.stats.SAKRolls.Add(1)
	p.newInfo = true
	p.log.Info("transmitting with sak", "ki", k.ki.String(), "an", k.an)
}

// retireLocked removes k's SAs from the SecY.
func (p *Participant) retireLocked(k *sakState) {
	for sci := range k.rxFor {
		p.secy.RemoveRXSA(sci, k.an)
	}
	if k.tx || p.latest == nil || p.latest.an != k.an {
		p.secy.RemoveTXSA(k.an)
	}
	p.log.Info("sak retired", "ki", k.ki.String(), "an", k.an)
}

// dropKeysLocked forgets all keys when no live peer is left: the CA is
// gone, so transmission stops until a new SAK is agreed.
func (p *Participant) dropKeysLocked() {
	for _, k := range []*sakState{p.old, p.latest} {
		if k != nil {
			p.retireLocked(k)
		}
	}
	p.old, p.latest, p.members = nil, nil, nil
	p.retireAt = time.Time{}
}

// lowestTXPNLocked returns the next PN of k's transmit SA (the lowest PN
// the peers may still accept), or 1 before transmission starts.
func (p *Participant) lowestTXPNLocked(k *sakState) uint64 {
	if k == nil || !k.tx {
		return 1
	}
	if st := p.secy.TXSAStats(k.an); st != nil {
		if pn := st.NextPN.Load(); pn > 0 {
			return pn
		}
	}
	return 1
}
