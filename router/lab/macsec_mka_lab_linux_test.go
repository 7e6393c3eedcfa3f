package lab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/router/status"
)

// mkaSettle bounds how long the lab waits for MKA to agree a SAK after
// both routers run: a few hellos (2 s each) and the SAK Use handshake.
const mkaSettle = 15 * time.Second

// waitSecY polls router ns's SecY until want holds or d passes.
func waitSecY(ctx context.Context, ns string, d time.Duration, what string, want func(status.MACsec) bool) (status.MACsec, error) {
	var m status.MACsec
	var err error
	for deadline := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		m, err = secyStatus(ctx, ns)
		if err == nil && m.MKA != nil && want(m) {
			return m, nil
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("%s: %s not within %v: mka %+v, %v", ns, what, d, m.MKA, err)
		}
	}
}

// mkaUp: one live peer and a latest SAK we transmit with.
func mkaUp(m status.MACsec) bool {
	k := m.MKA
	return len(k.Live) == 1 && k.Latest != nil && k.Latest.TX && k.Latest.RX
}

// rxBad sums the receive counters a lost or rejected frame shows in.
func rxBad(m status.MACsec) map[string]uint64 {
	out := map[string]uint64{}
	for _, c := range []string{"InPktsNoSA", "InPktsNoSAError", "InPktsNotValid", "InPktsInvalid", "InPktsLate"} {
		out[c] = rxCounter(m, c) + m.Counters[c]
	}
	return out
}

// udpStream sends n datagrams, one every gap, from host A to host B and
// returns how many distinct ones host B got.
func udpStream(ctx context.Context, l *lab, n int, gap time.Duration) (int, error) {
	pc, err := listenPacketIn(l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), 0).String())
	if err != nil {
		return 0, err
	}
	defer pc.Close()
	got := make(chan int, 1)
	go func() {
		seen := map[uint32]bool{}
		buf := make([]byte, 64)
		for len(seen) < n {
			pc.SetReadDeadline(time.Now().Add(3 * time.Second))
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				break
			}
			if k >= 4 {
				seen[binary.BigEndian.Uint32(buf)] = true
			}
		}
		got <- len(seen)
	}()
	cc, err := dialPacketIn(ctx, l.lanNS, pc.LocalAddr().String())
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	var b [32]byte
	for i := range n {
		binary.BigEndian.PutUint32(b[:], uint32(i))
		if _, err := cc.Write(b[:]); err != nil {
			return 0, err
		}
		time.Sleep(gap)
	}
	return <-got, nil
}

