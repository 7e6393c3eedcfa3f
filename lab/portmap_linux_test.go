package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/portmap/natpmp"
	"github.com/gvrouter/gvrouter/router/status"
)

// TestLabPortMapping proves port_mapping: on the running router with
// Debian's clients on the LAN host: natpmpc maps a TCP and a UDP port,
// and deletes a third mapping on request; upnpc finds the router by SSDP,
// maps a TCP and a UDP port, and is refused a mapping to another LAN host
// (secure mode, UPnP error 606); the WAN host reaches the LAN host
// through all four, not through the deleted one. From the WAN
// host natpmpc and upnpc get no mapping, and nothing answers on the
// router's WAN address (UDP 5351, TCP 5000, SSDP). The mappings survive a
// reload that keeps the section (table kept), one that changes the
// policy (table rebuilt from the state file) and a restart (state file;
// the restart announcement reaches the LAN host), and the WAN host still
// reaches the LAN host after each.
func TestLabPortMapping(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "natpmpc", "upnpc")
	var out strings.Builder
	opt := Options{
		RouterBinary: buildRouter(t),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		cfgEdits: []func(*labConfig){func(c *labConfig) {
			c.PortMapping = &labPortMapping{NATPMP: "on", PCP: "on", UPnP: "on"}
		}},
		testHook: func(l *lab) error { return checkPortMapping(t, l) },
		runTag:   nextRunTag(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v\noutput:\n%s", err, out.String())
	}
}

// Ports the LAN host maps.
const (
	pmTCP     = 15555 // natpmpc, TCP
	pmUDP     = 15556 // natpmpc, UDP
	pmUPnPTCP = 16000 // upnpc, TCP
	pmUPnPUDP = 16002 // upnpc, UDP
	pmDeleted = 15557 // natpmpc maps it, then deletes it
)

