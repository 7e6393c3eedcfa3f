package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
)

// superTransferBytes is what each direction and family of
// TestRunHostOffloads sends: some 250 superframes of 64 KiB.
const superTransferBytes = 16 << 20

// transferIn sends n pseudo-random bytes over TCP from namespace fromNS to
// a listener at listen in namespace toNS, dialling dial (the listener's
// address as the sender reaches it: through NAT or a port forward), and
// fails unless the receiver gets every byte intact. It returns the peer
// address the receiver saw.
func transferIn(ctx context.Context, fromNS, toNS string, listen, dial netip.AddrPort, n int64) (netip.AddrPort, error) {
	ln, err := listenIn(toNS, listen.String())
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer ln.Close()
	if dial.Port() == 0 {
		dial = netip.AddrPortFrom(dial.Addr(), netip.MustParseAddrPort(ln.Addr().String()).Port())
	}
	type result struct {
		sum  [sha256.Size]byte
		n    int64
		peer netip.AddrPort
		err  error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute))
		h := sha256.New()
		r := result{peer: netip.MustParseAddrPort(c.RemoteAddr().String())}
		r.n, r.err = io.Copy(h, c)
		copy(r.sum[:], h.Sum(nil))
		got <- r
	}()
	c, err := dialIn(ctx, fromNS, dial.String(), 10*time.Second)
	if err != nil {
		return netip.AddrPort{}, err
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	h := sha256.New()
	rng := rand.NewChaCha8([32]byte{7})
	buf := make([]byte, 256<<10)
	for sent := int64(0); sent < n; sent += int64(len(buf)) {
		rng.Read(buf)
		h.Write(buf)
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return netip.AddrPort{}, fmt.Errorf("send to %s after %d bytes: %w", dial, sent, err)
		}
	}
	c.Close()
	r := <-got
	if r.err != nil {
		return r.peer, fmt.Errorf("receive at %s: %w after %d bytes", listen, r.err, r.n)
	}
	if want := h.Sum(nil); r.n != n || !bytes.Equal(r.sum[:], want) {
		return r.peer, fmt.Errorf("receiver got %d bytes with SHA-256 %x, sent %d with %x", r.n, r.sum, n, want)
	}
	return r.peer, nil
}

// TestRunHostOffloads runs the lab with TSO, GSO and TX checksum offload
// on at every veth (Options.HostOffloads), as a container or VM beside
// the router sends: the proofs all pass, and TCP crosses the router both
// ways in both families (IPv4 masqueraded and through the port forward,
// IPv6 routed through the firewall), 16 MiB each, intact, in superframes
// the router takes whole and passes on whole, with no frame dropped as
// oversize.
//
// It runs beside the other parallel lab tests (a lab of its own, tagged):
// its flows are short and it checks counters, not speed.
func TestRunHostOffloads(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t)
	bin := buildRouter(t)
	var out bytes.Buffer
	opt := Options{
		RouterBinary: bin,
		StatusPort:   freePort(t),
		runTag:       nextRunTag(), // beside the other parallel labs
		HostOffloads: true,
		Log:          testLogger(t),
		Stdout:       &out,
		testHook: func(l *lab) error {
			for _, ns := range []string{l.lanNS, l.wanNS} {
				var o hw.Offloads
				err := inNetns(ns, func() error {
					var err error
					o, err = hw.GetOffloads(hostIf)
					return err
				})
				if err != nil || !o.TSO || !o.GSO || !o.TxCsum {
					return fmt.Errorf("offloads of %s in %s: %+v, %v; want TSO, GSO and TX checksum on", hostIf, ns, o, err)
				}
			}
			ctx := context.Background()
			before, err := l.readSuperframes(ctx)
			if err != nil {
				return err
			}
			for _, tc := range []struct {
				name         string
				fromNS, toNS string
				listen, dial netip.AddrPort
				wantPeer     netip.Addr
			}{
				{"IPv4 LAN→WAN, masqueraded", l.lanNS, l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), 0), netip.AddrPortFrom(wanHost4.Addr(), 0), wanRouter4.Addr()},
				{"IPv4 WAN→LAN, port forward", l.wanNS, l.lanNS, netip.AddrPortFrom(lanHost4.Addr(), forwardPort), netip.AddrPortFrom(wanRouter4.Addr(), forwardPort), wanHost4.Addr()},
				// The LAN host's address of the moment (SLAAC, the
				// delegated prefix): routed, not translated.
				{"IPv6 LAN→WAN", l.lanNS, l.wanNS, netip.AddrPortFrom(wanHost6.Addr(), 0), netip.AddrPortFrom(wanHost6.Addr(), 0), netip.Addr{}},
				{"IPv6 WAN→LAN, allowed port", l.wanNS, l.lanNS, netip.AddrPortFrom(lanHost6.Addr(), forwardPort), netip.AddrPortFrom(lanHost6.Addr(), forwardPort), wanHost6.Addr()},
			} {
				peer, err := transferIn(ctx, tc.fromNS, tc.toNS, tc.listen, tc.dial, superTransferBytes)
				if err != nil {
					return fmt.Errorf("%s: %w", tc.name, err)
				}
				switch {
				case tc.wantPeer.IsValid() && peer.Addr() != tc.wantPeer:
					return fmt.Errorf("%s: the receiver saw %s, want %s", tc.name, peer, tc.wantPeer)
				case !tc.wantPeer.IsValid() && (peer.Addr() == wanRouter6.Addr() || peer.Addr() == lanRouter6.Addr()):
					return fmt.Errorf("%s: the receiver saw the router's %s, want the LAN host's own address", tc.name, peer)
				}
			}
			after, err := l.readSuperframes(ctx)
			if err != nil {
				return err
			}
			d := after.minus(before)
			t.Logf("superframes over the four transfers: %+v", d)
			// At least a quarter of the 4 x 256 superframes of 64 KiB
			// the senders could make (TCP's autosizing starts smaller).
			if min := uint64(4 * superTransferBytes / (64 << 10) / 4); d.received < min || d.sentWhole < min {
				return fmt.Errorf("the router received %d superframes and sent %d whole, want at least %d each", d.received, d.sentWhole, min)
			}
			if after.oversize != 0 {
				return fmt.Errorf("the router's ports dropped %d frames as oversize", after.oversize)
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := Run(ctx, opt)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run() error: %v", err)
	}
	if !strings.Contains(out.String(), "proofs passed") || !strings.Contains(out.String(), "superframes received +") {
		t.Errorf("output lacks the passed proofs and the fast path proof's superframes")
	}
}
