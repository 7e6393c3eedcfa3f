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

// noLimit lifts the new-lease budget, for the tests of what the table
// does when a flood does get every address.
func noLimit(cfg Config) Config {
	cfg.NewLeaseBurst, cfg.NewLeaseRate = MaxNewLeaseBurst, MaxNewLeaseRate
	return cfg
}

// randomMACs returns n random unicast, locally administered MACs.
func randomMACs(rng *rand.Rand, n int) []net.HardwareAddr {
	out := make([]net.HardwareAddr, n)
	for i := range out {
		hw := make(net.HardwareAddr, 6)
		v := rng.Uint64()
		for j := range hw {
			hw[j] = byte(v >> (8 * j))
		}
		hw[0] = hw[0]&^1 | 2
		out[i] = hw
	}
	return out
}

// TestStarvation floods a range of 150 with DISCOVER and REQUEST from
// 10,000 random MACs in 10 s (of fake time), the attack RFC 2131 leaves
// to the server (RFC 2131 §7, "a malicious client could exhaust the
// address pool"). With the default new-lease budget the flood gets
// DefaultNewLeaseBurst and DefaultNewLeaseRate a second, the range keeps
// free addresses and a new client is served as soon as the flood ends;
// with the budget lifted, the range fills and the table stays bounded.
// Either way the static lease and an existing client's renewal work
// during the flood, the heap grows by less than 1 MiB, counters show the
// flood.
func TestStarvation(t *testing.T) {
	const size, flood, seconds = 150, 10000, 10
	tests := []struct {
		name    string
		cfg     Config
		limited bool
	}{
		{"default new-lease budget", testConfig(size), true},
		{"budget lifted: the range fills", noLimit(testConfig(size)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clk := newTestServer(t, tt.cfg)
			existing := dora(t, s, mac(1))
			rng := rand.New(rand.NewPCG(7, 8))
			run := func() {
				for _, hw := range randomMACs(rng, flood) {
					off, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, hw)))
					req := addrFrom32(u32(ip("192.168.1.100")) + uint32(rng.IntN(size)))
					if off != nil {
						req = ip4(off.YourIPAddr)
					}
					exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, hw, withReq(req.String()), withSID(srvAddr))))
					clk.Forward(seconds * time.Second / flood)
				}
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			run()
			runtime.GC()
			runtime.ReadMemStats(&after)
			growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			st := s.Stats()
			limited := st.Drops[DropNewLeaseLimited].Load()
			t.Logf("after %d random MACs in %d s: heap %+d KiB, bindings %d, offers %d, acks %d, naks %d, pool_exhausted %d, new_lease_limited %d, pool used %d/%d",
				flood, seconds, growth/1024, len(s.byAddr), st.Offer.Load(), st.Ack.Load(), st.Nak.Load(), st.PoolExhausted.Load(), limited, s.Status().PoolUsed, size)
			if growth > 1<<20 {
				t.Errorf("heap grew by %d bytes, want < 1 MiB", growth)
			}
			if n := len(s.byAddr); n > size+1 {
				t.Errorf("%d bindings, want at most the range (%d) and the static lease", n, size)
			}
			if tt.limited {
				// The first offer of the burst went to the existing client.
				maxNew := uint64(DefaultNewLeaseBurst + seconds*DefaultNewLeaseRate)
				if st.Offer.Load() > maxNew || st.Ack.Load() > maxNew || limited < flood {
					t.Errorf("Offer, Ack, new_lease_limited = %d, %d, %d; want at most %d, %d and at least %d (a DISCOVER and a REQUEST each)",
						st.Offer.Load(), st.Ack.Load(), limited, maxNew, maxNew, flood)
				}
				if used := s.Status().PoolUsed; used > int(maxNew) || st.PoolExhausted.Load() != 0 {
					t.Errorf("pool used %d/%d, pool_exhausted %d; want at most %d used, never exhausted", used, size, st.PoolExhausted.Load(), maxNew)
				}
			} else if st.PoolExhausted.Load() < 9000 || st.Ack.Load() != size || st.Nak.Load() < 9000 || st.Offer.Load() != size || limited != 0 {
				t.Errorf("PoolExhausted, Offer, Ack, Nak, new_lease_limited = %d, %d, %d, %d, %d; want most of the flood, %d, %d (the range less the existing client's, plus its own), most, 0",
					st.PoolExhausted.Load(), st.Offer.Load(), st.Ack.Load(), st.Nak.Load(), limited, size, size)
			}
			m, p := exchange(t, s, unicast(msg(dhcpv4.MessageTypeRequest, mac(1), withCI(existing.String()))))
			if typeOf(m) != "ACK" || ip4(m.YourIPAddr) != existing || p.Dst.Addr() != existing {
				t.Errorf("existing client's renewal during the flood = %s %v, want ACK %v", typeOf(m), m, existing)
			}
			if a := dora(t, s, staticMAC); a != staticIP {
				t.Errorf("static client during the flood got %v, want %v", a, staticIP)
			}
			if tt.limited {
				// A second after the flood a new client finds a token and
				// a free address.
				clk.Forward(time.Second)
				if a := dora(t, s, mac(2)); !s.inPool(a) {
					t.Errorf("new client after the flood got %v", a)
				}
			}
			run()
			if n := len(s.byAddr) + len(s.byClient); n > 2*size+1 {
				t.Errorf("after a second flood the table holds %d entries: not bounded", n)
			}
			checkInvariants(t, s)
		})
	}
}

