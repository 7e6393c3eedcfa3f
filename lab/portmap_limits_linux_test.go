package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/portmap/natpmp"
	"github.com/gvrouter/gvrouter/router/status"
)

// TestLabPortMappingLimits proves the rest of port_mapping on the running
// router, one router for all of it:
//   - PCP MAP and PEER from a client written from RFC 6887
//     (portmap/pcp/testdata/pcpclient.py, shared with TestPCPClient): a
//     renewal with another nonce is refused NOT_AUTHORIZED, the WAN host
//     reaches the LAN host through the MAP, and through the PEER only
//     from its peer's address and port;
//   - ports outside the allow rules are refused: NAT-PMP and PCP
//     NOT_AUTHORIZED (2) for an internal port below 1024, PCP
//     NOT_AUTHORIZED for an external port below 1024 with
//     PREFER_FAILURE, while NAT-PMP's suggested port below 1024 is only
//     a hint (RFC 6886 3.3: another port in range is given);
//   - 10,000 NAT-PMP requests from the LAN host create max_per_host
//     mappings and no more, the rest answered OUT_OF_RESOURCES and
//     counted in /metrics, and another LAN host still maps;
//   - a new wan address (the ISP's dnsmasq NAKs the renewal and leases
//     another) is announced to the LAN host (224.0.0.1:5350), NAT-PMP's
//     external address answer changes, and the mappings work on the new
//     address;
//   - a guest zone without permission is refused with each protocol's
//     code (checkPortMapGuest: natpmpc and a NAT-PMP MAP get result 2,
//     the RFC 6887 client's PCP MAP NOT_AUTHORIZED, upnpc 606, and no
//     SSDP answer), counted in refused/zone;
//   - a mapping made with the smallest lifetime (120 s) is gone from
//     /api/status after it, and the WAN host no longer gets through
//     while a longer one still lets it in.
//
// The router is a labclock build (cmd/gvrouter/labclock.go): the test
// moves its port mapping clock forward by the 120 s lifetime instead of
// waiting it out (portmap's unit tests keep the clamp to 120 s and the
// sweep on the table's clock), which took it from 2.5 minutes to about
// 80 s. Half of those still wait for the router's DHCP renewal (T1 of
// the ISP's 120 s lease) to see the new wan address, so parallelLongLab
// still lets the wait overlap the other lab tests without a slot.
func TestLabPortMappingLimits(t *testing.T) {
	parallelLongLab(t)
	requirePrivileged(t, "natpmpc", "upnpc", "/usr/bin/python3")
	script, err := filepath.Abs("../portmap/pcp/testdata/pcpclient.py")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	opt := Options{
		RouterBinary: buildRouterTags(t, "labclock"),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		cfgEdits: []func(*labConfig){func(c *labConfig) {
			// The guest prefix (checkPortMapGuest) is allowed too, so
			// that only its zone refuses it.
			c.PortMapping = &labPortMapping{NATPMP: "on", PCP: "on", UPnP: "on", MaxPerHost: pmLimit,
				Allow: []string{"deny 15900-15999 0.0.0.0/0 1-65535", "allow 1024-65535 10.77.1.0/24 1024-65535", "allow 1024-65535 10.77.3.0/24 1024-65535"}}
		}},
		testHook: func(l *lab) error { return checkPortMapLimits(t, l, script) },
		runTag:   nextRunTag(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v\noutput:\n%s", err, out.String())
	}
}

const (
	pmLimit     = 32    // max_per_host
	pmShort     = 15600 // NAT-PMP TCP, lifetime 120 s: expires in the test (the clock moved 120 s)
	pmPCPMap    = 15700 // PCP MAP TCP, 3600 s
	pmPCPPeer   = 15701 // PCP PEER TCP, its peer the WAN host at pmPeerPort
	pmPeerPort  = 17001
	pmBurstBase = 20000 // the burst asks for 20000..29999
	pmOtherHost = "10.77.1.50"
	pmNewWAN    = "10.77.2.7"
)

func checkPortMapLimits(t *testing.T, l *lab, script string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gw := netip.AddrPortFrom(lanRouter4.Addr(), natpmp.ServerPort)
	host := lanHost4.Addr()
	if _, err := l.waitPortMap(ctx, "the servers and the wan address", func(p *status.PortMapping) bool {
		return p.External != "" && len(p.Listen) > 0
	}); err != nil {
		return err
	}

	// The short mapping first, so that it is held through the rest.
	short, err := natpmpAsk(l.lanNS, host, gw, natpmp.Request{Op: natpmp.OpMapTCP, Internal: pmShort, External: pmShort, Lifetime: 1})
	if err != nil {
		return err
	}
	shortAt := time.Now()
	if short.Result != natpmp.ResultSuccess || short.Mapped != pmShort || short.Lifetime != 120 {
		return fmt.Errorf("NAT-PMP map TCP %d lifetime 1: %+v; want success, port %d, lifetime clamped to 120", pmShort, short, pmShort)
	}
	if err := reachTCP(ctx, l, wanRouter4.Addr(), pmShort, 0); err != nil {
		return fmt.Errorf("short mapping: %w", err)
	}

	// PCP MAP and PEER, the nonce check, and out-of-range ports.
	pcp := func(steps ...string) map[string]string {
		got := runOut(ctx, l.lanNS, 60, "/usr/bin/python3", append([]string{script, lanRouter4.Addr().String(), host.String()}, steps...)...)
		t.Logf("pcp client:\n%s", got)
		res := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
			name, rest, _ := strings.Cut(line, " ")
			res[name] = rest
		}
		return res
	}
	got := pcp(
		fmt.Sprintf("map,1,3600,1,6,%d", pmPCPMap),
		fmt.Sprintf("renew-other-nonce,1,3600,2,6,%d", pmPCPMap),
		fmt.Sprintf("renew,1,7200,1,6,%d", pmPCPMap),
		fmt.Sprintf("peer,2,3600,3,6,%d,%s,%d", pmPCPPeer, wanHost4.Addr(), pmPeerPort),
		"internal-80,1,3600,4,6,80",
		"external-80-prefer-failure,1,3600,5,6,15702,ext,80,prefer",
		"denied-prefer-failure,1,3600,6,6,15950,ext,15950,prefer",
		"denied-hint,1,3600,7,17,15951,ext,15951",
	)
	for name, want := range map[string]string{
		"map":                        fmt.Sprintf("v2 op129 result 0 port %d lifetime 3600", pmPCPMap),
		"renew-other-nonce":          "v2 op129 result 2 ", // NOT_AUTHORIZED (RFC 6887 section 11.3)
		"renew":                      fmt.Sprintf("v2 op129 result 0 port %d lifetime 7200", pmPCPMap),
		"peer":                       fmt.Sprintf("v2 op130 result 0 port %d lifetime 3600", pmPCPPeer),
		"internal-80":                "v2 op129 result 2 ",
		"external-80-prefer-failure": "v2 op129 result 2 ",
		"denied-prefer-failure":      "v2 op129 result 2 ",
		"denied-hint":                "v2 op129 result 0 port ",
	} {
		if !strings.HasPrefix(got[name], want) {
			return fmt.Errorf("PCP %s: %q, want %q", name, got[name], want)
		}
	}
	// Without PREFER_FAILURE a suggested port the rules deny is a hint
	// (RFC 6887 section 11.3): another port, outside the denied range.
	var hinted uint16
	if _, err := fmt.Sscanf(got["denied-hint"], "v2 op129 result 0 port %d", &hinted); err != nil || !allowedExt(hinted) {
		return fmt.Errorf("PCP denied-hint: %q, want a port in 1024-65535 outside 15900-15999", got["denied-hint"])
	}
	if err := reachTCP(ctx, l, wanRouter4.Addr(), pmPCPMap, 0); err != nil {
		return fmt.Errorf("PCP MAP: %w", err)
	}
	if err := reachTCP(ctx, l, wanRouter4.Addr(), pmPCPPeer, pmPeerPort); err != nil {
		return fmt.Errorf("PCP PEER from its peer: %w", err)
	}
	if err := reachTCP(ctx, l, wanRouter4.Addr(), pmPCPPeer, pmPeerPort+1); err == nil {
		return fmt.Errorf("PCP PEER: the WAN host got through from port %d, not the peer's %d", pmPeerPort+1, pmPeerPort)
	}

	// NAT-PMP: internal port 80 is outside every allow rule; a
	// suggested external port 80 is a hint, answered with one in range.
	r, err := natpmpAsk(l.lanNS, host, gw, natpmp.Request{Op: natpmp.OpMapTCP, Internal: 80, External: 80, Lifetime: 3600})
	if err != nil {
		return err
	}
	if r.Result != natpmp.ResultNotAuthorized {
		return fmt.Errorf("NAT-PMP map internal TCP 80: %+v; want result %d (not authorized)", r, natpmp.ResultNotAuthorized)
	}
	r, err = natpmpAsk(l.lanNS, host, gw, natpmp.Request{Op: natpmp.OpMapUDP, Internal: 15703, External: 80, Lifetime: 3600})
	if err != nil {
		return err
	}
	if r.Result != natpmp.ResultSuccess || !allowedExt(r.Mapped) {
		return fmt.Errorf("NAT-PMP map UDP 15703 suggesting external 80: %+v; want success on a port in 1024-65535", r)
	}
	r, err = natpmpAsk(l.lanNS, host, gw, natpmp.Request{Op: natpmp.OpMapTCP, Internal: 15952, External: 15952, Lifetime: 3600})
	if err != nil {
		return err
	}
	if r.Result != natpmp.ResultSuccess || !allowedExt(r.Mapped) {
		return fmt.Errorf("NAT-PMP map TCP 15952 suggesting the denied 15952: %+v; want success on a port in 1024-65535 outside 15900-15999", r)
	}
	pm, err := l.waitPortMap(ctx, "the PCP and NAT-PMP mappings", func(p *status.PortMapping) bool { return len(p.Mappings) == 6 })
	if err != nil {
		return err
	}
	held := len(pm.Mappings)
	refusedBefore := pm.Refused["host_limit"]

	// 10,000 requests from the LAN host: max_per_host mappings in all.
	counts := map[uint16]int{}
	start := time.Now()
	if err := inNetns(l.lanNS, func() error {
		c, err := net.ListenPacket("udp4", netip.AddrPortFrom(host, 0).String())
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 64)
		for i := range 10000 {
			port := uint16(pmBurstBase + i)
			req := natpmp.AppendRequest(nil, natpmp.Request{Op: natpmp.OpMapTCP, Internal: port, External: port, Lifetime: 3600})
			r, err := exchange(c, gw, req, buf)
			if err != nil {
				return fmt.Errorf("burst request %d: %w", i, err)
			}
			counts[r.Result]++
		}
		return nil
	}); err != nil {
		return err
	}
	t.Logf("10,000 NAT-PMP requests in %v: results %v", time.Since(start).Round(time.Millisecond), counts)
	if want := pmLimit - held; counts[natpmp.ResultSuccess] != want || counts[natpmp.ResultOutOfResources] != 10000-want {
		return fmt.Errorf("burst results %v: want %d successes (max_per_host %d, %d held) and the rest out of resources (%d)", counts, want, pmLimit, held, natpmp.ResultOutOfResources)
	}
	pm, err = l.waitPortMap(ctx, "the burst's mappings", func(p *status.PortMapping) bool { return len(p.Mappings) == pmLimit })
	if err != nil {
		return err
	}
	for _, m := range pm.Mappings {
		if m.Internal.Addr() != host {
			return fmt.Errorf("mapping %+v not to the LAN host", m)
		}
	}
	refused := uint64(10000 - (pmLimit - held))
	if pm.Refused["host_limit"]-refusedBefore != refused {
		return fmt.Errorf("status refused %v: want host_limit +%d", pm.Refused, refused)
	}
	metrics, err := routerStatus(ctx, l.rtrNS, "/metrics")
	if err != nil {
		return err
	}
	if want := fmt.Sprintf(`gvrouter_portmap_refused_total{reason="host_limit"} %d`, refusedBefore+refused); !strings.Contains(string(metrics), want) {
		return fmt.Errorf("/metrics lacks %q:\n%s", want, grepLines(metrics, "gvrouter_portmap_refused"))
	}
	// Another host (a second address of the LAN host) still maps.
	if err := command(ctx, l.lanNS, "ip", "addr", "add", pmOtherHost+"/24", "dev", hostIf).Run(); err != nil {
		return fmt.Errorf("adding %s: %w", pmOtherHost, err)
	}
	r, err = natpmpAsk(l.lanNS, netip.MustParseAddr(pmOtherHost), gw, natpmp.Request{Op: natpmp.OpMapTCP, Internal: 15800, External: 15800, Lifetime: 3600})
	if err != nil {
		return err
	}
	if r.Result != natpmp.ResultSuccess || r.Mapped != 15800 {
		return fmt.Errorf("NAT-PMP map from %s after the burst: %+v; want success", pmOtherHost, r)
	}

	// A new wan address: announced to the LAN host, answered, used.
	newWAN := netip.MustParseAddr(pmNewWAN)
	ann, err := listenUDPIn(l.lanNS, "0.0.0.0:5350")
	if err != nil {
		return err
	}
	defer ann.Close()
	// The ISP hands out another address: its dnsmasq refuses the
	// router's renewal (DHCPNAK) and leases the new one.
	if err := l.startISP(ispOptions{addr: newWAN}); err != nil {
		return err
	}
	if _, err := l.waitWANLease(ctx, newWAN, 110*time.Second); err != nil {
		return err
	}
	// Both protocols announce (RFC 6886 3.2.1, RFC 6887 14.1.3): the
	// NAT-PMP answer with the new address, and a PCP ANNOUNCE of the same
	// series (its epoch no older than that answer's; the start's series
	// may still be running).
	ann.SetReadDeadline(time.Now().Add(15 * time.Second))
	buf := make([]byte, 1100)
	var pcpEpochs []uint32
	newEpoch, havePCP := uint32(0), false
	for !havePCP || newEpoch == 0 {
		n, from, err := ann.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("announcements on the LAN: NAT-PMP of %s seen %v, PCP ANNOUNCE epochs %v: %w\n%s", newWAN, newEpoch != 0, pcpEpochs, err, tail(filepath.Join(l.dir, "router.log"), 3000))
		}
		if b := buf[:n]; n >= 24 && b[0] == 2 && b[1] == 128 && b[3] == 0 {
			pcpEpochs = append(pcpEpochs, binary.BigEndian.Uint32(b[8:]))
			t.Logf("PCP ANNOUNCE from %v: epoch %d", from, pcpEpochs[len(pcpEpochs)-1])
		} else {
			a, err := natpmp.ParseResponse(b)
			t.Logf("NAT-PMP announcement from %v: %+v (%v)", from, a, err)
			if err == nil && a.Op == natpmp.OpResponse+natpmp.OpExternalAddress && a.External == newWAN && newEpoch == 0 {
				newEpoch = max(a.Epoch, 1)
			}
		}
		if newEpoch != 0 {
			havePCP = slices.ContainsFunc(pcpEpochs, func(e uint32) bool { return e+1 >= newEpoch })
		}
	}
	r, err = natpmpAsk(l.lanNS, host, gw, natpmp.Request{Op: natpmp.OpExternalAddress})
	if err != nil {
		return err
	}
	if r.Result != natpmp.ResultSuccess || r.External != newWAN {
		return fmt.Errorf("NAT-PMP external address after the change: %+v; want %s", r, newWAN)
	}
	if got := runOut(ctx, l.lanNS, 20, "natpmpc", "-g", lanRouter4.Addr().String()); !strings.Contains(got, "Public IP address : "+pmNewWAN) {
		return fmt.Errorf("natpmpc after the wan address change:\n%s", got)
	}
	if err := reachTCP(ctx, l, newWAN, pmPCPMap, 0); err != nil {
		return fmt.Errorf("PCP MAP on the new wan address: %w", err)
	}

	// The short mapping expires on time: gone from the status, and the
	// WAN host no longer gets through while the PCP mapping still lets
	// it in. The router's port mapping clock (a labclock build) is moved
	// forward by the 120 s lifetime rather than waited out: still there
	// before, gone within a sweep after, and the PCP mapping 120 s
	// nearer its own end, so the clock moved by that and no more.
	pm, err = l.waitPortMap(ctx, "the status", func(*status.PortMapping) bool { return true })
	if err != nil {
		return err
	}
	pcpLeft, ok := remaining(pm, pmPCPMap)
	if !hasMapping(pm, pmShort) || !ok {
		return fmt.Errorf("before the clock moved (%v after the short mapping was made): short mapping listed %v, PCP MAP listed %v; want both",
			time.Since(shortAt).Round(time.Second), hasMapping(pm, pmShort), ok)
	}
	// The guest network while the short mapping runs out (a reload
	// into firewall zones: the mappings and their DNAT stay).
	if err := checkPortMapGuest(ctx, l, script, t.Logf); err != nil {
		return fmt.Errorf("guest zone: %w", err)
	}
	if err := l.router.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		return fmt.Errorf("moving the router's port mapping clock: %w", err)
	}
	moved := time.Now()
	pm, err = l.waitPortMap(ctx, "the short mapping's expiry", func(p *status.PortMapping) bool { return !hasMapping(p, pmShort) })
	if err != nil {
		return err
	}
	if late := time.Since(moved); late > 10*time.Second {
		return fmt.Errorf("short mapping left the status %v after its expiry", late.Round(time.Second))
	}
	// Remaining is in whole seconds, and up to 10 s of real time passed.
	if left, ok := remaining(pm, pmPCPMap); !ok || left > pcpLeft-115 || left < pcpLeft-135 {
		return fmt.Errorf("PCP MAP remaining %d s (listed %v) after the clock moved 120 s, %d s before", left, ok, pcpLeft)
	}
	if pm.Events["expired"] < 1 {
		return fmt.Errorf("events %v: want expired ≥ 1", pm.Events)
	}
	if err := reachTCP(ctx, l, newWAN, pmShort, 0); err == nil {
		return fmt.Errorf("the WAN host got through the expired mapping TCP %d", pmShort)
	}
	if err := reachTCP(ctx, l, newWAN, pmPCPMap, 0); err != nil {
		return fmt.Errorf("PCP MAP after the short one expired: %w", err)
	}
	return nil
}

