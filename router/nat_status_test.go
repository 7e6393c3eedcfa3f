package router

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
)

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
	e := natengine.New(engineConfig(cfg))
	if err := e.SetRules(natRules(cfg, seqIDs(cfg), nil, nil)); err != nil {
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

	c := conntrackStatus(e, 65536)
	if c.Max != 65536 || c.Flows != 1 || c.Drops["unsolicited"] != 1 || c.Events["created"] != 1 {
		t.Errorf("conntrackStatus = %+v", c)
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

	flows := flowsStatus(e.Flows())
	if len(flows) != 1 {
		t.Fatalf("flowsStatus = %+v, want 1 flow", flows)
	}
	f := flows[0]
	if f.Proto != "udp" || f.State != "UNREPLIED" || f.Src != host || f.Dst != remote || f.ReplySrc != remote ||
		f.ReplyDst.Addr() != netip.MustParseAddr("203.0.113.2") || f.PacketsOrig != 1 || f.ExpiresSeconds <= 0 {
		t.Errorf("flow = %+v", f)
	}
}
