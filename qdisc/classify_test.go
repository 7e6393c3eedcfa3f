package qdisc

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// vlan inserts an 802.1Q tag after the MAC addresses.
func vlan(f []byte, tpid, vid uint16) []byte {
	g := append([]byte(nil), f[:12]...)
	g = binary.BigEndian.AppendUint16(g, tpid)
	g = binary.BigEndian.AppendUint16(g, vid)
	return append(g, f[12:]...)
}

// pppoe wraps the IP packet of f in a PPPoE session header (RFC 2516).
func pppoe(f []byte) []byte {
	g := append([]byte(nil), f[:12]...)
	proto := uint16(pppIPv4)
	if binary.BigEndian.Uint16(f[12:]) == etherTypeIPv6 {
		proto = pppIPv6
	}
	g = binary.BigEndian.AppendUint16(g, etherTypePPPoESess)
	g = append(g, 0x11, 0, 0x12, 0x34)
	g = binary.BigEndian.AppendUint16(g, uint16(len(f)-14+2))
	g = binary.BigEndian.AppendUint16(g, proto)
	return append(g, f[14:]...)
}

func TestClassifyFrame(t *testing.T) {
	tcp := frame4("192.168.1.10", "198.51.100.7", protoTCP, 40000, 443, 100, 46<<2|1)
	for _, tc := range []struct {
		name  string
		frame []byte
		l3    uint16
		ver   uint8
		dscp  uint8
	}{
		{"ipv4 tcp", tcp, 14, 4, 46},
		{"vlan", vlan(tcp, etherTypeVLAN, 2), 18, 4, 46},
		{"qinq", vlan(vlan(tcp, etherTypeVLAN, 2), etherTypeQinQ, 100), 22, 4, 46},
		{"pppoe", pppoe(tcp), 22, 4, 46},
		{"vlan pppoe", vlan(pppoe(tcp), etherTypeVLAN, 7), 26, 4, 46},
		{"ipv6 udp", frame6("2001:db8::1", "2001:db8::2", protoUDP, 1, 2, 100, 10<<2), 14, 6, 10},
		{"ipv6 pppoe", pppoe(frame6("2001:db8::1", "2001:db8::2", protoUDP, 1, 2, 100, 8<<2)), 22, 6, 8},
		{"arp", append(make([]byte, 12), 0x08, 0x06, 0, 1), 0, 0, 0},
		{"short", []byte{1, 2, 3}, 0, 0, 0},
		{"truncated ipv4", tcp[:30], 0, 0, 0},
		{"three tags", vlan(vlan(vlan(tcp, etherTypeVLAN, 1), etherTypeVLAN, 2), etherTypeVLAN, 3), 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ClassifyFrame(tc.frame, HostSrc)
			if c.L3 != tc.l3 || c.IPVersion != tc.ver || c.DSCP != tc.dscp {
				t.Errorf("ClassifyFrame = L3 %d v%d DSCP %d, want L3 %d v%d DSCP %d", c.L3, c.IPVersion, c.DSCP, tc.l3, tc.ver, tc.dscp)
			}
		})
	}
	// Encapsulation does not change the flow or host.
	base := ClassifyFrame(tcp, HostSrc)
	for _, f := range [][]byte{vlan(tcp, etherTypeVLAN, 9), pppoe(tcp)} {
		if c := ClassifyFrame(f, HostSrc); c.Flow != base.Flow || c.Host != base.Host {
			t.Errorf("encapsulated flow/host %x/%x, want %x/%x", c.Flow, c.Host, base.Flow, base.Host)
		}
	}
	if base.Host != HashAddr(netip.MustParseAddr("192.168.1.10")) {
		t.Error("HostSrc host key != HashAddr(source)")
	}
	if c := ClassifyFrame(tcp, HostDst); c.Host != HashAddr(netip.MustParseAddr("198.51.100.7")) {
		t.Error("HostDst host key != HashAddr(destination)")
	}
	if c := ClassifyFrame(tcp, HostNone); c.Host != 0 {
		t.Error("HostNone host key != 0")
	}
}

func TestClassifyFlows(t *testing.T) {
	a := ClassifyFrame(udp4("10.0.0.1", "10.0.0.2", 1000, 53, 80), HostNone).Flow
	b := ClassifyFrame(udp4("10.0.0.1", "10.0.0.2", 1001, 53, 80), HostNone).Flow
	if a == b {
		t.Error("different source ports, same flow")
	}
	if c := ClassifyFrame(udp4("10.0.0.1", "10.0.0.2", 1000, 53, 300), HostNone).Flow; c != a {
		t.Error("same 5-tuple, different size: different flow")
	}
	// Fragments: ports are not read, so two fragments with different
	// bytes where ports would be are one flow (addresses + protocol).
	frag := func(port uint16) []byte {
		f := udp4("10.0.0.1", "10.0.0.2", port, 53, 80)
		binary.BigEndian.PutUint16(f[14+6:], 0x2000) // MF
		return f
	}
	if ClassifyFrame(frag(1), HostNone).Flow != ClassifyFrame(frag(2), HostNone).Flow {
		t.Error("IPv4 fragments split by bytes that are not ports")
	}
	// ICMP echo: the identifier separates pings.
	p1 := ClassifyFrame(frame4("10.0.0.1", "10.0.0.2", protoICMP, 1, 0, 98, 0), HostNone).Flow
	p2 := ClassifyFrame(frame4("10.0.0.1", "10.0.0.2", protoICMP, 2, 0, 98, 0), HostNone).Flow
	if p1 == p2 {
		t.Error("two echo identifiers, one flow")
	}
	// IPv6 with a Hop-by-Hop header still finds the ports; with a
	// Fragment header it falls back to the addresses.
	ext := func(nh uint8, port uint16) []byte {
		f := frame6("2001:db8::1", "2001:db8::2", protoUDP, port, 53, 120, 0)
		g := append([]byte(nil), f[:54]...)
		g[14+6] = nh
		g = append(g, protoUDP, 0, 0, 0, 0, 0, 0, 0)
		return append(g, f[54:]...)
	}
	if ClassifyFrame(ext(ip6HopByHop, 1), HostNone).Flow == ClassifyFrame(ext(ip6HopByHop, 2), HostNone).Flow {
		t.Error("IPv6 Hop-by-Hop: ports after it not used")
	}
	if ClassifyFrame(ext(ip6Fragment, 1), HostNone).Flow != ClassifyFrame(ext(ip6Fragment, 2), HostNone).Flow {
		t.Error("IPv6 fragment: ports used")
	}
}

