package lab

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/router/config"
)

// scapyMACsecPeer is the independent MACsec peer of TestMACsecInteropScapy
// (scapy.contrib.macsec, GCM from python3-cryptography). It sends
// protected ARP and ICMP echo requests to the router's SecY address,
// verifies and decrypts every MACsec frame the router sends with the
// router's key, answers the router's protected ARP requests, and prints
// what it got as JSON.
const scapyMACsecPeer = `
import json, sys, time
from scapy.all import ARP, AsyncSniffer, Ether, ICMP, IP, conf, sendp
from scapy.contrib.macsec import MACsecSA, MACsec
conf.verb = 0
iface, rmac, cipher, enc = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "on"
ktx, krx = bytes.fromhex(sys.argv[5]), bytes.fromhex(sys.argv[6])
psci, rsci = int(sys.argv[7], 16), int(sys.argv[8], 16)
xpn = "xpn" in cipher
salt = bytes.fromhex(sys.argv[9])
me, mine, rip = "02:00:00:00:aa:01", "10.9.0.2", "10.9.0.1"
tx = MACsecSA(sci=psci, an=0, pn=1, key=ktx, icvlen=16, encrypt=enc, send_sci=1,
              xpn_en=xpn, ssci=1 if xpn else None, salt=salt if xpn else None)
rx = MACsecSA(sci=rsci, an=0, pn=1, key=krx, icvlen=16, encrypt=enc, send_sci=1,
              xpn_en=xpn, ssci=2 if xpn else None, salt=salt if xpn else None)

def send(p):
    f = tx.encrypt(tx.encap(p))
    tx.pn += 1
    sendp(f, iface=iface)

out = {"frames": [], "bad": 0, "clear": 0, "errors": []}
def handle(p):
    if p.src != rmac:
        return
    if p.type != 0x88e5:
        out["clear"] += 1
        return
    try:
        d = rx.decap(rx.decrypt(p))
    except Exception as e:
        out["bad"] += 1
        out["errors"].append(repr(e))
        return
    r = {"E": int(p[MACsec].E), "pn": p[MACsec].PN}
    if ARP in d:
        a = d[ARP]
        r.update(kind="arp-%d" % a.op, src=a.psrc, dst=a.pdst)
        if a.op == 1 and a.pdst == mine:
            send(Ether(dst=rmac, src=me) / ARP(op=2, hwsrc=me, psrc=mine, hwdst=a.hwsrc, pdst=a.psrc))
    elif IP in d:
        r.update(src=d[IP].src, dst=d[IP].dst, len=d[IP].len)
        if ICMP in d:
            r.update(kind="icmp-%d" % d[ICMP].type, id=d[ICMP].id, seq=d[ICMP].seq)
        else:
            r.update(kind="ip")
    else:
        r.update(kind="other")
    out["frames"].append(r)

sn = AsyncSniffer(iface=iface, store=False, prn=handle)
sn.start()
time.sleep(0.5)
send(Ether(dst="ff:ff:ff:ff:ff:ff", src=me) / ARP(op=1, hwsrc=me, psrc=mine, pdst=rip))
time.sleep(0.3)
for seq in range(1, 4):
    send(Ether(dst=rmac, src=me) / IP(src=mine, dst=rip) / ICMP(id=0x77, seq=seq) / b"gvrouter macsec")
    time.sleep(0.2)
send(Ether(dst=rmac, src=me) / IP(src=mine, dst=rip) / ICMP(id=0x77, seq=9) / (b"x" * 1400))
time.sleep(1.0)
sn.stop()
print(json.dumps(out))
`

type scapyMACsecResult struct {
	Frames []struct {
		E    int    `json:"E"`
		PN   uint64 `json:"pn"`
		Kind string `json:"kind"`
		Src  string `json:"src"`
		ID   int    `json:"id"`
		Seq  int    `json:"seq"`
		Len  int    `json:"len"`
	} `json:"frames"`
	Bad    int      `json:"bad"`
	Clear  int      `json:"clear"`
	Errors []string `json:"errors"`
}

// requireScapy ends t unless Debian's python3 with python3-scapy is there.
func requireScapy(t *testing.T) {
	t.Helper()
	fail := func(format string, args ...any) { t.Helper(); netnstest.SkipOrFail(t, format, args...) }
	if _, err := os.Stat(scapyPython); err != nil {
		fail("needs %s: %v", scapyPython, err)
	}
	if err := exec.Command(scapyPython, "-c", "import scapy.all, scapy.contrib.macsec").Run(); err != nil {
		fail("needs python3-scapy with scapy.contrib.macsec: %v", err)
	}
}