// allowedExt reports whether the test's allow rules permit external
// port p: 1024-65535 but not the denied 15900-15999.
func allowedExt(p uint16) bool { return p >= 1024 && (p < 15900 || p > 15999) }

// remaining returns the seconds left to the mapping of external port ext
// in p, and whether p lists it.
func remaining(p *status.PortMapping, ext uint16) (int64, bool) {
	for _, m := range p.Mappings {
		if m.External == ext {
			return m.Remaining, true
		}
	}
	return 0, false
}

// hasMapping reports whether p lists a mapping of external port ext.
func hasMapping(p *status.PortMapping, ext uint16) bool {
	for _, m := range p.Mappings {
		if m.External == ext {
			return true
		}
	}
	return false
}

// natpmpAsk sends req from src in namespace ns to the server and returns
// its answer.
func natpmpAsk(ns string, src netip.Addr, server netip.AddrPort, req natpmp.Request) (natpmp.Response, error) {
	var r natpmp.Response
	err := inNetns(ns, func() error {
		c, err := net.ListenPacket("udp4", netip.AddrPortFrom(src, 0).String())
		if err != nil {
			return err
		}
		defer c.Close()
		r, err = exchange(c, server, natpmp.AppendRequest(nil, req), make([]byte, 64))
		return err
	})
	return r, err
}

