package stack

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"

	"github.com/gvrouter/gvrouter/hw"
)

// filteredConfig is the lab's config with the lan interface filtering
// sources, the wan one filtering the router's own inside-sourced packets,
// and a site 10.9.0.0/16 behind 10.1.0.7 on the LAN.
func (l *lab) filteredConfig() Config {
	cfg := l.config()
	cfg.Interfaces[0].IngressFilter = true
	cfg.Interfaces[1].EgressFilter = true
	cfg.Routes = []RouteConfig{{To: netip.MustParsePrefix("10.9.0.0/16"), Via: netip.MustParseAddr("10.1.0.7")}}
	return cfg
}

func newFilteredLab(t *testing.T) *lab {
	t.Helper()
	l := newLab(t)
	if err := l.r.Apply(l.filteredConfig()); err != nil {
		t.Fatal(err)
	}
	return l
}

// udpFrame is a UDP datagram from src to dst in a frame from host A to the
// router's lan MAC.
func udpFrame(src, dst netip.Addr, payload string) []byte {
	udp := make([]byte, header.UDPMinimumSize+len(payload))
	header.UDP(udp).Encode(&header.UDPFields{SrcPort: 4000, DstPort: 9, Length: uint16(len(udp))})
	copy(udp[header.UDPMinimumSize:], payload)
	if src.Is4() {
		return ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, ipv4Packet(src, dst, 64, header.UDPProtocolNumber, udp))
	}
	return ethFrame(lanMAC, aMAC, header.IPv6ProtocolNumber, ipv6Packet(src, dst, 64, header.UDPProtocolNumber, udp))
}

// TestIngressFilterSources: RFC 3704 ingress filtering on the lan
// interface, by source and destination; the wan interface filters
// nothing.
func TestIngressFilterSources(t *testing.T) {
	l := newFilteredLab(t)
	lan, wan := l.r.Interface("lan").ep, l.r.Interface("wan").ep
	if wan.ingress.Load() != nil {
		t.Fatal("wan interface has an ingress filter")
	}
	a := netip.MustParseAddr
	tests := []struct {
		name     string
		src, dst netip.Addr
		spoofed  bool
	}{
		{"own subnet, forwarded", aIP4, bIP4, false},
		{"own subnet, to the router", aIP4, lanIP4, false},
		{"site behind a static route", a("10.9.3.4"), bIP4, false},
		{"WAN host's address, to the router (reflection)", bIP4, lanIP4, true},
		{"WAN host's address, forwarded", bIP4, bIP4, true},
		{"foreign, forwarded", a("198.51.100.7"), bIP4, true},
		{"the router's own LAN address", lanIP4, bIP4, true},
		{"the router's own WAN address", wanIP4, bIP4, true},
		{"directed broadcast", a("10.1.0.255"), lanIP4, true},
		{"multicast", a("224.0.0.1"), lanIP4, true},
		{"0.0.0.0 to the limited broadcast (DHCPDISCOVER)", a("0.0.0.0"), a("255.255.255.255"), false},
		{"0.0.0.0 to the router", a("0.0.0.0"), lanIP4, false},
		{"0.0.0.0 forwarded", a("0.0.0.0"), bIP4, true},
		{"169.254/16 to mDNS", a("169.254.1.1"), a("224.0.0.251"), false},
		{"169.254/16 forwarded", a("169.254.1.1"), bIP4, true},

		{"v6 own subnet, forwarded", aIP6, bIP6, false},
		{"v6 own subnet, to the router", aIP6, lanIP6, false},
		{"v6 WAN host's address, to the router (reflection)", bIP6, lanIP6, true},
		{"v6 foreign, forwarded", a("2001:db8:ff::7"), bIP6, true},
		{"v6 the router's own address", lanIP6, bIP6, true},
		{"v6 multicast source", a("ff02::1"), lanIP6, true},
		{":: to a solicited-node group (DAD)", a("::"), a("ff02::1:ff00:2"), false},
		{":: forwarded", a("::"), bIP6, true},
		{"fe80:: to All_DHCP_Relay_Agents_and_Servers", a("fe80::a"), a("ff02::1:2"), false},
		{"fe80:: forwarded", a("fe80::a"), bIP6, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			frame := udpFrame(tc.src, tc.dst, "x")
			f := hw.Frame{Data: frame, WireLen: len(frame), CsumValid: true}
			v := classify(&f, &rxRun{mac: lan.mac, mtu: 1500, local: lan.local.Load(), ingress: lan.ingress.Load()})
			if got := v.dropped && v.drop == dropSpoofedSource; got != tc.spoofed {
				t.Errorf("classify(%s -> %s) spoofed = %v (dropped=%v, %s), want %v", tc.src, tc.dst, got, v.dropped, v.drop, tc.spoofed)
			}
			f = hw.Frame{Data: frame, WireLen: len(frame), CsumValid: true}
			if v := classify(&f, &rxRun{mac: wan.mac, mtu: 1500, local: wan.local.Load(), ingress: wan.ingress.Load()}); v.drop == dropSpoofedSource {
				t.Errorf("wan: classify(%s -> %s) = spoofed_source, want no ingress filter", tc.src, tc.dst)
			}
		})
	}
}

