package lab_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/linuxpeer"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/router/status"
)

// TestRouterMKAAgainstWPASupplicant keys the router's SecY by MKA alone
// (macsec[].mka, the router's own participant in router/mkalink) against
// Debian's wpa_supplicant 2.10 and the guest kernel's macsec, GCM-AES-128
// with encryption, once with either side as key server (set by
// priority). The link comes up (both see the other as a live peer, both
// kernels hold the SAK), the guest pings the router's SecY address, and
// TCP (iperf3 from a host behind the router to the guest, forwarded
// through the SecY) runs; with the router as key server and rekey: 5s,
// the SAK rolls at least twice during a 14 s iperf3 run and no second of
// it stalls. With wpa_supplicant as key server the rekey is its own: the
// router's first transmit SA starts 3000 frames short of the PN
// exhaustion threshold, wpa_supplicant sees the lowest PN the router
// reports pass it ("Peer LPN exhaustion") and distributes a new SAK during the
// iperf3 run, which the router takes and rolls to without a stalled
// second.
func TestRouterMKAAgainstWPASupplicant(t *testing.T) {
	netnstest.Privileged(t, "iperf3")
	for _, tc := range []struct {
		name                    string
		routerPrio, guestPrio   int
		routerKeyServer         bool
		rekey                   string
		iperfSeconds, wantRolls int
		firstTXPN               uint64 // the router's first transmit SA starts here, not at 1
	}{
		{name: "router-key-server", routerPrio: 16, guestPrio: 255, routerKeyServer: true, rekey: "5s", iperfSeconds: 14, wantRolls: 2},
		{name: "wpa-supplicant-key-server", routerPrio: 200, guestPrio: 16, iperfSeconds: 10, wantRolls: 1, firstTXPN: mka.PNExhaustion - 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			const (
				cakHex    = "4a1f9e3c77d20b5e8c61f0a29d3b7c14"
				cknHex    = "6c707220726f75746572" // "lpr router"
				routerSCI = "0200007700010001"     // linuxpeer.HostMAC + port 1
			)
			p, ns := linuxpeer.StartT(t, ctx, "mka", map[string]string{
				"MKA_CAK": cakHex, "MKA_CKN": cknHex, "MKA_PRIORITY": fmt.Sprint(tc.guestPrio), "ADDR": "10.77.0.2/24",
				"GUEST_CMD": "iperf3 -s -D",
			})
			host := hostBehind(t, ns)
			cakFile := filepath.Join(t.TempDir(), "cak")
			if err := os.WriteFile(cakFile, []byte(cakHex+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			rekey := ""
			if tc.rekey != "" {
				rekey = ", rekey: " + tc.rekey
			}
			var opts []router.Option
			if tc.firstTXPN != 0 {
				opts = append(opts, router.WithMKASecY(func(s router.MKASecY) router.MKASecY { return &firstTXPN{MKASecY: s, pn: tc.firstTXPN} }))
			}
			r := startRouter(t, ns, fmt.Sprintf(`ports:
  - name: %s
`+hostPort+`interfaces:
  - {name: link, port: %s, role: lan}
`+hostInterface+`macsec:
  - name: ms1
    on: link
    sci: %s
    cipher: gcm-aes-128
    encrypt: on
    mka: {ckn: %s, cak_file: %s, priority: %d%s}
    addresses: [10.77.0.1/24]
    pn_store: %s
`, p.Tap, p.Tap, routerSCI, cknHex, cakFile, tc.routerPrio, rekey, t.TempDir()), opts...)

			// Up by MKA: a live peer, the right key server, a SAK in use.
			var m *status.MACsecMKA
			deadline := time.Now().Add(45 * time.Second)
			for {
				m = routerMKA(t, r)
				if m != nil && len(m.Live) == 1 && m.KeyServer == tc.routerKeyServer && m.KeyServerSCI != "" &&
					m.Latest != nil && m.Latest.TX && m.Latest.RX {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("router MKA after 45 s: %+v", m)
				}
				time.Sleep(200 * time.Millisecond)
			}
			t.Logf("router MKA: key server %v (%s), live peer %s MI %s, SAK KN %d AN %d",
				m.KeyServer, m.KeyServerSCI, m.Live[0].SCI, m.Live[0].MI, m.Latest.KN, m.Latest.AN)
			if _, err := p.WaitConsole(ctx, regexp.MustCompile(`(?m)^LPEER MACSEC-IF (\S+)`), 30*time.Second); err != nil {
				t.Fatalf("guest made no SecY: %v", err)
			}
			// The host behind the router, reached over the SecY that
			// wpa_supplicant made only now.
			p.MustRun(t, ctx, "ip route add 10.78.0.0/24 via 10.77.0.1", 10*time.Second)
			// The guest's kernel may get its SAs a moment after the
			// router: ping until it answers, then require 3 of 3.
			deadline = time.Now().Add(30 * time.Second)
			for {
				out, err := p.Run(ctx, "ping -c 1 -W 1 10.77.0.1", 10*time.Second)
				if m := pingRE.FindStringSubmatch(out); err == nil && m != nil && m[2] == "1" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("guest cannot ping the router's SecY address over the MKA link:\n%s\n%s",
						out, p.MustRun(t, ctx, "ip macsec show", 10*time.Second))
				}
				time.Sleep(500 * time.Millisecond)
			}
			pingFromGuest(t, ctx, p, "10.77.0.1")
			rolls0 := routerMKA(t, r).Counters["sak_rolls"]

			// TCP across the SecY, through rolls where the router keys.
			res := iperfToGuest(t, ctx, host, tc.iperfSeconds)
			stalled := 0
			for _, iv := range res.Intervals {
				if iv.Sum.Bytes == 0 {
					stalled++
				}
			}
			after := routerMKA(t, r)
			rolls := after.Counters["sak_rolls"] - rolls0
			t.Logf("iperf3 %d s host→router→MKA SecY→guest: %.1f Mbit/s, %d retransmits, %d of %d seconds without data; %d SAK rolls meanwhile (now KN %d AN %d)",
				tc.iperfSeconds, res.End.SumReceived.BitsPerSecond/1e6, res.End.SumSent.Retransmits, stalled, len(res.Intervals), rolls, after.Latest.KN, after.Latest.AN)
			if stalled > 0 || res.End.SumReceived.BitsPerSecond == 0 {
				t.Errorf("TCP stalled for %d one-second intervals over the MKA link", stalled)
			}
			if rolls < uint64(tc.wantRolls) {
				t.Errorf("%d SAK rolls during iperf3, want at least %d", rolls, tc.wantRolls)
			}
			if tc.wantRolls > 0 && len(after.Live) != 1 {
				t.Errorf("after the rolls the router has %d live peers, want wpa_supplicant still live", len(after.Live))
			}
			if tc.firstTXPN != 0 {
				// The rekey was wpa_supplicant's: it says why, and the
				// router's latest SAK is a later one of the same key server.
				con := p.Console()
				gen := len(sakGenAnyRE.FindAllString(con, -1))
				exhausted := lpnExhaustionRE.FindAllString(con, -1)
				t.Logf("wpa_supplicant generated %d SAKs; logged %q", gen, exhausted)
				if gen < 2 || len(exhausted) == 0 {
					t.Errorf("wpa_supplicant generated %d SAKs and logged %q, want a second SAK on PN exhaustion", gen, exhausted)
				}
				if after.Latest == nil || after.Latest.KN < 2 || after.Latest.KeyServerMI != m.Latest.KeyServerMI {
					t.Errorf("router's latest SAK after wpa_supplicant's rekey: %+v (first was %+v), want KN >= 2 from the same key server", after.Latest, m.Latest)
				}
			}
			snap := r.Snapshot()
			for _, sc := range snap.MACsec[0].RXSC {
				t.Logf("router RX SC %s: %v", sc.SCI, sc.Counters)
			}
			t.Logf("router MKA counters: %v\nguest:\n%s", after.Counters, p.MustRun(t, ctx, "ip -s macsec show", 10*time.Second))
		})
	}
}

