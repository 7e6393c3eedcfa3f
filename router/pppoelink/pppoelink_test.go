package pppoelink

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/pppoe"
	"github.com/gvrouter/gvrouter/stack"
)

const systemPython = "/usr/bin/python3"

// acLower is a Lower whose far end is pppoe/testdata/scapy_ac.py, an
// access concentrator made of scapy's PPPoE and PPP layers (no code
// shared with package pppoe). One goroutine (routinePump) feeds it the
// frames the link writes and hands its answers to the link's taps, as
// the receive path would.
type acLower struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
	// lines carries the AC's input in order: frames (hex) and commands.
	lines   chan string
	mu      sync.Mutex
	taps    map[uint16]stack.Tap
	errs    []string
	summary string // the AC's SUMMARY line after DONE
	done    chan struct{}
	// echoReplies counts the client's LCP Echo-Replies written to the
	// AC (queued in lines, so in order before any later command).
	echoReplies atomic.Int32
}

func startAC(t *testing.T) *acLower {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		netnstest.SkipOrFail(t, "scapy peer needs %s with python3-scapy: %v", systemPython, err)
	}
	if err := exec.Command(systemPython, "-c", "import scapy.layers.ppp").Run(); err != nil {
		netnstest.SkipOrFail(t, "python3-scapy not importable: %v", err)
	}
	cmd := exec.Command(systemPython, "../../pppoe/testdata/scapy_ac.py", "chap", "0")
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
	sc := bufio.NewScanner(outp)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	a := &acLower{t: t, in: in, out: sc, lines: make(chan string, 1024),
		taps: make(map[uint16]stack.Tap), done: make(chan struct{})}
	go a.routinePump()
	t.Cleanup(func() { close(a.lines); <-a.done; in.Close(); cmd.Wait() })
	return a
}

func (a *acLower) AddTap(m stack.TapMatch, t stack.Tap) (func(), error) {
	if m != stack.MatchEtherType(m.EtherType) || m.EtherType != pppoe.EtherTypeDiscovery && m.EtherType != pppoe.EtherTypeSession {
		return nil, errors.New("want a PPPoE EtherType match")
	}
	a.mu.Lock()
	a.taps[m.EtherType] = t
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		delete(a.taps, m.EtherType)
		a.mu.Unlock()
	}, nil
}

func (a *acLower) WriteFrame(frame []byte) error {
	select {
	case a.lines <- hex.EncodeToString(frame):
	default:
		a.t.Error("AC side queue full: a frame loop?")
	}
	// Ethernet, PPPoE session (0x8864), 6-byte PPPoE header, PPP LCP
	// (0xc021), code Echo-Reply (10).
	if len(frame) > 22 && frame[12] == 0x88 && frame[13] == 0x64 && frame[20] == 0xc0 && frame[21] == 0x21 && frame[22] == 10 {
		a.echoReplies.Add(1)
	}
	return nil
}

// command sends a command line (PADT, DONE) to the AC in turn with the
// frames.
func (a *acLower) command(c string) { a.lines <- c }

func (a *acLower) routinePump() {
	defer close(a.done)
	for {
		line, ok := <-a.lines
		if !ok {
			return
		}
		if _, err := io.WriteString(a.in, line+"\n"); err != nil {
			a.t.Errorf("write to scapy AC: %v", err)
			return
		}
		for a.out.Scan() {
			l := a.out.Text()
			if l == "END" {
				break
			}
			if s, ok := strings.CutPrefix(l, "SUMMARY "); ok {
				a.mu.Lock()
				a.summary = s
				a.mu.Unlock()
				break
			}
			if e, ok := strings.CutPrefix(l, "ERR "); ok {
				a.mu.Lock()
				a.errs = append(a.errs, e)
				a.mu.Unlock()
				continue
			}
			h, ok := strings.CutPrefix(l, "OUT ")
			b, err := hex.DecodeString(h)
			if !ok || err != nil || len(b) < 14 {
				a.t.Errorf("scapy AC said %q", l)
				continue
			}
			a.mu.Lock()
			tap := a.taps[binary.BigEndian.Uint16(b[12:])]
			a.mu.Unlock()
			if tap != nil {
				tap.Deliver(b)
			}
		}
	}
}

type acSummary struct {
	Authed      bool `json:"authed"`
	IPCPUp      bool `json:"ipcp_up"`
	EchoReplies int  `json:"echo_replies"`
	DataOK      int  `json:"data_ok"`
	PADT        bool `json:"padt"`
	PADIs       int  `json:"padis"`
	PADTsSent   int  `json:"padts_sent"`
}

