package dnsforward

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// hdr is a query header: ID 0x1234, the flags, and the four counts.
func hdr(flags uint16, qd, an, ns, ar uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0x1234)
	b = binary.BigEndian.AppendUint16(b, flags)
	for _, c := range []uint16{qd, an, ns, ar} {
		b = binary.BigEndian.AppendUint16(b, c)
	}
	return b
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

var (
	wwwExample = []byte("\x03www\x07example\x00")
	typeAIN    = []byte{0, 1, 0, 1}
	optRR      = []byte{0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0} // UDP 1232, version 0
)

// TestMalformedQueries sends the queries a hostile LAN host can craft
// (compression loops, oversized and truncated names, lying counts, broken
// OPT records, opcodes and types a forwarder must refuse) and other broken
// queries: each is answered as its RFC says or dropped, and counted; none
// panics, and the forwarder keeps serving.
func TestMalformedQueries(t *testing.T) {
	u := newUpstream(t, "www.example. 300 IN A 192.0.2.1")
	f := startForwarder(t, Config{}, u)
	const none = -1
	long := make([]byte, 0, 300)
	for range 5 {
		long = append(long, 63)
		long = append(long, strings.Repeat("a", 63)...)
	}
	long = append(long, 0)
	for _, tc := range []struct {
		name      string
		msg       []byte
		rcode     int // none: no reply
		malformed uint64
	}{
		{"shorter than a header", []byte{0x12, 0x34, 1, 0, 0}, none, 1},
		{"response sent as a query", cat(hdr(flagQR|flagRD, 1, 0, 0, 0), wwwExample, typeAIN), none, 1},
		{"compression loop", cat(hdr(flagRD, 1, 0, 0, 0), []byte{0xc0, 12}, typeAIN), dns.RcodeFormatError, 1},
		{"forward pointer", cat(hdr(flagRD, 1, 0, 0, 0), []byte{0xc0, 20}, typeAIN, wwwExample), dns.RcodeFormatError, 1},
		{"truncated label", cat(hdr(flagRD, 1, 0, 0, 0), []byte("\x05ab")), dns.RcodeFormatError, 1},
		{"no type or class", cat(hdr(flagRD, 1, 0, 0, 0), wwwExample), dns.RcodeFormatError, 1},
		{"no class", cat(hdr(flagRD, 1, 0, 0, 0), wwwExample, []byte{0, 1}), dns.RcodeFormatError, 1},
		{"label over 63", cat(hdr(flagRD, 1, 0, 0, 0), []byte{64}, make([]byte, 64), []byte{0}, typeAIN), dns.RcodeFormatError, 1},
		{"name over 255", cat(hdr(flagRD, 1, 0, 0, 0), long, typeAIN), dns.RcodeFormatError, 1},
		{"extended label type", cat(hdr(flagRD, 1, 0, 0, 0), []byte{0x41, 0}, typeAIN), dns.RcodeFormatError, 1},
		{"QDCOUNT 0", hdr(flagRD, 0, 0, 0, 0), dns.RcodeFormatError, 1},
		{"QDCOUNT 2", cat(hdr(flagRD, 2, 0, 0, 0), wwwExample, typeAIN, wwwExample, typeAIN), dns.RcodeFormatError, 1},
		{"QDCOUNT 2, one there", cat(hdr(flagRD, 2, 0, 0, 0), wwwExample, typeAIN), dns.RcodeFormatError, 1},
		{"ARCOUNT past the end", cat(hdr(flagRD, 1, 0, 0, 3), wwwExample, typeAIN), dns.RcodeFormatError, 1},
		{"truncated OPT", cat(hdr(flagRD, 1, 0, 0, 1), wwwExample, typeAIN, optRR[:7]), dns.RcodeFormatError, 1},
		{"two OPTs", cat(hdr(flagRD, 1, 0, 0, 2), wwwExample, typeAIN, optRR, optRR), dns.RcodeFormatError, 1},
		{"OPT not at the root", cat(hdr(flagRD, 1, 0, 0, 1), wwwExample, typeAIN, []byte{0xc0, 12}, optRR[1:]), dns.RcodeFormatError, 1},
		{"EDNS version 1", cat(hdr(flagRD, 1, 0, 0, 1), wwwExample, typeAIN, unhex("00 0029 04d0 00 01 0000 0000")), dns.RcodeBadVers, 0},
		{"NOTIFY", cat(hdr(4<<11, 1, 0, 0, 0), wwwExample, []byte{0, 6, 0, 1}), dns.RcodeNotImplemented, 0},
		{"UPDATE", cat(hdr(5<<11, 1, 0, 0, 0), wwwExample, []byte{0, 6, 0, 1}), dns.RcodeNotImplemented, 0},
		{"AXFR over UDP", cat(hdr(0, 1, 0, 0, 0), wwwExample, []byte{0, 252, 0, 1}), dns.RcodeRefused, 0},
		{"CHAOS", cat(hdr(0, 1, 0, 0, 0), []byte("\x07version\x04bind\x00"), []byte{0, 16, 0, 3}), dns.RcodeRefused, 0},
		{"qtype OPT", cat(hdr(0, 1, 0, 0, 0), wwwExample, []byte{0, 41, 0, 1}), dns.RcodeRefused, 0},
		// Odd but readable: answered.
		{"compressed question", cat(hdr(flagRD, 1, 0, 0, 0), []byte{3, 'w', 'w', 'w', 0xc0, 22}, typeAIN, []byte("\x07example\x00")), dns.RcodeSuccess, 0},
		{"TC set in the query", cat(hdr(flagRD|flagTC, 1, 0, 0, 0), wwwExample, typeAIN), dns.RcodeSuccess, 0},
		{"trailing garbage", cat(hdr(flagRD, 1, 0, 0, 0), wwwExample, typeAIN, []byte{1, 2, 3}), dns.RcodeSuccess, 0},
		{"OPT with options", cat(hdr(flagRD, 1, 0, 0, 1), wwwExample, typeAIN, unhex("00 0029 04d0 00 00 0000 000c 000a 0008 0102030405060708")), dns.RcodeSuccess, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.Status().Drops["malformed"]
			reply := f.rawAsk(t, tc.msg, 300*time.Millisecond)
			if got := f.Status().Drops["malformed"] - before; got != tc.malformed {
				t.Errorf("Malformed rose by %d, want %d", got, tc.malformed)
			}
			if tc.rcode == none {
				if reply != nil {
					t.Errorf("reply % x, want none", reply)
				}
				return
			}
			if reply == nil {
				t.Fatalf("no reply, want %s", dns.RcodeToString[tc.rcode])
			}
			var m dns.Msg
			if err := m.Unpack(reply); err != nil {
				t.Fatalf("reply % x does not unpack: %v", reply, err)
			}
			if m.Id != 0x1234 || !m.Response || m.Rcode != tc.rcode {
				t.Errorf("reply ID %#x QR %v rcode %s, want 0x1234, QR, %s", m.Id, m.Response, dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			if tc.rcode == dns.RcodeBadVers {
				if opt := m.IsEdns0(); opt == nil || opt.Version() != 0 {
					t.Errorf("BADVERS reply OPT %v, want version 0", opt)
				}
			}
		})
	}
	st := f.Status()
	if st.FormErr != 15 || st.NotImplemented != 2 || st.Refused != 3 || st.BadVersion != 1 {
		t.Errorf("FormErr %d NotImplemented %d Refused %d BadVersion %d, want 15 2 3 1", st.FormErr, st.NotImplemented, st.Refused, st.BadVersion)
	}
	if r := f.ask(t, "udp", question("www.example.", dns.TypeA)); len(r.Answer) != 1 {
		t.Errorf("after the attacks: %v, want the answer", r)
	}
}

func TestMalformedTCP(t *testing.T) {
	f := startForwarder(t, Config{})
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"64 KiB message", cat([]byte{0xff, 0xff}, make([]byte, 65535))},
		{"shorter than a header", []byte{0, 5, 1, 2, 3, 4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", f.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			before := f.Status().Drops["malformed"]
			go c.Write(tc.msg) // may fail: the forwarder closes the connection
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if n, err := io.ReadAll(c); len(n) != 0 || (err != nil && !isReset(err)) {
				t.Errorf("read %d bytes, %v; want the connection closed", len(n), err)
			}
			if got := f.Status().Drops["malformed"] - before; got != 1 {
				t.Errorf("Malformed rose by %d, want 1", got)
			}
		})
	}
	// A broken query on TCP is answered FORMERR on its connection.
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := cat(hdr(flagRD, 1, 0, 0, 0), []byte{0xc0, 12}, typeAIN)
	c.Write(cat(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	conn := &dns.Conn{Conn: c}
	r, err := conn.ReadMsg()
	if err != nil || r.Rcode != dns.RcodeFormatError {
		t.Errorf("TCP compression loop: %v, %v; want FORMERR", r, err)
	}
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "reset by peer")
}