// TestNewLeaseBudget checks what spends the interface's new-lease
// budget (Config.NewLeaseBurst, NewLeaseRate): an address given to a
// client holding none, by OFFER or by an ACK at once; not a
// retransmitted DISCOVER for a live offer, the REQUEST taking it, a
// renewal (RFC 2131 §4.3.2 RENEWING) or INIT-REBOOT of a bound lease, a
// static lease. A refused client is silent and counted, and gets its
// address once the budget refills.
func TestNewLeaseBudget(t *testing.T) {
	cfg := testConfig(50)
	cfg.NewLeaseBurst, cfg.NewLeaseRate = 2, 0.5
	s, clk := newTestServer(t, cfg)
	limited := func() uint64 { return s.Stats().Drops[DropNewLeaseLimited].Load() }
	a1 := dora(t, s, mac(1))
	// A retransmitted DISCOVER and the REQUEST for a live offer are free.
	off, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(2))))
	off2, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(2))))
	if typeOf(off) != "OFFER" || typeOf(off2) != "OFFER" || !off.YourIPAddr.Equal(off2.YourIPAddr) {
		t.Fatalf("mac 2's DISCOVER twice: %s, %s", typeOf(off), typeOf(off2))
	}
	a2 := ip4(off.YourIPAddr)
	if ack, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, mac(2), withReq(a2.String()), withSID(srvAddr)))); typeOf(ack) != "ACK" {
		t.Fatalf("mac 2's REQUEST for its offer: %s", typeOf(ack))
	}
	// The burst of 2 is spent.
	tests := []struct {
		name string
		p    rawudp.Packet
		want string
	}{
		{"DISCOVER from a new client (RFC 2131 §4.3.1)", bcast(msg(dhcpv4.MessageTypeDiscover, mac(3))), "none"},
		{"REQUEST in SELECTING from a new client (§4.3.2)", bcast(msg(dhcpv4.MessageTypeRequest, mac(4), withReq("192.168.1.140"), withSID(srvAddr))), "none"},
		{"REQUEST in REBINDING for an address the server lost (§4.3.2)", bcast(msg(dhcpv4.MessageTypeRequest, mac(5), withCI("192.168.1.141"))), "none"},
		{"RENEWING of a bound lease (§4.3.2)", unicast(msg(dhcpv4.MessageTypeRequest, mac(1), withCI(a1.String()))), "ACK"},
		{"INIT-REBOOT of a bound lease (§4.3.2)", bcast(msg(dhcpv4.MessageTypeRequest, mac(2), withReq(a2.String()))), "ACK"},
		{"DISCOVER of a bound client", bcast(msg(dhcpv4.MessageTypeDiscover, mac(1))), "OFFER"},
		{"DISCOVER from the static lease's MAC", bcast(msg(dhcpv4.MessageTypeDiscover, staticMAC)), "OFFER"},
		{"INIT-REBOOT for another's address: NAK, not silence", bcast(msg(dhcpv4.MessageTypeRequest, mac(6), withReq(a1.String()))), "NAK"},
	}
	for _, tt := range tests {
		before := limited()
		m, _ := exchange(t, s, tt.p)
		if typeOf(m) != tt.want {
			t.Errorf("%s: reply %s, want %s", tt.name, typeOf(m), tt.want)
		}
		if refused := limited() - before; (refused == 1) != (tt.want == "none") {
			t.Errorf("%s: new_lease_limited rose by %d", tt.name, refused)
		}
	}
	// Two seconds earn one token back: mac 3's retransmission gets it.
	clk.Forward(2 * time.Second)
	if a := dora(t, s, mac(3)); !s.inPool(a) {
		t.Errorf("mac 3 after the refill got %v", a)
	}
	if m, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(7)))); m != nil {
		t.Errorf("mac 7 right after: %s, want silence", typeOf(m))
	}
	checkInvariants(t, s)
}

