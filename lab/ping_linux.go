package lab

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

const (
	// pingWant is how many echo replies a ping proof needs.
	pingWant = 3
	// pingInterval separates echo requests.
	pingInterval = 200 * time.Millisecond
)

// ping sends ICMP echo requests from a raw socket made in namespace ns to
// addr until pingWant replies came back or proofTimeout passed; the first
// requests may be lost while the router resolves neighbours.
func ping(ctx context.Context, ns string, to netip.Addr) (string, error) {
	return pingFrom(ctx, ns, netip.Addr{}, to)
}

// pingFrom is ping with the echo requests sent from address from (zero:
// the kernel's choice).
func pingFrom(ctx context.Context, ns string, from, to netip.Addr) (string, error) {
	network, proto := "ip4:icmp", 1
	var reqType, replyType icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	if to.Is6() {
		network, proto = "ip6:ipv6-icmp", 58
		reqType, replyType = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	var pc *icmp.PacketConn
	err := inNetns(ns, func() error {
		var err error
		laddr := ""
		if from.IsValid() {
			laddr = from.String()
		}
		pc, err = icmp.ListenPacket(network, laddr)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("ping %s from %s: %w", to, ns, err)
	}
	defer pc.Close()
	ctx, cancel := context.WithTimeout(ctx, proofTimeout)
	defer cancel()
	go func() {
		<-ctx.Done()
		pc.SetReadDeadline(time.Now())
	}()

	id := rand.IntN(0xffff)
	dst := &net.IPAddr{IP: to.AsSlice()}
	sent := map[int]time.Time{} // seq → send time, until its reply came
	nsent := 0
	var rtts []time.Duration
	send := func(seq int) error {
		m := icmp.Message{Type: reqType, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("gvrouter lab ping")}}
		b, err := m.Marshal(nil) // the kernel fills in the ICMPv6 checksum
		if err != nil {
			return err
		}
		sent[seq] = time.Now()
		nsent++
		_, err = pc.WriteTo(b, dst)
		return err
	}
	seq := 0
	if err := send(seq); err != nil {
		return "", fmt.Errorf("ping %s: %w", to, err)
	}
	next := time.Now().Add(pingInterval)
	buf := make([]byte, 1500)
	for len(rtts) < pingWant {
		if ctx.Err() != nil {
			return fmt.Sprintf("%d sent, %d replies", nsent, len(rtts)),
				fmt.Errorf("ping %s from %s: %d of %d replies in %v", to, ns, len(rtts), pingWant, proofTimeout)
		}
		if !time.Now().Before(next) {
			seq++
			if err := send(seq); err != nil {
				return "", fmt.Errorf("ping %s: %w", to, err)
			}
			next = time.Now().Add(pingInterval)
		}
		pc.SetReadDeadline(next)
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			continue // deadline: time to send the next request
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != replyType {
			continue
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || e.ID != id || from.String() != to.String() {
			continue
		}
		if t, ok := sent[e.Seq]; ok {
			rtts = append(rtts, time.Since(t))
			delete(sent, e.Seq)
		}
	}
	var sum time.Duration
	for _, r := range rtts {
		sum += r
	}
	return fmt.Sprintf("%d sent, %d replies, avg rtt %v", nsent, len(rtts),
		(sum / time.Duration(len(rtts))).Round(time.Microsecond)), nil
}
