package stack

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/macsec"
)

// lendWriter stands in for an af_xdp port over its UMEM: mem is the
// receive memory it sends from, ExtendFrame lends the room before a frame
// lying in it, and WriteFrames records each frame and where it lay (-1:
// outside mem, so the port would copy it).
type lendWriter struct {
	mem    []byte
	frames [][]byte
	offs   []int
}

func newLendWriter() *lendWriter { return &lendWriter{mem: make([]byte, 4096)} }

// offset is where b starts in mem, or -1.
func (w *lendWriter) offset(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	off := uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&w.mem[0]))
	if off >= uintptr(len(w.mem)) {
		return -1
	}
	return int(off)
}

func (w *lendWriter) ExtendFrame(f []byte, head int) []byte {
	off := w.offset(f)
	if off < head {
		return nil
	}
	return w.mem[off-head : off+len(f)]
}

func (w *lendWriter) WriteFrames(frames [][]byte) (int, error) {
	for _, f := range frames {
		w.frames = append(w.frames, bytes.Clone(f))
		w.offs = append(w.offs, w.offset(f))
	}
	return len(frames), nil
}

// received puts f into w's memory at off, as a port receives it there.
func (w *lendWriter) received(f []byte, off int) []byte {
	return w.mem[off : off+copy(w.mem[off:], f)]
}

// TestFastPathTagsInPlace sends a fast-path frame out of a tagged
// interface: inside a receive batch, from a writer's receive memory, the
// tags are pushed in front of the frame where it lies and the frame
// leaves from there (4 or 8 octets before where it arrived); from memory
// the writer does not send from, or outside a batch, it is copied. The
// bytes on the wire are the same either way, with the priority the frame
// arrived with.
func TestFastPathTagsInPlace(t *testing.T) {
	const at = 256
	plain := ethFrame(hostMAC, routerMAC, 0x0800, bytes.Repeat([]byte{0x45}, 46))
	for _, tc := range []struct {
		name     string
		vlan     []uint16
		tpid     uint16
		inMem    bool
		batch    bool
		wantOff  int
		wantTags []uint16
	}{
		{"one tag in place", []uint16{2}, 0, true, true, at - 4, []uint16{0x8100, 5<<13 | 2}},
		{"QinQ in place", []uint16{100, 10}, TPID8021AD, true, true, at - 8, []uint16{0x88a8, 5<<13 | 100, 0x8100, 5<<13 | 10}},
		{"other memory", []uint16{2}, 0, false, true, -1, []uint16{0x8100, 5<<13 | 2}},
		{"outside a batch", []uint16{2}, 0, true, false, -1, []uint16{0x8100, 5<<13 | 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newLendWriter()
			e := testEndpoint(nil)
			e.setWriter(w)
			e.vlan.Store(newEgressVLAN(&InterfaceConfig{VLAN: tc.vlan, VLANProtocol: tc.tpid, PCP: 1}))
			e.tx = new(txBatcher)
			if tc.batch {
				e.tx.begin()
			}
			f := bytes.Clone(plain)
			if tc.inMem {
				f = w.received(plain, at)
			}
			e.txMu.Lock()
			fw := e.writer.Load()
			e.appendFastLocked(fw, f, 5, false)
			e.sendPendingLocked(fw)
			e.txMu.Unlock()
			if len(w.frames) != 1 {
				t.Fatalf("writer got %d frames, want 1", len(w.frames))
			}
			if want := tagged(plain, tc.wantTags...); !bytes.Equal(w.frames[0], want) {
				t.Errorf("frame on the wire\n% x\nwant\n% x", w.frames[0], want)
			}
			if w.offs[0] != tc.wantOff {
				t.Errorf("frame sent from offset %d of the receive memory, want %d (-1: a copy)", w.offs[0], tc.wantOff)
			}
		})
	}
}

// TestFastPathTagsInPlaceAllocs: pushing tags in place allocates nothing.
func TestFastPathTagsInPlaceAllocs(t *testing.T) {
	w := newLendWriter()
	plain := ethFrame(hostMAC, routerMAC, 0x0800, bytes.Repeat([]byte{0x45}, 46))
	e := testEndpoint(nil)
	e.setWriter(discardLender{w})
	e.vlan.Store(newEgressVLAN(&InterfaceConfig{VLAN: []uint16{2}}))
	e.tx = new(txBatcher)
	e.tx.begin()
	fw := e.writer.Load()
	run := func() {
		f := w.received(plain, 256)
		e.txMu.Lock()
		e.appendFastLocked(fw, f, -1, false)
		e.sendPendingLocked(fw)
		e.txMu.Unlock()
	}
	run()
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Errorf("a tagged fast-path frame sent in place allocates %v times, want 0", n)
	}
}

