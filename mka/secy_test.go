package mka_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/mka/mkatest"
)

// frameSink collects the frames a SecY hands to a handler.
type frameSink struct {
	mu     sync.Mutex
	frames [][]byte
}

func (s *frameSink) handler(fs [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range fs {
		s.frames = append(s.frames, append([]byte(nil), f...))
	}
}

func (s *frameSink) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.frames
	s.frames = nil
	return f
}

type realNode struct {
	p      *mka.Participant
	secy   *macsec.SecY
	tx, rx frameSink
	sci    macsec.SCI
}

// TestWithMacsecSecY runs two participants on real macsec SecYs and sends
// a frame each way after every step of the handshake and of two rekeys:
// once both transmit, every frame must verify at the other end, including
// the XPN suites (SSCI and salt from MKA).
func TestWithMacsecSecY(t *testing.T) {
	for _, suite := range []macsec.CipherSuite{macsec.GCMAES128, macsec.GCMAESXPN256} {
		t.Run(suite.String(), func(t *testing.T) {
			clock, wire := mkatest.NewClock(), &mkatest.Wire{}
			var nodes []*realNode
			for i, sci := range []macsec.SCI{sciA, sciB} {
				n := &realNode{sci: sci}
				cfg := macsec.DefaultConfig(sci)
				cfg.Cipher, cfg.Encrypt, cfg.ReplayProtect, cfg.Workers = suite, true, true, 1
				cfg.TX, cfg.RX = n.tx.handler, n.rx.handler
				s, err := macsec.New(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				n.secy = s
				port := wire.NewPort(nil)
				n.p, err = mka.New(mka.Config{CAK: cak(t, cakHex, cknHex), SCI: sci, KeyServerPriority: uint8(10 + i),
					CipherSuite: suite, Confidentiality: true, Clock: clock}, s, port, nil)
				if err != nil {
					t.Fatal(err)
				}
				port.SetReceiver(n.p.Receive)
				nodes = append(nodes, n)
			}
			plain := append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00}, bytes.Repeat([]byte{0x45}, 50)...)
			sent, lost := 0, 0
			exchange := func() {
				for i, from := range nodes {
					to := nodes[1-i]
					from.secy.Protect([][]byte{append([]byte(nil), plain...)})
					for _, f := range from.tx.take() {
						sent++
						to.secy.Verify([][]byte{f})
						got := to.rx.take()
						if len(got) != 1 || !bytes.Equal(got[0], plain) {
							lost++
							t.Errorf("frame from %v (AN %d) not delivered by %v", from.sci, f[14]&3, to.sci)
						}
					}
				}
			}
			step := func(d time.Duration) {
				for el := time.Duration(0); el < d; el += 100 * time.Millisecond {
					clock.Advance(100 * time.Millisecond)
					for _, n := range nodes {
						n.p.Tick()
					}
					wire.Deliver(exchange)
					exchange()
				}
			}
			step(3 * time.Second)
			if sent == 0 {
				t.Fatal("no frame protected after 3 s")
			}
			for r := 0; r < 2; r++ {
				if err := nodes[0].p.Rekey(); err != nil {
					t.Fatal(err)
				}
				wire.Deliver(exchange)
				step(3 * time.Second)
			}
			if s := nodes[0].p.State(); s.Latest == nil || s.Latest.KI.KN != 3 || s.Previous != nil {
				t.Errorf("after two rekeys: %+v", s.Latest)
			}
			if lost != 0 || nodes[0].p.Stats().SecYErrors.Load()+nodes[1].p.Stats().SecYErrors.Load() != 0 {
				t.Errorf("%d of %d frames lost, secy errors %d/%d", lost, sent, nodes[0].p.Stats().SecYErrors.Load(), nodes[1].p.Stats().SecYErrors.Load())
			}
			t.Logf("%d frames protected and verified across 3 SAKs", sent)
		})
	}
}

