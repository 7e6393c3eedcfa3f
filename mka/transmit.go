package mka

import "time"

// transmitLocked builds an MKPDU (802.1X 11.11) for the outbox: Basic
// Parameter Set, the peer lists, SAK Use, the Distributed SAK while the
// key server is distributing, the XPN parameter set, the ICV.
func (p *Participant) transmitLocked(now time.Time) {
	if p.mn == ^uint32(0) {
		// MN space spent: a new MI starts a new MN sequence (9.4.2).
		if err := p.newMILocked(); err != nil {
			p.log.Error("new mi", "err", err)
			return
		}
	}
	p.mn++
	// Keep the MNs sent within the last LifeTime: a peer that echoes one
	// of them has heard us recently (9.4.3).
	for len(p.sent) > 0 && now.Sub(p.sent[0].at) >= LifeTime {
		p.sent = p.sent[1:]
	}
	p.sent = append(p.sent, mnStamp{at: now, mn: p.mn})
	p.lastSend = now
	p.newInfo = false

	m := &MKPDU{DA: p.cfg.DA, SA: p.cfg.MAC, EAPOLVersion: EAPOLVersion}
	m.Basic = BasicParams{Version: p.cfg.Version, KeyServerPriority: p.cfg.KeyServerPriority, KeyServer: p.keyServer,
		MACsecDesired: !p.cfg.NotDesired, Capability: p.cfg.Capability, SCI: p.cfg.SCI, MI: p.mi, MN: p.mn,
		AlgorithmAgility: AlgorithmAgility, CKN: p.cfg.CAK.ckn}
	for _, pr := range p.peers {
		if pr.live {
			m.Live = AppendPeer(m.Live, pr.mi, pr.mn)
		} else {
			m.Potential = AppendPeer(m.Potential, pr.mi, pr.mn)
		}
	}
	if k := p.latest; k != nil {
		m.HasSAKUse = true
		u := &m.SAKUse
		u.DelayProtect = p.cfg.BoundedHello
		u.Latest, u.LatestAN, u.LatestRX, u.LatestTX = k.ki, k.an, k.rxOK, k.tx
		lpn := p.lowestTXPNLocked(k)
		u.LatestLowestPN = uint32(lpn)
		var opn uint64
		if o := p.old; o != nil {
			u.Old, u.OldAN, u.OldRX, u.OldTX = o.ki, o.an, o.rxOK, o.tx
			opn = p.lowestTXPNLocked(o)
			u.OldLowestPN = uint32(opn)
		}
		if k.suite.XPN() {
			m.HasXPN = true
			m.XPN = XPNParams{LatestLowestPNHigh: uint32(lpn >> 32), OldLowestPNHigh: uint32(opn >> 32)}
		}
		if p.keyServer && k.ki.MI == p.mi && !p.allPeersLocked(func(u *SAKUse) bool { return u.Latest == k.ki && u.LatestRX }) {
			m.HasDistSAK = true
			m.DistSAK = DistributedSAK{AN: k.an, Offset: k.offset, KN: k.ki.KN, CipherSuite: k.suite, WrappedKey: k.wrapped}
		}
	}
	f, err := m.Append(nil, p.ick)
	if err != nil {
		p.log.Error("mkpdu encoding failed", "err", err)
		return
	}
	p.outbox = append(p.outbox, f)
}
