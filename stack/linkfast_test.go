package stack

import (
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
)

// TestLinkFastPathSlow: a link's packets of flows the engine has not
// offloaded (here: all of them), packets that are not IP, and a batch
// without room for an Ethernet header all go to slow, each once and in
// order, and a batch costs no allocation. The hits are the lab's
// TestWireGuardThroughput (inside/fast_path).
func TestLinkFastPathSlow(t *testing.T) {
	l, _ := newNATLab(t, nil)
	cfg := l.config()
	cfg.Links = []LinkConfig{{Name: "wg0", Endpoint: channel.New(64, 1420, ""), Addresses: []netip.Prefix{netip.MustParsePrefix("10.8.0.1/24")}}}
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.r.LinkFastPath("hostlan"); ok {
		t.Error("LinkFastPath of an Ethernet interface: ok, want only links")
	}
	fp, ok := l.r.LinkFastPath("wg0")
	if !ok {
		t.Fatal("LinkFastPath(wg0): no fast path")
	}
	const off = 16
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = append(make([]byte, off), echoRequest4(netip.MustParseAddr("10.8.0.2"), aIP4)...)
		bufs[i][off+5] = byte(i) // the IP ID's low byte numbers them
	}
	bufs[2][off] = 0x00 // not IP
	var got []byte
	slow := func(ip []byte) { got = append(got, ip[5]) }
	fwd, dropped := fp.ForwardBatch(bufs, off, slow)
	if fwd != 0 || dropped != 0 || string(got) != "\x00\x01\x02\x03" {
		t.Errorf("ForwardBatch without offloaded flows: %d forwarded, %d dropped, slow got %x; want 0, 0, 00010203", fwd, dropped, got)
	}
	got = got[:0]
	// No room for the Ethernet header: the packets start 4 bytes in.
	fp.ForwardBatch(bufs, 4, func(ip []byte) { got = append(got, ip[off-4+5]) })
	if string(got) != "\x00\x01\x02\x03" {
		t.Errorf("ForwardBatch with 4 bytes of room: slow got %x, want 00010203", got)
	}
	got = got[:0]
	if n := testing.AllocsPerRun(1000, func() { fp.ForwardBatch(bufs, off, func([]byte) {}) }); n != 0 {
		t.Errorf("ForwardBatch: %v allocations per batch, want 0", n)
	}
}
