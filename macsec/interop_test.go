package macsec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// scapyPeer is an independent MACsec implementation: scapy's
// scapy.contrib.macsec (Debian python3-scapy, GCM via python3-cryptography).
// It reads a JSON list of operations on stdin and writes results on stdout;
// no network is involved.
const scapyPeer = `
import sys, json
from scapy.layers.l2 import Ether
from scapy.contrib.macsec import MACsecSA
from scapy.compat import raw

out = []
for c in json.load(sys.stdin):
    kw = dict(sci=int(c["sci"], 16), an=c["an"], pn=c["pn"], key=bytes.fromhex(c["key"]),
              icvlen=16, encrypt=1 if c["encrypt"] else 0, send_sci=1)
    if c["xpn"]:
        kw.update(xpn_en=True, ssci=c["ssci"], salt=bytes.fromhex(c["salt"]))
    sa = MACsecSA(**kw)
    try:
        if c["op"] == "decrypt":
            back = sa.decap(sa.decrypt(Ether(bytes.fromhex(c["wire"]))))
            out.append({"ok": True, "data": raw(back).hex()})
        else:
            wire = raw(sa.encrypt(sa.encap(Ether(bytes.fromhex(c["plain"])))))
            out.append({"ok": True, "data": wire.hex()})
    except Exception as e:
        out.append({"ok": False, "data": type(e).__name__})
json.dump(out, sys.stdout)
`

type scapyOp struct {
	Op      string `json:"op"`
	SCI     string `json:"sci"`
	AN      uint8  `json:"an"`
	PN      uint64 `json:"pn"`
	Key     string `json:"key"`
	Encrypt bool   `json:"encrypt"`
	XPN     bool   `json:"xpn"`
	SSCI    uint32 `json:"ssci"`
	Salt    string `json:"salt"`
	Wire    string `json:"wire,omitempty"`
	Plain   string `json:"plain,omitempty"`
}

type scapyResult struct {
	OK   bool   `json:"ok"`
	Data string `json:"data"`
}

const python = "/usr/bin/python3"

// needScapy skips (or, under CI=true, fails) when the peer is missing.
func needScapy(t *testing.T) {
	t.Helper()
	err := exec.Command(python, "-c", "import scapy.contrib.macsec, cryptography").Run()
	if err == nil {
		return
	}
	netnstest.SkipOrFail(t, "%s with scapy not available (apt-get install python3-scapy): %v", python, err)
}

func runScapy(t *testing.T, ops []scapyOp) []scapyResult {
	t.Helper()
	in, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", scapyPeer)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scapy peer: %v\n%s", err, stderr.String())
	}
	var res []scapyResult
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(ops) {
		t.Fatalf("scapy peer output %q: %v", out, err)
	}
	return res
}

// TestScapyInterop exchanges frames with scapy for all four suites,
// encryption on and off: scapy must verify/decrypt what Protect produced,
// and Verify must accept what scapy produced.
func TestScapyInterop(t *testing.T) {
	needScapy(t)
	goroutineLeakCheck(t)
	const sci SCI = 0x5254001301560001
	sizes := []int{14 + 2, 60, 64, 100, 1514 - 32}
	for _, cs := range allSuites {
		for _, enc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/encrypt=%v", cs, enc), func(t *testing.T) {
				start := uint64(7)
				if cs.XPN() {
					start = 0x2_fffffffe // crosses a 2^32 boundary
				}
				key := testKey(cs)
				sa := SAConfig{AN: 1, PN: start, Key: key, SSCI: testSSCI, Salt: testSalt}
				op := scapyOp{SCI: sci.String(), AN: 1, Key: hex.EncodeToString(key.bytes()), Encrypt: enc,
					XPN: cs.XPN(), SSCI: testSSCI, Salt: hex.EncodeToString(testSalt[:])}
				var plains [][]byte
				for i, n := range sizes {
					plains = append(plains, testFrame(n, uint32(i)))
				}

				// Go -> scapy.
				var out sink
				cfg := testConfig(cs, enc, out.handler, out.handler)
				cfg.SCI = sci
				s, err := New(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.InstallTXSA(sa); err != nil {
					t.Fatal(err)
				}
				if err := s.SetEncodingSA(1); err != nil {
					t.Fatal(err)
				}
				s.Protect(plains)
				s.Close()
				wires := out.get()
				if len(wires) != len(plains) {
					t.Fatalf("Protect sent %d frames, want %d", len(wires), len(plains))
				}
				var ops []scapyOp
				for i, w := range wires {
					o := op
					o.Op, o.PN, o.Wire = "decrypt", start+uint64(i), hex.EncodeToString(w)
					ops = append(ops, o)
				}
				// A tampered frame proves that scapy really checks the ICV.
				bad := append([]byte(nil), wires[1]...)
				bad[len(bad)-20] ^= 1
				o := op
				o.Op, o.PN, o.Wire = "decrypt", start+1, hex.EncodeToString(bad)
				ops = append(ops, o)
				// scapy -> Go.
				for i, p := range plains {
					o := op
					o.Op, o.PN, o.Plain = "encrypt", start+uint64(i), hex.EncodeToString(p)
					ops = append(ops, o)
				}
				res := runScapy(t, ops)
				for i, p := range plains {
					if !res[i].OK || res[i].Data != hex.EncodeToString(p) {
						t.Errorf("scapy decrypt of our frame %d (PN %#x) = %+v, want %x", i, start+uint64(i), res[i], p)
					}
				}
				if r := res[len(plains)]; r.OK {
					t.Errorf("scapy accepted a tampered frame")
				}

				var in sink
				rcfg := testConfig(cs, false, in.handler, in.handler)
				rcfg.ReplayProtect = true
				r, err := New(rcfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.AddRXSC(sci); err != nil {
					t.Fatal(err)
				}
				if err := r.InstallRXSA(sci, sa); err != nil {
					t.Fatal(err)
				}
				var frames [][]byte
				for _, x := range res[len(plains)+1:] {
					if !x.OK {
						t.Fatalf("scapy encrypt: %s", x.Data)
					}
					frames = append(frames, mustHex(t, x.Data))
				}
				r.Verify(frames)
				r.Close()
				got := in.get()
				if len(got) != len(plains) {
					t.Fatalf("Verify accepted %d scapy frames, want %d (NotValid %d, BadTag %d)", len(got), len(plains),
						r.RXSCStats(sci).InPktsNotValid.Load(), r.Stats().InPktsBadTag.Load())
				}
				for i := range got {
					if !bytes.Equal(got[i], plains[i]) {
						t.Errorf("scapy frame %d: Verify delivered %x, want %x", i, got[i], plains[i])
					}
				}
				if strings.Contains(fmt.Sprint(r.Config()), hex.EncodeToString(key.bytes())) {
					t.Errorf("key visible in Config() output")
				}
			})
		}
	}
}
