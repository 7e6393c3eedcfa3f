package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/status"
)

// The NAT lab's proofs: the router masquerades the LAN behind its WAN
// address, forwards one port to the LAN host, reflects it for the LAN
// (hairpin), translates ICMP errors and fragments, and moves assured flows
// to its fast path.

const (
	// traceBase is the first UDP destination port of the traceroute
	// proof, as traceroute(8) uses.
	traceBase = 33434
	// udpBigBytes is the UDP proof's datagram: two fragments on a
	// 1500-byte MTU.
	udpBigBytes = 3000
)

// echoPeer runs a TCP echo server in srvNS on listen and a client in
// clientNS that dials dial (listen's address when dial is zero), sends
// echoBytes and checks they come back. It returns the client address the
// server saw.
func echoPeer(ctx context.Context, clientNS, srvNS string, listen, dial netip.AddrPort) (netip.AddrPort, string, error) {
	ctx, cancel := context.WithTimeout(ctx, proofTimeout)
	defer cancel()
	ln, err := listenIn(srvNS, listen.String())
	if err != nil {
		return netip.AddrPort{}, "", err
	}
	defer ln.Close()
	if !dial.IsValid() {
		dial = netip.MustParseAddrPort(ln.Addr().String())
	}
	type result struct {
		peer netip.AddrPort
		err  error
	}
	srv := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srv <- result{err: err}
			return
		}
		defer c.Close()
		peer, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		c.SetDeadline(time.Now().Add(proofTimeout))
		_, err = io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
		srv <- result{unmapAddrPort(peer), err}
	}()
	start := time.Now()
	c, err := dialIn(ctx, clientNS, dial.String(), proofTimeout)
	if err != nil {
		return netip.AddrPort{}, "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	want := make([]byte, echoBytes)
	rand.Read(want)
	wErr := make(chan error, 1)
	go func() {
		_, err := c.Write(want)
		c.(*net.TCPConn).CloseWrite()
		wErr <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		return netip.AddrPort{}, "", fmt.Errorf("read echo: %w", err)
	}
	if err := <-wErr; err != nil {
		return netip.AddrPort{}, "", fmt.Errorf("write: %w", err)
	}
	r := <-srv
	if r.err != nil {
		return r.peer, "", fmt.Errorf("echo server: %w", r.err)
	}
	if !bytes.Equal(got, want) {
		return r.peer, "", fmt.Errorf("echo returned %d bytes that differ from the %d sent", len(got), len(want))
	}
	return r.peer, fmt.Sprintf("%d KiB echoed intact in %v, server saw %s", echoBytes>>10, time.Since(start).Round(time.Millisecond), r.peer), nil
}

// unmapAddrPort drops an IPv4-mapped prefix.
func unmapAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// wantPeer checks that a proof's server saw the client from want.
func wantPeer(peer netip.AddrPort, want netip.Addr, err error) error {
	if err != nil {
		return err
	}
	if peer.Addr().Unmap() != want {
		return fmt.Errorf("server saw the connection from %s, want %s", peer, want)
	}
	return nil
}

// udpEchoPeer sends one size-byte datagram from clientNS to srv, where a
// server in srvNS echoes it; it checks the echo and returns the client
// address the server saw. A 3000-byte datagram crosses the router as
// fragments both ways.
func udpEchoPeer(ctx context.Context, clientNS, srvNS string, srv netip.AddrPort, size int) (netip.AddrPort, string, error) {
	var sc, cc *net.UDPConn
	err := inNetns(srvNS, func() (err error) {
		sc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(srv))
		return err
	})
	if err != nil {
		return netip.AddrPort{}, "", err
	}
	defer sc.Close()
	if err := inNetns(clientNS, func() (err error) {
		cc, err = net.ListenUDP("udp4", nil)
		return err
	}); err != nil {
		return netip.AddrPort{}, "", err
	}
	defer cc.Close()
	peers := make(chan netip.AddrPort, 1)
	go func() {
		buf := make([]byte, 65536)
		sc.SetReadDeadline(time.Now().Add(proofTimeout))
		for {
			n, from, err := sc.ReadFromUDPAddrPort(buf)
			if err != nil {
				close(peers)
				return
			}
			select {
			case peers <- unmapAddrPort(from):
			default:
			}
			sc.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	want := make([]byte, size)
	rand.Read(want)
	got := make([]byte, 65536)
	deadline := time.Now().Add(proofTimeout)
	start := time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		// The first datagrams may be lost while the router resolves
		// the WAN host's address: resend once a second.
		if _, err := cc.WriteToUDPAddrPort(want, srv); err != nil {
			return netip.AddrPort{}, "", err
		}
		cc.SetReadDeadline(time.Now().Add(time.Second))
		n, _, err := cc.ReadFromUDPAddrPort(got)
		if err != nil {
			continue
		}
		if !bytes.Equal(got[:n], want) {
			return netip.AddrPort{}, "", fmt.Errorf("echo of %d bytes differs from the %d sent", n, size)
		}
		peer := <-peers
		return peer, fmt.Sprintf("%d-byte datagram echoed intact in %v, server saw %s", size, time.Since(start).Round(time.Millisecond), peer), nil
	}
	return netip.AddrPort{}, "", fmt.Errorf("no echo of a %d-byte datagram", size)
}

