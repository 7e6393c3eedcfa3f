package dhcp6server

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// FuzzHandle feeds arbitrary messages to the handler, to ff02::1:2 or to
// the server's address, with or without a source MAC. Every datagram ends
// in exactly one Reply or one drop counter; a Reply answers only an
// Information-request, is at most maxReply bytes, parses (by hand and with
// the wire library), carries the request's transaction ID, our Server
// Identifier first, the request's Client Identifier byte for byte iff it
// had one, and options 23, 24 and 32 only as its Option Request option
// asked, and goes to the request's source, port 546.
func FuzzHandle(f *testing.F) {
	cid := opt(optClientID, cliDUID...)
	for _, b := range [][]byte{
		infoReq(),
		msg(msgInfoRequest),
		msg(msgInfoRequest, oro(23, 24, 32)),
		msg(msgInfoRequest, cid, oro(23), oro(24, 32), opt(8, 0, 0)),
		infoReq(opt(optServerID, srvDUID...)),
		infoReq(opt(optServerID, 0, 3, 0, 1, 1, 2, 3, 4, 5, 6)),
		infoReq(opt(optIANA, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0)),
		infoReq(opt(optIAPD, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0)),
		msg(msgInfoRequest, opt(optClientID, 0, 4, 1, 2, 3), oro(23)),
		msg(msgSolicit, cid, oro(23)),
		append(append([]byte{msgRelayForw, 0}, make([]byte, 32)...), opt(9, infoReq()...)...),
		append(infoReq(), 0, 23, 0, 16, 0xfd),
		{msgInfoRequest, 1, 2},
	} {
		f.Add(b, byte(0))
		f.Add(b, byte(3))
	}
	f.Fuzz(func(t *testing.T, payload []byte, mode byte) {
		s, _ := newTestServer(t, testConfig())
		p := pkt(payload)
		if mode&1 != 0 {
			p.Dst = netip.AddrPortFrom(srvAddr, ServerPort)
		}
		if mode&2 != 0 {
			p.SrcMAC = nil
		}
		in := slices.Clone(payload)
		r, ok := s.handle(p)
		if !bytes.Equal(payload, in) {
			t.Fatal("handle changed the request")
		}
		if d := dropSum(s); s.stats.Received.Load() != 1 || ok == (d == 1) || d > 1 {
			t.Fatalf("received %d, answered %v, drops %v: want exactly one outcome", s.stats.Received.Load(), ok, dropCounts(s))
		}
		if !ok {
			return
		}
		if payload[0] != msgInfoRequest {
			t.Fatalf("answered message type %d", payload[0])
		}
		b := r.Payload
		if len(b) > maxReply || len(b) < headerLen || b[0] != msgReply || !bytes.Equal(b[1:4], payload[1:4]) {
			t.Fatalf("Reply % x to % x", b, payload[:4])
		}
		if r.Src != netip.AddrPortFrom(srvAddr, ServerPort) || r.Dst != netip.AddrPortFrom(cliAddr, ClientPort) {
			t.Fatalf("Reply from %v to %v", r.Src, r.Dst)
		}
		if _, err := dhcpv6.MessageFromBytes(b); err != nil {
			t.Fatalf("Reply % x does not parse: %v", b, err)
		}
		// What the request asked, read by hand.
		var reqCID []byte
		requested := map[uint16]bool{}
		for _, o := range splitOptions(t, payload[headerLen:]) {
			body := o[1].([]byte)
			switch o[0].(uint16) {
			case optClientID:
				reqCID = body
			case optORO:
				for i := 0; i+1 < len(body); i += 2 {
					requested[binary.BigEndian.Uint16(body[i:])] = true
				}
			}
		}
		got := splitOptions(t, b[headerLen:])
		if len(got) == 0 || got[0][0].(uint16) != optServerID || !bytes.Equal(got[0][1].([]byte), srvDUID) {
			t.Fatalf("Reply options %v: Server Identifier not first", got)
		}
		var repCID []byte
		for _, o := range got[1:] {
			switch c := o[0].(uint16); c {
			case optClientID:
				repCID = o[1].([]byte)
			case 23, 24, 32:
				if !requested[c] {
					t.Fatalf("option %d sent unrequested (ORO %v)", c, requested)
				}
			default:
				t.Fatalf("Reply carries option %d", c)
			}
		}
		if !bytes.Equal(repCID, reqCID) || (repCID == nil) != (reqCID == nil) {
			t.Fatalf("Client Identifier % x in the Reply, % x in the request", repCID, reqCID)
		}
	})
}
