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