// TestIngressFilterForwardAndReload: a spoofed datagram the LAN hands the
// router is neither forwarded nor delivered and is counted; the same from
// a source behind a static route is forwarded until a reload takes the
// route away.
func TestIngressFilterForwardAndReload(t *testing.T) {
	l := newFilteredLab(t)
	lan := l.r.Interface("lan")
	site := netip.MustParseAddr("10.9.3.4")
	send := func(src netip.Addr, payload string) {
		lan.HandleBatch(0, []hw.Frame{{Data: udpFrame(src, bIP4, payload), WireLen: len(udpFrame(src, bIP4, payload)), CsumValid: true}})
	}
	atWAN := func(payload string, wait time.Duration) bool {
		ctx, cancel := context.WithTimeout(context.Background(), labTimeout(wait))
		defer cancel()
		return l.tapB.Wait(ctx, func(f []byte) bool { return bytes.Contains(f, []byte(payload)) }) != nil
	}

	send(netip.MustParseAddr("198.51.100.7"), "gvsp-foreign")
	send(bIP4, "gvsp-wanhost")
	send(site, "gvsp-site")
	if !atWAN("gvsp-site", 5*time.Second) {
		t.Fatal("datagram from the site behind the static route was not forwarded")
	}
	if atWAN("gvsp-foreign", 200*time.Millisecond) || atWAN("gvsp-wanhost", 0) {
		t.Fatal("a spoofed datagram was forwarded to the WAN")
	}
	if got := lan.Stats().Drops["spoofed_source"]; got != 2 {
		t.Fatalf(`lan Drops["spoofed_source"] = %d, want 2`, got)
	}

	cfg := l.filteredConfig()
	cfg.Routes = nil
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	send(site, "gvsp-site-after-reload")
	if atWAN("gvsp-site-after-reload", 200*time.Millisecond) {
		t.Fatal("datagram from the site was forwarded after its route was removed")
	}
	if got := lan.Stats().Drops["spoofed_source"]; got != 3 {
		t.Fatalf(`lan Drops["spoofed_source"] = %d after the reload, want 3`, got)
	}
}

// TestEgressFilterInsideSource: the router's own datagram from its LAN
// address to the WAN host is dropped at the wan interface and counted;
// from its WAN address it leaves. WriteFrame refuses the same.
func TestEgressFilterInsideSource(t *testing.T) {
	l := newFilteredLab(t)
	wan := l.r.Interface("wan")
	for _, tc := range []struct {
		from, to netip.Addr
		proto    tcpip.NetworkProtocolNumber
		payload  string
		leaves   bool
	}{
		{lanIP4, bIP4, ipv4.ProtocolNumber, "gvsp-out-lan4", false},
		{lanIP6, bIP6, ipv6.ProtocolNumber, "gvsp-out-lan6", false},
		{wanIP4, bIP4, ipv4.ProtocolNumber, "gvsp-out-wan4", true},
	} {
		c, err := gonet.DialUDP(l.r.Stack(), &tcpip.FullAddress{Addr: tcpip.AddrFromSlice(tc.from.AsSlice())},
			&tcpip.FullAddress{Addr: tcpip.AddrFromSlice(tc.to.AsSlice()), Port: 9}, tc.proto)
		if err != nil {
			t.Fatalf("DialUDP from %s: %v", tc.from, err)
		}
		before := wan.Stats().Drops["inside_source_out"]
		if _, err := c.Write([]byte(tc.payload)); err != nil {
			t.Fatalf("write from %s: %v", tc.from, err)
		}
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), labTimeout(time.Second))
		got := l.tapB.Wait(ctx, func(f []byte) bool { return bytes.Contains(f, []byte(tc.payload)) }) != nil
		cancel()
		if got != tc.leaves {
			t.Errorf("datagram from %s to %s left the wan interface = %v, want %v", tc.from, tc.to, got, tc.leaves)
		}
		drops := wan.Stats().Drops["inside_source_out"] - before
		if want := map[bool]uint64{false: 1, true: 0}[tc.leaves]; drops != want {
			t.Errorf("from %s: inside_source_out +%d, want +%d", tc.from, drops, want)
		}
	}
	frame := ethFrame(bMAC, wanMAC, header.IPv4ProtocolNumber, ipv4Packet(lanIP4, bIP4, 64, header.UDPProtocolNumber, make([]byte, 8)))
	if err := wan.WriteFrame(frame); !errors.Is(err, ErrInsideSource) {
		t.Errorf("WriteFrame(from %s) = %v, want ErrInsideSource", lanIP4, err)
	}
}

