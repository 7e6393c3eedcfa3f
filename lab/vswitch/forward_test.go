package vswitch

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/hwtest"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// testSwitch is the data path of labConfig on fake writers, with a clock
// the test moves.
type testSwitch struct {
	fw  *forwarder
	w   []*hwtest.Writer
	q   *queue
	now int64
}

func newTestSwitch(t testing.TB, cfg Config) *testSwitch {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	ts := &testSwitch{}
	writers := make([]hw.FrameWriter, len(cfg.Ports))
	for i := range writers {
		w := new(hwtest.Writer)
		ts.w = append(ts.w, w)
		writers[i] = w
	}
	ts.fw = newForwarder(newTable(&cfg), writers, func() int64 { return ts.now })
	ts.q = ts.fw.newQueue()
	return ts
}

// send hands frames to the switch as one batch received on port and
// returns what each port was sent.
func (ts *testSwitch) send(port int, frames ...hw.Frame) [][][]byte {
	ts.fw.handle(port, ts.q, frames)
	out := make([][][]byte, len(ts.w))
	for i, w := range ts.w {
		out[i] = w.Frames()
	}
	return out
}

func (ts *testSwitch) vlanStats(vid uint16) VLANStats {
	for _, v := range ts.fw.stats(make([]string, len(ts.w))).VLANs {
		if v.VID == vid {
			return v
		}
	}
	return VLANStats{}
}

// expectOut checks that out holds exactly want per port.
func expectOut(t *testing.T, out [][][]byte, want map[int][]byte) {
	t.Helper()
	names := []string{"lan", "wan", "cpu", "wan2"}
	for p := range out {
		w, ok := want[p]
		switch {
		case !ok && len(out[p]) != 0:
			t.Errorf("port %s got %d frames (first % x), want none", names[p], len(out[p]), out[p][0])
		case ok && len(out[p]) != 1:
			t.Errorf("port %s got %d frames, want 1: % x", names[p], len(out[p]), w)
		case ok && !bytes.Equal(out[p][0], w):
			t.Errorf("port %s got\n% x\nwant\n% x", names[p], out[p][0], w)
		}
	}
}

