package dnsforward

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// Upstream exchange. Each attempt sends the question from a new random
// source port with a new random ID (RFC 5452 §9.2) and accepts only an
// answer from the server's address and port with that ID and the same
// question (RFC 5452 §3, §9.1); anything else is counted and ignored
// while the attempt waits for the real answer, and so never reaches the
// cache. The cache keeps whole answers by question, so the records of
// one answer can never stand in for another name's.

// Errors of one attempt.
var (
	errMismatch  = errors.New("dnsforward: answer for another query")
	errMalformed = errors.New("dnsforward: malformed answer")
	errTruncated = errors.New("dnsforward: truncated answer")
	errNoPort    = errors.New("dnsforward: no free source port")
)

// bufPool holds upstream receive buffers of the largest DNS message
// (RFC 1035 §4.2.2, two-byte TCP length).
var bufPool = sync.Pool{New: func() any { b := make([]byte, 65535); return &b }}

// resolve asks the upstreams c's question in turn, starting with the one
// that answered last, and returns the answer's entry, or SERVFAIL when
// none answers usefully.
func (f *Forwarder) resolve(c *call) *entry {
	ups := *f.upstreams.Load()
	if len(ups) == 0 {
		f.stats.NoUpstream.Add(1)
		return f.servfail(&c.q)
	}
	attempts := min(max(len(ups), 2), maxAttempts)
	first := int(f.preferred.Load())
	for i := range attempts {
		if f.ctx.Err() != nil {
			break
		}
		idx := (first + i) % len(ups)
		m, err := f.exchange(ups[idx], &c.q)
		if err != nil {
			f.cfg.Log.Debug("dnsforward: upstream", "server", ups[idx], "err", err)
			continue
		}
		if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
			// SERVFAIL, REFUSED, NOTIMP, FORMERR, ...: this upstream
			// cannot answer; another may.
			f.stats.UpstreamRcodeErrors.Add(1)
			continue
		}
		f.preferred.Store(uint32(idx))
		e, err := newEntry(m, f.policy, f.cfg.Clock.Now())
		if err != nil { // e.g. larger than 64 KiB once repacked
			f.stats.UpstreamMalformed.Add(1)
			continue
		}
		// The answer is ours now: recursion available, and not
		// authoritative (RFC 1035 §4.1.1: AA is the name server's
		// own authority, which a cache does not have).
		e.flags = e.flags&^flagAA | flagRA
		return e
	}
	return f.servfail(&c.q)
}

// exchange asks server q's question once over UDP, and over TCP if the
// answer is truncated (RFC 1035 §4.2.1, RFC 7766 §5), with EDNS0
// advertising UpstreamUDPSize; a server that answers FORMERR to EDNS is
// asked again without it (RFC 6891 §7).
func (f *Forwarder) exchange(server netip.AddrPort, q *query) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.cfg.Timeout)
	defer cancel()
	qname := appendLower(make([]byte, 0, len(q.qname)), q.qname)
	if f.cfg.Use0x20 {
		f.mix0x20(qname)
	}
	name, _, err := dns.UnpackDomainName(qname, 0)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	ans, err := f.exchangeOnce(ctx, server, q, qname, name, true)
	if err == nil && ans.Rcode == dns.RcodeFormatError && ans.IsEdns0() == nil {
		ans, err = f.exchangeOnce(ctx, server, q, qname, name, false)
	}
	switch {
	case err == nil:
		f.stats.observeLatency(time.Since(start))
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		f.stats.UpstreamTimeouts.Add(1)
	case errors.Is(err, context.Canceled):
	default:
		f.stats.UpstreamErrors.Add(1)
	}
	return ans, err
}

func (f *Forwarder) exchangeOnce(ctx context.Context, server netip.AddrPort, q *query, qname []byte, name string, edns bool) (*dns.Msg, error) {
	id := f.randID()
	m := new(dns.Msg)
	m.Id = id
	m.RecursionDesired = true
	m.CheckingDisabled = q.flags&flagCD != 0
	m.AuthenticatedData = true // RFC 6840 §5.7: we understand AD
	m.Question = []dns.Question{{Name: name, Qtype: q.qtype, Qclass: q.qclass}}
	if edns {
		m.SetEdns0(UpstreamUDPSize, q.edns && q.do)
	}
	wire, err := m.Pack()
	if err != nil {
		return nil, err
	}
	f.stats.UpstreamQueries.Add(1)
	ans, err := f.exchangeUDP(ctx, server, wire, id, qname, q)
	if errors.Is(err, errTruncated) {
		f.stats.TCRetries.Add(1)
		ans, err = f.exchangeTCP(ctx, server, wire, id, qname, q)
	}
	return ans, err
}

