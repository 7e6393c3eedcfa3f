package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
)

// scapyMKAPeer is the independent MKA peer of TestMACsecMKANegative: an
// MKPDU encoder written from IEEE 802.1X-2020 (11.11 MKPDU format, 9.3.3
// ICK = KDF(CAK, "IEEE8021 ICK", first 16 octets of the CKN), 6.2.1 KDF
// with AES-CMAC from python3-cryptography), not from our Go code. It
// writes its frames octet by octet to an AF_PACKET socket rather than
// through scapy's layers, so malformed ones go out exactly as built. It reads
// one command a line on stdin and answers one JSON line on stdout:
//
//	valid N     N well-formed MKPDUs from MI 1, listing the router (MI, MN)
//	            in the Potential Peer List once one of its MKPDUs was seen
//	wrongcak N  N MKPDUs from another SCI and MI with an ICV from a wrong CAK
//	replay      the MKPDUs of the first "valid" again (old MNs)
//	bad NAME    one malformed MKPDU (names in the bad table)
//	unknown     one well-formed MKPDU carrying an unknown parameter set type
//
// It also checks the ICV of every MKPDU the router sends with its own ICK
// (router → scapy) and reports the router's MI and MN.
const scapyMKAPeer = `
import json, os, socket, sys, threading
from cryptography.hazmat.primitives.cmac import CMAC
from cryptography.hazmat.primitives.ciphers import algorithms
iface, rmac = sys.argv[1], bytes.fromhex(sys.argv[2].replace(":", ""))
cak, badcak, ckn = bytes.fromhex(sys.argv[3]), bytes.fromhex(sys.argv[4]), bytes.fromhex(sys.argv[5])
me = bytes.fromhex("020000aa0001")
pae = bytes.fromhex("0180c2000003")
sci1, sci2 = int.from_bytes(me, "big") << 16 | 1, int.from_bytes(me, "big") << 16 | 2
mi1, mi2 = os.urandom(12), os.urandom(12)

def cmac(k, m):
    c = CMAC(algorithms.AES(k))
    c.update(m)
    return c.finalize()

# 802.1X-2020 6.2.1: PRF = AES-CMAC; each block i is
# PRF(Key, i || Label || 0x00 || Context || L), i one octet, L two.
def kdf(k, label, ctx, bits):
    out, i = b"", 1
    while len(out) * 8 < bits:
        out += cmac(k, bytes([i]) + label + b"\x00" + ctx + bits.to_bytes(2, "big"))
        i += 1
    return out[:bits // 8]

def ick(k):
    return kdf(k, b"IEEE8021 ICK", ckn[:16], len(k) * 8)

ick_good, ick_bad = ick(cak), ick(badcak)

def pset(b1, b2, body, b3hi=0, length=None):
    n = len(body) if length is None else length
    return bytes([b1, b2, (b3hi & 0xf0) | (n >> 8 & 0x0f), n & 0xff]) + body + b"\x00" * (-len(body) % 4)

# Basic Parameter Set (11.11.1): MKA version, key server priority,
# KS/desired/capability (3 = integrity and confidentiality with any
# offset), body length, SCI, MI, MN, algorithm agility, CKN.
def basic(mi, mn, sci, ver=1, length=None, body_cut=None):
    body = sci.to_bytes(8, "big") + mi + mn.to_bytes(4, "big") + bytes.fromhex("0080c201") + ckn
    if body_cut is not None:
        body = body[:body_cut]
    return pset(ver, 255, body, 0x40 | 0x30, length)

def peerlist(typ, entries, length=None):
    return pset(typ, 0, b"".join(m + n.to_bytes(4, "big") for m, n in entries), 0, length)

def mkpdu(params, key=None, ver=3, eapol_len=None, extra=b""):
    n = len(params) + 16 if eapol_len is None else eapol_len
    m = pae + me + b"\x88\x8e" + bytes([ver, 5]) + n.to_bytes(2, "big") + params
    return m + cmac(key or ick_good, m) + extra

sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x888e))
sock.bind((iface, 0x888e))
lock = threading.Lock()
router = {"mi": None, "mn": 0, "verified": 0, "bad_icv": 0}

def rx():
    while True:
        f = sock.recv(2048)
        if len(f) < 46 or f[6:12] != rmac or f[12:14] != b"\x88\x8e" or f[15] != 5:
            continue
        n = int.from_bytes(f[16:18], "big")
        body = f[18:18 + n]
        ok = len(body) == n and cmac(ick_good, f[:18 + n - 16]) == body[-16:]
        with lock:
            if ok:
                router["verified"] += 1
                router["mi"], router["mn"] = body[12:24], int.from_bytes(body[24:28], "big")
            else:
                router["bad_icv"] += 1

threading.Thread(target=rx, daemon=True).start()
mn = {"1": 0, "2": 0}
first = []

def nextmn(k):
    mn[k] += 1
    return mn[k]

def listing():
    with lock:
        if router["mi"] is None:
            return b""
        return peerlist(2, [(router["mi"], router["mn"])])

def send(f):
    sock.send(f)

def good():
    return basic(mi1, nextmn("1"), sci1) + listing()

# Each bad frame keeps a valid ICV over what it carries where that is
# possible, so that only its framing is wrong.
def bad(name):
    b = basic(mi1, nextmn("1"), sci1)
    if name == "eapol-len-long":
        return mkpdu(b, eapol_len=len(b) + 16 + 40)
    if name == "eapol-len-short":
        return mkpdu(b, eapol_len=20)
    if name == "eapol-len-no-icv":
        return mkpdu(b, eapol_len=len(b))
    if name == "pset-past-end":
        return mkpdu(b + peerlist(2, [(os.urandom(12), 1)], length=16 * 8))
    if name == "pset-header-cut":
        return mkpdu(b + bytes([2, 0]))
    if name == "peerlist-not-16":
        return mkpdu(b + pset(1, 0, os.urandom(20)))
    if name == "unknown-pset-past-end":
        return mkpdu(b + pset(0x7e, 0, b"\x00" * 4, 0, length=200))
    if name == "basic-truncated":
        return mkpdu(basic(mi1, nextmn("1"), sci1, body_cut=20))
    if name == "basic-len-past-end":
        return mkpdu(basic(mi1, nextmn("1"), sci1, length=60))
    if name == "basic-mka-version-0":
        return mkpdu(basic(mi1, nextmn("1"), sci1, ver=0))
    if name == "duplicate-pset":
        return mkpdu(b + peerlist(2, [(os.urandom(12), 1)]) + peerlist(2, [(os.urandom(12), 1)]))
    if name == "eapol-version-0":
        return mkpdu(b, ver=0)
    if name == "eapol-version-1":
        return mkpdu(b, ver=1)
    if name == "eapol-version-2":
        return mkpdu(b, ver=2)
    if name == "eapol-header-only":
        return pae + me + b"\x88\x8e" + bytes([3, 5, 0, 0])
    raise ValueError(name)

for line in sys.stdin:
    cmd = line.split()
    if not cmd:
        continue
    out = {}
    if cmd[0] == "valid":
        for _ in range(int(cmd[1])):
            f = mkpdu(good())
            if len(first) < 3:
                first.append(f)
            send(f)
    elif cmd[0] == "wrongcak":
        for _ in range(int(cmd[1])):
            send(mkpdu(basic(mi2, nextmn("2"), sci2) + listing(), key=ick_bad))
    elif cmd[0] == "replay":
        for f in first:
            send(f)
        out["sent"] = len(first)
    elif cmd[0] == "bad":
        send(bad(cmd[1]))
    elif cmd[0] == "unknown":
        send(mkpdu(basic(mi1, nextmn("1"), sci1) + pset(0x7e, 0, b"gvrouter") + listing()))
    with lock:
        out.update(mi1=mi1.hex(), mi2=mi2.hex(), mn1=mn["1"], router_mi=router["mi"].hex() if router["mi"] else "",
                   router_mn=router["mn"], verified=router["verified"], bad_icv=router["bad_icv"])
    print(json.dumps(out), flush=True)
`

