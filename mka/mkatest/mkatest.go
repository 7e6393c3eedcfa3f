// Package mkatest provides test doubles for package mka: a fake clock, an
// in-memory shared medium that carries MKPDUs between participants, and a
// SecY that records what the participant installs.
package mkatest

import (
	"fmt"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/mka"
)

// Clock is a manually advanced mka.Clock. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at a fixed, arbitrary instant.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// Now implements mka.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Wire is a shared medium: every frame sent on one port reaches every
// other port when Deliver runs. Frames queue until then, so no
// participant is re-entered from its own Send. Wire is safe for
// concurrent use.
type Wire struct {
	mu      sync.Mutex
	ports   []*Port
	pending []sent
}

type sent struct {
	from  *Port
	frame []byte
}

// Port is one station on a Wire; it implements mka.Transport.
type Port struct {
	w    *Wire
	recv func([]byte)
	down bool // protected by w.mu
	// Tap, if set, sees every frame this port sends (under no lock).
	Tap func([]byte)
}

// NewPort attaches a station whose received frames go to recv (usually
// a Participant's Receive; set it later with SetReceiver).
func (w *Wire) NewPort(recv func([]byte)) *Port {
	p := &Port{w: w, recv: recv}
	w.mu.Lock()
	w.ports = append(w.ports, p)
	w.mu.Unlock()
	return p
}

// SetReceiver sets the function that receives the port's frames.
func (p *Port) SetReceiver(recv func([]byte)) {
	p.w.mu.Lock()
	p.recv = recv
	p.w.mu.Unlock()
}

// SetDown cuts the port off: it neither sends nor receives.
func (p *Port) SetDown(down bool) {
	p.w.mu.Lock()
	p.down = down
	p.w.mu.Unlock()
}

// Send implements mka.Transport: it queues a copy of frame.
func (p *Port) Send(frame []byte) error {
	if p.Tap != nil {
		p.Tap(frame)
	}
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	if !p.down {
		p.w.pending = append(p.w.pending, sent{p, append([]byte(nil), frame...)})
	}
	return nil
}

// Deliver hands queued frames to the other ports until none are left (the
// receivers' replies included), calling after, if not nil, after each
// delivery. It returns how many frames it delivered.
func (w *Wire) Deliver(after func()) int {
	n := 0
	for {
		w.mu.Lock()
		if len(w.pending) == 0 {
			w.mu.Unlock()
			return n
		}
		s := w.pending[0]
		w.pending = w.pending[1:]
		var to []func([]byte)
		for _, p := range w.ports {
			if p != s.from && !p.down && p.recv != nil {
				to = append(to, p.recv)
			}
		}
		w.mu.Unlock()
		for _, r := range to {
			r(s.frame)
			n++
			if after != nil {
				after()
			}
		}
		if n > 10000 {
			panic("mkatest: frames keep coming; a participant answers every frame")
		}
	}
}

// SA is an SA the fake SecY holds.
type SA struct {
	Config macsec.SAConfig
	Stats  *macsec.TXSAStats // transmit SAs only; set NextPN to fake traffic
}

// SecY is an mka.SecY (and mka.ProtectionSetter and mka.SuiteSwitcher)
// that records calls. It is safe for concurrent use.
type SecY struct {
	mu sync.Mutex
	// Events lists the calls in order, e.g. "rxsa 0200000000010001 0",
	// "txsa 0", "encoding 0", "rmrxsa ... 0", "rmtxsa 0", "addrxsc ...",
	// "rmrxsc ...", "conf offset-0".
	Events []string
	RX     map[macsec.SCI]*[4]*SA
	TX     [4]*SA
	// EncodingSA is the AN transmission uses, valid iff Transmitting.
	EncodingSA   uint8
	Transmitting bool
	Offset       mka.ConfidentialityOffset
	// Suite, if set, is the cipher suite the SecY runs: SAs whose key
	// length does not fit it are refused. SwitchCipherSuite sets it.
	Suite macsec.CipherSuite
	// SwitchErr, if set, is what SwitchCipherSuite returns (changing
	// nothing).
	SwitchErr error
}

var (
	_ mka.SecY             = (*SecY)(nil)
	_ mka.ProtectionSetter = (*SecY)(nil)
	_ mka.SuiteSwitcher    = (*SecY)(nil)
)

// fits reports whether c's key is for the SecY's suite (any key while
// Suite is unset).
func (s *SecY) fits(c macsec.SAConfig) bool {
	return s.Suite == 0 || c.Key.Len() == s.Suite.KeyLen()
}