// hop is one traceroute answer.
type hop struct {
	TTL  int
	From netip.Addr
	// Type is the ICMP type: 11 Time Exceeded, 3 Destination Unreachable.
	Type int
}

// traceroute sends UDP probes with TTL 1..maxTTL from namespace ns to to,
// like traceroute(8), and returns who answered. Each answer must quote the
// probe exactly as the LAN host sent it: source address and port and
// destination port, so an error that crossed the NAT came back translated.
func traceroute(ctx context.Context, ns string, to netip.Addr, maxTTL int) ([]hop, error) {
	var uc *net.UDPConn
	var ic *icmp.PacketConn
	err := inNetns(ns, func() (err error) {
		if uc, err = net.ListenUDP("udp4", nil); err != nil {
			return err
		}
		ic, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	if uc != nil {
		defer uc.Close()
	}
	if err != nil {
		return nil, err
	}
	defer ic.Close()
	src := netip.MustParseAddrPort(uc.LocalAddr().String())
	pc := ipv4.NewConn(uc)
	var hops []hop
	buf := make([]byte, 1500)
	for ttl := 1; ttl <= maxTTL; ttl++ {
		if err := pc.SetTTL(ttl); err != nil {
			return hops, err
		}
		dport := uint16(traceBase + ttl)
		got := false
		for try := 0; try < 3 && !got && ctx.Err() == nil; try++ {
			if _, err := uc.WriteToUDPAddrPort([]byte("gvrouter traceroute"), netip.AddrPortFrom(to, dport)); err != nil {
				return hops, err
			}
			ic.SetReadDeadline(time.Now().Add(time.Second))
			for {
				n, from, err := ic.ReadFrom(buf)
				if err != nil {
					break
				}
				h, ok := quotesProbe(buf[:n], src.Port(), dport)
				if !ok {
					continue
				}
				if h.quotedSrc != lanHost4.Addr() {
					return hops, fmt.Errorf("TTL %d: ICMP from %s quotes source %s, want the LAN host %s (not translated back)", ttl, from, h.quotedSrc, lanHost4.Addr())
				}
				a, _ := netip.ParseAddr(from.String())
				hops = append(hops, hop{TTL: ttl, From: a, Type: h.typ})
				got = true
				break
			}
		}
		if !got {
			return hops, fmt.Errorf("TTL %d: no ICMP answer", ttl)
		}
	}
	return hops, nil
}

type quoted struct {
	typ       int
	quotedSrc netip.Addr
}

// quotesProbe parses an ICMPv4 error (without IP header, as a raw ICMP
// socket returns it) and reports whether it quotes a UDP probe from sport
// to dport.
func quotesProbe(b []byte, sport, dport uint16) (quoted, bool) {
	if len(b) < 8+20+8 || (b[0] != 11 && b[0] != 3) {
		return quoted{}, false
	}
	ip := b[8:]
	ihl := int(ip[0]&0xf) * 4
	if ip[0]>>4 != 4 || ihl < 20 || len(ip) < ihl+8 || ip[9] != 17 {
		return quoted{}, false
	}
	udp := ip[ihl:]
	if binary.BigEndian.Uint16(udp) != sport || binary.BigEndian.Uint16(udp[2:]) != dport {
		return quoted{}, false
	}
	return quoted{typ: int(b[0]), quotedSrc: netip.AddrFrom4([4]byte(ip[12:16]))}, true
}

// setUpFar makes the WAN host forward farNet back to the router, so that
// a probe's TTL can run out at the WAN host (see farNet).
func (l *lab) setUpFar(ctx context.Context) error {
	if err := inNetns(l.wanNS, func() error { return writeSysctl("net/ipv4/ip_forward", "1", false) }); err != nil {
		return fmt.Errorf("lab: WAN host ip_forward: %w", err)
	}
	return nsRun(ctx, l.wanNS, "ip", "route", "replace", farNet.String(), "via", wanRouter4.Addr().String(), "dev", hostIf)
}

// natProofs check the router's NAT from the hosts. The port forward and
// the hairpin both listen on the LAN host's forwardPort: one chain. The
// fast path proof counts packets: it runs alone.
func (l *lab) natProofs() []step {
	fwd := netip.AddrPortFrom(lanHost4.Addr(), forwardPort)
	return []step{
		{"masquerade: TCP LAN→WAN, WAN host sees the router's WAN address", "masquerade", func(ctx context.Context) (string, error) {
			peer, d, err := echoPeer(ctx, l.lanNS, l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), 0), netip.AddrPort{})
			return d, wantPeer(peer, wanRouter4.Addr(), err)
		}},
		{fmt.Sprintf("port forward: TCP WAN→LAN via %s:%d, LAN host sees the WAN host", wanRouter4.Addr(), forwardPort), "forward", func(ctx context.Context) (string, error) {
			peer, d, err := echoPeer(ctx, l.wanNS, l.lanNS, fwd, netip.AddrPortFrom(wanRouter4.Addr(), forwardPort))
			return d, wantPeer(peer, wanHost4.Addr(), err)
		}},
		{fmt.Sprintf("hairpin: TCP LAN→%s:%d back to the LAN host, from a router address", wanRouter4.Addr(), forwardPort), "forward", func(ctx context.Context) (string, error) {
			peer, d, err := echoPeer(ctx, l.lanNS, l.lanNS, fwd, netip.AddrPortFrom(wanRouter4.Addr(), forwardPort))
			if err == nil && peer.Addr() == lanRouter4.Addr() {
				err = wantPeer(peer, lanRouter4.Addr(), nil) // either router address brings replies back
			} else {
				err = wantPeer(peer, wanRouter4.Addr(), err)
			}
			return d, err
		}},
		{fmt.Sprintf("UDP %d-byte datagram (fragments) LAN→WAN through masquerade", udpBigBytes), "udp", func(ctx context.Context) (string, error) {
			peer, d, err := udpEchoPeer(ctx, l.lanNS, l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), forwardPort+1), udpBigBytes)
			return d, wantPeer(peer, wanRouter4.Addr(), err)
		}},
		{"traceroute LAN→beyond the WAN host: Time Exceeded comes back translated", "traceroute", func(ctx context.Context) (string, error) {
			err := l.setUpFar(ctx)
			var hops []hop
			if err == nil {
				hops, err = traceroute(ctx, l.lanNS, farNet.Addr().Next().Next(), 2)
			}
			if err == nil && (len(hops) != 2 || hops[0].From != lanRouter4.Addr() || hops[1].From != wanHost4.Addr() || hops[1].Type != 11) {
				err = fmt.Errorf("hops %v, want Time Exceeded from %s then from %s", hops, lanRouter4.Addr(), wanHost4.Addr())
			}
			return fmt.Sprint(hops), err
		}},
		{"fast path: an assured flow's packets skip netstack", "", l.fastPathProof},
	}
}