func TestForward(t *testing.T) {
	ts := newTestSwitch(t, labConfig)
	lanBcast := netnstest.Frame(macBcast, macLAN, "lan-bcast")
	t.Run("untagged broadcast from LAN reaches CPU tagged VID 1 only", func(t *testing.T) {
		out := ts.send(portLAN, hwtest.Batch(lanBcast)...)
		expectOut(t, out, map[int][]byte{portCPU: netnstest.Tag(lanBcast, 0x8100, 1)})
	})
	t.Run("tagged VID 2 from CPU leaves WAN ports untagged", func(t *testing.T) {
		f := netnstest.Frame(macBcast, macCPU, "cpu-vid2")
		out := ts.send(portCPU, hwtest.Tagged(f, 0x8100, 0xa002))
		expectOut(t, out, map[int][]byte{portWAN: f, portWAN2: f})
	})
	t.Run("PCP kept towards a tagged port", func(t *testing.T) {
		f := netnstest.Frame(macBcast, macWAN, "wan-to-cpu")
		out := ts.send(portWAN, hwtest.Tagged(f, 0x8100, 0xc000)) // priority-tagged, PCP 6
		expectOut(t, out, map[int][]byte{portCPU: netnstest.Tag(f, 0x8100, 0xc002), portWAN2: f})
	})
	t.Run("known unicast goes to one port", func(t *testing.T) {
		// macWAN was learned on wan in VLAN 2 by the last subtest.
		before := ts.vlanStats(2)
		f := netnstest.Frame(macWAN, macCPU, "cpu-to-wan")
		out := ts.send(portCPU, hwtest.Tagged(f, 0x8100, 2))
		expectOut(t, out, map[int][]byte{portWAN: f})
		after := ts.vlanStats(2)
		if after.Forwarded != before.Forwarded+1 || after.Flooded != before.Flooded {
			t.Errorf("VLAN 2 forwarded, flooded = %d, %d; want %d, %d", after.Forwarded, after.Flooded, before.Forwarded+1, before.Flooded)
		}
	})
	t.Run("learning is per VLAN", func(t *testing.T) {
		f := netnstest.Frame(macWAN, macLAN, "lan-to-wan-mac")
		out := ts.send(portLAN, hwtest.Batch(f)...)
		expectOut(t, out, map[int][]byte{portCPU: netnstest.Tag(f, 0x8100, 1)})
	})
	t.Run("unknown unicast floods", func(t *testing.T) {
		f := netnstest.Frame([]byte{2, 9, 9, 9, 9, 9}, macCPU, "unknown")
		out := ts.send(portCPU, hwtest.Tagged(f, 0x8100, 2))
		expectOut(t, out, map[int][]byte{portWAN: f, portWAN2: f})
	})
	t.Run("station move", func(t *testing.T) {
		ts.send(portWAN2, hwtest.Batch(netnstest.Frame(macBcast, macWAN, "moved"))...)
		f := netnstest.Frame(macWAN, macCPU, "after-move")
		out := ts.send(portCPU, hwtest.Tagged(f, 0x8100, 2))
		expectOut(t, out, map[int][]byte{portWAN2: f})
	})
	t.Run("aged entry floods", func(t *testing.T) {
		ts.now += int64(AgingTime + time.Second)
		f := netnstest.Frame(macWAN, macCPU, "aged")
		out := ts.send(portCPU, hwtest.Tagged(f, 0x8100, 2))
		expectOut(t, out, map[int][]byte{portWAN: f, portWAN2: f})
	})
	t.Run("destination on the ingress port is filtered", func(t *testing.T) {
		ts.send(portWAN, hwtest.Batch(netnstest.Frame(macBcast, macWAN, "learn"))...)
		out := ts.send(portWAN, hwtest.Batch(netnstest.Frame(macWAN, []byte{2, 7, 7, 7, 7, 7}, "hairpin"))...)
		expectOut(t, out, nil)
	})
	t.Run("reserved group address is not relayed", func(t *testing.T) {
		out := ts.send(portLAN, hwtest.Batch(netnstest.Frame([]byte{0x01, 0x80, 0xc2, 0, 0, 0x0e}, macLAN, "lldp"))...)
		expectOut(t, out, nil)
	})
	t.Run("in-band C-tag is removed towards an access port", func(t *testing.T) {
		f := netnstest.Frame(macBcast, macCPU, "in-band")
		out := ts.send(portCPU, hwtest.Batch(netnstest.Tag(f, 0x8100, 0x2001))...)
		expectOut(t, out, map[int][]byte{portLAN: f})
	})
	t.Run("S-tagged frame crosses as payload", func(t *testing.T) {
		f := netnstest.Frame(macBcast, macLAN, "s-tag")
		out := ts.send(portLAN, hwtest.Tagged(f, 0x88a8, 100))
		expectOut(t, out, map[int][]byte{portCPU: netnstest.Tag(netnstest.Tag(f, 0x88a8, 100), 0x8100, 1)})
	})
	t.Run("drops", func(t *testing.T) {
		before := ts.fw.stats(make([]string, 4))
		f := netnstest.Frame(macBcast, macLAN, "drop")
		out := ts.send(portLAN,
			hwtest.Tagged(f, 0x8100, 2),      // VLAN 2: lan is not a member
			hwtest.Tagged(f, 0x8100, 2),      // twice
			hwtest.Tagged(f, 0x8100, 0x0fff), // reserved VID
		)
		out2 := ts.send(portCPU,
			hwtest.Batch(f)[0],          // untagged, no PVID
			hwtest.Tagged(f, 0x8100, 3), // VLAN 3: nobody's
		)
		expectOut(t, out, nil)
		expectOut(t, out2, nil)
		after := ts.fw.stats(make([]string, 4))
		for _, c := range []struct {
			what      string
			got, want uint64
		}{
			{"lan vlan_not_member", after.Ports[portLAN].Drops[DropVLANNotMember], before.Ports[portLAN].Drops[DropVLANNotMember] + 2},
			{"lan tag_malformed", after.Ports[portLAN].Drops[DropTagMalformed], before.Ports[portLAN].Drops[DropTagMalformed] + 1},
			{"cpu untagged_no_pvid", after.Ports[portCPU].Drops[DropUntaggedNoPVID], before.Ports[portCPU].Drops[DropUntaggedNoPVID] + 1},
			{"cpu vlan_not_member", after.Ports[portCPU].Drops[DropVLANNotMember], before.Ports[portCPU].Drops[DropVLANNotMember] + 1},
			{"VLAN 2 vlan_not_member", after.VLANs[1].Drops[DropVLANNotMember], before.VLANs[1].Drops[DropVLANNotMember] + 2},
			{"lan rx", after.Ports[portLAN].RxFrames, before.Ports[portLAN].RxFrames + 3},
		} {
			if c.got != c.want {
				t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
			}
		}
	})
	st := ts.fw.stats([]string{"lan", "wan", "cpu", "wan2"})
	if st.Ports[portLAN].Drops[DropReservedGroup] != 1 || st.Ports[portWAN].Drops[DropFiltered] != 1 {
		t.Errorf("lan reserved_group, wan filtered = %d, %d; want 1, 1", st.Ports[portLAN].Drops[DropReservedGroup], st.Ports[portWAN].Drops[DropFiltered])
	}
	for _, p := range st.Ports {
		if len(p.Drops) != int(numDropReasons)-1 {
			t.Errorf("port %s Drops = %v, want every reason", p.Name, p.Drops)
		}
	}
	if st.Ports[portCPU].TxFrames == 0 || st.Ports[portLAN].TxFrames == 0 {
		t.Errorf("TxFrames = %+v, want frames sent on cpu and lan", st.Ports)
	}
}