func (a *acLower) finish() acSummary {
	a.t.Helper()
	a.command("DONE")
	var sum acSummary
	waitFor(a.t, "the AC's summary", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.summary != ""
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := json.Unmarshal([]byte(a.summary), &sum); err != nil {
		a.t.Fatal(err)
	}
	for _, e := range a.errs {
		a.t.Errorf("scapy AC: %s", e)
	}
	return sum
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestLinkWithScapyAC: the link's goroutine, taps and WriteFrame carry a
// CHAP session with scapy's AC up to IPCP; the AC's first IP packet
// reaches Deliver; OnChange reports the address and DNS servers; a PADT
// from the AC brings one reconnect after the backoff, with one new PADI
// and not a loop of them; Close sends a PADT and removes the taps.
func TestLinkWithScapyAC(t *testing.T) {
	ac := startAC(t)
	var (
		mu      sync.Mutex
		changes []pppoe.Status
		packets [][]byte
	)
	l, err := Start(Config{
		Name: "wan",
		Session: pppoe.Config{Local: [6]byte{0x02, 0, 0, 0, 0, 0x01}, Service: "internet",
			Credentials: pppoe.NewCredentials("bob", "pw-0f-bob"), MinBackoff: 50 * time.Millisecond},
		OnChange: func(st pppoe.Status) { mu.Lock(); changes = append(changes, st); mu.Unlock() },
		Deliver: func(proto uint16, p []byte) {
			if proto == pppoe.ProtoIPv4 {
				mu.Lock()
				packets = append(packets, append([]byte(nil), p...))
				mu.Unlock()
			}
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Bind(ac); err != nil {
		t.Fatal(err)
	}
	up := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			ups := 0
			for _, c := range changes {
				if c.State == "up" && c.IPv4 != nil {
					ups++
				}
			}
			return ups >= n
		}
	}
	waitFor(t, "the session up", up(1))
	st := l.Status()
	wantDNS := []netip.Addr{netip.MustParseAddr("192.0.2.53"), netip.MustParseAddr("192.0.2.54")}
	if st.State != "up" || st.SessionID != 0x4242 || st.ACName != "scapy-ac" || st.MTU != 1492 || st.IPv4 == nil ||
		st.IPv4.Local != netip.MustParseAddr("100.64.7.9") || len(st.IPv4.DNS) != 2 || st.IPv4.DNS[0] != wantDNS[0] || st.IPv4.DNS[1] != wantDNS[1] {
		t.Fatalf("status = %+v", st)
	}
	waitFor(t, "the AC's ICMP echo at Deliver", func() bool { mu.Lock(); defer mu.Unlock(); return len(packets) > 0 })
	mu.Lock()
	p := packets[0]
	mu.Unlock()
	if len(p) < 28 || p[9] != 1 || netip.AddrFrom4([4]byte(p[12:16])) != netip.MustParseAddr("100.64.7.1") || p[20] != 8 {
		t.Errorf("delivered packet %x, want scapy's ICMP echo request from 100.64.7.1", p)
	}

	// The client's answer to the AC's LCP echo request, sent beside the
	// ICMP echo, must reach the AC before the PADT ends that session (a
	// CI run: the reply came after it, to an AC that had forgotten the
	// session's magic number).
	waitFor(t, "the client's LCP Echo-Reply at the AC", func() bool { return ac.echoReplies.Load() >= 1 })
	ac.command("PADT")
	waitFor(t, "the session up again after the AC's PADT", up(2))
	st = l.Status()
	if st.Reconnects != 1 || !strings.Contains(st.LastDownReason, "PADT") {
		t.Errorf("after PADT: reconnects %d reason %q, want 1 and the PADT", st.Reconnects, st.LastDownReason)
	}
	// No tight loop: the session stays up, with no further PADI.
	time.Sleep(300 * time.Millisecond)
	waitFor(t, "the client's second LCP Echo-Reply at the AC", func() bool { return ac.echoReplies.Load() >= 2 })
	l.Close()
	if c := l.Status().Counters; c["link_rx_queue_full"] != 0 || c["link_tx_error"] != 0 || c["link_no_deliver"] != 0 || c["padi_tx"]-c["link_no_lower"] != 2 || c["reconnects"] != 1 {
		t.Errorf("counters %v: want 2 PADIs sent (beside one Start may send before Bind, counted as link_no_lower), 1 reconnect, no link drops", c)
	}
	ac.mu.Lock()
	taps := len(ac.taps)
	ac.mu.Unlock()
	if taps != 0 {
		t.Errorf("%d taps left after Close", taps)
	}
	sum := ac.finish()
	if !sum.Authed || !sum.IPCPUp || sum.EchoReplies != 2 || !sum.PADT || sum.PADTsSent != 1 || sum.PADIs != 2 {
		t.Errorf("AC summary %+v: want authed, IPCP up, 2 echo replies (one per session), the client's PADT at Close, 2 PADIs", sum)
	}
}