// scapyMKAReply is a line of scapyMKAPeer's output.
type scapyMKAReply struct {
	MI1      string `json:"mi1"`
	MI2      string `json:"mi2"`
	MN1      uint32 `json:"mn1"`
	RouterMI string `json:"router_mi"`
	RouterMN uint32 `json:"router_mn"`
	Verified int    `json:"verified"`
	BadICV   int    `json:"bad_icv"`
	Sent     int    `json:"sent"`
}

// scapyMKA drives a running scapyMKAPeer.
type scapyMKA struct {
	in  io.Writer
	out *bufio.Scanner
}

func (s *scapyMKA) do(cmd string) (scapyMKAReply, error) {
	var r scapyMKAReply
	if _, err := fmt.Fprintln(s.in, cmd); err != nil {
		return r, fmt.Errorf("scapy %q: %w", cmd, err)
	}
	if !s.out.Scan() {
		return r, fmt.Errorf("scapy %q: no answer: %v", cmd, s.out.Err())
	}
	if err := json.Unmarshal(s.out.Bytes(), &r); err != nil {
		return r, fmt.Errorf("scapy %q: %q: %w", cmd, s.out.Bytes(), err)
	}
	return r, nil
}

// mkaPeersOf returns the MIs in a peer list.
func mkaPeersOf(ps []status.MKAPeer) map[string]status.MKAPeer {
	out := map[string]status.MKAPeer{}
	for _, p := range ps {
		out[p.MI] = p
	}
	return out
}