// TestForwardOrderAndOverflow floods a batch larger than the scratch space
// and the per-port lists: every frame arrives once, in order.
func TestForwardOrderAndOverflow(t *testing.T) {
	ts := newTestSwitch(t, Config{Ports: []PortConfig{
		{Name: "lan", PVID: 1}, {Name: "lan2", PVID: 1}, {Name: "cpu", Tagged: []uint16{1}},
	}})
	ts.q.scratch = make([]byte, 0, 5000) // a few frames' worth
	var batch []hw.Frame
	var want [][]byte
	for i := range 3 * outBatch {
		f := netnstest.Frame(macBcast, macLAN, fmt.Sprintf("frame-%04d", i))
		f = append(f, make([]byte, 1000)...)
		batch = append(batch, hw.Frame{Data: f, WireLen: len(f)})
		want = append(want, f)
	}
	out := ts.send(0, batch...)
	if len(out[1]) != len(want) || len(out[2]) != len(want) {
		t.Fatalf("lan2, cpu got %d, %d frames; want %d each", len(out[1]), len(out[2]), len(want))
	}
	for i := range want {
		if !bytes.Equal(out[1][i], want[i]) {
			t.Fatalf("lan2 frame %d = % x, want % x", i, out[1][i][:30], want[i][:30])
		}
		if !bytes.Equal(out[2][i], netnstest.Tag(want[i], 0x8100, 1)) {
			t.Fatalf("cpu frame %d = % x, want it tagged", i, out[2][i][:30])
		}
	}
	// A frame larger than the whole scratch space is a counted drop on the
	// port that needs a copy, and still reaches the others.
	big := append(netnstest.Frame(macBcast, macLAN, "big"), make([]byte, 6000)...)
	out = ts.send(0, hw.Frame{Data: big, WireLen: len(big)})
	if len(out[1]) != 1 || len(out[2]) != 0 {
		t.Errorf("big frame: lan2, cpu got %d, %d frames; want 1, 0", len(out[1]), len(out[2]))
	}
	if d := ts.fw.ports[2].drops[dropTx].Load(); d != 1 {
		t.Errorf("cpu tx drops = %d, want 1", d)
	}
}

