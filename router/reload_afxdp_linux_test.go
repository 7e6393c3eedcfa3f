package router

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw/xdpport"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router/config"
)

// reloadFrames is how many frames the port a reload removes must have
// moved before it goes: the acceptance's "frame accounting after 10^6
// frames".
const reloadFrames = 1_000_000

// TestReloadRemovesAFXDPPortUnderLoad floods UDP through a router whose
// two ports run on af_xdp, LAN→WAN and WAN→LAN, until the WAN port has
// moved 10^6 frames (50,000 with -short), then reloads a config without
// that port while the flood goes on. The reload must succeed with no
// panic; the UMEM the two ports shared must account for every frame,
// stay with the LAN port alone and have no refused descriptor; the
// removed port's XDP program must be gone and the kernel settings it
// changed back; the LAN side must go on receiving, with what it can no
// longer forward counted as drops; and once the router is closed every
// frame of the UMEM must be back on its free list.
func TestReloadRemovesAFXDPPortUnderLoad(t *testing.T) {
	want := uint64(reloadFrames)
	if testing.Short() {
		want = 50_000
	}
	netnstest.Privileged(t, "ip", "ethtool", "nft", "tc")
	rtr := netnstest.New(t, "rld", netnstest.WithoutIPv6())
	lan := netnstest.New(t, "rldl", netnstest.WithoutIPv6())
	wan := netnstest.New(t, "rldw", netnstest.WithoutIPv6())
	for _, l := range []struct {
		port, host string
		ns         *netnstest.Netns
		addr, gw   string
	}{
		{"va", "vb", lan, "192.168.81.2/24", "192.168.81.1"},
		{"wa", "wb", wan, "10.81.0.2/24", "10.81.0.1"},
	} {
		rtr.IP(t, "link", "add", l.port, "type", "veth", "peer", "name", l.host, "netns", l.ns.Name())
		rtr.IP(t, "link", "set", l.port, "up")
		l.ns.IP(t, "link", "set", l.host, "up")
		l.ns.IP(t, "addr", "add", l.addr, "dev", l.host)
		l.ns.IP(t, "route", "add", "default", "via", l.gw)
		// AF_XDP cannot flag a partial checksum (hw/xdpport/doc.go).
		l.ns.Run(t, "ethtool", "-K", l.host, "tx", "off")
	}
	wanBefore := rtr.PortStateOf(t, "wa")
	stateDir := t.TempDir()
	both := fmt.Sprintf(`ports:
  - {name: va, driver: af_xdp}
  - {name: wa, driver: af_xdp}
interfaces:
  - {name: lan, port: va, role: lan, addresses: [192.168.81.1/24]}
  - {name: lan2, port: wa, role: lan, addresses: [10.81.0.1/24]}
state_dir: %s
`, stateDir)
	lanOnly := fmt.Sprintf(`ports:
  - {name: va, driver: af_xdp}
interfaces:
  - {name: lan, port: va, role: lan, addresses: [192.168.81.1/24]}
state_dir: %s
`, stateDir)
	cfg, err := config.Parse("both.yaml", []byte(both))
	if err != nil {
		t.Fatal(err)
	}
	var r *Router
	rtr.Do(t, func() { r, err = New(cfg, Build{}, slog.New(slog.DiscardHandler)) })
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			r.Close()
		}
	}()
	r.mu.Lock()
	lp, lok := r.ports["va"].port.(*xdpport.Port)
	wp, wok := r.ports["wa"].port.(*xdpport.Port)
	r.mu.Unlock()
	if !lok || !wok {
		t.Fatalf("ports va, wa on %T, %T, want both *xdpport.Port", r.ports["va"].port, r.ports["wa"].port)
	}

	// One UDP flood each way, from sockets made in the hosts'
	// namespaces (the kernel's UDP stack as the peer).
	var conns []net.Conn
	for _, h := range []struct {
		ns *netnstest.Netns
		to string
	}{{lan, "10.81.0.2:9"}, {wan, "192.168.81.2:9"}} {
		h.ns.Do(t, func() {
			c, err := net.Dial("udp", h.to)
			if err != nil {
				t.Errorf("dial %s: %v", h.to, err)
				return
			}
			conns = append(conns, c)
		})
	}
	if len(conns) != 2 {
		t.FailNow()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent atomic.Uint64
	payload := make([]byte, 18) // 64-byte frames
	for _, c := range conns {
		wg.Go(func() {
			defer c.Close()
			for n := 0; ; n++ {
				if n&255 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
				if _, err := c.Write(payload); err == nil {
					sent.Add(1)
				}
			}
		})
	}
	stopFlood := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopFlood()

	moved := func() uint64 { st := wp.Stats(); return st.RxPackets + st.TxPackets }
	start := time.Now()
	for moved() < want {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("the WAN port moved %d frames in %v, want %d", moved(), time.Since(start), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st := wp.Stats()
	t.Logf("WAN port moved %d frames (rx %d, tx %d) in %v; %d datagrams sent by the hosts", st.RxPackets+st.TxPackets, st.RxPackets, st.TxPackets, time.Since(start).Round(time.Millisecond), sent.Load())
	lanDrops := func() (uint64, map[string]uint64) {
		var n uint64
		for _, ic := range r.Snapshot().Interfaces {
			if ic.Name == "lan" {
				for _, v := range ic.Drops {
					n += v
				}
				return n, ic.Drops
			}
		}
		return 0, nil
	}
	dropsBefore, _ := lanDrops()

	cfg2, err := config.Parse("lan-only.yaml", []byte(lanOnly))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(cfg2); err != nil {
		t.Fatalf("Reload without port wa under load: %v", err)
	}
	if ports := r.Snapshot().Ports; len(ports) != 1 || ports[0].Name != "va" {
		t.Errorf("ports after the reload = %+v, want va alone", ports)
	}
	// The two ports shared one UMEM (hw/xdpport Pool): the LAN port
	// keeps it, and every frame the removed port held is accounted for
	// (after Close below, every frame is free).
	c := wp.Umem().Counts()
	if wp.Umem() != lp.Umem() || c.Total() != wp.Umem().Frames() {
		t.Errorf("removed port's Umem.Counts() = %+v (shared with the LAN port: %v), want all %d frames accounted for", c, wp.Umem() == lp.Umem(), wp.Umem().Frames())
	}
	if info := lp.UmemInfo(); len(info.Ports) != 1 || info.Ports[0] != "va" {
		t.Errorf("LAN port's UMEM after the reload is used by %v, want va alone", info.Ports)
	}
	if bd := wp.Umem().BadDescs(); bd != 0 {
		t.Errorf("removed port's Umem.BadDescs() = %d, want 0", bd)
	}
	if rtr.HasXDP(t, "wa") {
		t.Error("an XDP program is left on wa after the reload removed it")
	}
	if after := rtr.PortStateOf(t, "wa"); !after.Equal(wanBefore) {
		t.Errorf("wa after the reload:\n%s\nwant as before the router:\n%s", after, wanBefore)
	}

	// The LAN side goes on: it receives the flood and counts what has
	// nowhere to go.
	rxBefore := lp.Stats().RxPackets
	time.Sleep(time.Second)
	if lp.Stats().RxPackets == rxBefore {
		t.Error("the LAN port received nothing in the second after the reload")
	}
	d, byReason := lanDrops()
	t.Logf("lan drops %d before the reload, %d a second after: %v", dropsBefore, d, byReason)
	if d == dropsBefore {
		t.Errorf("lan drops after the reload = %d, as before: want the flood to the removed subnet counted", d)
	}
	stopFlood()
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	closed = true
	c = lp.Umem().Counts()
	if c.Free != lp.Umem().Frames() || lp.Umem().BadDescs() != 0 {
		t.Errorf("LAN port's Umem after Close: %+v, %d bad descriptors; want all %d frames free, none bad", c, lp.Umem().BadDescs(), lp.Umem().Frames())
	}
}
