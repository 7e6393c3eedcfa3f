package dhcp6server

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

var (
	srvMAC  = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x01, 0x01}
	srvAddr = netip.MustParseAddr("fe80::1")
	// srvDUID is DUID-LL (type 3), hardware type 1, srvMAC: RFC 8415
	// §11.4, written out by hand.
	srvDUID   = []byte{0x00, 0x03, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x01, 0x01}
	dns1      = netip.MustParseAddr("fd00:1::1")
	dns2      = netip.MustParseAddr("2001:db8::53")
	cliMAC    = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x02, 0x01}
	cliAddr   = netip.MustParseAddr("fe80::200:ff:fe00:201")
	cliDUID   = []byte{0x00, 0x01, 0x00, 0x01, 0x30, 0x39, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x01} // DUID-LLT
	testXID   = [3]byte{0xab, 0xcd, 0xef}
	allRelays = AllRelayAgentsAndServers
)

func testConfig() Config {
	return Config{HWAddr: srvMAC, Addr: srvAddr, DNS: []netip.Addr{dns1, dns2}, Domains: []string{"lan", "example.org"}}
}

// newTestServer builds a server on cfg with a fake clock and a transport
// that drops what is sent.
func newTestServer(t testing.TB, cfg Config) (*Server, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New()
	cfg.Clock = clk
	s, err := New(cfg, nopTransport{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, clk
}

// opt encodes one option (RFC 8415 §21.1) by hand.
func opt(code uint16, body ...byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, code)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

// oro is an Option Request option for codes.
func oro(codes ...uint16) []byte {
	var body []byte
	for _, c := range codes {
		body = binary.BigEndian.AppendUint16(body, c)
	}
	return opt(optORO, body...)
}

// msg encodes a message of type typ with testXID and opts, by hand.
func msg(typ byte, opts ...[]byte) []byte {
	b := []byte{typ, testXID[0], testXID[1], testXID[2]}
	for _, o := range opts {
		b = append(b, o...)
	}
	return b
}

// infoReq is an Information-request as clients send it: Client
// Identifier, Elapsed Time, ORO for 23, 24 and 32.
func infoReq(extra ...[]byte) []byte {
	return msg(msgInfoRequest, append([][]byte{opt(optClientID, cliDUID...), opt(8, 0, 0), oro(23, 24, 32)}, extra...)...)
}

// pkt is payload from the client to ff02::1:2.
func pkt(payload []byte) rawudp.Packet {
	return rawudp.Packet{
		Payload: payload,
		Src:     netip.AddrPortFrom(cliAddr, ClientPort),
		Dst:     netip.AddrPortFrom(allRelays, ServerPort),
		SrcMAC:  cliMAC,
		DstMAC:  net.HardwareAddr{0x33, 0x33, 0x00, 0x01, 0x00, 0x02},
	}
}

// dropCounts returns the non-zero drop counters by name.
func dropCounts(s *Server) map[string]uint64 {
	out := map[string]uint64{}
	for r := range NumDropReasons {
		if n := s.stats.Drops[r].Load(); n > 0 {
			out[r.String()] = n
		}
	}
	return out
}

func dropSum(s *Server) uint64 {
	var n uint64
	for r := range NumDropReasons {
		n += s.stats.Drops[r].Load()
	}
	return n
}

// splitOptions splits a message's options area into (code, body) pairs, by
// hand; it fails t on a framing error.
func splitOptions(t testing.TB, b []byte) [][2]any {
	t.Helper()
	var out [][2]any
	for len(b) > 0 {
		if len(b) < 4 || len(b)-4 < int(binary.BigEndian.Uint16(b[2:])) {
			t.Fatalf("options % x: cut short", b)
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		out = append(out, [2]any{binary.BigEndian.Uint16(b), b[4 : 4+n]})
		b = b[4+n:]
	}
	return out
}

// chanTransport is an in-memory Transport.
type chanTransport struct {
	in, out chan rawudp.Packet
	sendErr error
}

func newChanTransport(n int) *chanTransport {
	return &chanTransport{in: make(chan rawudp.Packet, n), out: make(chan rawudp.Packet, n)}
}

func (c *chanTransport) Send(p rawudp.Packet) error {
	if c.sendErr != nil {
		return c.sendErr
	}
	c.out <- p
	return nil
}

func (c *chanTransport) Recv(ctx context.Context) (rawudp.Packet, error) {
	select {
	case p, ok := <-c.in:
		if !ok {
			return rawudp.Packet{}, rawudp.ErrClosed
		}
		return p, nil
	case <-ctx.Done():
		return rawudp.Packet{}, ctx.Err()
	}
}

// nopTransport drops what is sent.
type nopTransport struct{}

func (nopTransport) Send(rawudp.Packet) error { return nil }

func (nopTransport) Recv(ctx context.Context) (rawudp.Packet, error) {
	<-ctx.Done()
	return rawudp.Packet{}, ctx.Err()
}
