package ra

import (
	"context"
	"encoding/json"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// abuseResult is what testdata/abuse.py prints.
type abuseResult struct {
	BadRAs       int       `json:"bad_ras"`
	BadRSs       int       `json:"bad_rss"`
	FloodSent    int       `json:"flood_sent"`
	FloodSeconds float64   `json:"flood_seconds"`
	RAsSeen      []float64 `json:"ras_seen"`
	Answered     bool      `json:"answered"`
}

// floodSize is how many RSs scapy floods: about a second of its sending.
const floodSize = 2000

// TestInteropScapy has scapy, on a peer whose kernel has IPv6 off (so
// that only scapy speaks), send a Learner and an Advertiser sharing one
// link bad input: RAs with hop limit 64, an option of length 0, cut to
// 10 octets, a wrong checksum, a global source, code 1, and RSs with hop
// limit 64, an option of length 0, cut to 6 octets, a wrong checksum,
// from :: with SLLA, code 1. Each is counted under its reason, and none
// changes what the valid RA before them taught the Learner (each bad RA
// has router lifetime 0, which would remove the router). Then it floods
// valid RSs: every one is counted, scapy sees no more RAs than one per
// 3 s, and an RS after the flood is still answered.
func TestInteropScapy(t *testing.T) {
	t.Parallel()
	netnstest.Privileged(t, "ip", "sysctl", "/usr/bin/python3")
	if out, err := exec.Command("/usr/bin/python3", "-c", "import scapy.layers.inet6").CombinedOutput(); err != nil {
		netnstest.SkipOrFail(t, "scapy: %v: %s", err, out)
	}
	n := newTwoNS(t, "raa", "disable_ipv6=1")
	l, err := NewLearner(LearnerConfig{Link: n.link})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Link: n.link, SrcAddr: n.ourLL, Prefixes: []Prefix{{Prefix: netip.MustParsePrefix("2001:db8:6::/64")}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n.link.run(ctx, l.Deliver, a.Deliver)
	ldone, adone := make(chan error, 1), make(chan error, 1)
	go func() { ldone <- l.Run(ctx) }()
	go func() { adone <- a.Run(ctx) }()

	script, err := filepath.Abs("testdata/abuse.py")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := exec.Command("ip", "netns", "exec", n.peer.Name(), "/usr/bin/python3", script, n.peerIf, n.ourMAC, strconv.Itoa(floodSize)).Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("abuse.py: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("abuse.py (%v): %s", time.Since(start).Round(time.Millisecond), out)
	var res abuseResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("abuse.py printed %q: %v", out, err)
	}
	cancel()
	for _, c := range []chan error{ldone, adone} {
		if err := <-c; err != nil {
			t.Errorf("Run = %v", err)
		}
	}

	ls, as := l.Stats(), a.Stats()
	for r, want := range map[DropReason]uint64{
		DropHopLimit: 1, DropOptionLengthZero: 1, DropMalformed: 1, DropChecksum: 1, DropSourceNotLinkLocal: 1, DropCode: 1,
	} {
		if got := ls.Drops[r].Load(); got != want {
			t.Errorf("Learner drops[%s] = %d, want %d (all: %v)", r, got, want, dropMap(ls.Drops[:]))
		}
	}
	for r, want := range map[DropReason]uint64{
		DropHopLimit: 1, DropOptionLengthZero: 1, DropMalformed: 1, DropChecksum: 1, DropUnspecifiedWithSLLA: 1, DropCode: 1,
	} {
		if got := as.Drops[r].Load(); got != want {
			t.Errorf("Advertiser drops[%s] = %d, want %d (all: %v)", r, got, want, dropMap(as.Drops[:]))
		}
	}
	st := l.State()
	if ls.Received.Load() != 1 || len(st.Routers) != 1 || st.Routers[0].Addr != netip.MustParseAddr("fe80::bad") ||
		st.Routers[0].MAC.String() != n.peerMAC || len(st.Prefixes) != 1 || st.MTU != 1500 {
		t.Errorf("Learner received %d, state %v; want only the valid RA's router fe80::bad (%s), its prefix and MTU",
			ls.Received.Load(), st, n.peerMAC)
	}
	if got, want := as.RSReceived.Load(), uint64(res.FloodSent+1); got != want {
		t.Errorf("rs_received = %d, want the flood's %d and the last RS", got, want)
	}
	if got := as.SolicitedSent.Load() + as.RSCoalesced.Load(); got != as.RSReceived.Load() {
		t.Errorf("solicited_sent + rs_coalesced = %d, want rs_received %d", got, as.RSReceived.Load())
	}
	// The flood and the 4 s after it: one RA every 3 s, plus one the
	// schedule had already made (the initial ones are 16 s apart).
	if max := int((res.FloodSeconds+4)/3) + 2; len(res.RAsSeen) > max || len(res.RAsSeen) == 0 {
		t.Errorf("scapy saw %d RAs (at %v s) during a %.2f s flood and 4 s after; want 1 to %d", len(res.RAsSeen), res.RAsSeen, res.FloodSeconds, max)
	}
	for i := 1; i < len(res.RAsSeen); i++ {
		if res.RAsSeen[i]-res.RAsSeen[i-1] < 2.9 {
			t.Errorf("RAs at %v s and %v s: under 3 s apart", res.RAsSeen[i-1], res.RAsSeen[i])
		}
	}
	if !res.Answered {
		t.Error("the RS after the flood got no RA")
	}
	t.Logf("advertiser: rs %d solicited %d coalesced %d sent %d; learner: received %d drops %v",
		as.RSReceived.Load(), as.SolicitedSent.Load(), as.RSCoalesced.Load(), as.Sent.Load(), ls.Received.Load(), dropMap(ls.Drops[:]))
}
