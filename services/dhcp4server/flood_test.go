package dhcp4server

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

// TestStarvation floods a range of 150 with DISCOVER and REQUEST from
// 10,000 random MACs in 10 s (of fake time): the static lease and an
// existing client's renewal still work, the table stays within the range
// and the heap grows by less than 1 MiB, counters show the flood.
func TestStarvation(t *testing.T) {
	s, clk := newTestServer(t, testConfig(150))
	existing := dora(t, s, mac(1))
	rng := rand.New(rand.NewPCG(7, 8))
	flood := func() {
		for range 10000 {
			hw := make(net.HardwareAddr, 6)
			v := rng.Uint64()
			for i := range hw {
				hw[i] = byte(v >> (8 * i))
			}
			hw[0] = hw[0]&^1 | 2 // unicast, locally administered
			off, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, hw)))
			req := addrFrom32(u32(ip("192.168.1.100")) + uint32(rng.IntN(150)))
			if off != nil {
				req = ip4(off.YourIPAddr)
			}
			exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, hw, withReq(req.String()), withSID(srvAddr))))
			clk.Advance(time.Millisecond)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	flood()
	runtime.GC()
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	st := s.Stats()
	t.Logf("after 10,000 random MACs: heap %+d KiB, bindings %d, offers %d, acks %d, naks %d, pool_exhausted %d",
		growth/1024, len(s.byAddr), st.Offer.Load(), st.Ack.Load(), st.Nak.Load(), st.PoolExhausted.Load())
	if growth > 1<<20 {
		t.Errorf("heap grew by %d bytes, want < 1 MiB", growth)
	}
	if n := len(s.byAddr); n > 150+1 {
		t.Errorf("%d bindings, want at most the range (150) and the static lease", n)
	}
	if st.PoolExhausted.Load() < 9000 || st.Ack.Load() != 150 || st.Nak.Load() < 9000 || st.Offer.Load() != 150 {
		t.Errorf("PoolExhausted, Offer, Ack, Nak = %d, %d, %d, %d; want most of the flood, 150, 150 (the range less the existing client's, plus its own), most",
			st.PoolExhausted.Load(), st.Offer.Load(), st.Ack.Load(), st.Nak.Load())
	}
	m, p := exchange(t, s, unicast(msg(dhcpv4.MessageTypeRequest, mac(1), withCI(existing.String()))))
	if typeOf(m) != "ACK" || ip4(m.YourIPAddr) != existing || p.Dst.Addr() != existing {
		t.Errorf("existing client's renewal during the flood = %s %v, want ACK %v", typeOf(m), m, existing)
	}
	if a := dora(t, s, staticMAC); a != staticIP {
		t.Errorf("static client during the flood got %v, want %v", a, staticIP)
	}
	flood()
	if n := len(s.byAddr) + len(s.byClient); n > 2*150+1 {
		t.Errorf("after a second flood the table holds %d entries: not bounded", n)
	}
	checkInvariants(t, s)
}

// FuzzHandle feeds arbitrary datagrams to a server holding a lease, an
// offer and a quarantine: no panic, every reply a well-formed BOOTREPLY
// to the same transaction with an address of the range or the static
// lease, and the table keeps its invariants.
func FuzzHandle(f *testing.F) {
	cid := dhcpv4.WithOption(dhcpv4.OptClientIdentifier([]byte{1, 2, 0x10, 0, 0, 0, 1}))
	for _, m := range []*dhcpv4.DHCPv4{
		msg(dhcpv4.MessageTypeDiscover, mac(3)),
		msg(dhcpv4.MessageTypeDiscover, mac(3), withReq("192.168.1.101"), dhcpv4.WithBroadcast(true)),
		msg(dhcpv4.MessageTypeRequest, mac(2), withReq("192.168.1.101"), withSID(srvAddr)),
		msg(dhcpv4.MessageTypeRequest, mac(1), withReq("192.168.1.100")),
		msg(dhcpv4.MessageTypeRequest, mac(1), withCI("192.168.1.100")),
		msg(dhcpv4.MessageTypeRequest, mac(1), withReq("10.0.0.1"), dhcpv4.WithGatewayIP(net.ParseIP("192.168.1.2"))),
		msg(dhcpv4.MessageTypeDecline, mac(1), withReq("192.168.1.100"), withSID(srvAddr)),
		msg(dhcpv4.MessageTypeRelease, mac(1), withCI("192.168.1.100"), withSID(srvAddr)),
		msg(dhcpv4.MessageTypeInform, mac(4), withCI("192.168.1.50")),
		msg(dhcpv4.MessageTypeDiscover, staticMAC, cid, dhcpv4.WithOption(dhcpv4.OptMaxMessageSize(1500)),
			dhcpv4.WithOption(dhcpv4.OptHostName("host")), dhcpv4.WithRequestedOptions(dhcpv4.OptionRouter)),
	} {
		f.Add(m.ToBytes(), byte(0))
		f.Add(m.ToBytes(), byte(0x81))
	}
	good := msg(dhcpv4.MessageTypeDiscover, mac(3)).ToBytes()
	f.Add(good[:240], byte(0))
	f.Add(append(bytes.Clone(good[:240]), 53, 1, 1, 61, 255), byte(0))       // option overflow
	f.Add(append(bytes.Clone(good[:240]), 53, 1, 1, 52, 1, 3, 255), byte(0)) // option overload (ignored)
	f.Add(append(bytes.Clone(good[:236]), 1, 2, 3, 4), byte(0))              // wrong cookie
	f.Fuzz(func(t *testing.T, payload []byte, mode byte) {
		cfg := testConfig(4)
		cfg.Routes = []Route{{To: netip.MustParsePrefix("10.0.0.0/8"), Via: ip("192.168.1.254")}}
		s, clk := newTestServer(t, cfg)
		dora(t, s, mac(1))
		exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(2))))
		q := dora(t, s, mac(5))
		exchange(t, s, bcast(msg(dhcpv4.MessageTypeDecline, mac(5), withReq(q.String()), withSID(srvAddr))))
		clk.Advance(time.Duration(mode&0x7f) * time.Minute)
		p := rawudp.Packet{Payload: payload, Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.AddrPortFrom(broadcast4, 67)}
		if mode&0x80 != 0 {
			p.Src, p.Dst = netip.MustParseAddrPort("192.168.1.100:68"), netip.AddrPortFrom(srvAddr, 67)
		}
		r := s.handle(p)
		checkInvariants(t, s)
		if !r.send {
			return
		}
		m, err := dhcpv4.FromBytes(r.reply.Payload)
		if err != nil {
			t.Fatalf("reply does not parse: %v", err)
		}
		if m.OpCode != dhcpv4.OpcodeBootReply || !bytes.Equal(m.TransactionID[:], payload[4:8]) || !bytes.Equal(m.ClientHWAddr, payload[28:34]) {
			t.Fatalf("reply op %v xid %v chaddr %v to request xid %x chaddr %x", m.OpCode, m.TransactionID, m.ClientHWAddr, payload[4:8], payload[28:34])
		}
		if yi := ip4(m.YourIPAddr); !yi.IsUnspecified() && !s.inPool(yi) && yi != staticIP {
			t.Fatalf("reply yiaddr %v outside the range and the static lease", yi)
		}
		if yi := ip4(m.YourIPAddr); yi == q && mode&0x7f < 10 {
			t.Fatalf("quarantined %v handed out", q)
		}
		if r.reply.Src != netip.AddrPortFrom(srvAddr, 67) || len(r.reply.Payload)+28 > 1500 {
			t.Fatalf("reply from %v, %d bytes", r.reply.Src, len(r.reply.Payload))
		}
	})
}

