package mka

import (
	"time"

	"github.com/gvrouter/gvrouter/macsec"
)

// State is a snapshot of a participant for status pages. It holds no key.
type State struct {
	// MI and MN are our current member identifier and last MN sent.
	MI MI
	MN uint32
	// KeyServer: we are the elected key server.
	KeyServer bool
	// KeyServerSCI and KeyServerMI name the elected key server (ours when
	// KeyServer); zero when there is none.
	KeyServerSCI macsec.SCI
	KeyServerMI  MI
	// Live and Potential are the peers, sorted by SCI.
	Live, Potential []PeerState
	// CipherSuite is the suite the SecY runs now: Config.CipherSuite
	// unless a key server's SAK of another accepted suite switched it.
	CipherSuite macsec.CipherSuite
	// Offset is the confidentiality of the latest SAK.
	Offset ConfidentialityOffset
	// Latest and Previous are the SAKs held, nil when none.
	Latest, Previous *KeyState
	// LastRoll is when we last switched transmission to a new SAK; zero
	// before the first.
	LastRoll time.Time
}

// PeerState describes one peer.
type PeerState struct {
	SCI      macsec.SCI
	MI       MI
	MN       uint32
	Priority uint8
	// KeyServer: the peer claims the key server role.
	KeyServer bool
	// Expires is when the peer is removed unless heard from.
	Expires time.Time
}

// KeyState describes one SAK without revealing it.
type KeyState struct {
	KI KI
	AN uint8
	// RX: installed for receive on every live peer's SC; TX: we transmit
	// with it.
	RX, TX bool
	// Installed is when we got (or generated) it.
	Installed time.Time
}

// State returns a snapshot of the participant.
func (p *Participant) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := State{MI: p.mi, MN: p.mn, KeyServer: p.keyServer, Offset: p.offset, LastRoll: p.lastRoll,
		CipherSuite: p.suite}
	if p.keyServer {
		s.KeyServerSCI, s.KeyServerMI = p.cfg.SCI, p.mi
	} else if p.ks != nil {
		s.KeyServerSCI, s.KeyServerMI = p.ks.sci, p.ks.mi
	}
	for _, pr := range p.peers {
		ps := PeerState{SCI: pr.sci, MI: pr.mi, MN: pr.mn, Priority: pr.priority, KeyServer: pr.ksFlag, Expires: pr.expire}
		if pr.live {
			s.Live = append(s.Live, ps)
		} else {
			s.Potential = append(s.Potential, ps)
		}
	}
	sortPeers(s.Live)
	sortPeers(s.Potential)
	ks := func(k *sakState) *KeyState {
		if k == nil {
			return nil
		}
		return &KeyState{KI: k.ki, AN: k.an, RX: k.rxOK, TX: k.tx, Installed: k.installed}
	}
	s.Latest, s.Previous = ks(p.latest), ks(p.old)
	return s
}

func sortPeers(ps []PeerState) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && (ps[j].SCI < ps[j-1].SCI || (ps[j].SCI == ps[j-1].SCI && string(ps[j].MI[:]) < string(ps[j-1].MI[:]))); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}