// TestMACsecMKA runs the MACsec lab keyed by MKA alone (issue 22): both
// routers share a CAK, router 1 (priority 0) is key server and rolls the
// SAK every 10 s. The proofs (ping, TCP both ways) cross the link; a UDP
// stream across at least two rolls loses no frame to the rolls and the
// receiving router counts no late, invalid or SA-less frame; with router
// 2 killed, router 1 drops it after the MKA life time and sends no
// protected frame; restarted, router 2 rejoins and traffic crosses again.
func TestMACsecMKA(t *testing.T) {
	requirePrivileged(t)
	bin := buildRouter(t)
	var out strings.Builder
	ran := false
	opt := Options{
		RouterBinary:   bin,
		StatusPort:     freePort(t),
		Topology:       TopologyMACsec,
		Log:            testLogger(t),
		Stdout:         &out,
		routerArgs:     []string{"-debug"},
		macsecMKA:      true,
		macsecMKARekey: "10s",
		testHook: func(l *lab) error {
			ctx := context.Background()
			m1, err := waitSecY(ctx, l.rtrNS, mkaSettle, "MKA up", mkaUp)
			if err != nil {
				return err
			}
			m2, err := waitSecY(ctx, l.rtr2NS, mkaSettle, "MKA up", mkaUp)
			if err != nil {
				return err
			}
			if !m1.MKA.KeyServer || m2.MKA.KeyServer || m2.MKA.KeyServerSCI != m1.SCI || m1.MKA.Live[0].SCI != m2.SCI {
				return fmt.Errorf("roles: router 1 key server %v, router 2 key server %v (names %q), want router 1 %s", m1.MKA.KeyServer, m2.MKA.KeyServer, m2.MKA.KeyServerSCI, m1.SCI)
			}
			if m1.MKA.CKN != msCKN || m1.MKA.Counters["mkpdus_sent"] == 0 || m2.MKA.Counters["mkpdus_accepted"] == 0 {
				return fmt.Errorf("router 1 mka %+v, router 2 mka %+v: want ckn %s and MKPDUs both ways", m1.MKA, m2.MKA, msCKN)
			}

			// Rolls during traffic: 25 s of UDP at 500 datagrams/s.
			bad2, bad1 := rxBad(m2), rxBad(m1)
			rolls := m2.MKA.Counters["sak_rolls"]
			kn := m2.MKA.Latest.KN
			ringBefore, err := portDrops(ctx, l.rtrNS, lanPort, "ring", time.Now())
			if err != nil {
				return err
			}
			const datagrams = 12500
			n, err := udpStream(ctx, l, datagrams, 2*time.Millisecond)
			if err != nil {
				return err
			}
			ringAfter, err := portDrops(ctx, l.rtrNS, lanPort, "ring", time.Now())
			if err != nil {
				return err
			}
			var errs []error
			if ring := ringAfter - ringBefore; uint64(n)+ring < datagrams {
				errs = append(errs, fmt.Errorf("host B got %d of %d datagrams across the SAK rolls (%d ring overruns at router 1's LAN port)", n, datagrams, ring))
			}
			m1, err1 := secyStatus(ctx, l.rtrNS)
			m2, err2 := secyStatus(ctx, l.rtr2NS)
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			if got := m2.MKA.Counters["sak_rolls"] - rolls; got < 2 || m2.MKA.Latest == nil || m2.MKA.Latest.KN < kn+2 {
				errs = append(errs, fmt.Errorf("router 2: %d SAK rolls during 25 s of rekey every 10 s, latest key %+v (was kn %d); want >= 2", got, m2.MKA.Latest, kn))
			}
			for c, v := range rxBad(m2) {
				if v != bad2[c] {
					errs = append(errs, fmt.Errorf("router 2 %s rose by %d across the rolls, want 0", c, v-bad2[c]))
				}
			}
			for c, v := range rxBad(m1) {
				if v != bad1[c] {
					errs = append(errs, fmt.Errorf("router 1 %s rose by %d across the rolls, want 0", c, v-bad1[c]))
				}
			}
			t.Logf("rolls: host B got %d/%d datagrams; router 2 rolls %d, latest key %+v, previous %+v, counters %v",
				n, datagrams, m2.MKA.Counters["sak_rolls"]-rolls, m2.MKA.Latest, m2.MKA.Previous, m2.MKA.Counters)
			if err := errors.Join(errs...); err != nil {
				return err
			}

			// Kill router 2: router 1 drops it after the life time.
			killed := time.Now()
			if err := l.stopRouter2(); err != nil {
				return err
			}
			m1, err = waitSecY(ctx, l.rtrNS, mka.LifeTime+4*time.Second, "peer dropped", func(m status.MACsec) bool {
				return len(m.MKA.Live) == 0 && m.MKA.Latest == nil
			})
			if err != nil {
				return err
			}
			gone := time.Since(killed)
			if gone < mka.LifeTime-mka.HelloTime-time.Second {
				errs = append(errs, fmt.Errorf("router 1 dropped the peer %v after the kill, before the life time %v", gone, mka.LifeTime))
			}
			if m1.MKA.Counters["peer_timeouts"] == 0 {
				errs = append(errs, fmt.Errorf("router 1 peer_timeouts = 0 after the peer left"))
			}
			// Nothing protected leaves router 1 now; its hellos do.
			capt, err := startCapture(l.rtr2NS, msPort)
			if err != nil {
				return err
			}
			if _, err := udpStream(ctx, l, 500, 5*time.Millisecond); err != nil {
				capt.stop()
				return err
			}
			time.Sleep(mka.HelloTime)
			recs, others, _, err := capt.stop()
			if err != nil {
				return err
			}
			if len(recs) != 0 || others[0x0800]+others[0x86dd]+others[0x0806] != 0 || others[mka.EtherType] == 0 {
				errs = append(errs, fmt.Errorf("with the peer gone, router 1 sent %d MACsec frames, others %v; want none but MKPDUs", len(recs), others))
			}
			t.Logf("peer dropped %v after the kill; then on the link: %d MACsec frames, others %v", gone.Round(100*time.Millisecond), len(recs), others)

			// Restart router 2: it rejoins and traffic crosses again.
			if _, err := l.startMACsecPeer(ctx, l.opt.routerArgs...); err != nil {
				return err
			}
			if _, err := waitSecY(ctx, l.rtrNS, mkaSettle, "MKA up again", mkaUp); err != nil {
				return errors.Join(append(errs, err)...)
			}
			if _, err := waitSecY(ctx, l.rtr2NS, mkaSettle, "MKA up after restart", mkaUp); err != nil {
				return errors.Join(append(errs, err)...)
			}
			if _, err := ping(ctx, l.lanNS, wanHost4.Addr()); err != nil {
				errs = append(errs, fmt.Errorf("ping after router 2 rejoined: %w", err))
			}
			if _, err := tcpEcho(ctx, l.lanNS, l.wanNS, wanHost4.Addr()); err != nil {
				errs = append(errs, fmt.Errorf("TCP after router 2 rejoined: %w", err))
			}
			// No output shows the CAK.
			cak, err := os.ReadFile(filepath.Join(l.dir, "ms-cak.key"))
			if err != nil {
				return err
			}
			k := strings.TrimSpace(string(cak))
			for _, ns := range []string{l.rtrNS, l.rtr2NS} {
				for _, p := range []string{"/", "/api/status", "/metrics"} {
					b, err := routerStatus(ctx, ns, p)
					if err != nil {
						errs = append(errs, err)
					}
					if strings.Contains(strings.ToLower(string(b)), k) {
						errs = append(errs, fmt.Errorf("%s %s shows the CAK", ns, p))
					}
				}
			}
			for _, f := range []string{"router.log", "router2.log"} {
				b, _ := os.ReadFile(filepath.Join(l.dir, f))
				if strings.Contains(strings.ToLower(string(b)), k) {
					errs = append(errs, fmt.Errorf("%s shows the CAK", f))
				}
			}
			ran = true
			return errors.Join(errs...)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err := Run(ctx, opt)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run() error: %v", err)
	}
	if !ran {
		t.Fatal("the test hook did not finish")
	}
	for _, want := range []string{"ok   ping LAN→WAN IPv4", "ok   TCP LAN→WAN IPv4", "proofs passed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
