//go:build race

package stack

import (
	"context"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

// TestPinnedGVisorNeighbourCompletionRace guards the gVisor pin against
// google/gvisor#14242 (docs/lessons.md): when a resolution completes, the
// pinned netstack must not read the entry's link address, from the goroutine
// that sends the packets queued behind it, without the entry's lock. The test
// queues a packet behind an ARP resolution, completes it with a reply from
// MAC A and at once has the neighbour probe from MAC B, which rewrites the
// entry's link address under the lock. Before the fix the race detector
// reports the unlocked read against that write; the queued packet leaves in
// both cases. Built only with -race, the one way the race shows.
//
// Whether the sender runs before or after the probe is up to the scheduler,
// and the detector misses the race when the sender's locks happen to order
// the two, so the test repeats the exchange on fresh stacks (the detector
// reports a race once per process).
func TestPinnedGVisorNeighbourCompletionRace(t *testing.T) {
	for range 50 {
		completeAndProbe(t)
		if t.Failed() {
			return
		}
	}
}

// completeAndProbe runs the exchange of TestPinnedGVisorNeighbourCompletionRace once.
func completeAndProbe(t *testing.T) {
	var (
		routerMAC = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x01")
		macA      = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
		macB      = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0b")
		routerIP  = tcpip.AddrFrom4([4]byte{10, 9, 0, 1})
		hostIP    = tcpip.AddrFrom4([4]byte{10, 9, 0, 2})
	)
	clock := &immediateWaitClock{Clock: tcpip.NewStdClock()}
	defer clock.wg.Wait() // the sender drops its reference after the frame left
	s := stack.New(stack.Options{
		Clock:              clock,
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{udp.NewProtocol},
	})
	ch := channel.New(16, 1500, routerMAC)
	defer ch.Drain() // after Destroy: the stack may still send (ARP replies)
	defer s.Destroy()
	if err := s.CreateNIC(1, ethernet.New(ch)); err != nil {
		t.Fatalf("CreateNIC: %s", err)
	}
	if err := s.AddProtocolAddress(1, tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: routerIP, PrefixLen: 24},
	}, stack.AddressProperties{}); err != nil {
		t.Fatalf("AddProtocolAddress: %s", err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: tcpip.AddressWithPrefix{Address: routerIP, PrefixLen: 24}.Subnet(), NIC: 1}})

	conn, err := gonet.DialUDP(s, nil, &tcpip.FullAddress{NIC: 1, Addr: hostIP, Port: 9}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatalf("DialUDP: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("queued behind ARP")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if op := readARP(ctx, t, ch); op != header.ARPRequest {
		t.Fatalf("first frame: ARP op %d, want a request", op)
	}

	inject(ch, arpFrame(header.ARPReply, macA, hostIP, routerMAC, routerIP))
	inject(ch, arpFrame(header.ARPRequest, macB, hostIP, "\x00\x00\x00\x00\x00\x00", routerIP))

	// The queued datagram leaves once the completion's AfterFunc has run.
	for {
		pkt := ch.ReadContext(ctx)
		if pkt == nil {
			t.Fatal("the datagram queued behind ARP never left")
		}
		v := pkt.ToView()
		eth := header.Ethernet(v.AsSlice())
		typ, dst := eth.Type(), eth.DestinationAddress()
		v.Release()
		pkt.DecRef()
		if typ == header.IPv4ProtocolNumber {
			if dst != macA && dst != macB {
				t.Fatalf("datagram sent to %s, want %s or %s", dst, macA, macB)
			}
			return
		}
	}
}

// immediateWaitClock lets the test wait for the functions the stack runs at
// once (AfterFunc(0, f), as the neighbour cache sends the packets queued
// behind a resolution), so that the leak check does not see their packets.
type immediateWaitClock struct {
	tcpip.Clock
	wg sync.WaitGroup
}

func (c *immediateWaitClock) AfterFunc(d time.Duration, f func()) tcpip.Timer {
	if d != 0 {
		return c.Clock.AfterFunc(d, f)
	}
	c.wg.Add(1)
	return c.Clock.AfterFunc(0, func() {
		defer c.wg.Done()
		f()
	})
}

// inject hands the link one received frame and drops the test's reference.
func inject(ch *channel.Endpoint, pkt *stack.PacketBuffer) {
	ch.InjectInbound(0, pkt)
	pkt.DecRef()
}

// readARP returns the operation of the next frame ch sends, failing unless
// it is ARP.
func readARP(ctx context.Context, t *testing.T, ch *channel.Endpoint) header.ARPOp {
	t.Helper()
	pkt := ch.ReadContext(ctx)
	if pkt == nil {
		t.Fatal("no frame sent")
	}
	defer pkt.DecRef()
	v := pkt.ToView()
	defer v.Release()
	b := v.AsSlice()
	if len(b) < header.EthernetMinimumSize+header.ARPSize || header.Ethernet(b).Type() != header.ARPProtocolNumber {
		t.Fatalf("frame %x is not ARP", b)
	}
	return header.ARP(b[header.EthernetMinimumSize:]).Op()
}

// arpFrame builds an Ethernet ARP frame from sender (mac, ip) to target.
func arpFrame(op header.ARPOp, mac tcpip.LinkAddress, ip tcpip.Address, targetMAC tcpip.LinkAddress, targetIP tcpip.Address) *stack.PacketBuffer {
	b := make([]byte, header.EthernetMinimumSize+header.ARPSize)
	dst := targetMAC
	if op == header.ARPRequest {
		dst = header.EthernetBroadcastAddress
	}
	header.Ethernet(b).Encode(&header.EthernetFields{SrcAddr: mac, DstAddr: dst, Type: header.ARPProtocolNumber})
	a := header.ARP(b[header.EthernetMinimumSize:])
	a.SetIPv4OverEthernet()
	a.SetOp(op)
	ip4, tip4 := ip.As4(), targetIP.As4()
	copy(a.HardwareAddressSender(), mac)
	copy(a.ProtocolAddressSender(), ip4[:])
	copy(a.HardwareAddressTarget(), targetMAC)
	copy(a.ProtocolAddressTarget(), tip4[:])
	return stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(b)})
}
