package hw

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// TestPortLendsRingRoom forwards frames from one port's receive ring out
// of another port with an 8-byte header pushed in front of each, in the
// ring (as the stack pushes a PPPoE session header): ExtendFrame on the
// egress port lends the room before a frame of the ingress port's ring
// (the light ring, the V3 ring, the V3 ring with virtio-net headers), the
// RingHeadroom bytes before each frame overlap no other frame of the
// batch, and the peer gets the pushed frames. It refuses more room than
// RingHeadroom and memory outside the rings, and allocates nothing.
func TestPortLendsRingRoom(t *testing.T) {
	privileged(t)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"light ring", Config{}},
		{"V3 ring", Config{BlockRingOnly: true}},
		{"V3 ring, vnet", Config{BlockRingOnly: true, VnetHdr: VnetOn}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNetns(t)
			vethPair(t, n, "p0", "p1")
			vethPair(t, n, "q0", "q1")
			in := tc.cfg
			in.Name = "p1"
			pin := openIn(t, n, in)
			pout := openIn(t, n, Config{Name: "q1"})

			var (
				mu     sync.Mutex
				seen   []byte // a ring frame, for the allocation check
				errs   []string
				pushed int
			)
			handle := func(_ int, frames []Frame) {
				mu.Lock()
				defer mu.Unlock()
				before := make([][]byte, len(frames))
				for i, f := range frames {
					before[i] = bytes.Clone(f.Data)
				}
				// Scribble over all the room first, then check that no
				// frame of the batch changed.
				for i, f := range frames {
					x := pout.ExtendFrame(f.Data, RingHeadroom)
					if x == nil || len(x) != RingHeadroom+len(f.Data) || &x[RingHeadroom] != &f.Data[0] {
						errs = append(errs, fmt.Sprintf("frame %d of %d: ExtendFrame(frame, %d) did not lend the room before it", i, len(frames), RingHeadroom))
						return
					}
					for j := range RingHeadroom {
						x[j] = 0xee
					}
				}
				for i, f := range frames {
					if !bytes.Equal(f.Data, before[i]) {
						errs = append(errs, fmt.Sprintf("frame %d of %d changed by the room of the others", i, len(frames)))
					}
				}
				if pout.ExtendFrame(frames[0].Data, RingHeadroom+1) != nil {
					errs = append(errs, "ExtendFrame lent more than RingHeadroom")
				}
				for _, f := range frames {
					if !bytes.Contains(f.Data, []byte("lend-")) {
						continue
					}
					seen = f.Data
					// The session header goes after the MAC addresses:
					// they move 8 bytes forward, in the ring.
					x := pout.ExtendFrame(f.Data, 8)
					copy(x[:12], x[8:20])
					binary.BigEndian.PutUint16(x[12:], 0x8864)
					copy(x[14:20], "\x11\x00\x12\x34\x00\x00")
					if n, err := pout.WriteFrames([][]byte{x}); n != 1 || err != nil {
						errs = append(errs, fmt.Sprintf("WriteFrames(pushed frame) = %d, %v", n, err))
					}
					pushed++
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := pin.Run(ctx, handle); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("Run() = %v", err)
				}
			})
			t.Cleanup(func() { cancel(); wg.Wait() })

			send := n.RawSocket(t, "p0")
			recv := n.RawSocket(t, "q0")
			src := []byte{2, 0, 0, 0, 0, 0x10}
			var want [][]byte
			for i := range 3 { // back to back: often one V3 block
				f := netnstest.Frame(netnstest.Broadcast, src, fmt.Sprintf("lend-%d", i))
				send.Send(t, f)
				w := append(append(bytes.Clone(f[:12]), 0x88, 0x64, 0x11, 0x00, 0x12, 0x34, 0x00, 0x00), f[12:]...)
				want = append(want, w)
			}
			for i, w := range want {
				got, ok := recv.WaitFor(fmt.Sprintf("lend-%d", i), 3*time.Second)
				if !ok {
					t.Fatalf("frame lend-%d with its pushed header did not reach q0", i)
				}
				if !bytes.Equal(got.Data, w) {
					t.Errorf("q0 got\n% x\nwant\n% x", got.Data, w)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, e := range errs {
				t.Error(e)
			}
			if pushed != 3 {
				t.Errorf("pushed %d frames, want 3", pushed)
			}
			if x := pout.ExtendFrame(make([]byte, 64), 8); x != nil {
				t.Error("ExtendFrame lent room before a frame outside every ring")
			}
			// The ring stays mapped while the port is open: reading the
			// pointers of a handed-back frame is safe.
			if a := testing.AllocsPerRun(1000, func() { pout.ExtendFrame(seen, 8) }); a != 0 {
				t.Errorf("ExtendFrame allocs = %v, want 0", a)
			}
		})
	}
}

// TestReceiveRingsForgotten: a closed port's rings leave the set
// ExtendFrame looks in, so memory the kernel may map there later is
// never lent.
func TestPortReceiveRingsForgotten(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	count := func() int {
		if s := receiveRings.Load(); s != nil {
			return len(*s)
		}
		return 0
	}
	before := count()
	var p *Port
	var err error
	n.Do(t, func() { p, err = Open(Config{Name: "p1"}, nil) })
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got := count(); got <= before {
		t.Errorf("open port: %d receive rings recorded, want more than %d", got, before)
	}
	p.Close()
	if got := count(); got != before {
		t.Errorf("closed port: %d receive rings recorded, want %d", got, before)
	}
}
