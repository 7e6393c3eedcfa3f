package xsk

import (
	"bytes"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests run Send's frame accounting against a socket whose rings
// are ordinary memory, with the test playing the kernel: it takes
// descriptors off the TX ring and completes them when it chooses, so
// every order of completion and release can be tried. No privilege is
// needed.

// fakeRing is a ring over ordinary memory: producer, consumer, flags.
func fakeRing(size int) ring {
	w := make([]uint32, 3)
	return ring{producer: &w[0], consumer: &w[1], flags: &w[2], mask: uint32(size - 1), size: uint32(size)}
}

// newFakeSocket adds a socket with rings of size entries to u.
func newFakeSocket(t *testing.T, u *Umem, size int) *Socket {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.nextID++
	s := &Socket{umem: u, id: u.nextID, fd: -1, scratch: make([]uint64, refillBatch), cscr: make([]uint64, refillBatch), copies: make([]sendCopy, refillBatch)}
	s.rx = &descRing{ring: fakeRing(size), descs: make([]unix.XDPDesc, size)}
	s.tx = &descRing{ring: fakeRing(size), descs: make([]unix.XDPDesc, size)}
	s.fill = &addrRing{ring: fakeRing(size), addrs: make([]uint64, size)}
	s.comp = &addrRing{ring: fakeRing(size), addrs: make([]uint64, size)}
	u.sockets = append(u.sockets, s)
	t.Cleanup(func() { s.Close() })
	return s
}

// kernelTakeTX consumes every descriptor on s's TX ring, as the kernel
// does when it sends them.
func kernelTakeTX(s *Socket) []unix.XDPDesc { return kernelTakeTXTo(s, nil) }

// kernelTakeTXTo is kernelTakeTX appending to out.
func kernelTakeTXTo(s *Socket, out []unix.XDPDesc) []unix.XDPDesc {
	prod := atomic.LoadUint32(s.tx.producer)
	for c := atomic.LoadUint32(s.tx.consumer); c != prod; c++ {
		out = append(out, s.tx.descs[c&s.tx.mask])
	}
	atomic.StoreUint32(s.tx.consumer, prod)
	return out
}

// kernelComplete puts the frames of descs on s's completion ring.
func kernelComplete(s *Socket, descs []unix.XDPDesc) {
	prod := atomic.LoadUint32(s.comp.producer)
	for _, d := range descs {
		s.comp.addrs[prod&s.comp.mask] = d.Addr
		prod++
	}
	atomic.StoreUint32(s.comp.producer, prod)
}

// kernelReceive receives frames into the frames s has on its fill ring
// and puts them on its RX ring.
func kernelReceive(s *Socket, frames ...[]byte) {
	u := s.umem
	fc := atomic.LoadUint32(s.fill.consumer)
	rp := atomic.LoadUint32(s.rx.producer)
	for _, f := range frames {
		addr := s.fill.addrs[fc&s.fill.mask] + uint64(u.DataOffset())
		fc++
		copy(u.Frame(addr, len(f)), f)
		s.rx.descs[rp&s.rx.mask] = unix.XDPDesc{Addr: addr, Len: uint32(len(f))}
		rp++
	}
	atomic.StoreUint32(s.fill.consumer, fc)
	atomic.StoreUint32(s.rx.producer, rp)
}

// receiveOne has the kernel receive f on s and returns its descriptor and
// the view of it the caller's handler gets.
func receiveOne(t *testing.T, s *Socket, f []byte) (Desc, []byte) {
	t.Helper()
	s.Refill()
	kernelReceive(s, f)
	var d [1]Desc
	if n := s.Receive(d[:]); n != 1 {
		t.Fatalf("Receive = %d frames, want 1", n)
	}
	return d[0], s.umem.Data(d[0])
}

func checkCounts(t *testing.T, u *Umem, what string, want Counts) {
	t.Helper()
	c := u.Counts()
	// Fill is whatever Refill put on the fill rings; the rest must be
	// exact.
	want.Fill = c.Fill
	want.Free = u.Frames() - want.Fill - want.RX - want.Held - want.Lent - want.TX - want.Completion
	if c != want || c.Total() != u.Frames() {
		t.Errorf("%s: Counts() = %+v, want %+v", what, c, want)
	}
}

// TestSendLends checks both orders in which a lent frame's two owners
// let go, that a frame is lent once (a second Send copies it), that
// ordinary memory is copied, and that the frames leave with their bytes.
func TestSendLends(t *testing.T) {
	u := newTestUmem(t, UmemConfig{Frames: 64})
	rx := newFakeSocket(t, u, 16)
	tx := newFakeSocket(t, u, 16)
	frame := bytes.Repeat([]byte{0xab}, 100)

	t.Run("released first", func(t *testing.T) {
		d, view := receiveOne(t, rx, frame)
		r := tx.Send([][]byte{view})
		if r != (SendResult{Queued: 1, Lent: 1, Bytes: 100}) {
			t.Fatalf("Send(received frame) = %+v, want it queued and lent", r)
		}
		checkCounts(t, u, "sent, still held", Counts{Lent: 1})
		if n := u.Release([]Desc{d}); n != 1 {
			t.Errorf("Release(lent frame) = %d, want 1", n)
		}
		checkCounts(t, u, "released", Counts{TX: 1})
		sent := kernelTakeTX(tx)
		if len(sent) != 1 || sent[0].Addr != d.Addr || sent[0].Len != d.Len {
			t.Fatalf("TX ring held %+v, want the received frame's own descriptor %+v", sent, d)
		}
		kernelComplete(tx, sent)
		checkCounts(t, u, "completed", Counts{Completion: 1})
		tx.Complete()
		checkCounts(t, u, "recycled", Counts{})
	})

	t.Run("completed first", func(t *testing.T) {
		d, view := receiveOne(t, rx, frame)
		if r := tx.Send([][]byte{view}); r.Lent != 1 {
			t.Fatalf("Send = %+v, want the frame lent", r)
		}
		kernelComplete(tx, kernelTakeTX(tx))
		tx.Complete()
		checkCounts(t, u, "completed while held", Counts{Held: 1})
		// Still the caller's: a second writer copies it, however it
		// asks.
		r := rx.Send([][]byte{view})
		if r != (SendResult{Queued: 1, Bytes: 100}) {
			t.Errorf("Send(frame lent before) = %+v, want it queued as a copy", r)
		}
		copied := kernelTakeTX(rx)
		if len(copied) != 1 || copied[0].Addr>>u.shift == d.Addr>>u.shift || !bytes.Equal(u.Frame(copied[0].Addr, int(copied[0].Len)), frame) {
			t.Fatalf("second Send put %+v on the ring, want a copy of the frame in another frame", copied)
		}
		kernelComplete(rx, copied)
		rx.Complete()
		u.Release([]Desc{d})
		checkCounts(t, u, "released after completion", Counts{})
	})

	t.Run("lent once per batch", func(t *testing.T) {
		d, view := receiveOne(t, rx, frame)
		other := bytes.Repeat([]byte{0xcd}, 60)
		r := tx.Send([][]byte{view, other, view})
		if r != (SendResult{Queued: 3, Lent: 1, Bytes: 260}) {
			t.Fatalf("Send(frame, other memory, frame again) = %+v, want 3 queued, 1 lent", r)
		}
		sent := kernelTakeTX(tx)
		for i, want := range [][]byte{frame, other, frame} {
			if got := u.Frame(sent[i].Addr, int(sent[i].Len)); !bytes.Equal(got, want) {
				t.Errorf("TX descriptor %d holds % x..., want % x...", i, got[:4], want[:4])
			}
		}
		if sent[0].Addr != d.Addr || sent[2].Addr == d.Addr {
			t.Errorf("TX descriptors %+v: want the first from the received frame, the third a copy", sent)
		}
		checkCounts(t, u, "one lent, two copies", Counts{Lent: 1, TX: 2})
		u.Release([]Desc{d})
		kernelComplete(tx, sent)
		tx.Complete()
		checkCounts(t, u, "all done", Counts{})
	})

	if n := u.BadDescs(); n != 0 {
		t.Errorf("BadDescs() = %d, want 0", n)
	}
}

// TestSendRingFull fills the TX ring: frames past its room are refused
// and counted, not claimed, so the caller's frame stays the caller's.
func TestSendRingFull(t *testing.T) {
	u := newTestUmem(t, UmemConfig{Frames: 64})
	rx := newFakeSocket(t, u, 16)
	tx := newFakeSocket(t, u, 4)
	filler := make([][]byte, 4)
	for i := range filler {
		filler[i] = make([]byte, 60)
	}
	if r := tx.Send(filler); r.Queued != 4 {
		t.Fatalf("Send(4 into an empty 4-entry ring) = %+v", r)
	}
	d, view := receiveOne(t, rx, make([]byte, 60))
	if r := tx.Send([][]byte{view, view}); r != (SendResult{RingFull: 2}) {
		t.Errorf("Send into a full ring = %+v, want both counted RingFull", r)
	}
	checkCounts(t, u, "ring full", Counts{Held: 1, TX: 4})
	u.Release([]Desc{d})
	kernelComplete(tx, kernelTakeTX(tx))
	tx.Complete()
	checkCounts(t, u, "drained", Counts{})
}

// TestSendBadAndNoFrame: empty and oversized frames are refused, and a
// copy without a free frame is counted; neither takes a frame.
func TestSendBadAndNoFrame(t *testing.T) {
	u := newTestUmem(t, UmemConfig{Frames: 2})
	tx := newFakeSocket(t, u, 8)
	big := make([]byte, u.FrameSize()-u.DataOffset()+1)
	f := make([]byte, 60)
	r := tx.Send([][]byte{nil, big, f, f, f})
	if r != (SendResult{Queued: 2, Bytes: 120, Bad: 2, NoFrame: 1}) {
		t.Errorf("Send(empty, oversized, 3 with 2 free frames) = %+v", r)
	}
	checkCounts(t, u, "two copies queued", Counts{TX: 2})
}

// TestCloseReturnsLentFrames closes the socket whose TX ring holds frames
// received on another: those the receiver still holds go back to it,
// those it released go to the free list.
func TestCloseReturnsLentFrames(t *testing.T) {
	u := newTestUmem(t, UmemConfig{Frames: 64})
	rx := newFakeSocket(t, u, 16)
	tx := newFakeSocket(t, u, 16)
	d1, v1 := receiveOne(t, rx, make([]byte, 60))
	d2, v2 := receiveOne(t, rx, make([]byte, 60))
	if r := tx.Send([][]byte{v1, v2}); r.Lent != 2 {
		t.Fatalf("Send = %+v, want both lent", r)
	}
	u.Release([]Desc{d1}) // the ring owns it now; d2 is still held
	checkCounts(t, u, "before close", Counts{Lent: 1, TX: 1})
	tx.Close()
	checkCounts(t, u, "after the TX socket closed", Counts{Held: 1})
	u.Release([]Desc{d2})
	checkCounts(t, u, "after release", Counts{})
	if n := u.BadDescs(); n != 0 {
		t.Errorf("BadDescs() = %d, want 0", n)
	}
}

// TestLocateExtend checks the pointer range check and the headroom a
// frame lends.
func TestLocateExtend(t *testing.T) {
	u := newTestUmem(t, UmemConfig{FrameSize: 2048, Frames: 4})
	f := u.Frame(2048+256, 100)
	if a, ok := u.Locate(f); !ok || a != 2048+256 {
		t.Errorf("Locate(frame at 2304) = %d, %v", a, ok)
	}
	if _, ok := u.Locate(make([]byte, 100)); ok {
		t.Error("Locate(other memory) = ok")
	}
	if _, ok := u.Locate(u.mem[2000:2100]); ok {
		t.Error("Locate(bytes across two frames) = ok")
	}
	x := u.Extend(f, 16)
	if len(x) != 116 || &x[16] != &f[0] || cap(x) != 2048-256+16 {
		t.Errorf("Extend(f, 16): len %d cap %d, want 116 and %d with f at [16]", len(x), cap(x), 2048-256+16)
	}
	if u.Extend(f, 257) != nil || u.Extend(make([]byte, 10), 1) != nil {
		t.Error("Extend past the frame's start or of other memory != nil")
	}
	if u.Extend(f, 256) == nil {
		t.Error("Extend(f, XDP_PACKET_HEADROOM) = nil, want the whole headroom")
	}
}

// TestSendAllocs: a lent and a copied frame per Send, nothing allocated.
func TestSendAllocs(t *testing.T) {
	u := newTestUmem(t, UmemConfig{Frames: 64})
	rx := newFakeSocket(t, u, 16)
	tx := newFakeSocket(t, u, 16)
	other := make([]byte, 60)
	frames := make([][]byte, 2)
	var d [1]Desc
	sent := make([]unix.XDPDesc, 0, 16)
	step := func() {
		rx.Refill()
		kernelReceive(rx, other)
		rx.Receive(d[:])
		frames[0], frames[1] = u.Data(d[0]), other
		tx.Send(frames)
		u.Release(d[:])
		kernelComplete(tx, kernelTakeTXTo(tx, sent[:0]))
		tx.Complete()
	}
	step()
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Errorf("Send with a lent and a copied frame allocates %v times, want 0", n)
	}
	checkCounts(t, u, "after 1001 rounds", Counts{})
}