// BenchmarkDORA measures whole DISCOVER-OFFER-REQUEST-ACK handshakes
// through Run over an in-memory transport, one op per handshake: without
// a lease file, with one and a client at a time (each ACK waits for an
// fsync), and with 64 clients at a time (ACKs share fsyncs).
func BenchmarkDORA(b *testing.B) {
	for _, bc := range []struct {
		name     string
		file     bool
		parallel int
		clients  int
	}{
		{"memory", false, 1, 60000},
		{"memory/parallel-64", false, 64, 60000},
		{"file", true, 1, 1000},
		{"file/parallel-64", true, 64, 1000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := Config{
				ServerAddr: ip("10.0.0.1"), Subnet: netip.MustParsePrefix("10.0.0.0/16"),
				RangeStart: ip("10.0.0.10"), RangeEnd: ip("10.0.255.250"), LeaseTime: time.Hour,
			}
			if bc.file {
				cfg.LeaseFile = filepath.Join(b.TempDir(), "leases.json")
			}
			s, err := New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			tr := newChanTransport(256)
			s.t = tr
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { s.Run(ctx); close(done) }()
			sid := withSID(ip("10.0.0.1"))
			discovers := make([][]byte, bc.clients)
			for i := range discovers {
				discovers[i] = msg(dhcpv4.MessageTypeDiscover, mac(i)).ToBytes()
			}
			pkt := func(payload []byte) rawudp.Packet {
				return rawudp.Packet{Payload: payload, Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.AddrPortFrom(broadcast4, 67)}
			}
			// The client side reuses its messages: the REQUEST of client i
			// is built at its first OFFER (its address never changes).
			reqs := make([][]byte, bc.clients)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i += bc.parallel {
				k := min(bc.parallel, b.N-i)
				for j := range k {
					tr.in <- pkt(discovers[(i+j)%bc.clients])
				}
				for range k {
					p := <-tr.out
					if msgTypeOf(p.Payload) != msgOffer {
						b.Fatalf("reply type %d, want OFFER", msgTypeOf(p.Payload))
					}
					c := int(binary.BigEndian.Uint16(p.Payload[32:34]))
					if reqs[c] == nil {
						off, _ := dhcpv4.FromBytes(p.Payload)
						reqs[c] = msg(dhcpv4.MessageTypeRequest, off.ClientHWAddr, withReq(off.YourIPAddr.String()), sid).ToBytes()
					}
					tr.in <- pkt(reqs[c])
				}
				for range k {
					if p := <-tr.out; msgTypeOf(p.Payload) != msgAck {
						b.Fatalf("reply type %d, want ACK", msgTypeOf(p.Payload))
					}
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handshakes/s")
			b.StopTimer()
			cancel()
			<-done
		})
	}
}

// msgTypeOf finds option 53 in a DHCP message without parsing it all.
func msgTypeOf(b []byte) byte {
	for o := b[240:]; len(o) >= 2 && o[0] != 255; {
		if o[0] == 0 {
			o = o[1:]
			continue
		}
		if o[0] == optMsgType && o[1] == 1 && len(o) >= 3 {
			return o[2]
		}
		o = o[min(len(o), 2+int(o[1])):]
	}
	return 0
}
