package pppoe

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// scapyAC runs testdata/scapy_ac.py, an access concentrator made of
// scapy's PPPoED/PPPoE/PPP/PPP_LCP/PPP_CHAP/PPP_IPCP layers: the peer that
// shares no code with this package.
type scapyAC struct {
	t    *testing.T
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	errs []string
}

const systemPython = "/usr/bin/python3"

func startScapyAC(t *testing.T, args ...string) *scapyAC {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		netnstest.SkipOrFail(t, "scapy peer needs %s with python3-scapy: %v", systemPython, err)
	}
	if err := exec.Command(systemPython, "-c", "import scapy.layers.ppp").Run(); err != nil {
		netnstest.SkipOrFail(t, "python3-scapy not importable: %v", err)
	}
	cmd := exec.Command(systemPython, append([]string{"testdata/scapy_ac.py"}, args...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	sc := bufio.NewScanner(outp)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	return &scapyAC{t: t, cmd: cmd, in: in, out: sc}
}

// exchange sends one line and returns the AC's OUT frames.
func (a *scapyAC) exchange(line string) [][]byte {
	a.t.Helper()
	if _, err := io.WriteString(a.in, line+"\n"); err != nil {
		a.t.Fatalf("write to scapy AC: %v", err)
	}
	var frames [][]byte
	for a.out.Scan() {
		l := a.out.Text()
		switch {
		case l == "END":
			return frames
		case strings.HasPrefix(l, "OUT "):
			b, err := hex.DecodeString(l[4:])
			if err != nil {
				a.t.Fatalf("scapy AC: %v", err)
			}
			frames = append(frames, b)
		case strings.HasPrefix(l, "ERR "):
			a.errs = append(a.errs, l[4:])
		default:
			a.t.Fatalf("scapy AC said %q", l)
		}
	}
	a.t.Fatalf("scapy AC ended: %v", a.out.Err())
	return nil
}

type scapySummary struct {
	Checks      int  `json:"checks"`
	Authed      bool `json:"authed"`
	IPCPUp      bool `json:"ipcp_up"`
	ClientMRU   *int `json:"client_mru"`
	EchoReplies int  `json:"echo_replies"`
	DataOK      int  `json:"data_ok"`
	PADT        bool `json:"padt"`
}

func (a *scapyAC) done() scapySummary {
	a.t.Helper()
	io.WriteString(a.in, "DONE\n")
	for a.out.Scan() {
		if l, ok := strings.CutPrefix(a.out.Text(), "SUMMARY "); ok {
			var s scapySummary
			if err := json.Unmarshal([]byte(l), &s); err != nil {
				a.t.Fatal(err)
			}
			return s
		}
	}
	a.t.Fatalf("no summary from scapy AC")
	return scapySummary{}
}

func TestScapyAC(t *testing.T) {
	for _, tc := range []struct {
		auth       string
		maxPayload uint16
		wantMTU    int
	}{
		{"chap", 0, 1492},
		{"pap", 0, 1492},
		{"chap", 1500, 1500}, // RFC 4638 baby jumbo
	} {
		t.Run(fmt.Sprintf("%s/max_payload_%d", tc.auth, tc.maxPayload), func(t *testing.T) {
			runScapyAC(t, tc.auth, tc.maxPayload, tc.wantMTU)
		})
	}
}

func runScapyAC(t *testing.T, auth string, maxPayload uint16, wantMTU int) {
	ac := startScapyAC(t, auth, map[uint16]string{0: "0", 1500: "1500"}[maxPayload])
	c := &capture{}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := New(Config{Local: clientMAC, Service: "internet", Credentials: NewCredentials("bob", "pw-0f-bob"),
		MaxPayload: maxPayload, Rand: seqRand()}, c)
	if err != nil {
		t.Fatal(err)
	}
	s.Start(now)
	var icmp []byte
	for range 200 {
		fs := c.take()
		if len(fs) == 0 {
			break
		}
		for _, f := range fs {
			for _, r := range ac.exchange(hex.EncodeToString(f)) {
				if proto, pkt := s.Handle(now, r); proto == ProtoIPv4 {
					icmp = append([]byte(nil), pkt...)
				}
			}
		}
	}
	st := s.Status(now)
	if st.State != "up" {
		t.Fatalf("state %q reason %q; scapy errors %v", st.State, st.LastDownReason, ac.errs)
	}
	if st.MTU != wantMTU || st.ACName != "scapy-ac" || st.SessionID != 0x4242 {
		t.Errorf("MTU %d AC %q session %#x, want %d scapy-ac 0x4242", st.MTU, st.ACName, st.SessionID, wantMTU)
	}
	wantIPv4 := IPv4Status{Local: netip.MustParseAddr("100.64.7.9"), Peer: netip.MustParseAddr("100.64.7.1"),
		DNS: []netip.Addr{netip.MustParseAddr("192.0.2.53"), netip.MustParseAddr("192.0.2.54")}}
	if st.IPv4 == nil || st.IPv4.Local != wantIPv4.Local || st.IPv4.Peer != wantIPv4.Peer || len(st.IPv4.DNS) != 2 ||
		st.IPv4.DNS[0] != wantIPv4.DNS[0] || st.IPv4.DNS[1] != wantIPv4.DNS[1] {
		t.Errorf("IPv4 = %+v, want %+v", st.IPv4, wantIPv4)
	}
	// Answer scapy's ICMP echo through Link.Encap; scapy parses it.
	if len(icmp) < 28 || icmp[9] != 1 || icmp[20] != 8 {
		t.Fatalf("no ICMP echo request from scapy came out of Handle: %x; scapy errors %v; counters %v", icmp, ac.errs, st.Counters)
	}
	l, up := s.Link()
	if !up {
		t.Fatal("Link not up")
	}
	buf := make([]byte, l.HeaderLen()+len(icmp))
	copy(buf[l.HeaderLen():], icmp)
	reply := buf[l.HeaderLen():]
	copy(reply[12:16], icmp[16:20])
	copy(reply[16:20], icmp[12:16])
	reply[20] = 0 // echo reply
	binary.BigEndian.PutUint16(reply[22:], 0)
	binary.BigEndian.PutUint16(reply[22:], checksum(reply[20:]))
	frame, ok := l.Encap(buf, l.HeaderLen(), ProtoIPv4)
	if !ok {
		t.Fatal("Encap failed")
	}
	if fs := ac.exchange("DATA " + hex.EncodeToString(frame)); len(fs) != 0 {
		t.Errorf("unexpected frames %x", fs)
	}
	s.Stop(now)
	for _, f := range c.take() {
		ac.exchange(hex.EncodeToString(f))
	}
	sum := ac.done()
	for _, e := range ac.errs {
		t.Errorf("scapy AC: %s", e)
	}
	if !sum.Authed || !sum.IPCPUp || sum.EchoReplies != 1 || sum.DataOK != 1 || !sum.PADT || sum.Checks < 20 {
		t.Errorf("scapy summary %+v", sum)
	}
	if maxPayload != 0 && (sum.ClientMRU == nil || *sum.ClientMRU != 1500) {
		t.Errorf("client MRU request %v, want 1500 (RFC 4638)", sum.ClientMRU)
	}
	if maxPayload == 0 && sum.ClientMRU != nil && *sum.ClientMRU > DefaultMRU {
		t.Errorf("client MRU request %d without RFC 4638", *sum.ClientMRU)
	}
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}