// rebuildingSecY is a real SecY that SwitchCipherSuite replaces by a new
// one of the other suite, as router/macsec_mka.go does.
type rebuildingSecY struct {
	*macsec.SecY
	t   *testing.T
	cfg macsec.Config
}

func (r *rebuildingSecY) SwitchCipherSuite(suite macsec.CipherSuite) error {
	c := r.cfg
	c.Cipher = suite
	s, err := macsec.New(c, nil)
	if err != nil {
		return err
	}
	r.SecY.Close()
	r.SecY = s
	r.t.Cleanup(func() { s.Close() })
	return nil
}

// TestSuiteSwitchWithMacsecSecY: a GCM-AES-256 participant whose real
// SecY is rebuilt for a GCM-AES-128 key server's SAK exchanges frames
// both ways with it once both transmit, and through a rekey.
func TestSuiteSwitchWithMacsecSecY(t *testing.T) {
	clock, wire := mkatest.NewClock(), &mkatest.Wire{}
	var secys [2]*rebuildingSecY
	var ps [2]*mka.Participant
	var tx, rx [2]frameSink
	for i, sci := range []macsec.SCI{sciA, sciB} {
		suite := []macsec.CipherSuite{macsec.GCMAES128, macsec.GCMAES256}[i]
		cfg := macsec.DefaultConfig(sci)
		cfg.Cipher, cfg.Encrypt, cfg.ReplayProtect, cfg.Workers = suite, true, true, 1
		cfg.TX, cfg.RX = tx[i].handler, rx[i].handler
		s, err := macsec.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		secys[i] = &rebuildingSecY{SecY: s, t: t, cfg: cfg}
		port := wire.NewPort(nil)
		mc := mka.Config{CAK: cak(t, cakHex, cknHex), SCI: sci, KeyServerPriority: uint8(10 + i), CipherSuite: suite,
			Confidentiality: true, Clock: clock}
		if i == 1 {
			mc.CipherSuites = []macsec.CipherSuite{macsec.GCMAES128}
		}
		ps[i], err = mka.New(mc, secys[i], port, nil)
		if err != nil {
			t.Fatal(err)
		}
		port.SetReceiver(ps[i].Receive)
	}
	plain := append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00}, bytes.Repeat([]byte{0x45}, 50)...)
	delivered := 0
	exchange := func() {
		for i := range 2 {
			secys[i].Protect([][]byte{append([]byte(nil), plain...)})
			for _, f := range tx[i].take() {
				secys[1-i].Verify([][]byte{f})
				got := rx[1-i].take()
				if len(got) != 1 || !bytes.Equal(got[0], plain) {
					t.Errorf("frame %d→%d (AN %d) not delivered", i, 1-i, f[14]&3)
				} else {
					delivered++
				}
			}
		}
	}
	step := func(d time.Duration) {
		for el := time.Duration(0); el < d; el += 100 * time.Millisecond {
			clock.Advance(100 * time.Millisecond)
			for _, p := range ps {
				p.Tick()
			}
			wire.Deliver(exchange)
			exchange()
		}
	}
	step(3 * time.Second)
	if secys[1].Config().Cipher != macsec.GCMAES128 || ps[1].State().CipherSuite != macsec.GCMAES128 {
		t.Fatalf("B's SecY runs %v, want GCM-AES-128", secys[1].Config().Cipher)
	}
	if err := ps[0].Rekey(); err != nil {
		t.Fatal(err)
	}
	step(3 * time.Second)
	if delivered == 0 || ps[1].Stats().SecYErrors.Load() != 0 || ps[1].Stats().SuiteSwitches.Load() != 1 {
		t.Errorf("%d frames delivered, B's secy errors %d, switches %d; want frames, 0, 1",
			delivered, ps[1].Stats().SecYErrors.Load(), ps[1].Stats().SuiteSwitches.Load())
	}
	t.Logf("%d frames protected and verified on the switched suite", delivered)
}
