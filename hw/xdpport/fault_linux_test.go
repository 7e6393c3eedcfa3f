package xdpport

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xsk"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"golang.org/x/sys/unix"
)

// The faults an AF_XDP port must survive, beside TestRxRingFull (a
// stalled receiver: the fill ring runs dry, xdp_fill_empty) and
// TestFrameAccounting (10^6 frames out with the TX ring overrun): each
// ends with its drops counted and every Umem frame back where it
// belongs.

// checkFrames fails t unless every Umem frame of p is free or on the
// fill ring, none is held, sent or waiting for completion, and no
// descriptor was refused: the port leaked nothing. It reaps completions
// first, as the next WriteFrames would.
func checkFrames(t *testing.T, p *Port, when string) {
	t.Helper()
	var c xsk.Counts
	for end := time.Now().Add(5 * time.Second); ; {
		for _, s := range p.socks {
			s.Complete()
		}
		c = p.umem.Counts()
		// Held counts a batch the receive loop is handing on: it is
		// back on the fill ring once the loop catches up with what is
		// still arriving, so wait for that too rather than catch the
		// loop mid-batch.
		if c.TX == 0 && c.Completion == 0 && c.Held == 0 || time.Now().After(end) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Frames on the RX ring are received and not yet read: traffic may
	// still arrive.
	if c.Held != 0 || c.TX != 0 || c.Completion != 0 || c.Free+c.Fill+c.RX != p.umem.Frames() || c.Total() != p.umem.Frames() {
		t.Errorf("%s: Umem.Counts() = %+v, want all %d frames free, on the fill ring or waiting on the RX ring", when, c, p.umem.Frames())
	}
	if bd := p.umem.BadDescs(); bd != 0 {
		t.Errorf("%s: Umem.BadDescs() = %d, want 0", when, bd)
	}
}

// flood sends frame out of fd (a packet socket bound to the port's peer)
// until stop is closed or n frames went, ignoring errors (the link may
// be down), and returns how many the kernel took.
func flood(fd int, frame []byte, n int, stop <-chan struct{}) int {
	sent := 0
	for i := 0; n == 0 || i < n; i++ {
		if i&63 == 0 {
			select {
			case <-stop:
				return sent
			default:
			}
		}
		if _, err := unix.Write(fd, frame); err == nil {
			sent++
		}
	}
	return sent
}

// TestFillRingFull: at rest the fill ring holds all it can, and Refill
// on it posts nothing and leaves the rest of the Umem free. Then 10^6
// frames arrive (20,000 with -short) with the receive loop refilling the
// full ring after every batch: every frame is received or counted by
// the kernel (veth drops what its own ring cannot take, counted there),
// the port's counter matches the handler's, and afterwards every Umem
// frame is free or back on the fill ring.
func TestFillRingFull(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 20_000
	}
	ns := newLab(t)
	p := open(t, ns, "va")
	s := p.socks[0]
	c := p.umem.Counts()
	if c.Fill != ringSize || c.Free != p.umem.Frames()-ringSize {
		t.Fatalf("after Open Umem.Counts() = %+v, want the fill ring full (%d) and the rest free", c, ringSize)
	}
	if n := s.Refill(); n != 0 {
		t.Errorf("Refill() on a full fill ring = %d, want 0", n)
	}
	if c2 := p.umem.Counts(); c2 != c {
		t.Errorf("Refill() on a full fill ring moved frames: %+v, was %+v", c2, c)
	}
	in := &counter{marker: []byte("fill")}
	run(t, p, in.handle)
	fd := ns.PacketSocket(t, "vb", unix.ETH_P_ALL)
	defer unix.Close(fd)
	sent := flood(fd, netnstest.Frame(macA, macB, "fill"), total, nil)
	// Until the count stops growing.
	for prev := int64(-1); in.n.Load() != prev; {
		prev = in.n.Load()
		time.Sleep(100 * time.Millisecond)
	}
	st := p.Stats()
	got := uint64(in.n.Load())
	drops := st.Drops[DropFillEmpty] + st.Drops[hw.DropRing]
	t.Logf("sent %d, received %d, xdp_fill_empty %d, ring %d", sent, got, st.Drops[DropFillEmpty], st.Drops[hw.DropRing])
	if got == 0 || got+drops > uint64(sent) {
		t.Errorf("received %d of %d frames with %d counted drops: want some received and none counted twice", got, sent, drops)
	}
	if st.RxPackets != got {
		t.Errorf("Stats().RxPackets = %d, handler saw %d", st.RxPackets, got)
	}
	checkFrames(t, p, "after the flood")
	if c := p.umem.Counts(); c.Fill != ringSize {
		t.Errorf("after the flood the fill ring holds %d, want it full again (%d)", c.Fill, ringSize)
	}
}

