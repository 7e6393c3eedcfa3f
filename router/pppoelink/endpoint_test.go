package pppoelink

import (
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"

	"github.com/gvrouter/gvrouter/pppoe"
)

// TestEndpointWithScapyAC: with the Endpoint as a netstack NIC that takes
// the IPCP address when the session comes up, scapy's ICMP echo to that
// address is answered by netstack, and the reply reaches the AC in a
// PPPoE session frame it parses as the echo reply (data_ok): the slow
// path in both directions.
func TestEndpointWithScapyAC(t *testing.T) {
	ac := startAC(t)
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{icmp.NewProtocol4},
	})
	defer s.Destroy()
	ep := NewEndpoint()
	if err := s.CreateNIC(1, ep); err != nil {
		t.Fatalf("CreateNIC: %s", err)
	}
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: 1}})
	var ups atomic.Int32
	l, err := Start(Config{
		Name: "wan",
		Session: pppoe.Config{Local: [6]byte{0x02, 0, 0, 0, 0, 0x01}, Service: "internet",
			Credentials: pppoe.NewCredentials("bob", "pw-0f-bob"), MinBackoff: 50 * time.Millisecond},
		OnChange: func(st pppoe.Status) {
			ep.Follow(st)
			if st.State == "up" && st.IPv4 != nil {
				a := tcpip.AddrFrom4(st.IPv4.Local.As4())
				if err := s.AddProtocolAddress(1, tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber,
					AddressWithPrefix: a.WithPrefix()}, stack.AddressProperties{}); err != nil {
					t.Errorf("AddProtocolAddress: %s", err)
				}
				ups.Add(1)
			}
		},
		Deliver: ep.Deliver,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ep.Bind(l)
	if err := l.Bind(ac); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the session up", func() bool { return ups.Load() == 1 })
	if ep.MTU() != 1492 {
		t.Errorf("endpoint MTU %d, want the session's 1492", ep.MTU())
	}
	time.Sleep(200 * time.Millisecond) // the echo exchange follows IPCP at once
	l.Close()
	sum := ac.finish()
	if sum.DataOK != 1 {
		t.Errorf("AC summary %+v: want netstack's echo reply to scapy's ping (data_ok 1)", sum)
	}
	if n := ep.TxNotUp.Load() + ep.TxTooBig.Load(); n != 0 {
		t.Errorf("%d packets dropped by the endpoint", n)
	}
}