func checkPortMapping(t *testing.T, l *lab) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wanAddr := wanRouter4.Addr()
	gw := lanRouter4.Addr().String()
	host := lanHost4.Addr().String()
	logPath := filepath.Join(l.dir, "router.log")

	pm, err := l.waitPortMap(ctx, "the servers and the wan address", func(p *status.PortMapping) bool {
		return p.External != "" && len(p.Listen) > 0
	})
	if err != nil {
		return err
	}
	t.Logf("listening: %q", pm.Listen)
	for _, s := range pm.Listen {
		if strings.Contains(s, wanAddr.String()) || !(strings.Contains(s, gw) || strings.HasSuffix(s, "on lan (239.255.255.250)")) {
			return fmt.Errorf("port mapping listens on %q: want LAN-side sockets only", s)
		}
	}

	// natpmpc maps a TCP and a UDP port.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-g", gw}, "Public IP address : " + wanAddr.String()},
		{[]string{"-g", gw, "-a", fmt.Sprint(pmTCP), fmt.Sprint(pmTCP), "tcp", "3600"}, fmt.Sprintf("Mapped public port %d protocol TCP to local port %d liftime ", pmTCP, pmTCP)},
		{[]string{"-g", gw, "-a", fmt.Sprint(pmUDP), fmt.Sprint(pmUDP), "udp", "3600"}, fmt.Sprintf("Mapped public port %d protocol UDP to local port %d liftime ", pmUDP, pmUDP)},
	} {
		got := runOut(ctx, l.lanNS, 20, "natpmpc", c.args...)
		t.Logf("natpmpc %s:\n%s", strings.Join(c.args, " "), got)
		if !strings.Contains(got, c.want) {
			return fmt.Errorf("natpmpc %s: output lacks %q:\n%s", strings.Join(c.args, " "), c.want, got)
		}
	}

	// upnpc maps one TCP port and is refused a mapping to another host.
	// -i: the lab's WAN address is private (10.77.2.1), which miniupnpc
	// takes for a disconnected gateway unless told to go on.
	got := runOut(ctx, l.lanNS, 40, "upnpc", "-i", "-e", "lab console", "-a", host, fmt.Sprint(pmUPnPTCP), fmt.Sprint(pmUPnPTCP), "TCP", "3600")
	t.Logf("upnpc -a %s:\n%s", host, got)
	if want := fmt.Sprintf("external %s:%d TCP is redirected to internal %s:%d", wanAddr, pmUPnPTCP, host, pmUPnPTCP); !strings.Contains(got, want) {
		return fmt.Errorf("upnpc: output lacks %q:\n%s", want, got)
	}
	got = runOut(ctx, l.lanNS, 40, "upnpc", "-i", "-a", host, fmt.Sprint(pmUPnPUDP), fmt.Sprint(pmUPnPUDP), "UDP", "3600")
	t.Logf("upnpc -a %s UDP:\n%s", host, got)
	if want := fmt.Sprintf("external %s:%d UDP is redirected to internal %s:%d", wanAddr, pmUPnPUDP, host, pmUPnPUDP); !strings.Contains(got, want) {
		return fmt.Errorf("upnpc: output lacks %q:\n%s", want, got)
	}
	other := "10.77.1.77"
	got = runOut(ctx, l.lanNS, 40, "upnpc", "-i", "-a", other, "16001", "16001", "TCP", "3600")
	t.Logf("upnpc -a %s:\n%s", other, got)
	if want := fmt.Sprintf("AddPortMapping(16001, 16001, %s) failed with code 606", other); !strings.Contains(got, want) {
		return fmt.Errorf("upnpc for another host: output lacks %q:\n%s", want, got)
	}

	// natpmpc deletes a mapping on request (lifetime 0, RFC 6886 3.4).
	for _, life := range []string{"3600", "0"} {
		got := runOut(ctx, l.lanNS, 20, "natpmpc", "-g", gw, "-a", fmt.Sprint(pmDeleted), fmt.Sprint(pmDeleted), "tcp", life)
		t.Logf("natpmpc -a %d tcp %s:\n%s", pmDeleted, life, got)
		if !strings.Contains(got, "Mapped public port") {
			return fmt.Errorf("natpmpc -a %d tcp %s:\n%s", pmDeleted, life, got)
		}
	}

	pm, err = l.waitPortMap(ctx, "four mappings", func(p *status.PortMapping) bool { return len(p.Mappings) == 4 })
	if err != nil {
		return err
	}
	if pm.Refused["secure_mode"] != 1 {
		return fmt.Errorf("refused %v: want secure_mode 1 (upnpc for %s)", pm.Refused, other)
	}
	owners := map[string]int{}
	for _, m := range pm.Mappings {
		owners[string(m.Owner)+" "+m.Protocol]++
		if m.Internal.Addr() != lanHost4.Addr() || m.Remaining <= 0 {
			return fmt.Errorf("mapping %+v: want to %s with time left", m, host)
		}
	}
	if owners["natpmp tcp"] != 1 || owners["natpmp udp"] != 1 || owners["upnp tcp"] != 1 || owners["upnp udp"] != 1 {
		return fmt.Errorf("mappings by owner %v: want natpmp tcp, natpmp udp, upnp tcp, upnp udp", owners)
	}
	if pm.Events["deleted"] != 1 {
		return fmt.Errorf("events %v: want deleted 1 (natpmpc's lifetime 0)", pm.Events)
	}
	for _, m := range pm.Mappings {
		if m.External == pmDeleted {
			return fmt.Errorf("mapping %+v deleted by natpmpc still listed", m)
		}
	}
	dctx, dcancel := context.WithTimeout(ctx, 3*time.Second)
	if c, err := dialIn(dctx, l.wanNS, netip.AddrPortFrom(wanAddr, pmDeleted).String(), 2*time.Second); err == nil {
		c.Close()
		dcancel()
		return fmt.Errorf("WAN host connected to deleted mapping TCP %d", pmDeleted)
	}
	dcancel()
	if err := reachThrough(ctx, l, "after mapping"); err != nil {
		return err
	}

	// The WAN host: no mapping, and nothing answers on the WAN address.
	before := pm.Events["created"]
	for _, g := range []string{wanAddr.String(), gw} {
		// stdbuf: natpmpc retries for a minute; what it printed before
		// the timeout ends it is kept.
		got := runOut(ctx, l.wanNS, 8, "stdbuf", "-oL", "natpmpc", "-g", g, "-a", "17000", "17000", "tcp", "3600")
		t.Logf("natpmpc from the WAN host to %s:\n%s", g, got)
		if !strings.Contains(got, "using gateway : "+g) {
			return fmt.Errorf("natpmpc from the WAN host via %s did not run:\n%s", g, got)
		}
		if strings.Contains(got, "Mapped public port") || strings.Contains(got, "Public IP address") {
			return fmt.Errorf("natpmpc from the WAN host via %s got an answer:\n%s", g, got)
		}
	}
	got = runOut(ctx, l.wanNS, 30, "upnpc", "-i", "-l")
	t.Logf("upnpc -l from the WAN host:\n%s", got)
	if !strings.Contains(got, "No IGD UPnP Device found") {
		return fmt.Errorf("upnpc from the WAN host found a gateway:\n%s", got)
	}
	if err := silentOnWAN(ctx, l); err != nil {
		return err
	}
	pm, err = l.waitPortMap(ctx, "the counters", func(*status.PortMapping) bool { return true })
	if err != nil {
		return err
	}
	if pm.Events["created"] != before || len(pm.Mappings) != 4 {
		return fmt.Errorf("after the WAN host's requests: created %d (was %d), %d mappings; want no new one", pm.Events["created"], before, len(pm.Mappings))
	}

	// A reload that keeps the section (a new LAN address restarts only
	// the servers): the table and its mappings stay, nothing restored.
	cfgPath := filepath.Join(l.dir, "lab.yaml")
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	extra := strings.Replace(string(orig), "- "+lanRouter4.String()+"\n", "- "+lanRouter4.String()+"\n"+strings.Repeat(" ", indentOf(string(orig), "- "+lanRouter4.String()))+"- 10.77.1.9/24\n", 1)
	if extra == string(orig) {
		return fmt.Errorf("lab config has no %s line:\n%s", lanRouter4, orig)
	}
	if err := reloadWith(l, cfgPath, extra); err != nil {
		return err
	}
	pm, err = l.waitPortMap(ctx, "the servers on the new LAN address", func(p *status.PortMapping) bool {
		return slices.Contains(p.Listen, "udp 10.77.1.9:5351")
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(logPath, 3000))
	}
	if len(pm.Mappings) != 4 || pm.Events["restored"] != 0 {
		return fmt.Errorf("after a reload that keeps port_mapping: %d mappings, restored %d; want 4 kept in the table, none restored", len(pm.Mappings), pm.Events["restored"])
	}
	if err := reachThrough(ctx, l, "after a reload"); err != nil {
		return err
	}

	// A reload that changes the policy: a new table from the state file.
	changed := strings.Replace(extra, "port_mapping:\n", "port_mapping:\n"+strings.Repeat(" ", indentOf(extra, "natpmp:"))+"max_per_host: 32\n", 1)
	if err := reloadWith(l, cfgPath, changed); err != nil {
		return err
	}
	pm, err = l.waitPortMap(ctx, "the table rebuilt from the state file", func(p *status.PortMapping) bool {
		return p.Events["restored"] == 4 && len(p.Mappings) == 4
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(logPath, 3000))
	}
	if err := reachThrough(ctx, l, "after a policy change"); err != nil {
		return err
	}

	// A restart: the state file brings the mappings back, and the LAN
	// host hears the restart announcement.
	ann, err := listenUDPIn(l.lanNS, "0.0.0.0:5350")
	if err != nil {
		return err
	}
	defer ann.Close()
	if err := l.stopRouter(); err != nil {
		return err
	}
	if err := l.startRouter(ctx); err != nil {
		return err
	}
	pm, err = l.waitPortMap(ctx, "the mappings after a restart", func(p *status.PortMapping) bool {
		return p.External != "" && p.Events["restored"] == 4 && len(p.Mappings) == 4
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(logPath, 3000))
	}
	if err := reachThrough(ctx, l, "after a restart"); err != nil {
		return err
	}
	ann.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	for {
		n, from, err := ann.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("no NAT-PMP restart announcement on the LAN: %w", err)
		}
		if r, err := natpmp.ParseResponse(buf[:n]); err == nil && r.Op == 128 && r.External == wanAddr {
			t.Logf("announcement from %v: external %v, epoch %d", from, r.External, r.Epoch)
			break
		}
	}
	return nil
}