// TestLinkDownUnderLoad takes the link down while the port transmits
// and the peer floods it, then up again: by the peer (the port loses
// its carrier) and by the port's own interface (ip link set down).
// While it is down the kernel holds on to what is on the TX ring (its
// completions lag: copy mode sends at most one frame per wakeup with
// no carrier, none with the device down), the ring fills and the port
// counts what finds no room as tx_nobufs, never blocking and never
// failing. When it is up again the kernel sends and completes what it
// held, frames cross both ways, and every Umem frame comes back.
func TestLinkDownUnderLoad(t *testing.T) {
	for _, tc := range []struct{ name, dev string }{
		{"carrier", "vb"},
		{"admin", "va"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newLab(t)
			p := open(t, ns, "va")
			in := &counter{marker: []byte("after-up")}
			var rx atomic.Int64
			run(t, p, func(q int, fs []hw.Frame) {
				rx.Add(int64(len(fs)))
				in.handle(q, fs)
			})
			changes := make(chan bool, 16)
			p.SetLinkHandler(func(up bool) { changes <- up })
			waitLink := func(want bool) {
				t.Helper()
				for end := time.After(3 * hw.LinkPollInterval); ; {
					select {
					case up := <-changes:
						if up == want {
							return
						}
					case <-end:
						t.Fatalf("link not %v within %v", want, 3*hw.LinkPollInterval)
					}
				}
			}
			// The peer floods the port throughout.
			fd := ns.PacketSocket(t, "vb", unix.ETH_P_ALL)
			defer unix.Close(fd)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() { flood(fd, netnstest.Frame(macA, macB, "background"), 0, stop) })
			defer func() { close(stop); wg.Wait() }()

			batch := make([][]byte, BatchSize)
			for i := range batch {
				batch[i] = netnstest.Frame(macB, macA, "while-down")
			}
			offered, sent := 0, 0
			write := func(rounds int) {
				for range rounds {
					k, err := p.WriteFrames(batch)
					if err != nil {
						t.Fatalf("WriteFrames = %v", err)
					}
					offered += len(batch)
					sent += k
				}
			}
			write(20)
			ns.IP(t, "link", "set", tc.dev, "down")
			waitLink(false)
			before := p.Stats().Drops[hw.DropTxNoBufs]
			write(200) // 25,600 frames: far more than the TX ring holds
			st := p.Stats()
			held := p.umem.Counts().TX
			t.Logf("down: wrote %d of %d, tx_nobufs %d, TX ring and kernel hold %d frames", sent, offered, st.Drops[hw.DropTxNoBufs], held)
			if st.Drops[hw.DropTxNoBufs] == before {
				t.Errorf("no tx_nobufs counted while %s was down", tc.dev)
			}
			// tx_nobufs above shows the ring was full; by now the kernel
			// may have taken some (one per wakeup without carrier), but
			// not all of them.
			if held == 0 {
				t.Errorf("the kernel holds no frames on the TX ring while %s is down, want it holding what it could not send", tc.dev)
			}

			ns.IP(t, "link", "set", tc.dev, "up")
			waitLink(true)
			rxUp := rx.Load()
			peer := ns.RawSocket(t, "vb")
			marker := netnstest.Frame(macB, macA, "after-up-out")
			for end := time.Now().Add(3 * time.Second); ; {
				// The TX ring drains as the kernel is woken again.
				if _, err := p.WriteFrames([][]byte{marker}); err != nil {
					t.Fatalf("WriteFrames after up = %v", err)
				}
				offered++
				if _, ok := peer.WaitFor("after-up-out", 50*time.Millisecond); ok {
					break
				}
				if time.Now().After(end) {
					t.Fatal("no frame from the port reached the peer after the link came back")
				}
			}
			// The flood keeps the port's receive path saturated, so one
			// frame may be among the counted drops (ring, fill-ring
			// empty): send until one arrives.
			for end := time.Now().Add(3 * time.Second); ; {
				peer.Send(t, netnstest.Frame(macA, macB, "after-up-in"))
				if waitCount(in, 1, 50*time.Millisecond) > 0 {
					break
				}
				if time.Now().After(end) {
					t.Error("the port received nothing from the peer after the link came back")
					break
				}
			}
			close(stop)
			wg.Wait()
			stop = make(chan struct{}) // for the deferred close
			st = p.Stats()
			if got := st.TxPackets + st.Drops[hw.DropTxNoBufs] + st.Drops[DropUmemEmpty]; got != uint64(offered) {
				t.Errorf("tx %d + tx_nobufs %d + xdp_umem_empty %d = %d, want every one of %d frames sent or counted",
					st.TxPackets, st.Drops[hw.DropTxNoBufs], st.Drops[DropUmemEmpty], got, offered)
			}
			t.Logf("after up: received %d frames (%d since up), counters %+v", rx.Load(), rx.Load()-rxUp, st)
			checkFrames(t, p, "after the link came back")
		})
	}
}
