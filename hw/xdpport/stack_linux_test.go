package xdpport

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/stack"
)

// TestStackChecksum runs the router's stack on a port of each backend
// and has the Linux peer send UDP to the router's own address. The
// af_xdp port reports no checksum status, so the stack's software check
// for locally terminated packets (the path of hw.Frame with CsumValid
// and CsumPartial false, as on bcm47094's bgmac) decides: with the
// peer's TX checksumming off the datagram is delivered; with it on the
// kernel hands over a partial checksum, which no AF_XDP frame can flag,
// so the stack drops it as l4_checksum, as it must drop a corrupt one
// (the reason the lab turns TX checksumming off on its veths). The
// af_packet port flags that partial checksum from the ring header, so
// it delivers both.
func TestStackChecksum(t *testing.T) {
	for _, tc := range []struct {
		driver, txCsum string
		delivered      bool
	}{
		{"af_packet", "off", true},
		{"af_packet", "on", true},
		{"af_xdp", "off", true},
		{"af_xdp", "on", false},
	} {
		t.Run(tc.driver+"/tx="+tc.txCsum, func(t *testing.T) {
			netnstest.Privileged(t, "ethtool", "bash", "nft", "tc")
			ns := newLab(t)
			ns.Run(t, "ethtool", "-K", "vb", "tx", tc.txCsum)
			p := openBackend(t, ns, tc.driver, "va", "")
			t.Cleanup(func() { p.Close() })
			r, err := stack.New(stack.Config{Interfaces: []stack.InterfaceConfig{{
				Name: "lan", MAC: p.HardwareAddr(), Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/24")}, Writer: p,
			}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Close)
			ifc := r.Interface("lan")
			ifc.SetLinkUp(true)
			c, err := r.ListenUDPConn(netip.MustParseAddrPort("10.9.0.1:9"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx, ifc.HandleBatch) }()
			t.Cleanup(func() { cancel(); <-done })
			ns.IP(t, "addr", "add", "10.9.0.2/24", "dev", "vb")
			ns.IP(t, "neigh", "add", "10.9.0.1", "lladdr", p.HardwareAddr().String(), "dev", "vb")
			ns.Run(t, "bash", "-c", "echo hello > /dev/udp/10.9.0.1/9")

			c.SetReadDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 64)
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if got := err == nil; got != tc.delivered {
				t.Errorf("%s, peer tx checksumming %s: datagram delivered = %v (%q from %v, err %v), want %v", tc.driver, tc.txCsum, got, buf[:n], from, err, tc.delivered)
			}
			want := uint64(1)
			if tc.delivered {
				want = 0
			}
			// The drop is counted before netstack sees the frame; wait
			// for the receive loop to have handled it.
			wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer wcancel()
			for ifc.Stats().Drops["l4_checksum"] != want && wctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			if got := ifc.Stats().Drops["l4_checksum"]; got != want {
				t.Errorf("%s, peer tx checksumming %s: l4_checksum drops = %d, want %d (drops %v)", tc.driver, tc.txCsum, got, want, ifc.Stats().Drops)
			}
		})
	}
}