// TestMACsecInteropScapy runs the router with a SecY on one end of a veth
// pair and scapy's independent 802.1AE implementation on the other, for
// each of the four cipher suites with encryption on and off: scapy's
// protected ARP and echo requests are verified by the router (scapy →
// router), and the router's protected echo replies, answered by its
// netstack, are verified and decrypted by scapy (router → scapy).
func TestMACsecInteropScapy(t *testing.T) {
	requirePrivileged(t)
	requireScapy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("gvmsi%d", os.Getpid())
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
		{"ip", "link", "set", "peer0", "up"},
		{"sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"},
	} {
		if err := nsRun(ctx, ns, args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := setWireLike(ns, "peer0"); err != nil {
		t.Fatal(err)
	}
	const (
		peerSCI   = "02000000aa010001"
		routerSCI = "02000000bb010001"
		salt      = "e630e81a48de86a21c66fa6d"
	)
	for _, cipher := range []string{"gcm-aes-128", "gcm-aes-256", "gcm-aes-xpn-128", "gcm-aes-xpn-256"} {
		for _, encrypt := range []string{"on", "off"} {
			t.Run(cipher+"/encrypt-"+encrypt, func(t *testing.T) {
				n := 16
				if strings.HasSuffix(cipher, "256") {
					n = 32
				}
				kPeer, kRouter := make([]byte, n), make([]byte, n)
				for i := range n {
					kPeer[i], kRouter[i] = byte(i), byte(0xa0+i)
				}
				xpn := ""
				xpnPeer := ""
				if strings.Contains(cipher, "xpn") {
					xpn = ", ssci: 2, salt: " + salt
					xpnPeer = ", ssci: 1, salt: " + salt
				}
				yaml := fmt.Sprintf(`ports:
  - name: rtr0
interfaces:
  - {name: link, port: rtr0, role: wan}
macsec:
  - name: ms1
    on: link
    sci: %s
    cipher: %s
    encrypt: %s
    replay: on
    window: 0
    tx: [{an: 0, pn: 1, key_id: "01", key: %x%s}]
    rx: [{sci: %s, sa: [{an: 0, pn: 1, key_id: "02", key: %x%s}]}]
    addresses: [10.9.0.1/24]
    pn_store: %s
`, routerSCI, cipher, encrypt, kRouter, xpn, peerSCI, kPeer, xpnPeer, t.TempDir())
				cfg, err := config.Parse("interop.yaml", []byte(yaml+"state_dir: "+t.TempDir()+"\n"))
				if err != nil {
					t.Fatal(err)
				}
				var r *router.Router
				if err := inNetns(ns, func() error {
					var err error
					r, err = router.New(cfg, router.Build{Version: "test"}, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
					return err
				}); err != nil {
					t.Fatalf("router.New: %v", err)
				}
				defer r.Close()
				out, err := output(ctx, ns, scapyPython, "-c", scapyMACsecPeer, "peer0", routerMAC, cipher, encrypt,
					hex.EncodeToString(kPeer), hex.EncodeToString(kRouter), peerSCI, routerSCI, salt)
				if err != nil {
					t.Fatalf("scapy: %v\n%s", err, out)
				}
				var res scapyMACsecResult
				if err := json.Unmarshal(out, &res); err != nil {
					t.Fatalf("scapy output %q: %v", out, err)
				}
				if res.Bad > 0 {
					t.Errorf("scapy could not verify %d MACsec frames from the router: %v", res.Bad, res.Errors)
				}
				var replies, arp int
				wantE := map[string]int{"on": 1, "off": 0}[encrypt]
				for _, f := range res.Frames {
					if f.E != wantE {
						t.Errorf("router frame %+v has E=%d, want %d", f, f.E, wantE)
					}
					switch {
					case f.Kind == "icmp-0" && f.ID == 0x77 && f.Src == "10.9.0.1":
						replies++
					case f.Kind == "arp-2" && f.Src == "10.9.0.1":
						arp++
					}
				}
				if replies < 4 || arp < 1 {
					t.Errorf("scapy verified %d echo replies (want 4, one of 1428 bytes) and %d ARP replies (want >= 1) from the router: %+v", replies, arp, res.Frames)
				}
				snap := r.Snapshot()
				if len(snap.MACsec) != 1 {
					t.Fatalf("status has %d SecYs, want 1", len(snap.MACsec))
				}
				m := snap.MACsec[0]
				var ok, notValid, late uint64
				for _, sc := range m.RXSC {
					ok += sc.Counters["InPktsOK"]
					notValid += sc.Counters["InPktsNotValid"]
					late += sc.Counters["InPktsLate"]
				}
				out2 := m.TXSC["OutPktsProtected"] + m.TXSC["OutPktsEncrypted"]
				if ok < 5 || notValid != 0 || late != 0 || out2 < 5 {
					t.Errorf("router counters: InPktsOK %d (want >= 5), InPktsNotValid %d, InPktsLate %d (want 0), protected out %d (want >= 5)", ok, notValid, late, out2)
				}
				t.Logf("%s encrypt %s: scapy verified %d frames from the router (%d echo replies), router InPktsOK %d, %d frames in clear", cipher, encrypt, len(res.Frames), replies, ok, res.Clear)
			})
		}
	}
}