// TestMACsecMKANegative runs one router whose SecY is keyed by MKA on a
// veth whose other end is scapyMKAPeer, an MKPDU encoder written from the
// standard (IEEE 802.1X-2020 clause 11) in Python. Its well-formed MKPDUs
// are accepted and make it a live peer, and it verifies the router's ICVs:
// the two encoders agree. MKPDUs with an ICV from a wrong CAK are counted
// as invalid ICV and make no peer; replayed MKPDUs are counted and change
// no peer; malformed lengths and parameter sets are counted as drops, and
// the router still answers MKPDUs and serves its status page afterwards.
func TestMACsecMKANegative(t *testing.T) {
	requirePrivileged(t)
	requireScapy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	ns := fmt.Sprintf("gvmkn%d", os.Getpid())
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
		{"ip", "link", "set", "lo", "up"},
		{"sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"},
	} {
		if err := nsRun(ctx, ns, args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := setWireLike(ns, "peer0"); err != nil {
		t.Fatal(err)
	}
	// A 16-octet CKN: the ICK's KDF context is the first 16 octets of
	// the CKN, so none of it is padding whose convention could differ.
	const (
		ckn    = "6d6b612d6e656761746976652d6c6162" // "mka-negative-lab"
		cak    = "0123456789abcdef0123456789abcdef"
		badCAK = "0123456789abcdef0123456789abcdee"
	)
	dir := t.TempDir()
	cakFile := filepath.Join(dir, "cak")
	if err := os.WriteFile(cakFile, []byte(cak+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	yaml := fmt.Sprintf(`ports:
  - name: rtr0
interfaces:
  - {name: link, port: rtr0, role: wan}
macsec:
  - name: ms1
    on: link
    sci: 02000000bb010001
    cipher: gcm-aes-128
    encrypt: on
    replay: on
    window: 0
    mka: {ckn: %s, cak_file: %s, priority: 0}
    addresses: [10.9.0.1/24]
    pn_store: %s
status:
  listen: [127.0.0.1:%d]
state_dir: %s
`, ckn, cakFile, filepath.Join(dir, "pn"), port, filepath.Join(dir, "state"))
	cfg, err := config.Parse("mkaneg.yaml", []byte(yaml))
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

	cmd := command(ctx, ns, scapyPython, "-u", "-c", scapyMKAPeer, "peer0", routerMAC, cak, badCAK, ckn)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("scapy: %v: %s", err, stderr.String())
		}
	}()
	sc := &scapyMKA{in: stdin, out: bufio.NewScanner(stdout)}

	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/api/status"
	get := func() (*status.MACsecMKA, error) {
		b, err := httpGet(ctx, ns, url)
		if err != nil {
			return nil, err
		}
		var s status.Snapshot
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, err
		}
		if len(s.MACsec) != 1 || s.MACsec[0].MKA == nil {
			return nil, fmt.Errorf("status has %d SecYs, want 1 with mka", len(s.MACsec))
		}
		return s.MACsec[0].MKA, nil
	}
	// wait polls the status page until want holds (counters are read
	// when the page is built, but frames cross a queue first).
	wait := func(what string, want func(*status.MACsecMKA) bool) *status.MACsecMKA {
		t.Helper()
		var m *status.MACsecMKA
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			m, err = get()
			if err == nil && want(m) {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5 s: mka %+v, %v, scapy stderr %s", what, m, err, stderr.String())
			}
		}
	}
	do := func(c string) scapyMKAReply {
		t.Helper()
		rep, err := sc.do(c)
		if err != nil {
			t.Fatalf("%v: %s", err, stderr.String())
		}
		return rep
	}

	// (1) Scapy hears the router's MKPDUs (the router sends one every
	// hello time), checks their ICV, then sends well-formed MKPDUs that
	// list the router: scapy is then a live peer.
	var rep scapyMKAReply
	for deadline := time.Now().Add(6 * time.Second); rep.RouterMI == ""; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("scapy saw no router MKPDU with a valid ICV in 6 s: %+v, %s", rep, stderr.String())
		}
		rep, err = sc.do("noop")
		if err != nil {
			t.Fatal(err)
		}
	}
	m0 := wait("status", func(*status.MACsecMKA) bool { return true })
	if rep.RouterMI != m0.MI {
		t.Fatalf("scapy read router MI %s from the router's MKPDUs, status says %s", rep.RouterMI, m0.MI)
	}
	rep = do("valid 3")
	m1 := wait("scapy a live peer", func(m *status.MACsecMKA) bool {
		_, live := mkaPeersOf(m.Live)[rep.MI1]
		return live && m.Counters["mkpdus_accepted"] >= m0.Counters["mkpdus_accepted"]+3
	})
	if p := mkaPeersOf(m1.Live)[rep.MI1]; p.MN != rep.MN1 || p.SCI != "020000aa00010001" {
		t.Errorf("live peer %+v, want scapy's MN %d, SCI 020000aa00010001", p, rep.MN1)
	}
	if d := m1.Counters["invalid_icv"] + m1.Counters["malformed"] + m1.Counters["replayed"]; d != 0 {
		t.Errorf("well-formed MKPDUs: %d counted invalid ICV, malformed or replayed, want 0: %v", d, m1.Counters)
	}
	if rep.BadICV != 0 || rep.Verified == 0 {
		t.Errorf("scapy verified %d router MKPDUs with its own ICK, %d did not verify, want > 0 and 0", rep.Verified, rep.BadICV)
	}
	t.Logf("(1) scapy MI %s live at the router (MN %d); scapy verified %d router MKPDUs", rep.MI1, rep.MN1, rep.Verified)

	// (3) Replays of scapy's first MKPDUs (MN 1..3, not above the last
	// accepted) are counted and change no peer.
	rep = do("replay")
	m3 := wait("replays counted", func(m *status.MACsecMKA) bool {
		return m.Counters["replayed"] >= m1.Counters["replayed"]+uint64(rep.Sent)
	})
	if got := m3.Counters["replayed"] - m1.Counters["replayed"]; got != uint64(rep.Sent) || rep.Sent != 3 {
		t.Errorf("%d replays sent, %d counted", rep.Sent, got)
	}
	if m3.Counters["mkpdus_accepted"] != m1.Counters["mkpdus_accepted"] {
		t.Errorf("replays accepted: mkpdus_accepted %d → %d", m1.Counters["mkpdus_accepted"], m3.Counters["mkpdus_accepted"])
	}
	if b, a := fmt.Sprint(m1.Live, m1.Potential), fmt.Sprint(m3.Live, m3.Potential); a != b {
		t.Errorf("replays changed the peers: before %s, after %s", b, a)
	}
	t.Logf("(3) %d replays counted, peers unchanged: %v", rep.Sent, m3.Live)

	// (2) A wrong CAK: counted invalid ICV, no peer of that MI.
	rep = do("wrongcak 3")
	m2 := wait("invalid ICVs counted", func(m *status.MACsecMKA) bool {
		return m.Counters["invalid_icv"] >= m3.Counters["invalid_icv"]+3
	})
	if _, ok := mkaPeersOf(append(m2.Live, m2.Potential...))[rep.MI2]; ok {
		t.Errorf("wrong-CAK MI %s is a peer: live %v potential %v", rep.MI2, m2.Live, m2.Potential)
	}
	if len(m2.Live) != 1 || m2.Counters["mkpdus_accepted"] != m3.Counters["mkpdus_accepted"] {
		t.Errorf("wrong CAK: live %v (want scapy's good MI only), accepted %d → %d", m2.Live, m3.Counters["mkpdus_accepted"], m2.Counters["mkpdus_accepted"])
	}
	t.Logf("(2) wrong CAK: invalid_icv %d → %d, no peer %s", m3.Counters["invalid_icv"], m2.Counters["invalid_icv"], rep.MI2)

	// (4) Malformed lengths and parameter sets, one at a time: each is
	// received, none accepted, each counted as malformed (or, where the
	// lengths still parse, as an invalid ICV).
	prev := m2
	for _, name := range []string{
		"eapol-len-long", "eapol-len-short", "eapol-len-no-icv", "eapol-header-only",
		"pset-past-end", "pset-header-cut", "peerlist-not-16", "unknown-pset-past-end",
		"basic-truncated", "basic-len-past-end", "basic-mka-version-0", "duplicate-pset",
		"eapol-version-0", "eapol-version-1", "eapol-version-2",
	} {
		do("bad " + name)
		m := wait(name+" received", func(m *status.MACsecMKA) bool {
			return m.Counters["mkpdus_received"] > prev.Counters["mkpdus_received"] &&
				m.Counters["malformed"]+m.Counters["invalid_icv"]+m.Counters["mkpdus_accepted"] >
					prev.Counters["malformed"]+prev.Counters["invalid_icv"]+prev.Counters["mkpdus_accepted"]
		})
		dm, di := m.Counters["malformed"]-prev.Counters["malformed"], m.Counters["invalid_icv"]-prev.Counters["invalid_icv"]
		if da := m.Counters["mkpdus_accepted"] - prev.Counters["mkpdus_accepted"]; da != 0 || dm+di != 1 {
			t.Errorf("%s: accepted +%d, malformed +%d, invalid_icv +%d; want one drop, none accepted", name, da, dm, di)
		} else {
			t.Logf("(4) %s: malformed +%d, invalid_icv +%d", name, dm, di)
		}
		prev = m
	}

	// An unknown parameter set type with a consistent length is skipped,
	// as 802.1X-2020 11.11.3 says receivers do: the MKPDU is accepted.
	do("unknown")
	m4 := wait("unknown parameter set type accepted", func(m *status.MACsecMKA) bool {
		return m.Counters["mkpdus_accepted"] > prev.Counters["mkpdus_accepted"]
	})

	// Still alive: scapy's next well-formed MKPDUs are accepted, the
	// router still sends MKPDUs scapy verifies, the page still answers.
	before := do("valid 2")
	m5 := wait("accepts well-formed MKPDUs after the abuse", func(m *status.MACsecMKA) bool {
		p, live := mkaPeersOf(m.Live)[before.MI1]
		return live && p.MN == before.MN1 && m.Counters["mkpdus_accepted"] >= m4.Counters["mkpdus_accepted"]+2
	})
	deadline := time.Now().Add(5 * time.Second)
	for after := before; after.Verified <= before.Verified; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("router sent no MKPDU scapy verified after the malformed ones: %+v", after)
		}
		after = do("noop")
		if after.BadICV != 0 {
			t.Errorf("scapy: %d router MKPDUs did not verify", after.BadICV)
		}
	}
	t.Logf("after: counters %v", m5.Counters)
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