// guestIperf is what iperfToGuest reads of iperf3 -J.
type guestIperf struct {
	Intervals []struct {
		Sum struct {
			Bytes uint64 `json:"bytes"`
		} `json:"sum"`
	} `json:"intervals"`
	End struct {
		SumReceived struct {
			Bytes         uint64  `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		SumSent struct {
			Retransmits int `json:"retransmits"`
		} `json:"sum_sent"`
	} `json:"end"`
}

// iperfToGuest runs iperf3 for seconds from host through the router to
// the guest's iperf3 server (10.77.0.2), retrying the connection a few
// times while the guest's SAs settle.
func iperfToGuest(t *testing.T, ctx context.Context, host *netnstest.Netns, seconds int) guestIperf {
	t.Helper()
	args := []string{"netns", "exec", host.Name(), "iperf3", "-c", "10.77.0.2", "-t", fmt.Sprint(seconds), "--connect-timeout", "5000", "-J"}
	var out []byte
	var err error
	for try := 0; try < 5; try++ {
		out, err = exec.CommandContext(ctx, "ip", args...).CombinedOutput()
		if err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Fatalf("iperf3 through the router to the guest: %v\n%s", err, out)
	}
	var res guestIperf
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("iperf3 -J: %v\n%s", err, out)
	}
	return res
}

// firstTXPN starts the first transmit SA the participant installs at pn
// instead of 1 (router.WithMKASecY).
type firstTXPN struct {
	router.MKASecY
	pn   uint64
	done atomic.Bool
}

// InstallTXSA implements mka.SecY.
func (s *firstTXPN) InstallTXSA(c macsec.SAConfig) error {
	if s.done.CompareAndSwap(false, true) {
		c.PN = s.pn
	}
	return s.MKASecY.InstallTXSA(c)
}

// lpnExhaustionRE matches wpa_supplicant's reason for a rekey on PN
// exhaustion: the lowest PN its peer reports in SAK Use ("Peer"), or that
// of its own receive SA ("My"), passed the threshold.
var lpnExhaustionRE = regexp.MustCompile(`KaY: (My|Peer) LPN exhaustion`)

// sakGenAnyRE matches each SAK wpa_supplicant generated as key server.
var sakGenAnyRE = regexp.MustCompile(`KaY: generated new SAK`)

// routerMKA returns the router's one SecY's MKA status, nil before it has
// one.
func routerMKA(t *testing.T, r *router.Router) *status.MACsecMKA {
	t.Helper()
	snap := r.Snapshot()
	if len(snap.MACsec) != 1 {
		t.Fatalf("status has %d SecYs, want 1", len(snap.MACsec))
	}
	return snap.MACsec[0].MKA
}
