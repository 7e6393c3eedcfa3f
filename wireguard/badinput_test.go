package wireguard

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
)

// TestWrongKeyPeer: a device whose key the other side does not know gets
// no handshake and no packet through; the other side counts its
// initiations as invalid.
func TestWrongKeyPeer(t *testing.T) {
	a, b := pair(t)
	c := newNode(t, "10.9.0.1") // poses as a's inside address, with its own key
	c.configure(t, b.peerOf(true))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if conn, err := gonet.DialContextTCP(ctx, c.s, tcpip.FullAddress{Addr: tcpip.AddrFrom4(b.addr.As4()), Port: 9}, ipv4.ProtocolNumber); err == nil {
		conn.Close()
		t.Fatal("a peer with an unknown key reached b's netstack")
	}
	if got := b.stats.InvalidInitiation.Load(); got == 0 {
		t.Errorf("b counted %d invalid initiations from the unknown key, want > 0", got)
	}
	if got := c.bind.Stats.RxResponses.Load(); got != 0 {
		t.Errorf("the unknown key got %d handshake responses, want 0", got)
	}
	if got := b.tun.Stats.RxPackets.Load(); got != 0 {
		t.Errorf("b's netstack got %d packets, want 0", got)
	}
	uapi, _ := c.dev.IpcGet()
	st, err := ReadStatus(uapi, nil, Stats{}, time.Now())
	if err != nil || len(st.Peers) != 1 || st.Peers[0].HandshakeAge != -1 || !st.Peers[0].LastHandshake.IsZero() || st.Peers[0].RxBytes != 0 {
		t.Errorf("status of the unknown key's peer = %+v, %v; want no handshake, nothing received", st.Peers, err)
	}
	_ = a
}

// TestBadInput: random UDP to the listen port and a replayed initiation
// are counted and do no harm; the tunnel still works after.
func TestBadInput(t *testing.T) {
	a, b := pair(t)
	ping(t, a, b)
	init := lastInitiation(t, a)
	attacker, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.port))
	send := func(p []byte) {
		if _, err := attacker.WriteToUDP(p, to); err != nil {
			t.Fatal(err)
		}
	}
	send([]byte("short"))
	send(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 25))
	send(append([]byte{msgInitiation, 0, 0, 0}, make([]byte, 60)...))           // an initiation of the wrong size
	send(append([]byte{msgTransport, 0, 0, 0}, bytes.Repeat([]byte{7}, 60)...)) // a transport packet for no receiver index
	mac1 := bytes.Clone(init)
	mac1[sizeInitiation-20] ^= 1 // inside MAC1
	send(mac1)
	send(init) // the replay
	deadline := time.Now().Add(5 * time.Second)
	for b.stats.HandshakeReplay.Load() == 0 || b.stats.InvalidMAC1.Load() == 0 {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"bind RxShort", b.bind.Stats.RxShort.Load(), 1},
		{"bind RxUnknownType", b.bind.Stats.RxUnknownType.Load(), 1},
		{"bind RxBadSize", b.bind.Stats.RxBadSize.Load(), 1},
		{"bind RxUnknownIndex", b.bind.Stats.RxUnknownIndex.Load(), 1},
		{"device HandshakeReplay", b.stats.HandshakeReplay.Load(), 1},
		{"device InvalidMAC1", b.stats.InvalidMAC1.Load(), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	ping(t, b, a) // still up
}

// TestHandshakeFlood: a flood of initiations (a captured one, replayed
// thousands of times, so MAC1 is valid) puts the device under load; it
// answers with cookie replies instead of doing Diffie-Hellman for each
// (whitepaper §5.3), the attacker's socket receives them, the handshake
// queue stays bounded and the tunnel survives.
func TestHandshakeFlood(t *testing.T) {
	a, b := pair(t)
	ping(t, a, b)
	init := lastInitiation(t, a)
	attacker, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.port))
	cookies := make(chan int, 1)
	go func() {
		n := 0
		buf := make([]byte, 2048)
		attacker.SetReadDeadline(time.Now().Add(15 * time.Second))
		for {
			m, err := attacker.Read(buf)
			if err != nil {
				break
			}
			if m == sizeCookieReply && buf[0] == msgCookieReply {
				n++
				if n == 1 {
					cookies <- n
				}
			}
		}
	}()
	var got bool
	for round := 0; round < 20 && !got; round++ {
		for range 2000 {
			attacker.WriteToUDP(init, to)
		}
		select {
		case <-cookies:
			got = true
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !got {
		t.Fatalf("no cookie reply reached the flooder; b counted %d cookie replies sent, %d replays, %d initiations received",
			b.stats.CookieRepliesSent.Load(), b.stats.HandshakeReplay.Load(), b.bind.Stats.RxInitiations.Load())
	}
	if b.stats.CookieRepliesSent.Load() == 0 {
		t.Errorf("CookieRepliesSent = 0 though the flooder got a cookie reply")
	}
	time.Sleep(500 * time.Millisecond) // let the queue drain
	ping(t, b, a)
}
