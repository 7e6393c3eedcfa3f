package dnsforward

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"sync"
	"time"
)

// aLongTimeAgo is a deadline in the past, which wakes a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// udpReaders is how many goroutines read one UDP socket: half the CPUs,
// at least one. A reader answers cache hits itself, so it is busy with
// the socket's syscalls most of the time, and the clients and the
// kernel need the other CPUs: with dnsperf on 2 CPUs, one reader served
// 156,000 queries/s where two, contending for the socket's read lock,
// served 130,000 (scripts/dnsbench.sh).
func udpReaders() int { return max(1, runtime.NumCPU()/2) }

// Serve answers the UDP queries that arrive on pc until ctx ends (then
// it returns nil) or pc fails (then it returns the error). It reads with
// udpReaders goroutines; pc must allow concurrent ReadFrom and WriteTo,
// as *net.UDPConn and gonet's UDPConn do. Serve does not close pc; it
// sets a past read deadline on it when ctx ends.
func (f *Forwarder) Serve(ctx context.Context, pc net.PacketConn) error {
	stop := context.AfterFunc(ctx, func() { pc.SetReadDeadline(aLongTimeAgo) })
	defer stop()
	n := udpReaders()
	errc := make(chan error, n)
	for range n {
		go func() { errc <- f.routineUDP(ctx, pc) }()
	}
	var first error
	for range n {
		if err := <-errc; err != nil && first == nil {
			first = err
			pc.SetReadDeadline(aLongTimeAgo) // stop the other readers too
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return first
}

// routineUDP is one of Serve's readers: read, answer, repeat. It
// returns nil when ctx ends, else the read error that stopped it.
func (f *Forwarder) routineUDP(ctx context.Context, pc net.PacketConn) error {
	f.cfg.Log.Debug("dnsforward: udp reader started", "addr", pc.LocalAddr())
	defer f.cfg.Log.Debug("dnsforward: udp reader stopped", "addr", pc.LocalAddr())
	buf := make([]byte, maxQuerySize)
	s := newScratch()
	to := &replyTo{pc: pc}
	to.fast, _ = pc.(addrPortConn)
	for {
		var n int
		var err error
		if to.fast != nil {
			n, to.ap, err = to.fast.ReadFromUDPAddrPort(buf)
		} else {
			n, to.addr, err = pc.ReadFrom(buf)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err // or a sibling failed and woke us
		}
		f.stats.QueriesUDP.Add(1)
		f.handle(buf[:n], to, s)
	}
}

// ServeTCP answers DNS over TCP (RFC 7766) on the connections l accepts
// until ctx ends (then it closes l and the connections and returns nil)
// or l fails. It serves at most Config.MaxTCPConns connections at once
// and closes one idle for Config.TCPIdleTimeout; queries on one
// connection may be answered out of order (RFC 7766 §6.2.1.1).
func (f *Forwarder) ServeTCP(ctx context.Context, l net.Listener) error {
	var (
		mu    sync.Mutex // protects conns
		conns = make(map[net.Conn]struct{})
		wg    sync.WaitGroup
	)
	stop := context.AfterFunc(ctx, func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer func() {
		stop()
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		if len(conns) >= f.cfg.MaxTCPConns || ctx.Err() != nil {
			mu.Unlock()
			f.stats.TCPConnsRefused.Add(1)
			c.Close()
			continue
		}
		conns[c] = struct{}{}
		mu.Unlock()
		f.stats.TCPConns.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.routineTCP(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		}()
	}
}

// tcpClient is one client TCP connection; wmu serialises the replies,
// which the connection's reader and resolving goroutines both write.
type tcpClient struct {
	conn    net.Conn
	wmu     sync.Mutex // wmu protects buf and writes to conn
	buf     []byte
	timeout time.Duration
}

// write sends b with its two-byte length in one write (RFC 7766 §8).
func (t *tcpClient) write(b []byte) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.buf = binary.BigEndian.AppendUint16(t.buf[:0], uint16(len(b)))
	t.buf = append(t.buf, b...)
	t.conn.SetWriteDeadline(time.Now().Add(t.timeout))
	t.conn.Write(t.buf)
}

// routineTCP reads the length-prefixed queries of one connection until
// it is idle for too long, closed, or sends a length no query has.
func (f *Forwarder) routineTCP(c net.Conn) {
	tc := &tcpClient{conn: c, timeout: f.cfg.TCPIdleTimeout}
	to := &replyTo{tc: tc}
	s := newScratch()
	buf := make([]byte, maxQuerySize)
	for {
		c.SetReadDeadline(time.Now().Add(f.cfg.TCPIdleTimeout))
		if _, err := io.ReadFull(c, buf[:2]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(buf))
		if n < headerLen || n > maxQuerySize {
			// Not a query we would answer (a 64 KiB message, or less
			// than a header): reading it whole would only cost memory.
			f.stats.Malformed.Add(1)
			return
		}
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			return
		}
		f.stats.QueriesTCP.Add(1)
		f.handle(buf[:n], to, s)
	}
}
