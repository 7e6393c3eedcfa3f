package wglink

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/wireguard"
)

// loopback opens the Bind's udp4 socket on 127.0.0.1.
func loopback(network string, port uint16) (wireguard.PacketConn, error) {
	if network != "udp4" {
		return nil, nil
	}
	return net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
}

func key(t *testing.T) wireguard.Key {
	k, err := wireguard.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestApplyAndResolve: the first Apply brings the device up with its
// peers (named in Status); a peer whose endpoint is a host name gets
// the address the resolver gives, soon after Apply and without a
// handshake; Status lists peers by name; a failed lookup is counted as errors/resolve; a second
// Apply that drops a peer leaves the other, with its endpoint.
func TestApplyAndResolve(t *testing.T) {
	lookups := make(chan string, 16)
	fail := false
	l := New(Env{Name: "wg0", Listen: loopback, Resolve: func(host string) ([]netip.Addr, error) {
		lookups <- host
		if fail {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{netip.MustParseAddr("192.0.2.7")}, nil
	}})
	defer l.Close()
	priv, phone, laptop := key(t), key(t).PublicKey(), key(t).PublicKey()
	c := wireguard.Config{PrivateKey: priv, Peers: []wireguard.Peer{
		{Name: "phone", PublicKey: phone, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.2/32")}},
		{Name: "laptop", PublicKey: laptop, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.3/32")}},
	}}
	if err := l.Apply(c, map[wireguard.Key]string{laptop: "laptop.example:51820"}); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-lookups:
		if h != "laptop.example" {
			t.Errorf("looked up %q, want laptop.example", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no lookup after Apply")
	}
	var st wireguard.Status
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if st, err = l.Status(); err != nil {
			t.Fatal(err)
		}
		if len(st.Peers) == 2 && st.Peers[0].Endpoint == "192.0.2.7:51820" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(st.Peers) != 2 || st.Peers[0].Name != "laptop" || st.Peers[1].Name != "phone" || st.Peers[0].Endpoint != "192.0.2.7:51820" ||
		st.PublicKey != priv.PublicKey().String() || st.ListenPort == 0 {
		t.Fatalf("status = %+v, want phone and laptop (at 192.0.2.7:51820), the key and a port", st)
	}

	fail = true
	c.Peers = c.Peers[1:]
	if err := l.Apply(c, map[wireguard.Key]string{laptop: "moved.example:51820"}); err != nil {
		t.Fatal(err)
	}
	<-lookups
	deadline = time.Now().Add(5 * time.Second)
	for {
		st, _ = l.Status()
		if st.Counters["errors"]["resolve"] > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(st.Peers) != 1 || st.Peers[0].Name != "laptop" || st.Peers[0].Endpoint != "192.0.2.7:51820" || st.Counters["errors"]["resolve"] == 0 {
		t.Errorf("after dropping phone with a failing resolver: %+v, want laptop still at 192.0.2.7:51820 and errors/resolve counted", st)
	}
}

// TestNoPeerDrops: packets netstack routes into the interface to an
// address no peer's allowed IPs hold are counted as drops/no_peer, one
// for each, and nothing leaves on the underlay (the Bind sends no
// datagram and the peer's socket gets none); wireguard-go's TUN reader
// would drop them without a word. A packet to the peer then does leave
// (its handshake initiation), so the check above can see a send.
func TestNoPeerDrops(t *testing.T) {
	peerSock, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peerSock.Close()
	l := New(Env{Name: "wg0", Listen: loopback})
	defer l.Close()
	c := wireguard.Config{PrivateKey: key(t), Peers: []wireguard.Peer{{
		Name: "phone", PublicKey: key(t).PublicKey(),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.2/32"), netip.MustParsePrefix("fd00:8::2/128")},
		Endpoint:   peerSock.LocalAddr().(*net.UDPAddr).AddrPort(),
	}}}
	if err := l.Apply(c, nil); err != nil {
		t.Fatal(err)
	}
	counters := func() (noPeer, inside, udpTx uint64) {
		st, err := l.Status()
		if err != nil {
			t.Fatal(err)
		}
		return st.Counters["drops"]["no_peer"], st.Counters["inside"]["to_tunnel"], st.Counters["udp"]["tx"]
	}
	// send has netstack forward one packet to dst into the tunnel.
	send := func(dst string) {
		a := netip.MustParseAddr(dst)
		var ip []byte
		if a.Is4() {
			ip = make([]byte, 28)
			ip[0], ip[3], ip[8], ip[9] = 0x45, 28, 64, 17
			copy(ip[12:], []byte{192, 168, 1, 10})
			copy(ip[16:], a.AsSlice())
		} else {
			ip = make([]byte, 48)
			ip[0], ip[5], ip[6], ip[7] = 0x60, 8, 17, 64
			copy(ip[8:], netip.MustParseAddr("fd00:1::10").AsSlice())
			copy(ip[24:], a.AsSlice())
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(ip)})
		pkt.NetworkPacketInfo.IsForwardedPacket = true
		var pl stack.PacketBufferList
		pl.PushBack(pkt)
		l.TUN().WritePackets(pl)
		pkt.DecRef()
	}
	noPeer0, inside0, tx0 := counters()
	dsts := []string{"10.8.0.77", "192.0.2.1", "10.8.0.3", "fd00:8::77", "2001:db8::1"}
	for _, d := range dsts {
		send(d)
	}
	// Wait until the device's reader has taken all of them (dropped here
	// or handed to the device), then a little for what it might send.
	deadline := time.Now().Add(5 * time.Second)
	for {
		noPeer, inside, _ := counters()
		if noPeer-noPeer0+inside-inside0 >= uint64(len(dsts)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	peerSock.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 2048)
	if n, from, err := peerSock.ReadFromUDPAddrPort(buf); err == nil {
		t.Errorf("the peer's socket got a %d-byte datagram from %v after packets to no peer, want none", n, from)
	}
	noPeer, inside, tx := counters()
	if noPeer-noPeer0 != uint64(len(dsts)) || tx != tx0 {
		t.Errorf("%d packets to addresses no peer allows: drops/no_peer +%d, inside/to_tunnel +%d, udp/tx +%d; want +%d, +0, +0",
			len(dsts), noPeer-noPeer0, inside-inside0, tx-tx0, len(dsts))
	}

	// A packet to the peer leaves: its handshake initiation reaches the
	// peer's socket.
	send("10.8.0.2")
	peerSock.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _, err := peerSock.ReadFromUDPAddrPort(buf); err != nil || n != 148 || buf[0] != 1 {
		t.Errorf("a packet to the peer: the peer's socket got %d bytes (type %d), %v; want a 148-byte handshake initiation", n, buf[0], err)
	}
	if n, _, _ := counters(); n != noPeer {
		t.Errorf("a packet to the peer counted as drops/no_peer (+%d)", n-noPeer)
	}
}