// fastPathProof streams TCP from the LAN host to a sink on the WAN host.
// Once the flow is assured (after a 1 MiB warm-up) it reads the router's
// counters, streams fastPathBytes more on the same connection and reads
// them again before closing it: the fast path's hit counter must have
// risen by at least the segments sent while netstack's IP counter stayed
// flat (ARP, ND and the like may add a few packets). With
// Options.HostOffloads the LAN host sends superframes of up to 64 KiB, one
// hit each: the hits must reach one per 64 KiB, the router must have
// received at least as many superframes and dropped none as oversize.
func (l *lab) fastPathProof(ctx context.Context) (string, error) {
	const warmup, fastPathBytes = 1 << 20, 16 << 20
	ctx, cancel := context.WithTimeout(ctx, proofTimeout)
	defer cancel()
	ln, err := listenIn(l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), 0).String())
	if err != nil {
		return "", err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c)
	}()
	c, err := dialIn(ctx, l.lanNS, ln.Addr().String(), proofTimeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	buf := make([]byte, 64<<10)
	send := func(n int) error {
		for ; n > 0; n -= len(buf) {
			if _, err := c.Write(buf[:min(n, len(buf))]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := send(warmup); err != nil {
		return "", err
	}
	before, super0, err := l.fastPathCounters(ctx, time.Now())
	if err != nil {
		return "", err
	}
	if err := send(fastPathBytes); err != nil {
		return "", err
	}
	after, super1, err := l.fastPathCounters(ctx, time.Now())
	if err != nil {
		return "", err
	}
	// The last segments may still be on their way through the router
	// when the write returns (a loaded CI run read hits 12 % short):
	// read again until they have crossed, for at most 3 s.
	for deadline := time.Now().Add(3 * time.Second); !l.opt.HostOffloads && after.FastPathHits-before.FastPathHits < uint64(fastPathBytes/1448) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if after, super1, err = l.fastPathCounters(ctx, time.Now()); err != nil {
			return "", err
		}
	}
	hits := after.FastPathHits - before.FastPathHits
	rx := after.NetstackIPReceived - before.NetstackIPReceived
	d := fmt.Sprintf("%d MiB on an assured flow: fast-path hits +%d, netstack IP packets received +%d", fastPathBytes>>20, hits, rx)
	if !l.opt.HostOffloads {
		segments := uint64(fastPathBytes / 1448)
		switch {
		case hits < segments:
			return d, fmt.Errorf("the fast path forwarded fewer packets than the %d segments sent", segments)
		case rx*100 > hits:
			return d, errors.New("netstack's counter did not stay flat (more than 1% of the fast path's packets)")
		}
		return d, nil
	}
	sf := super1.minus(super0)
	d += fmt.Sprintf(", superframes received +%d, sent on whole +%d, cut +%d, oversize drops +%d", sf.received, sf.sentWhole, sf.segmented, sf.oversize)
	supers := uint64(fastPathBytes / (64 << 10))
	switch {
	case sf.oversize > 0:
		return d, errors.New("the router dropped frames as oversize")
	case sf.received < supers || hits < supers:
		return d, fmt.Errorf("fewer superframes received or forwarded by the fast path than the %d a 64 KiB TSO sender makes at least", supers)
	case rx > 10+hits/100:
		return d, errors.New("netstack's counter did not stay flat")
	}
	return d, nil
}

// natCounters are the status JSON counters the fast-path proof compares.
type natCounters struct {
	FastPathHits       uint64
	NetstackIPReceived uint64
}

// fastPathCounters reads the fast path proof's counters and the
// superframe counters from one status snapshot taken after since: one
// wait for the status server's once-a-second sample, not two.
func (l *lab) fastPathCounters(ctx context.Context, since time.Time) (natCounters, superframeStats, error) {
	s, err := l.statusSince(ctx, since)
	if err != nil {
		return natCounters{}, superframeStats{}, err
	}
	if s.Conntrack == nil || s.Netstack == nil {
		return natCounters{}, superframeStats{}, errors.New("lab: status JSON has no conntrack or netstack section")
	}
	return natCounters{FastPathHits: s.Conntrack.FastPathHits, NetstackIPReceived: s.Netstack.IPPacketsReceived}, superframesOf(s), nil
}

// statusSince returns the router's status snapshot once one taken at or
// after since is served (the status server samples once a second), or
// the latest after statusFreshTimeout; any snapshot if since is zero.
func (l *lab) statusSince(ctx context.Context, since time.Time) (status.Snapshot, error) {
	deadline := since.Add(statusFreshTimeout)
	for {
		body, err := httpGet(ctx, l.rtrNS, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+"/api/status")
		if err != nil {
			return status.Snapshot{}, err
		}
		var s status.Snapshot
		if err := json.Unmarshal(body, &s); err != nil {
			return status.Snapshot{}, fmt.Errorf("lab: status JSON: %w", err)
		}
		if since.IsZero() || !s.Time.Before(since) || time.Now().After(deadline) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return status.Snapshot{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// natView is the part of the status JSON's NAT section the lab tests read.
type natView struct {
	Flows        int
	EarlyDropped uint64
	TableFull    uint64
	PortDrops    map[string]uint64 // all ports' drops by reason, summed
	Overload     uint64            // new flows shed while a receive ring fell behind
}

// natView reads the router's current NAT counters.
func (l *lab) natView(ctx context.Context) (natView, error) {
	body, err := httpGet(ctx, l.rtrNS, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+"/api/status")
	if err != nil {
		return natView{}, err
	}
	var s status.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return natView{}, fmt.Errorf("lab: status JSON: %w", err)
	}
	if s.Conntrack == nil {
		return natView{}, errors.New("lab: status JSON has no conntrack section")
	}
	c := s.Conntrack
	v := natView{Flows: c.Flows, EarlyDropped: c.Events["early_dropped"], TableFull: c.Drops[natengine.DropTableFull.String()],
		Overload: c.Drops[natengine.DropOverload.String()], PortDrops: map[string]uint64{}}
	for _, p := range s.Ports {
		for k, n := range p.Drops {
			v.PortDrops[k] += n
		}
	}
	return v, nil
}