func TestSetCE(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frame  []byte
		ect    bool
		offset int
	}{
		{"ipv4 not-ect", frame4("10.0.0.1", "10.0.0.2", protoTCP, 1, 2, 60, 46<<2), false, 14},
		{"ipv4 ect0", frame4("10.0.0.1", "10.0.0.2", protoTCP, 1, 2, 60, 46<<2|2), true, 14},
		{"ipv4 ect1", frame4("10.0.0.1", "10.0.0.2", protoTCP, 1, 2, 60, 1), true, 14},
		{"ipv4 ce", frame4("10.0.0.1", "10.0.0.2", protoTCP, 1, 2, 60, 3), true, 14},
		{"ipv6 ect0", frame6("2001:db8::1", "2001:db8::2", protoTCP, 1, 2, 80, 46<<2|2), true, 14},
		{"ipv6 not-ect", frame6("2001:db8::1", "2001:db8::2", protoTCP, 1, 2, 80, 46<<2), false, 14},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := append([]byte(nil), tc.frame...)
			c := ClassifyFrame(f, HostNone)
			if got := SetCE(f, int(c.L3), c.IPVersion); got != tc.ect {
				t.Fatalf("SetCE = %v, want %v", got, tc.ect)
			}
			if !tc.ect {
				if !bytes.Equal(f, tc.frame) {
					t.Error("Not-ECT frame changed")
				}
				return
			}
			if e := ecn(f, int(c.L3), c.IPVersion); e != ecnCE {
				t.Errorf("ECN after SetCE = %d, want CE", e)
			}
			if after := ClassifyFrame(f, HostNone); after.DSCP != c.DSCP {
				t.Errorf("DSCP changed %d -> %d", c.DSCP, after.DSCP)
			}
			if c.IPVersion == 4 && ipv4Checksum(f[14:34]) != 0 {
				t.Error("IPv4 header checksum invalid after SetCE")
			}
		})
	}
}

// FuzzClassifyFrame: any bytes classify without panic, the IP offset lies
// inside the frame, classification is deterministic, and SetCE keeps a valid
// IPv4 header checksum valid and touches nothing but the ECN bits and checksum.
// Seeds are in testdata/fuzz/FuzzClassifyFrame.
func FuzzClassifyFrame(f *testing.F) {
	f.Add(frame4("10.0.0.1", "10.0.0.2", protoTCP, 1, 2, 60, 2))
	f.Add(frame6("2001:db8::1", "2001:db8::2", protoUDP, 1, 2, 80, 1))
	f.Fuzz(func(t *testing.T, frame []byte) {
		c := ClassifyFrame(frame, HostSrc)
		if c != ClassifyFrame(frame, HostSrc) {
			t.Fatal("not deterministic")
		}
		if c.IPVersion == 0 {
			if c.L3 != 0 || c.DSCP != 0 || c.Host != 0 {
				t.Fatalf("non-IP class %+v", c)
			}
			if SetCE(frame, int(c.L3), c.IPVersion) {
				t.Fatal("SetCE on non-IP reported ECT")
			}
			return
		}
		hdr := 20
		if c.IPVersion == 6 {
			hdr = 40
		}
		if int(c.L3)+hdr > len(frame) {
			t.Fatalf("L3 %d + %d beyond frame of %d", c.L3, hdr, len(frame))
		}
		g := append([]byte(nil), frame...)
		valid := c.IPVersion == 4 && ipv4Checksum(g[c.L3:c.L3+20]) == 0 && g[c.L3]&0x0f == 5
		ect := SetCE(g, int(c.L3), c.IPVersion)
		if !ect && !bytes.Equal(g, frame) {
			t.Fatal("SetCE changed a Not-ECT frame")
		}
		if valid && ipv4Checksum(g[c.L3:c.L3+20]) != 0 {
			t.Fatalf("SetCE broke the IPv4 checksum: % x", g[c.L3:c.L3+20])
		}
		for i := range g {
			if g[i] != frame[i] && i != int(c.L3)+1 && (c.IPVersion != 4 || (i != int(c.L3)+10 && i != int(c.L3)+11)) {
				t.Fatalf("SetCE changed byte %d", i)
			}
		}
	})
}

func TestClassifyAllocs(t *testing.T) {
	f := vlan(frame6("2001:db8::1", "2001:db8::2", protoTCP, 1, 2, 100, 2), etherTypeVLAN, 3)
	if n := testing.AllocsPerRun(100, func() { ClassifyFrame(f, HostSrc) }); n != 0 {
		t.Errorf("ClassifyFrame allocs = %v, want 0", n)
	}
}
