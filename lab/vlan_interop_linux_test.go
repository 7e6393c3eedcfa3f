package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/router/config"
)

// scapyPython is Debian's python3 with python3-scapy: the independent
// 802.1Q peer of TestVLANInteropScapy.
const scapyPython = "/usr/bin/python3"

// scapyPeer sends the test's frames on the peer end of the router's port
// and prints every frame the router sent back as JSON. It answers the
// router's ARP requests (on whatever VLAN they came), so echo replies and
// SYN-ACKs need no neighbour entry in advance.
const scapyPeer = `
import json, sys, time
from scapy.all import (ARP, AsyncSniffer, Dot1AD, Dot1Q, Ether, ICMP, IP, TCP,
                       conf, sendp)
conf.verb = 0
iface, rmac = sys.argv[1], sys.argv[2]
me = "02:00:00:00:aa:01"
bc = "ff:ff:ff:ff:ff:ff"

def tags(p):
    out, l = [], p.payload
    while isinstance(l, (Dot1Q, Dot1AD)):
        out.append({"tpid": 0x88a8 if isinstance(l, Dot1AD) else 0x8100, "vid": l.vlan, "pcp": l.prio})
        l = l.payload
    return out, l

def wrap(tl, inner):
    e = Ether(dst=rmac if inner is not None and not isinstance(inner, ARP) else bc, src=me)
    p = e
    for t in tl:
        p = p / (Dot1AD if t["tpid"] == 0x88a8 else Dot1Q)(vlan=t["vid"], prio=0)
    return p / inner

def answer_arp(p):
    tl, l = tags(p)
    if isinstance(l, ARP) and l.op == 1:
        e = Ether(dst=p.src, src=me)
        q = e
        for t in tl:
            q = q / (Dot1AD if t["tpid"] == 0x88a8 else Dot1Q)(vlan=t["vid"])
        sendp(q / ARP(op=2, hwsrc=me, psrc=l.pdst, hwdst=l.hwsrc, pdst=l.psrc), iface=iface)

sn = AsyncSniffer(iface=iface, store=True, lfilter=lambda p: p.src == rmac, prn=answer_arp)
sn.start()
time.sleep(0.5)

vlans = {
    "vid1": ([{"tpid": 0x8100, "vid": 1}], "192.168.1.1", "192.168.1.77"),
    "vid2": ([{"tpid": 0x8100, "vid": 2}], "203.0.113.2", "203.0.113.77"),
    "qinq": ([{"tpid": 0x88a8, "vid": 100}, {"tpid": 0x8100, "vid": 10}], "10.100.10.1", "10.100.10.77"),
    "vid0": ([{"tpid": 0x8100, "vid": 0}], "10.0.0.1", "10.0.0.77"),
    "vid3": ([{"tpid": 0x8100, "vid": 3}], "192.168.1.1", "192.168.1.77"),
}
ident = 1
for name, (tl, dst, src) in vlans.items():
    sendp(wrap(tl, ARP(op=1, hwsrc=me, psrc=src, pdst=dst)), iface=iface)
    time.sleep(0.2)
    sendp(wrap(tl, IP(src=src, dst=dst) / ICMP(id=ident, seq=1) / b"gvrouter"), iface=iface)
    time.sleep(0.2)
    sendp(wrap(tl, IP(src=src, dst=dst) / TCP(sport=40000 + ident, dport=80, flags="S", seq=1000)), iface=iface)
    time.sleep(0.2)
    ident += 1
# A full-size QinQ frame: 1500-byte IP packet, 1522 bytes on the wire.
tl, dst, src = vlans["qinq"]
sendp(wrap(tl, IP(src=src, dst=dst) / ICMP(id=99, seq=1) / (b"x" * 1472)), iface=iface)
time.sleep(1.5)
sn.stop()

out = []
for p in sn.results:
    tl, l = tags(p)
    r = {"tags": tl}
    if isinstance(l, ARP):
        r.update(kind="arp-reply" if l.op == 2 else "arp-request", src=l.psrc, dst=l.pdst)
    elif isinstance(l, IP):
        r.update(src=l.src, dst=l.dst)
        if ICMP in l:
            r.update(kind="icmp-%d" % l[ICMP].type, id=l[ICMP].id, len=l.len)
        elif TCP in l:
            r.update(kind="tcp-" + str(l[TCP].flags), dport=l[TCP].dport)
        else:
            r.update(kind="ip")
    else:
        r.update(kind="other")
    out.append(r)
print(json.dumps(out))
`

