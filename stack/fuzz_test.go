package stack

import (
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// FuzzHandleBatch feeds arbitrary frames to an endpoint: nothing may
// panic, every frame is either delivered or counted as one drop, and a
// delivered frame passed the checks classify promises.
func FuzzHandleBatch(f *testing.F) {
	f.Add(ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber, ipv4Packet(hostIP4, routerIP4, 64, header.UDPProtocolNumber, udpDatagram(1, 2, []byte("x")))), false, false)
	f.Add(ethFrame(routerMAC, hostMAC, header.IPv6ProtocolNumber, ipv6Packet(hostIP6, farIP6, 1, header.UDPProtocolNumber, udpDatagram(1, 2, []byte("x")))), false, true)
	f.Add(ethFrame(bcastMAC, hostMAC, header.ARPProtocolNumber, make([]byte, header.ARPSize)), true, false)
	f.Add([]byte{1, 2, 3}, false, false)
	f.Fuzz(func(t *testing.T, data []byte, csumValid, csumPartial bool) {
		var d recordingDispatcher
		e := testEndpoint(&d)
		e.HandleBatch(0, []hw.Frame{{Data: data, WireLen: len(data), CsumValid: csumValid, CsumPartial: csumPartial}})
		var s InterfaceStats
		e.stats.fill(&s)
		var drops uint64
		for _, n := range s.Drops {
			drops += n
		}
		if got := uint64(len(d.pkts)) + drops; got != 1 {
			t.Fatalf("delivered %d + dropped %d (%v), want 1 in all", len(d.pkts), drops, s.Drops)
		}
		if len(d.pkts) == 1 && d.pkts[0].proto == header.IPv4ProtocolNumber {
			ip := header.IPv4(d.pkts[0].l3)
			if !ip.IsChecksumValid() || int(ip.TotalLength()) > len(ip) {
				t.Fatalf("delivered a bad IPv4 header: %x", []byte(ip))
			}
		}
	})
}