// TestClientRate: one MAC's messages, however it varies chaddr, get
// clientBurst answers at once and clientRate a second after, each
// refusal counted (rate_limited); another client is served meanwhile,
// and a relayed message is kept by chaddr, not by the relay's MAC.
func TestClientRate(t *testing.T) {
	s, clk := newTestServer(t, testConfig(50))
	a := dora(t, s, mac(1))
	renew := func(hw net.HardwareAddr, from net.HardwareAddr) bool {
		p := unicast(msg(dhcpv4.MessageTypeRequest, hw, withCI(a.String())))
		p.SrcMAC = from
		m, _ := exchange(t, s, p)
		return m != nil
	}
	n := 0
	for range 100 {
		if renew(mac(1), mac(1)) {
			n++
		}
	}
	if want := clientBurst - 2; n != want { // the DORA spent 2
		t.Errorf("100 renewals at once: %d answered, want clientBurst less the DORA (%d)", n, want)
	}
	if got := s.Stats().Drops[DropRateLimited].Load(); got != uint64(100-n) {
		t.Errorf("rate_limited = %d, want %d", got, 100-n)
	}
	// The same MAC with ever-new chaddrs is the same sender.
	p := bcast(msg(dhcpv4.MessageTypeDiscover, mac(10)))
	p.SrcMAC = mac(1)
	if m, _ := exchange(t, s, p); m != nil {
		t.Error("a DISCOVER with chaddr 10 from the flooding MAC was answered")
	}
	if b := dora(t, s, mac(2)); !s.inPool(b) {
		t.Errorf("another client during the flood got %v", b)
	}
	// Relayed: the frame's source is the relay's, the budget chaddr's.
	relay := net.HardwareAddr{0x02, 0xee, 0, 0, 0, 1}
	for i := range 3 {
		p := bcast(msg(dhcpv4.MessageTypeDiscover, mac(20+i), dhcpv4.WithGatewayIP(net.ParseIP("192.168.1.2"))))
		p.SrcMAC = relay
		for range clientBurst {
			s.handle(p)
		}
		if m, _ := exchange(t, s, p); m != nil {
			t.Errorf("relayed client %d beyond its burst answered", i)
		}
	}
	clk.Forward(time.Second)
	if !renew(mac(1), mac(1)) || renew(mac(1), mac(1)) {
		t.Error("a second later the MAC did not get exactly clientRate (1) answer")
	}
}

// TestClientTableFull: a flood of ever-new MACs fills the table of
// per-MAC budgets; a client whose idle entry was forgotten still renews
// (RFC 2131 §4.3.2 RENEWING), and the table stays within maxClients.
func TestClientTableFull(t *testing.T) {
	s, clk := newTestServer(t, noLimit(testConfig(50)))
	a := dora(t, s, mac(1))
	clk.Forward(time.Minute) // mac 1's entry is full again: idle
	for _, hw := range randomMACs(rand.New(rand.NewPCG(1, 1)), maxClients+100) {
		s.handle(bcast(msg(dhcpv4.MessageTypeInform, hw, withCI("192.168.1.9"))))
	}
	if n := s.clients.Len(); n > maxClients {
		t.Errorf("the table holds %d MACs, more than maxClients (%d)", n, maxClients)
	}
	m, _ := exchange(t, s, unicast(msg(dhcpv4.MessageTypeRequest, mac(1), withCI(a.String()))))
	if typeOf(m) != "ACK" {
		t.Errorf("renewal with the table full of a flood's MACs: %s, want ACK", typeOf(m))
	}
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
		clk.Forward(time.Duration(mode&0x7f) * time.Minute)
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