// exchangeUDP sends wire from a random port and waits for its answer.
func (f *Forwarder) exchangeUDP(ctx context.Context, server netip.AddrPort, wire []byte, id uint16, qname []byte, q *query) (*dns.Msg, error) {
	conn, release, err := f.dialUDP(ctx, server)
	if err != nil {
		return nil, err
	}
	defer func() {
		conn.Close()
		if release != nil {
			release()
		}
	}()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	defer context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })()
	if _, err := conn.Write(wire); err != nil {
		return nil, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	pc, _ := conn.(net.PacketConn)
	for {
		var n int
		var from net.Addr
		if pc != nil {
			n, from, err = pc.ReadFrom(buf)
		} else {
			n, err = conn.Read(buf)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if from != nil && !sameAddr(from, server) {
			f.stats.UpstreamSpoofed.Add(1)
			continue
		}
		ans, err := f.checkAnswer(buf[:n], id, qname, q, false)
		switch err {
		case nil, errTruncated:
			return ans, err
		case errMismatch:
			f.stats.UpstreamMismatched.Add(1)
		default:
			f.stats.UpstreamMalformed.Add(1)
		}
	}
}

// exchangeTCP sends wire over a new TCP connection and reads one answer
// (RFC 7766 §8: two-byte length, one write).
func (f *Forwarder) exchangeTCP(ctx context.Context, server netip.AddrPort, wire []byte, id uint16, qname []byte, q *query) (*dns.Msg, error) {
	conn, err := f.cfg.DialTCP(ctx, server)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	defer context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })()
	msg := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(wire)), uint16(len(wire)))
	if _, err := conn.Write(append(msg, wire...)); err != nil {
		return nil, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	if _, err := io.ReadFull(conn, buf[:2]); err != nil {
		return nil, ctxErr(ctx, err)
	}
	n := int(binary.BigEndian.Uint16(buf))
	if _, err := io.ReadFull(conn, buf[:n]); err != nil {
		return nil, ctxErr(ctx, err)
	}
	ans, err := f.checkAnswer(buf[:n], id, qname, q, true)
	switch err {
	case nil:
	case errMismatch:
		f.stats.UpstreamMismatched.Add(1)
	default:
		f.stats.UpstreamMalformed.Add(1)
	}
	return ans, err
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// checkAnswer validates b as the answer to the query with id and the
// wire name qname (as sent, lower-case or 0x20-mixed) and q's type and
// class: a response (QR) to a standard query with exactly that question.
// The name compares case-insensitively unless Use0x20 is on. A truncated
// UDP answer returns errTruncated for the caller to retry over TCP.
func (f *Forwarder) checkAnswer(b []byte, id uint16, qname []byte, q *query, tcp bool) (*dns.Msg, error) {
	if len(b) < headerLen {
		return nil, errMalformed
	}
	flags := binary.BigEndian.Uint16(b[2:])
	if binary.BigEndian.Uint16(b) != id || flags&flagQR == 0 || flags&opcodeMask != 0 ||
		binary.BigEndian.Uint16(b[4:]) != 1 {
		return nil, errMismatch
	}
	end, ok := nameEnd(b, headerLen)
	if !ok || end+4 > len(b) {
		return nil, errMismatch
	}
	got := b[headerLen:end]
	if f.cfg.Use0x20 {
		if string(got) != string(qname) {
			return nil, errMismatch
		}
	} else if !equalFold(got, qname) {
		return nil, errMismatch
	}
	if binary.BigEndian.Uint16(b[end:]) != q.qtype || binary.BigEndian.Uint16(b[end+2:]) != q.qclass {
		return nil, errMismatch
	}
	if flags&flagTC != 0 && !tcp {
		return nil, errTruncated
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		return nil, errMalformed
	}
	return m, nil
}

// sameAddr reports whether a is server (IPv4-mapped addresses unmapped).
func sameAddr(a net.Addr, server netip.AddrPort) bool {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		var err error
		if ap, err = netip.ParseAddrPort(a.String()); err != nil {
			return false
		}
	}
	return ap.Addr().Unmap() == server.Addr().Unmap() && ap.Port() == server.Port()
}

// dialUDP opens a socket to server from a random port in 1024..65535,
// reserved first through Config.ReservePort if set; a taken port
// (reserved elsewhere or EADDRINUSE) is counted and another one tried.
func (f *Forwarder) dialUDP(ctx context.Context, server netip.AddrPort) (net.Conn, func(), error) {
	for range portTries {
		port := f.randPort()
		var release func()
		if f.cfg.ReservePort != nil {
			r, ok := f.cfg.ReservePort(syscall.IPPROTO_UDP, port)
			if !ok {
				f.stats.PortCollisions.Add(1)
				continue
			}
			release = r
		}
		conn, err := f.cfg.DialUDP(ctx, server, port)
		if err == nil {
			return conn, release, nil
		}
		if release != nil {
			release()
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, err
		}
		f.stats.PortCollisions.Add(1)
	}
	return nil, nil, errNoPort
}

func (f *Forwarder) randID() uint16 {
	f.randMu.Lock()
	defer f.randMu.Unlock()
	return uint16(f.cfg.Rand.Uint32())
}

func (f *Forwarder) randPort() uint16 {
	f.randMu.Lock()
	defer f.randMu.Unlock()
	return uint16(minPort + f.cfg.Rand.IntN(65536-minPort))
}

// mix0x20 puts the letters of the wire name n in random case.
func (f *Forwarder) mix0x20(n []byte) {
	f.randMu.Lock()
	defer f.randMu.Unlock()
	var bits uint64
	for i, c := range n {
		if i%64 == 0 {
			bits = f.cfg.Rand.Uint64()
		}
		if 'a' <= c && c <= 'z' && bits&(1<<(i%64)) != 0 {
			n[i] = c - 'a' + 'A'
		}
	}
}
