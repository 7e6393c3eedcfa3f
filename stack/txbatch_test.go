package stack

import (
	"encoding/binary"
	"sync"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// callRecorder records the size of every WriteFrames call that carries
// test datagrams and their UDP sequence numbers, in order. Calls with
// only other frames (netstack's own ARP, NDP or MLD, sent by its timers
// on other goroutines) are not the test's business.
type callRecorder struct {
	next  hw.FrameWriter
	mu    sync.Mutex
	on    bool
	sizes []int
	seqs  []uint32
}

func (c *callRecorder) WriteFrames(frames [][]byte) (int, error) {
	c.mu.Lock()
	if c.on {
		ours := false
		for _, f := range frames {
			if len(f) >= 14+20+8+4 && be16(f[12:]) == uint16(header.IPv4ProtocolNumber) && header.IPv4(f[14:]).Protocol() == protoUDP {
				c.seqs = append(c.seqs, binary.BigEndian.Uint32(f[14+20+8:]))
				ours = true
			}
		}
		if ours {
			c.sizes = append(c.sizes, len(frames))
		}
	}
	c.mu.Unlock()
	return c.next.WriteFrames(frames)
}

// TestForwardedBatchLeavesInOneWrite checks that the packets forwarded
// from one receive batch leave the egress interface in one WriteFrames
// call (one sendmmsg on a real port), in the order they arrived.
func TestForwardedBatchLeavesInOneWrite(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP4) // resolve B's MAC first
	rec := &callRecorder{next: l.tapB}
	cfg := l.config()
	cfg.Interfaces[1].Writer = rec
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	const n = 48
	batch := make([]hw.Frame, n)
	for i := range batch {
		payload := binary.BigEndian.AppendUint32(nil, uint32(i))
		f := ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, ipv4Packet(aIP4, bIP4, 64, header.UDPProtocolNumber, udpDatagram(1000, 9, payload)))
		batch[i] = hw.Frame{Data: f, WireLen: len(f)}
	}
	rec.mu.Lock()
	rec.on = true
	rec.mu.Unlock()
	l.r.Interface("lan").HandleBatch(0, batch)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seqs) != n {
		t.Fatalf("forwarded %d datagrams, want %d (calls %v)", len(rec.seqs), n, rec.sizes)
	}
	for i, s := range rec.seqs {
		if s != uint32(i) {
			t.Fatalf("datagram %d left as number %d: order not kept (%v)", i, s, rec.seqs)
		}
	}
	if len(rec.sizes) > 2 {
		t.Errorf("WriteFrames called %d times (sizes %v), want the batch in one call", len(rec.sizes), rec.sizes)
	}
	if st := l.r.Interface("wan").Stats(); st.TxPackets < n {
		t.Errorf("wan TxPackets = %d, want >= %d", st.TxPackets, n)
	}
}
