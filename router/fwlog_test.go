package router

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/gvrouter/gvrouter/capture"
	"github.com/gvrouter/gvrouter/firewall"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/natengine"
)

// synPacket is an IPv4 TCP SYN from src:sport to dst:dport, checksums
// set.
func synPacket(t *testing.T, src, dst string, sport, dport uint16) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP,
		SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), SYN: true, Window: 65535}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, tcp); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFirewallLogCapture: a rule with log: capture hands the packet of
// each flow it decides to the firewall:log capture point, which a
// capture through the capture API (capture.Manager, what `gvrouter
// capture` and /api/capture use) writes as pcapng; at most
// firewall.LogBurst at once, the rest counted as log_limited. A rule
// with log: on only counts.
func TestFirewallLogCapture(t *testing.T) {
	const lan, wan natengine.Iface = 1, 2
	now := time.Unix(1_700_000_000, 0)
	e := natengine.New(natengine.Config{TimeNow: func() time.Time { return now }})
	rs, err := firewall.Compile(firewall.Policy{
		Zones: []firewall.Zone{
			{Name: "lan", Ifaces: []int32{int32(lan)}, Input: firewall.Accept, Forward: firewall.Accept},
			{Name: "wan", Ifaces: []int32{int32(wan)}, Input: firewall.Drop, Forward: firewall.Drop},
		},
		Rules: []firewall.Rule{
			{Name: "no-ssh", Src: "lan", Dest: "wan", Protos: []uint8{6}, DestPorts: []firewall.PortRange{{First: 22, Last: 22}}, Target: firewall.Drop, Log: true, LogCapture: true},
			{Name: "no-telnet", Src: "lan", Dest: "wan", Protos: []uint8{6}, DestPorts: []firewall.PortRange{{First: 23, Last: 23}}, Target: firewall.Drop, Log: true},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.SetRules(natengine.Rules{
		Ifaces: []natengine.IfaceConfig{
			{ID: lan, Name: "lan", Addrs: []netip.Addr{netip.MustParseAddr("192.168.1.1")}, Subnets: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}},
			{ID: wan, Name: "wan", WAN: true, Masquerade: true, Addrs: []netip.Addr{netip.MustParseAddr("203.0.113.2")}},
		},
		Zones: rs,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &Router{}
	r.fwLog = firewallLogPoint(e)
	syn := synPacket(t, "192.168.1.10", "198.51.100.7", 1, 22)
	if n := testing.AllocsPerRun(100, func() { r.fwLog.CaptureIP(capture.In, syn) }); n != 0 {
		t.Errorf("%v allocs per CaptureIP with no capture running, want 0", n)
	}
	m := capture.NewManager(r.lookupCapture)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	type result struct {
		res capture.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := m.Run(ctx, capture.Request{Iface: FirewallLogPoint, Seconds: 30}, &out)
		done <- result{res, err}
	}()
	for deadline := time.Now().Add(5 * time.Second); !r.fwLog.Active(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the firewall:log capture did not start")
		}
	}
	forward := func(pkt []byte) natengine.Verdict {
		if v := e.Prerouting(pkt, lan); v != natengine.Accept {
			return v
		}
		return e.Postrouting(pkt, wan)
	}
	if v := forward(synPacket(t, "192.168.1.10", "198.51.100.7", 40000, 23)); v != natengine.Drop {
		t.Fatalf("telnet: %v, want drop", v)
	}
	const n = firewall.LogBurst + 10
	for i := range n {
		if v := forward(synPacket(t, "192.168.1.10", "198.51.100.7", 41000+uint16(i), 22)); v != natengine.Drop {
			t.Fatalf("ssh %d: %v, want drop", i, v)
		}
	}
	cancel()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	rules, _ := e.Firewall().Counters()
	if rules[0].Logged != n || rules[0].LogLimited != n-firewall.LogBurst || rules[1].Logged != 1 || rules[1].LogLimited != 0 {
		t.Errorf("rule counters %+v, want no-ssh logged %d, log-limited %d; no-telnet logged 1", rules, n, n-firewall.LogBurst)
	}
	pcap := slices.Clone(out.Bytes())
	rd, err := pcapgo.NewNgReader(&out, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("pcapng: %v", err)
	}
	var ports []uint16
	for {
		data, _, err := rd.ReadPacketData()
		if err != nil {
			break
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip == nil || tcp == nil || !ip.SrcIP.Equal(net.ParseIP("192.168.1.10")) || !tcp.SYN {
			t.Errorf("captured packet is not the LAN host's SYN: %v", p)
			continue
		}
		ports = append(ports, uint16(tcp.DstPort))
	}
	if len(ports) != firewall.LogBurst || res.res.Captured != firewall.LogBurst {
		t.Errorf("captured %d packets (result %+v), want %d (the log burst)", len(ports), res.res, firewall.LogBurst)
	}
	for _, p := range ports {
		if p != 22 {
			t.Errorf("captured a packet to port %d: only no-ssh logs to the capture", p)
		}
	}

	// tshark, an independent reader, sees the same.
	if _, err := exec.LookPath("tshark"); err != nil {
		netnstest.SkipOrFail(t, "tshark: %v", err)
	}
	file := filepath.Join(t.TempDir(), "firewall-log.pcapng")
	if err := os.WriteFile(file, pcap, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command("tshark", "-n", "-r", file, "-T", "fields", "-e", "ip.src", "-e", "tcp.dstport", "-e", "tcp.flags.syn").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != firewall.LogBurst || lines[0] != "192.168.1.10\t22\tTrue" && lines[0] != "192.168.1.10\t22\t1" {
		t.Errorf("tshark read %d packets, first %q; want %d, the LAN host's SYNs to port 22", len(lines), lines[0], firewall.LogBurst)
	}
}
