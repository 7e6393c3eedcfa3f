package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/status"
)

// stunReflector runs on the WAN host, a STUN server's binding in small:
// every datagram to addr:port is answered with the address and port it
// came from, as text ("10.77.2.1:40001"). It prints "ready" once bound.
const stunReflector = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    data, (a, p) = s.recvfrom(2048)
    s.sendto(("%s:%d" % (a, p)).encode(), (a, p))
`

// Ports of the hole-punching test: the reflector's (STUN's) and the LAN
// endpoints', two pairs, one per order.
const (
	stunPort       = 3478
	punchFirstPort = 41000
)

// lanHost4b is a second address on the LAN host: the second LAN endpoint
// of the hole-punching test, a host of its own as far as the router can
// tell.
var lanHost4b = netip.MustParsePrefix("10.77.1.3/24")

// TestHairpinHolePunch is what P2P applications do after STUN (RFC 4787
// REQ-9: hairpinning for UDP), against the real router with its default
// (address-and-port-dependent) filtering: two LAN endpoints, on two
// addresses, ask a reflector on the WAN host for their mapped external
// endpoints, then send to each other's. Each receives the other's
// datagrams, and its socket sees them from the peer's external endpoint
// (REQ-9a), whichever side sends first; the router's "filtered" drop
// counter does not rise for them. A datagram from the WAN host's other
// port to a mapping, which the filtering refuses, shows that filtering
// is in force: it is not delivered and is the one filtered drop per pair.
// The lab's own TCP hairpin proof (a port forward reflected for the LAN)
// ran before the hook.
func TestHairpinHolePunch(t *testing.T) {
	parallelLab(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := nsRun(ctx, l.lanNS, "ip", "addr", "add", lanHost4b.String(), "dev", hostIf); err != nil {
			return err
		}
		stun := netip.AddrPortFrom(wanHost4.Addr(), stunPort)
		refl := command(ctx, l.wanNS, scapyPython, "-c", stunReflector, stun.Addr().String(), strconv.Itoa(stunPort))
		stdout, err := refl.StdoutPipe()
		if err != nil {
			return err
		}
		var stderr syncBuffer
		refl.Stderr = &stderr
		if err := refl.Start(); err != nil {
			return err
		}
		defer refl.Wait()
		defer refl.Process.Kill()
		if lines := bufio.NewScanner(stdout); !lines.Scan() || lines.Text() != "ready" {
			return fmt.Errorf("reflector did not start: %q %s", lines.Text(), stderr.String())
		}

		filtered0, err := filteredDrops(ctx, l)
		if err != nil {
			return err
		}
		var errs []error
		pairs := 0
		for i, order := range []string{"A first", "B first"} {
			a := netip.AddrPortFrom(lanHost4.Addr(), uint16(punchFirstPort+2*i))
			b := netip.AddrPortFrom(lanHost4b.Addr(), uint16(punchFirstPort+2*i+1))
			if i == 1 {
				a, b = b, a
			}
			pairs++
			if err := holePunch(l, stun, a, b); err != nil {
				errs = append(errs, fmt.Errorf("%s (%s sends first): %w", order, a, err))
			}
		}
		filtered1, err := filteredDrops(ctx, l)
		if err != nil {
			return err
		}
		if filtered1 != filtered0+uint64(pairs) {
			errs = append(errs, fmt.Errorf("conntrack drops %q rose from %d to %d, want by %d (the outside probes only)",
				natengine.DropFiltered, filtered0, filtered1, pairs))
		}
		return errors.Join(errs...)
	})
}

// holePunch opens LAN sockets on first and second, learns their mapped
// endpoints from the reflector at stun, and exchanges datagrams between
// the mapped endpoints, first's sent first.
func holePunch(l *lab, stun, first, second netip.AddrPort) error {
	var fc, sc *net.UDPConn
	if err := inNetns(l.lanNS, func() (err error) {
		if fc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(first)); err != nil {
			return err
		}
		sc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(second))
		return err
	}); err != nil {
		if fc != nil {
			fc.Close()
		}
		return err
	}
	defer fc.Close()
	defer sc.Close()
	fext, err := stunMapped(fc, stun)
	if err != nil {
		return err
	}
	sext, err := stunMapped(sc, stun)
	if err != nil {
		return err
	}
	if fext.Addr() != wanRouter4.Addr() || sext.Addr() != wanRouter4.Addr() || fext == sext {
		return fmt.Errorf("reflector saw %s and %s, want two ports of %s", fext, sext, wanRouter4.Addr())
	}
	for round := 0; round < 2; round++ {
		if err := punch(fc, sc, sext, fext, fmt.Sprintf("%s round %d", first, round)); err != nil {
			return err
		}
		if err := punch(sc, fc, fext, sext, fmt.Sprintf("%s round %d", second, round)); err != nil {
			return err
		}
	}
	return outsideProbe(l, fc, fext, stun)
}

// outsideProbe sends one datagram from the WAN host's port next to the
// reflector's, which the LAN socket c never sent to, to c's mapped
// endpoint ext: the default filtering refuses it, so c must not receive
// it.
func outsideProbe(l *lab, c *net.UDPConn, ext, stun netip.AddrPort) error {
	var w *net.UDPConn
	if err := inNetns(l.wanNS, func() (err error) {
		w, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(stun.Addr(), stun.Port()+1)))
		return err
	}); err != nil {
		return err
	}
	defer w.Close()
	if _, err := w.WriteToUDPAddrPort([]byte("unsolicited"), ext); err != nil {
		return err
	}
	buf := make([]byte, 64)
	c.SetReadDeadline(time.Now().Add(time.Second))
	if n, from, err := c.ReadFromUDPAddrPort(buf); err == nil {
		return fmt.Errorf("%s received %q from %s, which it never sent to (address-and-port-dependent filtering)", c.LocalAddr(), buf[:n], from)
	}
	return nil
}

// stunMapped asks the reflector at stun which endpoint c's datagrams come
// from, with a few tries for a lost datagram.
func stunMapped(c *net.UDPConn, stun netip.AddrPort) (netip.AddrPort, error) {
	buf := make([]byte, 128)
	for try := 0; try < 3; try++ {
		if _, err := c.WriteToUDPAddrPort([]byte("binding request"), stun); err != nil {
			return netip.AddrPort{}, err
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil || unmapAddrPort(from) != stun {
			continue
		}
		return netip.ParseAddrPort(string(buf[:n]))
	}
	return netip.AddrPort{}, fmt.Errorf("no answer from the reflector %s to %s", stun, c.LocalAddr())
}

// punch sends msg from src to the peer's mapped endpoint peerExt (the
// router's WAN address) and checks that dst receives it, with its socket
// seeing it from src's mapped endpoint srcExt (RFC 4787 REQ-9a). It
// sends up to three times, so that a datagram lost before the router
// (the router's ARP for the second address) is not mistaken for one the
// router dropped; the filtered counter tells those apart.
func punch(src, dst *net.UDPConn, peerExt, srcExt netip.AddrPort, msg string) error {
	buf := make([]byte, 256)
	for try := 0; try < 3; try++ {
		if _, err := src.WriteToUDPAddrPort([]byte(msg), peerExt); err != nil {
			return err
		}
		dst.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, from, err := dst.ReadFromUDPAddrPort(buf)
			if err != nil {
				break // resend
			}
			if string(buf[:n]) != msg {
				continue // an earlier try's copy
			}
			if from = unmapAddrPort(from); from != srcExt {
				return fmt.Errorf("%s received %q from %s, want from %s (the sender's mapped endpoint)", dst.LocalAddr(), msg, from, srcExt)
			}
			return nil
		}
	}
	return fmt.Errorf("%s sent %q to %s three times; %s received none", src.LocalAddr(), msg, peerExt, dst.LocalAddr())
}

// filteredDrops reads the router's conntrack drops "filtered" from its
// status JSON.
func filteredDrops(ctx context.Context, l *lab) (uint64, error) {
	body, err := httpGet(ctx, l.rtrNS, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+"/api/status")
	if err != nil {
		return 0, err
	}
	var s status.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return 0, fmt.Errorf("status JSON: %w", err)
	}
	if s.Conntrack == nil {
		return 0, errors.New("status JSON has no conntrack section")
	}
	return s.Conntrack.Drops[natengine.DropFiltered.String()], nil
}
