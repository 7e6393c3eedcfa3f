package wireguard

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	gvstack "github.com/gvrouter/gvrouter/stack"
)

// TestTunnel: two devices on our Bind and TUN complete a handshake and
// carry ping and TCP both ways between their netstacks.
func TestTunnel(t *testing.T) {
	goroutineLeakCheck(t)
	a, b := pair(t)
	ping(t, a, b)
	ping(t, b, a)
	echoTCP(t, a, b, 7)
	echoTCP(t, b, a, 7)
	if a.bind.Stats.RxResponses.Load() == 0 || b.bind.Stats.RxInitiations.Load() == 0 || b.bind.Stats.RxTransport.Load() == 0 {
		t.Errorf("bind counters: a got %d responses, b %d initiations and %d transport packets; want each > 0",
			a.bind.Stats.RxResponses.Load(), b.bind.Stats.RxInitiations.Load(), b.bind.Stats.RxTransport.Load())
	}
	if x, y := a.bind.Stats.RxUnknownIndex.Load(), b.bind.Stats.RxUnknownIndex.Load(); x != 0 || y != 0 {
		t.Errorf("RxUnknownIndex = %d, %d on a live tunnel; want 0", x, y)
	}
	if a.tun.Stats.TxPackets.Load() == 0 || b.tun.Stats.RxPackets.Load() == 0 {
		t.Errorf("tun counters: a sent %d, b received %d; want > 0", a.tun.Stats.TxPackets.Load(), b.tun.Stats.RxPackets.Load())
	}
	checkStatus(t, a, b)
}

// checkStatus checks a's Status after traffic with its peer b.
func checkStatus(t *testing.T, a, b *node) {
	t.Helper()
	uapi, err := a.dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(uapi, map[Key]string{b.key.PublicKey(): "b"}, Stats{&a.bind.Stats, &a.tun.Stats, &a.stats}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.PublicKey != a.key.PublicKey().String() || st.ListenPort != a.port || len(st.Peers) != 1 {
		t.Fatalf("status = %+v, want a's public key, port %d and one peer", st, a.port)
	}
	p := st.Peers[0]
	if p.Name != "b" || p.PublicKey != b.key.PublicKey().String() || p.Endpoint != netip.AddrPortFrom(b.underlay, b.port).String() ||
		p.RxBytes == 0 || p.TxBytes == 0 || p.HandshakeAge < 0 || p.HandshakeAge > 60 ||
		len(p.AllowedIPs) != 1 || p.AllowedIPs[0] != netip.PrefixFrom(b.addr, 32) {
		t.Errorf("peer status = %+v", p)
	}
	if got := st.Counters["udp"]["rx_response"]; got == 0 {
		t.Errorf("counters[udp][rx_response] = %d, want > 0; counters %v", got, st.Counters)
	}
	if _, ok := st.Counters["drops"]["unknown_index"]; !ok {
		t.Errorf("counters lack drops/unknown_index: %v", st.Counters)
	}
	js, _ := json.Marshal(st)
	if strings.Contains(string(js), a.key.String()) || strings.Contains(string(js), a.key.hex()) {
		t.Errorf("status JSON holds the private key: %s", js)
	}
}

// TestTunnelOverNetstack: the same tunnel with each Bind on a UDP socket
// of the router's own netstack (*stack.UDPConn, as on the WAN), the two
// netstacks joined by an in-memory Ethernet wire: the kernel carries
// nothing.
func TestTunnelOverNetstack(t *testing.T) {
	goroutineLeakCheck(t)
	wan1, wan2 := wirePair(t, "203.0.113.1/24", "203.0.113.2/24")
	on := func(ns *gvstack.Netstack, addr string) func(*node) Listener {
		return func(n *node) Listener {
			n.underlay = netip.MustParseAddr(addr)
			return func(network string, port uint16) (PacketConn, error) {
				if network != "udp4" {
					return nil, nil
				}
				return ns.ListenUDPConn(netip.AddrPortFrom(n.underlay, port))
			}
		}
	}
	a := newNodeOn(t, "10.9.0.1", on(wan1, "203.0.113.1"))
	b := newNodeOn(t, "10.9.0.2", on(wan2, "203.0.113.2"))
	b.configure(t, a.peerOf(false))
	a.configure(t, b.peerOf(true))
	ping(t, a, b)
	echoTCP(t, a, b, 7)
	echoTCP(t, b, a, 7)
	if got := wan2.Interface("wan").Stats(); b.bind.Stats.RxTransport.Load() == 0 {
		t.Errorf("b's Bind got no transport packet over the netstack wire; wan stats %+v", got)
	}
}

// wireWriter carries one netstack's frames to another's interface, on
// a goroutine of its own, as a cable would.
type wireWriter struct{ ch chan []byte }

func (w wireWriter) WriteFrames(frames [][]byte) (int, error) {
	for _, f := range frames {
		select {
		case w.ch <- bytes.Clone(f):
		default: // a full wire drops, as a full ring would
		}
	}
	return len(frames), nil
}

// wirePair returns two router netstacks, each with one interface "wan"
// holding addr, joined back to back.
func wirePair(t *testing.T, addr1, addr2 string) (*gvstack.Netstack, *gvstack.Netstack) {
	t.Helper()
	w1, w2 := wireWriter{make(chan []byte, 512)}, wireWriter{make(chan []byte, 512)}
	mk := func(mac byte, addr string, w wireWriter) *gvstack.Netstack {
		ns, err := gvstack.New(gvstack.Config{Interfaces: []gvstack.InterfaceConfig{{
			Name: "wan", MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, mac}, MTU: 1500,
			Addresses: []netip.Prefix{netip.MustParsePrefix(addr)}, Writer: w,
		}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	n1, n2 := mk(1, addr1, w1), mk(2, addr2, w2)
	done := make(chan struct{})
	var wg sync.WaitGroup
	carry := func(from wireWriter, to *gvstack.Interface) {
		defer wg.Done()
		for {
			select {
			case f := <-from.ch:
				to.HandleBatch(0, []hw.Frame{{Data: f, WireLen: len(f)}})
			case <-done:
				return
			}
		}
	}
	wg.Add(2)
	go carry(w1, n2.Interface("wan"))
	go carry(w2, n1.Interface("wan"))
	t.Cleanup(func() {
		close(done)
		wg.Wait()
		n1.Close()
		n2.Close()
	})
	return n1, n2
}
