package xsk

import (
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// inFlight is a frame the fake kernel took off a TX ring and has not yet
// completed: a NIC still reading it by DMA (zero-copy), so its bytes must
// not change until the completion.
type inFlight struct {
	desc unix.XDPDesc
	seq  uint64
}

// TestSendCompletionLag plays a kernel whose completions lag behind its
// sends, as a NIC's do under load (zero-copy: the frame is read by DMA
// until its completion) or a device that stalls: it takes descriptors off
// the TX ring at once but completes them late, in bursts of random size,
// sometimes not for many batches, never more than the completion ring
// holds. Meanwhile the router side keeps receiving and forwarding
// (received frames lent, other memory copied) and releases what it
// received now before and now after the completion. Over 10^6 frames
// (10^5 with -short):
//   - every frame offered is queued or counted (RingFull, NoFrame), never
//     both, and the frames taken off the ring are exactly the queued ones,
//     in order;
//   - no frame is reused while the kernel still holds it: each is
//     stamped with a sequence number that must still be there at its
//     completion;
//   - the Umem's accounting covers every frame at every step, and once
//     the kernel catches up and the caller releases what it holds, every
//     frame is free or on the fill ring again.
func TestSendCompletionLag(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	const ringSize = 64
	u := newTestUmem(t, UmemConfig{Frames: 512})
	rx := newFakeSocket(t, u, ringSize)
	tx := newFakeSocket(t, u, ringSize)
	rng := rand.New(rand.NewPCG(1, 2))

	var (
		seq       uint64 // the next stamp
		lastTaken uint64 // the last stamp taken off the TX ring
		flight    []inFlight
		held      []Desc // received, not yet released
		offered   int
		queued    int
		refused   int
		ringFull  int
		noFrame   int
		taken     int
		lagRounds int
		bursts    int
		stall     int  // batches left in this stall
		stopped   bool // the stall takes nothing off the TX ring
	)
	own := make([][]byte, 6) // ordinary memory: Send copies these
	for i := range own {
		own[i] = make([]byte, 64)
	}
	rdescs := make([]Desc, 16)
	batch := make([][]byte, 0, 24)
	stamp := func(b []byte) {
		seq++
		binary.BigEndian.PutUint64(b, seq)
	}
	// take moves everything on the TX ring into flight, checking the
	// order of the stamps.
	take := func() int {
		descs := kernelTakeTX(tx)
		for _, d := range descs {
			s := binary.BigEndian.Uint64(u.Frame(d.Addr, int(d.Len)))
			if s <= lastTaken {
				t.Fatalf("TX ring gave stamp %d after %d: out of order or twice", s, lastTaken)
			}
			lastTaken = s
			flight = append(flight, inFlight{d, s})
		}
		taken += len(descs)
		return len(descs)
	}
	// complete completes up to n of the oldest frames in flight, as
	// many as the completion ring has room for.
	complete := func(n int) {
		room := int(tx.comp.size - (atomic.LoadUint32(tx.comp.producer) - atomic.LoadUint32(tx.comp.consumer)))
		n = min(n, room, len(flight))
		done := make([]unix.XDPDesc, 0, n)
		for _, f := range flight[:n] {
			if s := binary.BigEndian.Uint64(u.Frame(f.desc.Addr, int(f.desc.Len))); s != f.seq {
				t.Fatalf("frame %#x changed while the kernel held it: stamp %d, sent as %d", f.desc.Addr, s, f.seq)
			}
			done = append(done, f.desc)
		}
		kernelComplete(tx, done)
		flight = flight[n:]
	}

	for offered < total {
		// Receive a few frames on rx (as many as its fill ring lets),
		// stamp them and forward them with some copies among them.
		rx.Refill()
		avail := int(atomic.LoadUint32(rx.fill.producer) - atomic.LoadUint32(rx.fill.consumer))
		roomRX := ringSize - int(atomic.LoadUint32(rx.rx.producer)-atomic.LoadUint32(rx.rx.consumer))
		k := min(rng.IntN(16)+1, avail, roomRX)
		frames := make([][]byte, k)
		for i := range frames {
			frames[i] = make([]byte, 64)
		}
		kernelReceive(rx, frames...)
		n := rx.Receive(rdescs)
		batch = batch[:0]
		for i, d := range rdescs[:n] {
			v := u.Data(d)
			stamp(v)
			batch = append(batch, v)
			if i%3 == 0 {
				o := own[i/3] // a buffer of its own in this batch
				stamp(o)
				batch = append(batch, o)
			}
		}
		r := tx.Send(batch)
		if sum := r.Queued + r.Bad + r.NoFrame + r.RingFull; sum != len(batch) || r.Bad != 0 {
			t.Fatalf("Send(%d frames) = %+v: want each queued or counted once, none bad", len(batch), r)
		}
		offered += len(batch)
		queued += r.Queued
		refused += r.RingFull + r.NoFrame
		ringFull += r.RingFull
		noFrame += r.NoFrame
		held = append(held, rdescs[:n]...)
		// Release what was received, now at once, now a few batches
		// later (after the frames completed, or while they are still
		// in flight).
		if rng.IntN(3) != 0 {
			u.Release(held)
			held = held[:0]
		}
		// The kernel takes what is queued, and completes late: in a
		// stall nothing for 5-60 batches (and in every other stall it
		// takes nothing off the TX ring either, a device that stopped),
		// otherwise a burst of random size.
		if stall == 0 && rng.IntN(20) == 0 {
			stall = 5 + rng.IntN(56)
			stopped = rng.IntN(2) == 0
		}
		if stall > 0 {
			stall--
			lagRounds++
			if !stopped {
				take()
			}
		} else {
			take()
			bursts++
			complete(rng.IntN(2 * ringSize))
		}
		if c := u.Counts(); c.Total() != u.Frames() {
			t.Fatalf("after %d frames Counts() = %+v covers %d of %d frames", offered, c, c.Total(), u.Frames())
		}
	}
	if refused == 0 {
		t.Errorf("no frame was refused in %d: the lag never filled the TX ring or the free list, the test proved nothing", offered)
	}
	// The kernel catches up; the caller releases what it holds.
	for len(flight) > 0 || tx.tx.pending() > 0 {
		take()
		complete(len(flight))
		tx.Complete()
	}
	tx.Complete()
	u.Release(held)
	if taken != queued {
		t.Errorf("the kernel took %d frames off the TX ring, Send queued %d", taken, queued)
	}
	checkCounts(t, u, "after the kernel caught up", Counts{})
	if n := u.BadDescs(); n != 0 {
		t.Errorf("BadDescs() = %d, want 0", n)
	}
	t.Logf("%d frames offered: %d queued, %d refused and counted (%d ring full, %d no free frame); %d batches with no completion, %d bursts", offered, queued, refused, ringFull, noFrame, lagRounds, bursts)
	if ringFull == 0 || noFrame == 0 {
		t.Errorf("the stalls never filled the TX ring (%d) or emptied the free list (%d): the test proved less than it says", ringFull, noFrame)
	}
}