func TestForwardTxRefused(t *testing.T) {
	ts := newTestSwitch(t, labConfig)
	ts.w[portCPU].Limit = 1 // a full device queue: one frame per call
	f := netnstest.Frame(macBcast, macLAN, "x")
	ts.send(portLAN, hwtest.Batch(f, f, f)...)
	st := ts.fw.stats(make([]string, 4))
	if c := st.Ports[portCPU]; c.TxFrames != 1 || c.Drops[DropTx] != 2 {
		t.Errorf("cpu TxFrames, Drops[tx] = %d, %d; want 1, 2", c.TxFrames, c.Drops[DropTx])
	}
}

// nopWriter accepts every frame and does nothing.
type nopWriter struct{}

func (nopWriter) WriteFrames(frames [][]byte) (int, error) { return len(frames), nil }

// benchSwitch is labConfig on writers that do nothing, with macWAN and
// macCPU learned.
func benchSwitch(tb testing.TB) (*forwarder, *queue) {
	cfg := labConfig
	writers := make([]hw.FrameWriter, len(cfg.Ports))
	for i := range writers {
		writers[i] = nopWriter{}
	}
	fw := newForwarder(newTable(&cfg), writers, func() int64 { return 1 })
	q := fw.newQueue()
	fw.handle(portWAN, q, hwtest.Batch(netnstest.Frame(macBcast, macWAN, "learn")))
	fw.handle(portCPU, q, []hw.Frame{hwtest.Tagged(netnstest.Frame(macBcast, macCPU, "learn"), 0x8100, 2)})
	return fw, q
}

// benchBatches are ring-sized batches of the lab's three kinds of
// traffic: known unicast from an access port to the tagged port (tag
// inserted), known unicast from the tagged port (tag stripped by the
// kernel: zero copy), and broadcasts flooded from the tagged port.
func benchBatches() map[string][]hw.Frame {
	const n = 128
	m := map[string][]hw.Frame{}
	for i := range n {
		size := 60 + (i%24)*60
		up := append(netnstest.Frame(macCPU, macWAN, "up"), make([]byte, size-60)...)
		down := append(netnstest.Frame(macWAN, macCPU, "down"), make([]byte, size-60)...)
		bcast := append(netnstest.Frame(macBcast, macCPU, "bcast"), make([]byte, size-60)...)
		m["access-to-tagged"] = append(m["access-to-tagged"], hw.Frame{Data: up, WireLen: len(up)})
		m["tagged-to-access"] = append(m["tagged-to-access"], hwtest.Tagged(down, 0x8100, 2))
		m["flood"] = append(m["flood"], hwtest.Tagged(bcast, 0x8100, 2))
	}
	return m
}

var benchIngress = map[string]int{"access-to-tagged": portWAN, "tagged-to-access": portCPU, "flood": portCPU}

func TestForwardAllocs(t *testing.T) {
	fw, q := benchSwitch(t)
	for name, batch := range benchBatches() {
		port := benchIngress[name]
		if a := testing.AllocsPerRun(100, func() { fw.handle(port, q, batch) }); a != 0 {
			t.Errorf("handle(%s) allocs = %v, want 0", name, a)
		}
	}
}

// BenchmarkDecide is the per-frame decision alone: classification,
// learning of the source and the lookup of the destination.
func BenchmarkDecide(b *testing.B) {
	fw, _ := benchSwitch(b)
	for _, name := range []string{"access-to-tagged", "tagged-to-access", "flood"} {
		batch, port := benchBatches()[name], benchIngress[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var sink uint64
			for b.Loop() {
				for i := range batch {
					sink += fw.decide(port, &batch[i], 1).egress
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(batch)), "ns/frame")
			_ = sink
		})
	}
}

// BenchmarkHandle is the whole data path of one batch without syscalls:
// decisions, tag insertion into scratch, per-port lists and counters.
func BenchmarkHandle(b *testing.B) {
	fw, q := benchSwitch(b)
	for _, name := range []string{"access-to-tagged", "tagged-to-access", "flood"} {
		batch, port := benchBatches()[name], benchIngress[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fw.handle(port, q, batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(batch)), "ns/frame")
		})
	}
}
