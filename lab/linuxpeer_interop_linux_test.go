package lab_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/linuxpeer"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/router/config"
)

// startRouter runs the router with yamlText in namespace ns (the peer's,
// so that it can open the tap) until t ends.
func startRouter(t *testing.T, ns *netnstest.Netns, yamlText string, opts ...router.Option) *router.Router {
	t.Helper()
	cfg, err := config.Parse("linuxpeer.yaml", []byte(yamlText+"state_dir: "+t.TempDir()+"\n"))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, yamlText)
	}
	var r *router.Router
	ns.Do(t, func() {
		r, err = router.New(cfg, router.Build{Version: "test"}, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})), opts...)
	})
	if err != nil {
		t.Fatalf("router.New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// hostBehind makes a host namespace (deleted when t ends) on a veth pair
// whose other end, lph0, is left in ns for the router (hostPort): the
// host has 10.78.0.10/24 and 10.78.0.20/24 and reaches 10.77.0.0/16
// through the router's 10.78.0.1.
func hostBehind(t *testing.T, ns *netnstest.Netns) *netnstest.Netns {
	t.Helper()
	host := netnstest.New(t, "lph", netnstest.WithoutIPv6())
	ns.IP(t, "link", "add", "lph0", "type", "veth", "peer", "name", "lph1", "netns", host.Name())
	ns.IP(t, "link", "set", "lph0", "up")
	host.IP(t, "link", "set", "lph1", "up")
	host.IP(t, "addr", "add", "10.78.0.10/24", "dev", "lph1")
	host.IP(t, "addr", "add", "10.78.0.20/24", "dev", "lph1")
	host.IP(t, "route", "add", "10.77.0.0/16", "via", "10.78.0.1")
	// Wire-like, as the lab's hosts: without TSO/GSO the host sends no
	// frames over the MTU (the router drops those as oversize).
	var err error
	host.Do(t, func() { err = hw.SetOffloads("lph1", hw.Offloads{RxCsum: true}) })
	if err != nil {
		t.Fatalf("offloads of lph1: %v", err)
	}
	return host
}

// hostPort is the router's config for hostBehind's port.
const hostPort = "  - name: lph0\n"

// hostInterface is the router's interface on hostBehind's port.
const hostInterface = "  - {name: hostlan, port: lph0, role: lan, addresses: [10.78.0.1/24]}\n"

// iperfRE reads the received rate from iperf3 -J's end summary.
var iperfRE = regexp.MustCompile(`"sum_received":\s*{[^}]*"bits_per_second":\s*([0-9.e+]+)`)

// iperfRetrRE reads the sender's retransmits from iperf3 -J's end summary.
var iperfRetrRE = regexp.MustCompile(`"sum_sent":\s*{[^}]*"retransmits":\s*(\d+)`)

// guestRXRE reads the guest's RX SA counters from ip -s macsec show.
var guestRXRE = regexp.MustCompile(`stats: InPktsOK InPktsInvalid InPktsNotValid InPktsNotUsingSA InPktsUnusedSA\s+(\d+)\s+(\d+)\s+(\d+)`)

// pingRE reads busybox ping's summary.
var pingRE = regexp.MustCompile(`(\d+) packets transmitted, (\d+) packets received`)

// pingFromGuest pings addr from the guest count times and fails t unless
// every echo is answered.
func pingFromGuest(t *testing.T, ctx context.Context, p *linuxpeer.Peer, addr string, args ...string) {
	t.Helper()
	line := fmt.Sprintf("ping -c 3 -W 2 %s %s", strings.Join(args, " "), addr)
	out, err := p.Run(ctx, line, 20*time.Second)
	m := pingRE.FindStringSubmatch(out)
	if err != nil || m == nil || m[1] != m[2] {
		t.Fatalf("guest: %s: %v\n%s", line, err, out)
	}
}

// TestStaticMACsecAgainstLinux runs the router's static-key SecY against
// the guest kernel's macsec (an independent 802.1AE implementation) on
// the tap: the guest pings the router's SecY address, with 1400-byte
// echoes too, and sends 2 MiB by TCP to the router's discard sink; then
// iperf3 runs for 3 s each way between a host behind a second router
// port and the guest, forwarded through the SecY. Both sides' counters
// must show the frames validated and none rejected.
func TestStaticMACsecAgainstLinux(t *testing.T) {
	netnstest.Privileged(t, "iperf3")
	for _, tc := range []struct {
		cipher  string
		encrypt string
	}{
		{"gcm-aes-128", "on"},
		{"gcm-aes-xpn-256", "on"},
	} {
		t.Run(tc.cipher, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const (
				salt      = "e630e81a48de86a21c66fa6d"
				routerSCI = "0200007700010001" // linuxpeer.HostMAC + port 1
			)
			p, ns := linuxpeer.StartT(t, ctx, "macsec", map[string]string{
				"CIPHER": tc.cipher, "ENCRYPT": tc.encrypt, "SALT": salt, "ADDR": "10.77.0.2/24",
				"MACSEC_OPTS": "replay on window 0",
				"GUEST_CMD":   "iperf3 -s -D && ip route add 10.78.0.0/24 via 10.77.0.1",
			})
			host := hostBehind(t, ns)
			xpnRouter, xpnGuest := "", ""
			if strings.Contains(tc.cipher, "xpn") {
				// The guest sends with SSCI 2 and receives the router's with 1.
				xpnRouter, xpnGuest = ", ssci: 1, salt: "+salt, ", ssci: 2, salt: "+salt
			}
			r := startRouter(t, ns, fmt.Sprintf(`ports:
  - name: %s
`+hostPort+`interfaces:
  - {name: link, port: %s, role: lan}
`+hostInterface+`macsec:
  - name: ms1
    on: link
    sci: %s
    cipher: %s
    encrypt: %s
    replay: on
    window: 0
    tx: [{an: 0, pn: 1, key_id: "02", key: %s%s}]
    rx: [{sci: %s, sa: [{an: 0, pn: 1, key_id: "01", key: %s%s}]}]
    addresses: [10.77.0.1/24]
    pn_store: %s
`, p.Tap, p.Tap, routerSCI, tc.cipher, tc.encrypt, p.Env["RXKEY"], xpnRouter, p.Env["SCI"], p.Env["TXKEY"], xpnGuest, t.TempDir()))
			if err := r.ServeDiscard(netip.MustParseAddrPort("10.77.0.1:9")); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			pingFromGuest(t, ctx, p, "10.77.0.1")
			pingFromGuest(t, ctx, p, "10.77.0.1", "-s", "1400")
			const n = 2 << 20
			p.MustRun(t, ctx, fmt.Sprintf("head -c %d /dev/zero | nc -w 5 10.77.0.1 9", n), 40*time.Second)
			t.Logf("ping and %d bytes by TCP crossed in %v", n, time.Since(t0).Round(100*time.Millisecond))
			// iperf3 from the host behind the router to the guest's
			// iperf3 -s, forwarded through the SecY, each direction.
			for _, dir := range [][]string{nil, {"-R"}} {
				args := append([]string{"netns", "exec", host.Name(), "iperf3", "-c", "10.77.0.2", "-t", "3", "-J"}, dir...)
				var out []byte
				var err error
				var bps [][]byte
				// The guest's iperf3 -s takes a moment to listen again
				// after a test; it refuses connections until then.
				for try := 0; try < 5; try++ {
					out, err = exec.CommandContext(ctx, "ip", args...).CombinedOutput()
					if bps = iperfRE.FindSubmatch(out); bps != nil || !bytes.Contains(out, []byte("Connection refused")) {
						break
					}
					time.Sleep(time.Second)
				}
				if err != nil || bps == nil {
					t.Fatalf("iperf3 %v through the router to the guest: %v\n%s", dir, err, out)
				}
				retr := iperfRetrRE.FindSubmatch(out)
				if retr == nil {
					retr = [][]byte{nil, []byte("?")}
				}
				t.Logf("iperf3 %v host→router→MACsec→guest: %s bit/s received, %s retransmits", dir, bps[1], retr[1])
			}
			ms := p.MustRun(t, ctx, "ip -s macsec show macsec0", 10*time.Second)
			snap := r.Snapshot()
			if len(snap.MACsec) != 1 {
				t.Fatalf("status has %d SecYs, want 1", len(snap.MACsec))
			}
			m := snap.MACsec[0]
			var ok, bad uint64
			for _, sc := range m.RXSC {
				ok += sc.Counters["InPktsOK"]
				for _, c := range []string{"InPktsNotValid", "InPktsInvalid", "InPktsLate", "InPktsNoSA", "InPktsNotUsingSA", "InPktsUnchecked", "InPktsDelayed"} {
					bad += sc.Counters[c]
				}
			}
			// 2 MiB in segments of at most 1446 bytes is over 1400 frames.
			if ok < 1400 || bad != 0 {
				t.Errorf("router RX SCs: InPktsOK %d (want >= 1400), rejected %d (want 0): %+v", ok, bad, m.RXSC)
			}
			if out := m.TXSC["OutPktsProtected"] + m.TXSC["OutPktsEncrypted"]; out < 6 {
				t.Errorf("router OutPktsProtected+Encrypted = %d, want >= 6", out)
			}
			// The guest's RX SA: the router's echo replies and TCP ACKs.
			g := guestRXRE.FindStringSubmatch(ms)
			if g == nil {
				t.Fatalf("no RX SA statistics in the guest's ip -s macsec show:\n%s", ms)
			}
			if gok, _ := strconv.Atoi(g[1]); gok < 6 || g[2] != "0" || g[3] != "0" {
				t.Errorf("guest RX SA: InPktsOK %s (want >= 6), InPktsInvalid %s, InPktsNotValid %s (want 0)", g[1], g[2], g[3])
			}
			for _, port := range snap.Ports {
				t.Logf("router port %s: mtu %d, rx %d, tx %d packets, drops %v", port.Name, port.MTU, port.RxPackets, port.TxPackets, port.Drops)
			}
			t.Logf("router InPktsOK %d, guest InPktsOK %s; guest:\n%s", ok, g[1], ms)
		})
	}
}

// TestVLANAgainstLinux runs the router's VLAN interfaces 10 and 20 on the
// tap against the guest kernel's 8021q. On each VLAN the guest pings the
// router and sends 64 KiB by TCP to the router's discard sink; and a host
// (a kernel namespace) on a third, untagged router port pings the guest's
// address on each VLAN through the router, so that frames the router
// originates onto each VLAN (ARP, forwarded echoes) reach the guest and
// its replies come back.
func TestVLANAgainstLinux(t *testing.T) {
	netnstest.Privileged(t, "ping")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, ns := linuxpeer.StartT(t, ctx, "vlan", map[string]string{"VLANS": "10:10.77.10.2/24 20:10.77.20.2/24"})
	host := hostBehind(t, ns)
	r := startRouter(t, ns, fmt.Sprintf(`ports:
  - name: %s
`+hostPort+`interfaces:
  - {name: v10, port: %s, vlan: 10, role: lan, addresses: [10.77.10.1/24]}
  - {name: v20, port: %s, vlan: 20, role: lan, addresses: [10.77.20.1/24]}
`+hostInterface, p.Tap, p.Tap, p.Tap))
	for _, vid := range []int{10, 20} {
		a := "10.77." + strconv.Itoa(vid) + ".1"
		pingFromGuest(t, ctx, p, a)
		if err := r.ServeDiscard(netip.MustParseAddrPort(a + ":9")); err != nil {
			t.Fatal(err)
		}
		p.MustRun(t, ctx, "head -c 65536 /dev/zero | nc -w 5 "+a+" 9", 20*time.Second)
		// The guest answers host address 10.78.0.<vid> on VLAN vid only.
		p.MustRun(t, ctx, fmt.Sprintf("ip route add 10.78.0.%d/32 via %s", vid, a), 10*time.Second)
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", host.Name(),
			"ping", "-c", "3", "-W", "2", "-I", fmt.Sprintf("10.78.0.%d", vid), fmt.Sprintf("10.77.%d.2", vid)).CombinedOutput()
		if m := linuxPingRE.FindSubmatch(out); err != nil || m == nil || string(m[1]) != string(m[2]) {
			t.Errorf("host ping of the guest on VLAN %d through the router: %v\n%s", vid, err, out)
		}
	}
	st := p.MustRun(t, ctx, "cat /proc/net/vlan/eth0.10 /proc/net/vlan/eth0.20", 10*time.Second)
	t.Logf("guest VLAN statistics:\n%s", st)
}

// linuxPingRE reads iputils ping's summary.
var linuxPingRE = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)
