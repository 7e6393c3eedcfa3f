package upnp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

// TestUpnpc runs Debian's upnpc (miniupnpc) in a LAN namespace against
// the server in a gateway namespace, whose SSDP socket joins the group
// on the LAN interface only and whose HTTP server listens on the LAN
// address only. upnpc discovers the gateway, maps a TCP and a UDP port
// (each a DNAT entry that takes a WAN packet to the LAN host), lists
// them, is refused a mapping to another LAN host (secure mode, 606),
// deletes one; the other expires. From a WAN namespace upnpc finds no
// gateway, and fetching the description through the LAN address is
// refused (403).
func TestUpnpc(t *testing.T) {
	netnstest.Privileged(t, "ip", "upnpc")
	// miniupnpc takes a gateway whose external address is reserved
	// (203.0.113.0/24 is TEST-NET-3) for one that is not connected, so
	// the WAN here has an address outside its reserved list.
	wanAddr := netip.MustParseAddr("11.22.33.44")
	gw, lan, wan := pt.Namespaces(t, "up", wanAddr)

	tb, e, clk := pt.TableOn(t, portmap.Policy{Secure: true}, wanAddr)
	s := &Server{Table: tb, Device: Device{UUID: testUUID, FriendlyName: "gvrouter"}, Inside: []netip.Prefix{pt.LANNet},
		Location: "http://192.168.1.1:5000" + descPath}
	var ssdp net.PacketConn
	var ln net.Listener
	var err error
	gw.Do(t, func() {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByName("gl"); err != nil {
			return
		}
		if ssdp, err = net.ListenMulticastUDP("udp4", ifi, net.UDPAddrFromAddrPort(SSDPGroup)); err != nil {
			return
		}
		ln, err = net.Listen("tcp4", "192.168.1.1:5000")
	})
	if err != nil {
		t.Fatalf("listen in the gateway: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := s.HTTPServer()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.ServeSSDP(ctx, ssdp) }()
	go func() {
		defer wg.Done()
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("http: %v", err)
		}
	}()
	defer func() { cancel(); hs.Close(); wg.Wait() }()

	upnpc := func(ns *netnstest.Netns, args ...string) string {
		out, _ := exec.Command("ip", append([]string{"netns", "exec", ns.Name(), "timeout", "30", "upnpc"}, args...)...).CombinedOutput()
		t.Logf("upnpc %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	expect := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("upnpc output lacks %q", w)
			}
		}
	}
	out0 := upnpc(lan, "-a", "192.168.1.10", "5000", "5000", "TCP", "3600")
	expect(out0, "Found valid IGD : http://192.168.1.1:5000/ctl/IPConn", "ExternalIPAddress = 11.22.33.44",
		"external 11.22.33.44:5000 TCP is redirected to internal 192.168.1.10:5000 (duration=3600)")
	expect(upnpc(lan, "-a", "192.168.1.10", "5001", "5001", "UDP", "60"),
		"external 11.22.33.44:5001 UDP is redirected to internal 192.168.1.10:5001 (duration=120)")
	expect(upnpc(lan, "-l"), "TCP  5000->192.168.1.10:5000", "UDP  5001->192.168.1.10:5001")
	out := upnpc(lan, "-a", "192.168.1.20", "6000", "6000", "TCP", "3600")
	expect(out, "AddPortMapping(6000, 6000, 192.168.1.20) failed with code 606")
	if pt.Installed(e, natengine.ProtoTCP, 6000, netip.AddrPortFrom(pt.HostB, 6000)) {
		t.Error("secure mode: a mapping to another host was installed")
	}
	if !pt.Installed(e, natengine.ProtoTCP, 5000, netip.AddrPortFrom(pt.HostA, 5000)) || !pt.Installed(e, natengine.ProtoUDP, 5001, netip.AddrPortFrom(pt.HostA, 5001)) {
		t.Fatalf("NAT engine mappings %+v", e.PortMappings())
	}
	pkt := pt.UDPPacket(pt.Remote, 4444, wanAddr, 5001)
	if v := e.Prerouting(pkt, pt.WANIf); v != natengine.Accept || netip.AddrFrom4([4]byte(pkt[16:20])) != pt.HostA {
		t.Errorf("WAN packet to udp 5001: %v, to %v; want accept, to %v", v, netip.AddrFrom4([4]byte(pkt[16:20])), pt.HostA)
	}
	upnpc(lan, "-d", "5000", "TCP")
	if pt.Installed(e, natengine.ProtoTCP, 5000, netip.AddrPortFrom(pt.HostA, 5000)) {
		t.Error("deleted mapping still in the NAT engine")
	}
	clk.Add(121 * time.Second)
	if n := tb.Sweep(); n != 1 || len(e.PortMappings()) != 0 {
		t.Errorf("after 121 s: %d expired, %d left; want 1, 0", n, len(e.PortMappings()))
	}

	// The WAN side: no discovery answer; the description refused.
	out = upnpc(wan, "-l")
	if !strings.Contains(out, "No IGD UPnP Device found") {
		t.Errorf("upnpc on the WAN found a gateway:\n%s", out)
	}
	out = upnpc(wan, "-u", "http://192.168.1.1:5000"+descPath, "-l")
	if strings.Contains(out, "ExternalIPAddress = 11.22.33.44") {
		t.Errorf("upnpc from the WAN with the LAN URL:\n%s", out)
	}
	if s.Stats().HTTPOutside.Load() == 0 {
		t.Error("no HTTP request from outside counted")
	}
}