// waitPortMap polls the status until its port mapping section satisfies
// ok, for up to 60 s.
func (l *lab) waitPortMap(ctx context.Context, what string, ok func(*status.PortMapping) bool) (*status.PortMapping, error) {
	deadline := time.Now().Add(60 * time.Second)
	var last *status.PortMapping
	for {
		snap, err := l.statusSince(ctx, time.Now())
		if err == nil && snap.PortMapping != nil {
			last = snap.PortMapping
			if ok(last) {
				return last, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("port mapping: waited 60 s for %s; last section %+v (err %v)", what, last, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// reachThrough checks that the WAN host reaches the LAN host at the
// router's WAN address through the four mappings: TCP and UDP by natpmpc
// and by upnpc (a connection, or a datagram there and its answer back).
func reachThrough(ctx context.Context, l *lab, when string) error {
	for _, port := range []int{pmTCP, pmUPnPTCP} {
		ln, err := listenIn(l.lanNS, netip.AddrPortFrom(lanHost4.Addr(), uint16(port)).String())
		if err != nil {
			return err
		}
		go func() {
			if c, err := ln.Accept(); err == nil {
				io.WriteString(c, "lan host")
				c.Close()
			}
		}()
		c, err := dialIn(ctx, l.wanNS, netip.AddrPortFrom(wanRouter4.Addr(), uint16(port)).String(), proofTimeout)
		if err != nil {
			ln.Close()
			return fmt.Errorf("%s: WAN host to mapped TCP %d: %w", when, port, err)
		}
		c.SetDeadline(time.Now().Add(proofTimeout))
		b, err := io.ReadAll(c)
		c.Close()
		ln.Close()
		if string(b) != "lan host" {
			return fmt.Errorf("%s: WAN host through mapped TCP %d read %q, %v; want the LAN host's greeting", when, port, b, err)
		}
	}
	for _, port := range []uint16{pmUDP, pmUPnPUDP} {
		if err := reachUDP(l, port, when); err != nil {
			return err
		}
	}
	return nil
}

// reachUDP sends a datagram from the WAN host to the router's WAN
// address at port and wants the LAN host's answer back.
func reachUDP(l *lab, port uint16, when string) error {
	srv, err := listenUDPIn(l.lanNS, netip.AddrPortFrom(lanHost4.Addr(), port).String())
	if err != nil {
		return err
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		srv.SetReadDeadline(time.Now().Add(proofTimeout))
		if n, from, err := srv.ReadFrom(buf); err == nil {
			srv.WriteTo(append([]byte("lan host got "), buf[:n]...), from)
		}
	}()
	var c net.Conn
	if err := inNetns(l.wanNS, func() (err error) {
		c, err = net.Dial("udp4", netip.AddrPortFrom(wanRouter4.Addr(), port).String())
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(proofTimeout))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "lan host got ping" {
		return fmt.Errorf("%s: WAN host through mapped UDP %d: %q, %v; want the LAN host's answer", when, port, buf[:n], err)
	}
	return nil
}

// silentOnWAN checks that nothing answers the WAN host on the port
// mapping ports: a NAT-PMP request to UDP 5351 of the WAN address (no
// listener) and of the LAN address (routed from the WAN: wan_input drops
// it) and an SSDP search to UDP 1900 get no answer, TCP 5000 of the WAN
// address does not connect.
func silentOnWAN(ctx context.Context, l *lab) error {
	for _, probe := range []struct {
		to   netip.Addr
		port uint16
		msg  string
	}{
		{wanRouter4.Addr(), 5351, "\x00\x00"}, // NAT-PMP external address request
		{lanRouter4.Addr(), 5351, "\x00\x00"}, // the same to the LAN address, routed from the WAN
		{wanRouter4.Addr(), 1900, "M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nMAN: \"ssdp:discover\"\r\nMX: 1\r\nST: ssdp:all\r\n\r\n"},
	} {
		var c net.Conn
		if err := inNetns(l.wanNS, func() (err error) {
			c, err = net.Dial("udp4", netip.AddrPortFrom(probe.to, probe.port).String())
			return err
		}); err != nil {
			return err
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write([]byte(probe.msg))
		buf := make([]byte, 1500)
		n, err := c.Read(buf)
		c.Close()
		if err == nil {
			return fmt.Errorf("UDP %v:%d answered the WAN host: %q", probe.to, probe.port, buf[:n])
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if c, err := dialIn(dctx, l.wanNS, netip.AddrPortFrom(wanRouter4.Addr(), 5000).String(), 2*time.Second); err == nil {
		c.Close()
		return fmt.Errorf("TCP 5000 on the WAN address accepted the WAN host")
	}
	return nil
}

// runOut runs name in ns for at most secs seconds and returns what it
// printed, stdout and stderr, whether or not it failed.
func runOut(ctx context.Context, ns string, secs int, name string, args ...string) string {
	cmd := command(ctx, ns, "timeout", append([]string{fmt.Sprint(secs), name}, args...)...)
	b, _ := cmd.CombinedOutput()
	return string(b)
}

// listenUDPIn opens a UDP socket on addr in namespace ns.
func listenUDPIn(ns, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := inNetns(ns, func() (err error) {
		c, err = net.ListenPacket("udp4", addr)
		return err
	})
	return c, err
}

// reloadWith writes cfg to path and sends the router SIGHUP.
func reloadWith(l *lab, path, cfg string) error {
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	return l.router.cmd.Process.Signal(syscall.SIGHUP)
}

// indentOf returns the indentation of the first line of s containing sub.
func indentOf(s, sub string) int {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return len(line) - len(strings.TrimLeft(line, " "))
		}
	}
	return 0
}
