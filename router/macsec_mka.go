package router

import (
	"fmt"
	"log/slog"

	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/router/mkalink"
)

// MKA on a SecY: the participant lives as long as its SecY (a change of
// mka: rebuilds both, config.MACsec.SameSecY) and follows the lower
// interface across reloads; router/mkalink does the work.
//
// Cipher suite agreement: MKA offers the SecY's cipher and encrypt, and
// accepts a key server's SAK of any suite package macsec implements
// (mkaSuites). Such a SAK makes the participant rebuild the SecY for that
// suite (mkaSecY.SwitchCipherSuite) before it installs the SAK; the
// configured suite stays what the router distributes as key server. A
// reload compares config with config (rs.cfg keeps the configured cipher,
// not the one in use), so an unchanged macsec entry keeps the running
// SecY on the negotiated suite and the participant with its peers; a
// change that config.MACsec.SameSecY sees rebuilds SecY and participant
// on the configured suite, and the key server's next SAK switches it
// again.

// startMKA starts rs's participant. It sends nothing until
// bindMKALocked gives it the lower interface.
func (r *Router) startMKA(rs *runningSecY, sci macsec.SCI) error {
	k := rs.cfg.MKA
	var secy MKASecY = mkaSecY{rs: rs, log: r.log.With("component", "macsec", "name", rs.cfg.Name)}
	if r.mkaSecY != nil {
		secy = r.mkaSecY(secy)
	}
	var mac [6]byte
	copy(mac[:], rs.mac)
	l, err := mkalink.Start(mkalink.Config{
		Name:  rs.cfg.Name,
		Rekey: k.Rekey,
		Participant: mka.Config{
			CAK:               k.CAK,
			SCI:               sci,
			MAC:               mac,
			KeyServerPriority: uint8(k.Priority),
			CipherSuite:       rs.cfg.CipherSuite(),
			CipherSuites:      mkaSuites,
			Confidentiality:   rs.cfg.Encrypt,
			Rand:              r.mkaRand,
		},
	}, secy, r.log.With("component", "mka", "secy", rs.cfg.Name))
	if err != nil {
		return err
	}
	rs.mka = l
	return nil
}

// bindMKALocked points rs's participant at its lower interface as the
// netstack has it now (Apply may have recreated it).
func (r *Router) bindMKALocked(rs *runningSecY) {
	if rs.mka == nil {
		return
	}
	var lower mkalink.Lower
	if ifc := r.net.Interface(rs.cfg.On); ifc != nil {
		lower = ifc
	}
	if err := rs.mka.Bind(lower); err != nil {
		r.log.Error("mka bind", "secy", rs.cfg.Name, "err", err)
	}
}

// stopMKA stops rs's participant, before its SecY closes.
func (rs *runningSecY) stopMKA() {
	if rs.mka != nil {
		rs.mka.Close()
		rs.mka = nil
	}
}

// MKASecY is what an MKA participant keys: the SecY, whose cipher suite
// it can switch (WithMKASecY).
type MKASecY interface {
	mka.SecY
	mka.SuiteSwitcher
}

// mkaSuites are the cipher suites a participant accepts from a key
// server: all that package macsec implements.
var mkaSuites = []macsec.CipherSuite{macsec.GCMAES128, macsec.GCMAES256, macsec.GCMAESXPN128, macsec.GCMAESXPN256}

// mkaSecY is the SecY a participant keys: the running SecY's current
// macsec core, which SwitchCipherSuite replaces. The participant calls it
// with its own lock held, on its link's goroutine (never from a receive
// handler), and never at the same time as the router closes the SecY:
// bindMACsecLocked and closeMACsecLocked stop the participant first.
type mkaSecY struct {
	rs  *runningSecY
	log *slog.Logger
}

var (
	_ mka.SecY          = mkaSecY{}
	_ mka.SuiteSwitcher = mkaSecY{}
)

// AddRXSC implements mka.SecY.
func (m mkaSecY) AddRXSC(sci macsec.SCI) error { return m.rs.secy.Load().AddRXSC(sci) }

// RemoveRXSC implements mka.SecY.
func (m mkaSecY) RemoveRXSC(sci macsec.SCI) error { return m.rs.secy.Load().RemoveRXSC(sci) }

// InstallRXSA implements mka.SecY.
func (m mkaSecY) InstallRXSA(sci macsec.SCI, c macsec.SAConfig) error {
	return m.rs.secy.Load().InstallRXSA(sci, c)
}

// RemoveRXSA implements mka.SecY.
func (m mkaSecY) RemoveRXSA(sci macsec.SCI, an uint8) { m.rs.secy.Load().RemoveRXSA(sci, an) }

// InstallTXSA implements mka.SecY.
func (m mkaSecY) InstallTXSA(c macsec.SAConfig) error { return m.rs.secy.Load().InstallTXSA(c) }

// SetEncodingSA implements mka.SecY.
func (m mkaSecY) SetEncodingSA(an uint8) error { return m.rs.secy.Load().SetEncodingSA(an) }

// RemoveTXSA implements mka.SecY.
func (m mkaSecY) RemoveTXSA(an uint8) { m.rs.secy.Load().RemoveTXSA(an) }

// TXSAStats implements mka.SecY.
func (m mkaSecY) TXSAStats(an uint8) *macsec.TXSAStats { return m.rs.secy.Load().TXSAStats(an) }

// SwitchCipherSuite implements mka.SuiteSwitcher: it builds a new macsec
// core for suite with the running one's settings (no SA, no receive SC),
// puts it into the link and closes the old one, whose frames in flight
// are delivered or dropped as at any close. Its counters start again
// from zero. rs.cfg keeps the configured suite (see the comment at the
// top of this file on reloads).
func (m mkaSecY) SwitchCipherSuite(suite macsec.CipherSuite) error {
	rs := m.rs
	old := rs.secy.Load()
	mc := rs.mc
	mc.Cipher = suite
	s, err := macsec.New(mc, rs.secyLog)
	if err != nil {
		return fmt.Errorf("macsec %s: rebuild for %v: %w", rs.cfg.Name, suite, err)
	}
	rs.link.SetSecY(s)
	rs.secy.Store(s)
	from := old.Config().Cipher
	old.Close()
	m.log.Info("macsec secy rebuilt for the mka key server's cipher suite", "from", from.String(), "to", suite.String(),
		"configured", rs.cfg.CipherSuite().String())
	return nil
}