// exchange sends req to server and waits up to 2 s for its answer,
// once more after a timeout (RFC 6886 3.1 retries).
func exchange(c net.PacketConn, server netip.AddrPort, req, buf []byte) (natpmp.Response, error) {
	var err error
	for range 2 {
		if _, err = c.WriteTo(req, net.UDPAddrFromAddrPort(server)); err != nil {
			return natpmp.Response{}, err
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var n int
		if n, _, err = c.ReadFrom(buf); err == nil {
			return natpmp.ParseResponse(buf[:n])
		}
	}
	return natpmp.Response{}, err
}

// reachTCP checks that the WAN host, from source port from (0: any),
// connects to to:port and reads the LAN host's greeting on that port.
func reachTCP(ctx context.Context, l *lab, to netip.Addr, port, from uint16) error {
	ln, err := listenIn(l.lanNS, netip.AddrPortFrom(lanHost4.Addr(), port).String())
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.WriteString(c, "lan host")
			c.Close()
		}
	}()
	var c net.Conn
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := inNetns(l.wanNS, func() (err error) {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(wanHost4.Addr(), from))}
		c, err = d.DialContext(dctx, "tcp4", netip.AddrPortFrom(to, port).String())
		return err
	}); err != nil {
		return fmt.Errorf("WAN host to %s:%d: %w", to, port, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(proofTimeout))
	b, err := io.ReadAll(c)
	if string(b) != "lan host" {
		return fmt.Errorf("WAN host through %s:%d read %q, %v; want the LAN host's greeting", to, port, b, err)
	}
	return nil
}