// scapyFrame is one frame the router sent, as scapyPeer reports it.
type scapyFrame struct {
	Tags []struct {
		TPID int `json:"tpid"`
		VID  int `json:"vid"`
		PCP  int `json:"pcp"`
	} `json:"tags"`
	Kind  string `json:"kind"`
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	ID    int    `json:"id"`
	Len   int    `json:"len"`
	DPort int    `json:"dport"`
}

func (f scapyFrame) tagString() string {
	s := ""
	for _, t := range f.Tags {
		s += fmt.Sprintf("[%#04x vid %d pcp %d]", t.TPID, t.VID, t.PCP)
	}
	if s == "" {
		return "untagged"
	}
	return s
}

// TestVLANInteropScapy runs the router in a namespace on one end of a veth
// pair, with 802.1Q VLANs 1 and 2, an 802.1ad QinQ interface [100, 10]
// and an untagged interface on the one port, and has scapy send
// 802.1Q-tagged ARP, ICMP echo and TCP SYN on the other end: each VLAN
// answers with its own tags and configured PCP, VID 0 (priority tagged)
// reaches the untagged interface, and VID 3 gets no answer and counts as
// vlan_unknown.
func TestVLANInteropScapy(t *testing.T) {
	requirePrivileged(t)
	fail := func(format string, args ...any) { t.Helper(); netnstest.SkipOrFail(t, format, args...) }
	if _, err := os.Stat(scapyPython); err != nil {
		fail("VLAN interop needs %s: %v", scapyPython, err)
	}
	if err := exec.Command(scapyPython, "-c", "import scapy.all").Run(); err != nil {
		fail("VLAN interop needs python3-scapy: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ns := fmt.Sprintf("gvvlan%d", os.Getpid())
	if err := addNetns(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := deleteNetns(context.Background(), ns); err != nil {
			t.Errorf("delete netns %s: %v", ns, err)
		}
	})
	const routerMAC = "02:00:00:00:bb:01"
	for _, args := range [][]string{
		{"ip", "link", "add", "rtr0", "address", routerMAC, "type", "veth", "peer", "name", "peer0"},
		{"ip", "link", "set", "rtr0", "up"},
		{"ip", "link", "set", "peer0", "mtu", "1508", "up"}, // full-size 802.1ad QinQ frames from scapy
		{"sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"},
	} {
		if err := nsRun(ctx, ns, args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := setWireLike(ns, "peer0"); err != nil {
		t.Fatal(err)
	}

	cfgPath := filepath.Join(t.TempDir(), "vlan.yaml")
	yaml := `ports:
  - name: rtr0
interfaces:
  - {name: v1, port: rtr0, vlan: 1, pcp: 5, role: lan, addresses: [192.168.1.1/24]}
  - {name: v2, port: rtr0, vlan: 2, role: wan, addresses: [203.0.113.2/24]}
  - {name: q, port: rtr0, vlan: [100, 10], vlan_protocol: 802.1ad, pcp: 3, role: lan, addresses: [10.100.10.1/24]}
  - {name: untagged, port: rtr0, role: lan, addresses: [10.0.0.1/24]}
status:
  listen: [v1:80]
firewall: {wan_input: accept}  # v2 (role wan) must answer the TCP probe too
state_dir: ` + t.TempDir() + `
`
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var r *router.Router
	if err := inNetns(ns, func() error {
		var err error
		r, err = router.New(cfg, router.Build{Version: "test"}, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})))
		return err
	}); err != nil {
		t.Fatalf("router.New: %v", err)
	}
	defer r.Close()
	// The 802.1ad QinQ interface needs 8 bytes of tags, none of which the
	// kernel allows for (it allows 4 only behind TPID 0x8100): the
	// router raised rtr0's kernel MTU by 8, so 1522-byte frames pass.
	if mtu, err := output(ctx, ns, "cat", "/sys/class/net/rtr0/mtu"); err != nil || string(mtu) != "1508\n" {
		t.Errorf("rtr0 kernel MTU while the router runs = %q (%v), want 1508", mtu, err)
	}

	out, err := output(ctx, ns, scapyPython, "-c", scapyPeer, "peer0", routerMAC)
	if err != nil {
		t.Fatalf("scapy: %v\n%s", err, out)
	}
	var frames []scapyFrame
	if err := json.Unmarshal(out, &frames); err != nil {
		t.Fatalf("scapy output %q: %v", out, err)
	}
	for _, f := range frames {
		t.Logf("router sent %s %s %s -> %s id %d dport %d", f.tagString(), f.Kind, f.Src, f.Dst, f.ID, f.DPort)
	}

	type tag struct{ tpid, vid, pcp int }
	want := []struct {
		vlan string
		addr string
		tags []tag
		id   int
	}{
		{"vid1", "192.168.1.1", []tag{{0x8100, 1, 5}}, 1},
		{"vid2", "203.0.113.2", []tag{{0x8100, 2, 0}}, 2},
		{"qinq", "10.100.10.1", []tag{{0x88a8, 100, 3}, {0x8100, 10, 3}}, 3},
		{"vid0", "10.0.0.1", nil, 4},
	}
	for _, w := range want {
		for _, kind := range []string{"arp-reply", "icmp-0", "tcp"} {
			i := slices.IndexFunc(frames, func(f scapyFrame) bool {
				switch {
				case f.Src != w.addr:
					return false
				case kind == "tcp":
					return len(f.Kind) > 4 && f.Kind[:4] == "tcp-" && f.DPort == 40000+w.id
				case kind == "icmp-0":
					return f.Kind == kind && f.ID == w.id
				}
				return f.Kind == kind
			})
			if i < 0 {
				t.Errorf("%s: no %s from %s", w.vlan, kind, w.addr)
				continue
			}
			f := frames[i]
			got := make([]tag, 0, len(f.Tags))
			for _, g := range f.Tags {
				got = append(got, tag{g.TPID, g.VID, g.PCP})
			}
			if !slices.Equal(got, w.tags) {
				t.Errorf("%s: %s from %s carried %s, want %v", w.vlan, kind, w.addr, f.tagString(), w.tags)
			}
		}
	}
	if i := slices.IndexFunc(frames, func(f scapyFrame) bool { return f.Kind == "icmp-0" && f.ID == 99 }); i < 0 {
		t.Errorf("qinq: no echo reply to a full-size (1522-byte) QinQ frame")
	} else if f := frames[i]; f.Len != 1500 || len(f.Tags) != 2 {
		t.Errorf("qinq: full-size echo reply is %d bytes of IP with %s, want 1500 with two tags", f.Len, f.tagString())
	}
	if i := slices.IndexFunc(frames, func(f scapyFrame) bool { return len(f.Tags) > 0 && f.Tags[0].VID == 3 }); i >= 0 {
		t.Errorf("router answered on VLAN 3, which has no interface: %+v", frames[i])
	}
	snap := r.Snapshot()
	var unknown uint64
	for _, p := range snap.Ports {
		unknown += p.Drops["vlan_unknown"]
	}
	// VLAN 3: the ARP request, the echo request and the SYN.
	if unknown < 3 {
		t.Errorf("port drops vlan_unknown = %d, want >= 3 (VLAN 3's frames); ports %+v", unknown, snap.Ports)
	}
	for _, ifc := range snap.Interfaces {
		if ifc.Name == "q" && (!slices.Equal(ifc.VLAN, []int{100, 10}) || ifc.VLANProtocol != "802.1ad" || ifc.PCP == nil || *ifc.PCP != 3) {
			t.Errorf("status interface q = vlan %v %q pcp %v, want [100 10] 802.1ad 3", ifc.VLAN, ifc.VLANProtocol, ifc.PCP)
		}
	}
	t.Logf("%d frames from the router; vlan_unknown = %d", len(frames), unknown)
	r.Close()
	if mtu, err := output(ctx, ns, "cat", "/sys/class/net/rtr0/mtu"); err != nil || string(mtu) != "1500\n" {
		t.Errorf("rtr0 kernel MTU after Close = %q (%v), want 1500 again", mtu, err)
	}
}
