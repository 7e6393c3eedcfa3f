package natstatus

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/natrules"
	"github.com/gvrouter/gvrouter/router/status"
)

// natBase is a config with a lan and two wans on one port.
const natBase = `ports:
  - {name: eth0, mtu: 1500}
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24, fd00:1::1/64]}
  - {name: wan, port: eth0, vlan: 2, role: wan, mtu: 1492, addresses: [203.0.113.2/24, 2001:db8::2/64]}
  - {name: wan2, port: eth0, vlan: 3, role: wan, addresses: [198.51.100.2/24]}
status:
  listen: [lan:80, "127.0.0.1:8080"]
`

// udp4 builds an IPv4 UDP packet (checksums are not checked by the engine).
func udp4(src, dst netip.AddrPort) []byte {
	b := make([]byte, 28)
	b[0], b[8], b[9] = 0x45, 64, natengine.ProtoUDP
	binary.BigEndian.PutUint16(b[2:], 28)
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[20:], src.Port())
	binary.BigEndian.PutUint16(b[22:], dst.Port())
	binary.BigEndian.PutUint16(b[24:], 8)
	return b
}

func TestConntrackStatus(t *testing.T) {
	cfg, err := config.Parse("nat.yaml", []byte(natBase+"nat: {masquerade: [wan]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := natengine.New(natrules.EngineConfig(cfg))
	if err := e.SetRules(natrules.Compile(cfg, seqIDs(cfg), nil, nil)); err != nil {
		t.Fatal(err)
	}
	host := netip.MustParseAddrPort("192.168.1.10:5000")
	remote := netip.MustParseAddrPort("198.51.100.7:53")
	pkt := udp4(host, remote)
	if v := e.Prerouting(pkt, 1); v != natengine.Accept {
		t.Fatalf("Prerouting = %v", v)
	}
	if v := e.Postrouting(pkt, 2); v != natengine.Accept {
		t.Fatalf("Postrouting = %v", v)
	}
	// An unsolicited packet from the WAN to the LAN host: one drop.
	if v := e.Prerouting(udp4(remote, netip.AddrPortFrom(host.Addr(), 22)), 2); v != natengine.Drop {
		t.Fatalf("unsolicited Prerouting = %v, want drop", v)
	}

	c := Status(e, 65536)
	if c.Max != 65536 || c.Flows != 1 || c.Drops["unsolicited"] != 1 || c.Events["created"] != 1 {
		t.Errorf("Status = %+v", c)
	}
	states := map[string]int{}
	for _, fc := range c.States {
		states[fc.Proto+" "+fc.State] = fc.Flows
	}
	if states["udp UNREPLIED"] != 1 || states["tcp ESTABLISHED"] != 0 || len(states) != 13 {
		t.Errorf("States = %v, want udp UNREPLIED 1 and every state listed", states)
	}
	if _, ok := c.SlowPath["miss"]; !ok {
		t.Errorf("SlowPath = %v, want every reason", c.SlowPath)
	}
	if len(c.NATPorts) != 1 || c.NATPorts[0] != (status.NATPorts{Proto: "udp", Address: "203.0.113.2", Ports: 1, Flows: 1}) {
		t.Errorf("NATPorts = %+v, want udp 203.0.113.2: 1 port, 1 flow", c.NATPorts)
	}

	flows := Flows(e.Flows())
	if len(flows) != 1 {
		t.Fatalf("Flows = %+v, want 1 flow", flows)
	}
	f := flows[0]
	if f.Proto != "udp" || f.State != "UNREPLIED" || f.Src != host || f.Dst != remote || f.ReplySrc != remote ||
		f.ReplyDst.Addr() != netip.MustParseAddr("203.0.113.2") || f.PacketsOrig != 1 || f.ExpiresSeconds <= 0 {
		t.Errorf("flow = %+v", f)
	}
}

// fullEngine returns an engine with n masqueraded UDP flows.
func fullEngine(b *testing.B, n int) *natengine.Engine {
	cfg, err := config.Parse("nat.yaml", []byte(natBase+"nat: {masquerade: [wan]}\n"))
	if err != nil {
		b.Fatal(err)
	}
	e := natengine.New(natengine.Config{MaxConns: n})
	if err := e.SetRules(natrules.Compile(cfg, seqIDs(cfg), nil, nil)); err != nil {
		b.Fatal(err)
	}
	// Two remotes per internal endpoint: n flows on n/2 mappings (one
	// external address has only 64,512 ports above 1023).
	remotes := [2]netip.AddrPort{netip.MustParseAddrPort("198.51.100.7:53"), netip.MustParseAddrPort("198.51.100.8:53")}
	for i := 0; i < n; i++ {
		j := i / 2
		host := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 168, 1, byte(2 + j%200)}), uint16(1024+j/200))
		pkt := udp4(host, remotes[i%2])
		e.Prerouting(pkt, 1)
		e.Postrouting(pkt, 2)
	}
	if e.Len() != n {
		b.Fatalf("%d flows, want %d", e.Len(), n)
	}
	return e
}

// BenchmarkConntrackStatus is the cost of a census with a full default
// table (the sampler takes one every CensusInterval).
func BenchmarkConntrackStatus(b *testing.B) {
	e := fullEngine(b, natengine.DefaultMaxConns)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Status(e, natengine.DefaultMaxConns)
	}
}

// BenchmarkConntrackTable is one request for the conntrack table's first
// page with a full default table.
func BenchmarkConntrackTable(b *testing.B) {
	e := fullEngine(b, natengine.DefaultMaxConns)
	q, _ := status.ParseTableQuery("", "")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		status.BuildPage(Flows(e.Flows()), q)
	}
}

func TestCensusCache(t *testing.T) {
	cfg, err := config.Parse("nat.yaml", []byte(natBase+"nat: {masquerade: [wan]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := natengine.New(natrules.EngineConfig(cfg))
	if err := e.SetRules(natrules.Compile(cfg, seqIDs(cfg), nil, nil)); err != nil {
		t.Fatal(err)
	}
	var cc Cache
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if n := len(cc.Get(e, t0).natPorts); n != 0 {
		t.Fatalf("empty engine: %d NAT port entries", n)
	}
	pkt := udp4(netip.MustParseAddrPort("192.168.1.10:5000"), netip.MustParseAddrPort("198.51.100.7:53"))
	e.Prerouting(pkt, 1)
	e.Postrouting(pkt, 2)
	if n := len(cc.Get(e, t0.Add(CensusInterval-time.Millisecond)).natPorts); n != 0 {
		t.Errorf("census refreshed before CensusInterval: %d entries", n)
	}
	if n := len(cc.Get(e, t0.Add(CensusInterval)).natPorts); n != 1 {
		t.Errorf("census not refreshed after CensusInterval: %d entries, want 1", n)
	}
	if n := len(cc.Get(e, t0).natPorts); n != 1 {
		t.Errorf("clock stepped back: %d entries, want a fresh census (1)", n)
	}
}

// seqIDs numbers the interfaces in config order from 1, like NIC IDs.
func seqIDs(cfg *config.Config) natrules.IDs {
	return func(name string) (natengine.Iface, bool) {
		for i, ic := range cfg.Interfaces {
			if ic.Name == name {
				return natengine.Iface(i + 1), true
			}
		}
		return 0, false
	}
}