// discardLender is a lendWriter that keeps nothing it is given.
type discardLender struct{ *lendWriter }

func (discardLender) WriteFrames(frames [][]byte) (int, error) { return len(frames), nil }

// TestMACsecSealsInReceiveBuffer forwards a frame from a receive buffer
// out of a SecY whose lower interface is tagged and whose port sends from
// that memory: the SecY seals it in place (SecTAG in front, ICV behind),
// the lower tag is pushed in front of that, and the frame leaves from its
// receive buffer, 20 octets before where it arrived. A peer SecY with the
// same key accepts it and gets the frame back.
func TestMACsecSealsInReceiveBuffer(t *testing.T) {
	const at = 256
	for _, encrypt := range []bool{false, true} {
		t.Run(map[bool]string{false: "integrity", true: "encrypt"}[encrypt], func(t *testing.T) {
			w := newLendWriter()
			lower := testEndpoint(nil)
			lower.setWriter(w)
			lower.vlan.Store(newEgressVLAN(&InterfaceConfig{VLAN: []uint16{2}}))
			l := NewMACsecLink()
			upper := testEndpoint(nil)
			upper.setWriter(l)
			upper.tx = new(txBatcher)
			upper.tx.begin()
			l.lower.Store(lower)
			l.upper.Store(upper)
			key := macsec.NewKey(bytes.Repeat([]byte{0x42}, 16))
			sci := macsec.MakeSCI([6]byte(routerMAC), 1)
			cfg := macsec.DefaultConfig(sci)
			cfg.Encrypt = encrypt
			cfg.TX, cfg.RX = l.Transmit, l.Receive
			secy, err := macsec.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer secy.Close()
			if err := secy.InstallTXSA(macsec.SAConfig{AN: 0, PN: 1, Key: key}); err != nil {
				t.Fatal(err)
			}
			l.SetSecY(secy)

			plain := ethFrame(hostMAC, routerMAC, 0x0800, bytes.Repeat([]byte{0x45}, 100))
			f := w.received(plain, at)
			upper.txMu.Lock()
			fw := upper.writer.Load()
			upper.appendFastLocked(fw, f, -1, false)
			upper.sendPendingLocked(fw)
			upper.txMu.Unlock()
			if len(w.frames) != 1 {
				t.Fatalf("lower writer got %d frames, want 1", len(w.frames))
			}
			if want := at - macsec.SecTAGSCILen - vlanTagLength; w.offs[0] != want {
				t.Errorf("protected frame sent from offset %d of the receive memory, want %d (-1: a copy)", w.offs[0], want)
			}
			out := w.frames[0]
			if binary.BigEndian.Uint16(out[12:]) != 0x8100 || binary.BigEndian.Uint16(out[14:])&0xfff != 2 || binary.BigEndian.Uint16(out[16:]) != etherTypeMACsec {
				t.Fatalf("frame on the wire starts % x, want the MACs, tag 2, then a SecTAG", out[:18])
			}

			// The peer: untag, verify, compare.
			var got [][]byte
			rcfg := macsec.DefaultConfig(macsec.MakeSCI([6]byte(hostMAC), 1))
			rcfg.TX = func([][]byte) {}
			rcfg.RX = func(fs [][]byte) {
				for _, f := range fs {
					got = append(got, bytes.Clone(f))
				}
			}
			peer, err := macsec.New(rcfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			if err := peer.AddRXSC(sci); err != nil {
				t.Fatal(err)
			}
			if err := peer.InstallRXSA(sci, macsec.SAConfig{AN: 0, PN: 1, Key: key}); err != nil {
				t.Fatal(err)
			}
			untagged := append(bytes.Clone(out[:12]), out[16:]...)
			peer.Verify([][]byte{untagged})
			if len(got) != 1 || !bytes.Equal(got[0], plain) {
				t.Errorf("peer SecY delivered %d frames (% x), want the frame sent", len(got), got)
			}
		})
	}
}

var _ hw.FrameWriter = (*lendWriter)(nil)