func (s *SecY) event(f string, a ...any) { s.Events = append(s.Events, fmt.Sprintf(f, a...)) }

// AddRXSC implements mka.SecY.
func (s *SecY) AddRXSC(sci macsec.SCI) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.RX == nil {
		s.RX = map[macsec.SCI]*[4]*SA{}
	}
	if s.RX[sci] != nil {
		return fmt.Errorf("rx sc %v exists", sci)
	}
	s.RX[sci] = &[4]*SA{}
	s.event("addrxsc %v", sci)
	return nil
}

// RemoveRXSC implements mka.SecY.
func (s *SecY) RemoveRXSC(sci macsec.SCI) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.RX[sci] == nil {
		return fmt.Errorf("no rx sc %v", sci)
	}
	delete(s.RX, sci)
	s.event("rmrxsc %v", sci)
	return nil
}

// InstallRXSA implements mka.SecY.
func (s *SecY) InstallRXSA(sci macsec.SCI, c macsec.SAConfig) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.RX[sci]
	if sc == nil || c.AN > 3 {
		return fmt.Errorf("no rx sc %v", sci)
	}
	if !s.fits(c) {
		return fmt.Errorf("rx sa %d: %d-octet key for %v", c.AN, c.Key.Len(), s.Suite)
	}
	sc[c.AN] = &SA{Config: c}
	s.event("rxsa %v %d", sci, c.AN)
	return nil
}

// RemoveRXSA implements mka.SecY.
func (s *SecY) RemoveRXSA(sci macsec.SCI, an uint8) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc := s.RX[sci]; sc != nil && an < 4 {
		sc[an] = nil
	}
	s.event("rmrxsa %v %d", sci, an)
}

// InstallTXSA implements mka.SecY.
func (s *SecY) InstallTXSA(c macsec.SAConfig) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.AN > 3 {
		return fmt.Errorf("an %d", c.AN)
	}
	if !s.fits(c) {
		return fmt.Errorf("tx sa %d: %d-octet key for %v", c.AN, c.Key.Len(), s.Suite)
	}
	st := &macsec.TXSAStats{}
	st.NextPN.Store(max(c.PN, 1))
	s.TX[c.AN] = &SA{Config: c, Stats: st}
	s.event("txsa %d", c.AN)
	return nil
}

// SetEncodingSA implements mka.SecY.
func (s *SecY) SetEncodingSA(an uint8) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if an > 3 || s.TX[an] == nil {
		return fmt.Errorf("no tx sa %d", an)
	}
	s.EncodingSA, s.Transmitting = an, true
	s.event("encoding %d", an)
	return nil
}

// RemoveTXSA implements mka.SecY.
func (s *SecY) RemoveTXSA(an uint8) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if an > 3 {
		return
	}
	s.TX[an] = nil
	if s.EncodingSA == an {
		s.Transmitting = false
	}
	s.event("rmtxsa %d", an)
}

// TXSAStats implements mka.SecY.
func (s *SecY) TXSAStats(an uint8) *macsec.TXSAStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if an > 3 || s.TX[an] == nil {
		return nil
	}
	return s.TX[an].Stats
}

// SetConfidentiality implements mka.ProtectionSetter.
func (s *SecY) SetConfidentiality(o mka.ConfidentialityOffset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Offset = o
	s.event("conf %v", o)
	return nil
}

// SwitchCipherSuite implements mka.SuiteSwitcher as a rebuilt SecY
// would: every SA and receive SC is gone and transmission stops.
func (s *SecY) SwitchCipherSuite(suite macsec.CipherSuite) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.SwitchErr != nil {
		return s.SwitchErr
	}
	s.Suite = suite
	s.RX = nil
	s.TX = [4]*SA{}
	s.EncodingSA, s.Transmitting = 0, false
	s.event("suite %v", suite)
	return nil
}

// Snapshot returns copies of the SA tables and the encoding SA.
func (s *SecY) Snapshot() (rx map[macsec.SCI][4]*SA, tx [4]*SA, enc uint8, transmitting bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rx = map[macsec.SCI][4]*SA{}
	for k, v := range s.RX {
		rx[k] = *v
	}
	return rx, s.TX, s.EncodingSA, s.Transmitting
}

// EventLog returns a copy of Events.
func (s *SecY) EventLog() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.Events...)
}
