package router

import (
	"io"

	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/router/mkalink"
)

// MKA on a SecY (issue 22): the participant lives as long as its SecY
// (a change of mka: rebuilds both, config.MACsec.SameSecY) and follows
// the lower interface across reloads; router/mkalink does the work.

// startMKA starts rs's participant. It sends nothing until
// bindMKALocked gives it the lower interface.
func (r *Router) startMKA(rs *runningSecY, sci macsec.SCI) error {
	k := rs.cfg.MKA
	var secy mka.SecY = rs.secy
	if r.mkaSecY != nil {
		secy = r.mkaSecY(rs.secy)
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

// WithMKARand makes the MKA participants draw MIs and SAKs from rand
// instead of crypto/rand: a test that must know the SAKs (the lab's
// key-leak check) injects it. Never use it outside tests.
func WithMKARand(rand io.Reader) Option { return func(r *Router) { r.mkaRand = rand } }

// WithMKASecY puts wrap's SecY between each MKA participant and its
// SecY: a test that must steer what the participant installs (a transmit
// SA that starts near PN exhaustion, so that the peer's key server
// rekeys) wraps it. Never use it outside tests.
func WithMKASecY(wrap func(*macsec.SecY) mka.SecY) Option {
	return func(r *Router) { r.mkaSecY = wrap }
}
