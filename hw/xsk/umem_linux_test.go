package xsk

import (
	"encoding/binary"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests need no privilege: a UMEM is ordinary anonymous memory
// until a socket registers it.

func TestNewUmemErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  UmemConfig
		want string
	}{
		{"frame size", UmemConfig{FrameSize: 1024}, "frame size 1024"},
		{"negative frames", UmemConfig{Frames: -1}, "-1 frames"},
		{"too many frames", UmemConfig{Frames: maxFrames + 1}, "frames, want 1 to"},
		{"headroom", UmemConfig{FrameSize: 2048, Headroom: 300}, "headroom 300"},
		{"negative headroom", UmemConfig{Headroom: -1}, "headroom -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := NewUmem(tc.cfg)
			if err == nil {
				u.Close()
				t.Fatalf("NewUmem(%+v) = nil error, want one containing %q", tc.cfg, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewUmem(%+v) = %v, want it to contain %q", tc.cfg, err, tc.want)
			}
		})
	}
}

func newTestUmem(t testing.TB, cfg UmemConfig) *Umem {
	t.Helper()
	u, err := NewUmem(cfg)
	if err != nil {
		t.Fatalf("NewUmem(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := u.Close(); err != nil {
			t.Errorf("Umem.Close: %v", err)
		}
	})
	return u
}

func TestUmemAllocRelease(t *testing.T) {
	u := newTestUmem(t, UmemConfig{FrameSize: 4096, Frames: 8, Headroom: 64})
	if got, want := u.DataOffset(), 64+unix.XDP_PACKET_HEADROOM; got != want {
		t.Errorf("DataOffset() = %d, want %d", got, want)
	}
	descs := make([]Desc, 10)
	if n := u.Alloc(descs); n != 8 {
		t.Fatalf("Alloc(10 of 8 frames) = %d, want 8", n)
	}
	seen := map[uint64]bool{}
	for _, d := range descs[:8] {
		if d.Addr%4096 != uint64(u.DataOffset()) || seen[d.Addr/4096] {
			t.Errorf("Alloc gave address %#x: want a distinct frame at offset %d", d.Addr, u.DataOffset())
		}
		seen[d.Addr/4096] = true
	}
	if c := u.Counts(); c != (Counts{Held: 8}) {
		t.Errorf("Counts() after Alloc = %+v, want all 8 Held", c)
	}
	if n := u.Alloc(descs); n != 0 {
		t.Errorf("Alloc on an empty UMEM = %d, want 0", n)
	}
	if n := u.Release(descs[:3]); n != 3 {
		t.Errorf("Release(3) = %d, want 3", n)
	}
	// Releasing the same frames again, or addresses outside the UMEM,
	// is refused and counted.
	bad := []Desc{descs[0], {Addr: 8 * 4096}, {Addr: 1 << 40}}
	if n := u.Release(bad); n != 0 {
		t.Errorf("Release(twice-freed and foreign frames) = %d, want 0", n)
	}
	if got := u.BadDescs(); got != 3 {
		t.Errorf("BadDescs() = %d, want 3", got)
	}
	if c := u.Counts(); c != (Counts{Free: 3, Held: 5}) || c.Total() != 8 {
		t.Errorf("Counts() = %+v, want Free 3 Held 5", c)
	}
	u.Release(descs[3:8])
	if c := u.Counts(); c != (Counts{Free: 8}) {
		t.Errorf("Counts() after releasing all = %+v, want Free 8", c)
	}
}

func TestUmemFrame(t *testing.T) {
	u := newTestUmem(t, UmemConfig{FrameSize: 2048, Frames: 4})
	for _, tc := range []struct {
		addr uint64
		n    int
		ok   bool
	}{
		{0, 2048, true},
		{256, 1500, true},
		{2048 + 256, 1792, true},
		{256, 1793, false}, // past its frame
		{3*2048 + 2047, 1, true},
		{4 * 2048, 1, false}, // past the UMEM
		{1 << 63, 1, false},
		{0, -1, false},
	} {
		b := u.Frame(tc.addr, tc.n)
		if (b != nil) != tc.ok {
			t.Errorf("Frame(%#x, %d) = %d bytes (nil %v), want ok %v", tc.addr, tc.n, len(b), b == nil, tc.ok)
			continue
		}
		if b != nil {
			end := (tc.addr/2048 + 1) * 2048
			if len(b) != tc.n || uint64(cap(b)) != end-tc.addr {
				t.Errorf("Frame(%#x, %d): len %d cap %d, want len %d cap %d", tc.addr, tc.n, len(b), cap(b), tc.n, end-tc.addr)
			}
		}
	}
	// Frames do not overlap: a write through one is not seen in another.
	u.Frame(2048, 2048)[0] = 0xaa
	if u.Frame(0, 2048)[2047] != 0 || u.Frame(4096, 1)[0] != 0 || u.Frame(2048, 1)[0] != 0xaa {
		t.Error("frames overlap")
	}
}

func TestInstructions(t *testing.T) {
	for _, a := range []Action{ActionPass, ActionDrop} {
		insns := instructions(7, a)
		// Marshal checks every instruction encodes.
		var order binary.ByteOrder = binary.LittleEndian
		if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 {
			order = binary.BigEndian
		}
		var b strings.Builder
		if err := insns.Marshal(&b, order); err != nil {
			t.Fatalf("instructions(%d).Marshal: %v", a, err)
		}
		// 5 instructions, the map load taking two slots.
		if got := b.Len(); got != 6*8 {
			t.Errorf("instructions(%d) is %d bytes, want 48", a, got)
		}
		if got := insns[2].Constant; got != int64(a.xdp()) {
			t.Errorf("instructions(%d): fallback r3 = %d, want %d", a, got, a.xdp())
		}
	}
}