// TestIngressFilterNoAllocs: classification with the filter on, and a
// receive batch of spoofed frames, allocate nothing.
func TestIngressFilterNoAllocs(t *testing.T) {
	l := newFilteredLab(t)
	lan := l.r.Interface("lan")
	e := lan.ep
	good, spoofed6 := udpFrame(aIP4, lanIP4, "x"), udpFrame(bIP6, lanIP6, "x")
	local, src := e.local.Load(), e.ingress.Load()
	r := &rxRun{mac: e.mac, mtu: 1500, local: local, ingress: src}
	got := testing.AllocsPerRun(1000, func() {
		for _, fr := range [][]byte{good, spoofed6} {
			f := hw.Frame{Data: fr, WireLen: len(fr), CsumValid: true}
			classify(&f, r)
		}
	})
	if got != 0 {
		t.Errorf("classify with the ingress filter: %v allocations, want 0", got)
	}
	frames := make([]hw.Frame, 16)
	spoofed4 := udpFrame(bIP4, bIP4, "x")
	for i := range frames {
		frames[i] = hw.Frame{Data: spoofed4, WireLen: len(spoofed4), CsumValid: true}
	}
	if got := testing.AllocsPerRun(1000, func() { lan.HandleBatch(0, frames) }); got != 0 {
		t.Errorf("HandleBatch of spoofed frames: %v allocations, want 0", got)
	}
}

// TestIngressFilterOffloadedFlow: the fast path does not run the filter,
// so a reload that narrows a lan interface's subnet must send its
// offloaded flows back through classify: the LAN host's segments on an
// assured, offloaded connection are spoofed_source drops afterwards.
func TestIngressFilterOffloadedFlow(t *testing.T) {
	l, nat := newNATLab(t, nil)
	if err := l.r.Apply(l.filteredConfig()); err != nil {
		t.Fatal(err)
	}
	peers := remoteServer(t, l.b, netip.AddrPortFrom(bIP4, 5003))
	c := dial(t, l.a, netip.AddrPortFrom(bIP4, 5003))
	exchange(t, c, 64<<10)
	peer(t, peers)
	hits0 := nat.Stats().FastPathHits.Load()
	exchange(t, c, 1<<20)
	if hits := nat.Stats().FastPathHits.Load() - hits0; hits < 100 {
		t.Fatalf("fast path forwarded %d packets of a 1 MiB echo: the flow is not offloaded", hits)
	}
	lan := l.r.Interface("lan")
	sp0 := lan.Stats().Drops["spoofed_source"]
	cfg := l.filteredConfig()
	cfg.Interfaces[0].Addresses = []netip.Prefix{netip.MustParsePrefix("10.1.0.129/25"), netip.MustParsePrefix("fd00:1::1/64")}
	cfg.Routes = nil // its gateway is outside the new subnet
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Now().Add(labTimeout(time.Second)))
	c.Write(make([]byte, 16<<10))
	deadline := time.Now().Add(labTimeout(5 * time.Second))
	for lan.Stats().Drops["spoofed_source"] == sp0 {
		if time.Now().After(deadline) {
			t.Fatalf("the LAN host (%s, now outside 10.1.0.128/25) kept its offloaded flow: no spoofed_source drop", aIP4)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIngressFilterTaps: a raw-frame tap on the lan interface (the DHCP
// and RA services' way in) gets a datagram from the LAN's subnet and a
// DHCPDISCOVER-like one from 0.0.0.0, never a spoofed one, which is
// counted as spoofed_source instead; with no allocation.
func TestIngressFilterTaps(t *testing.T) {
	l := newFilteredLab(t)
	lan := l.r.Interface("lan")
	tap := &countTap{consume: true}
	remove, err := lan.AddTap(TapMatch{EtherType: 0x0800, IPProto: 17, DstPort: 9}, tap)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	frame := func(src, dst netip.Addr) hw.Frame {
		f := udpFrame(src, dst, "x")
		return hw.Frame{Data: f, WireLen: len(f), CsumValid: true}
	}
	lan.HandleBatch(0, []hw.Frame{
		frame(aIP4, lanIP4),
		frame(netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("255.255.255.255")),
		frame(bIP4, lanIP4),
		frame(netip.MustParseAddr("198.51.100.7"), lanIP4),
	})
	if got := tap.n.Load(); got != 2 {
		t.Errorf("tap got %d frames, want 2 (the LAN host's and the one from 0.0.0.0)", got)
	}
	if got := lan.Stats().Drops["spoofed_source"]; got != 2 {
		t.Errorf(`Drops["spoofed_source"] = %d, want 2`, got)
	}
	frames := []hw.Frame{frame(aIP4, lanIP4), frame(bIP4, lanIP4)}
	if got := testing.AllocsPerRun(1000, func() { lan.HandleBatch(0, frames) }); got != 0 {
		t.Errorf("HandleBatch through a tap with the ingress filter: %v allocations, want 0", got)
	}
}
