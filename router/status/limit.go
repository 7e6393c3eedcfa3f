package status

import (
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

const (
	// MaxConns bounds the connections the status server holds open, over
	// all its listeners. Each costs a goroutine, its buffers and, while a
	// page renders, the page: 1,000 concurrent GETs took the router's RSS
	// from 41 to 75 MB (~34 KB each). The page's readers are a few
	// browsers (at most 6 connections each) and a Prometheus scraper, so
	// 64 serves them all and bounds the cost to ~2 MB.
	MaxConns = 64

	// maxRefusing bounds the goroutines that answer connections past
	// MaxConns; past it a connection is closed without an answer. The
	// answer is a few hundred bytes, so a handful keeps up with a flood.
	maxRefusing = 16

	// refuseTimeout bounds how long an answer to a refused connection may
	// take: writing the 503 and reading what the client sent, so that the
	// close sends FIN and the client reads the 503 rather than a reset.
	refuseTimeout = time.Second
)

// busyBody is the body of the answer to a connection past MaxConns.
const busyBody = "status page busy: too many open connections\n"

// busyResponse is the whole answer to a connection past MaxConns.
var busyResponse = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(busyBody)) + "\r\n" +
	"\r\n" + busyBody

// connLimit counts a Server's open connections and refusals. It is safe
// for concurrent use.
type connLimit struct {
	open     atomic.Int64  // connections accepted and not yet closed
	refused  atomic.Uint64 // connections refused because open reached MaxConns
	refusing atomic.Int32  // goroutines answering refused connections
}

// limitListener is a net.Listener that holds at most MaxConns connections
// open: past that, Accept answers each new connection with a 503 and
// closes it, and accepts the next.
type limitListener struct {
	net.Listener
	lim *connLimit
}

// Accept implements net.Listener.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.lim.open.Add(1) <= MaxConns {
			return &limitConn{Conn: c, lim: l.lim}, nil
		}
		l.lim.open.Add(-1)
		l.lim.refused.Add(1)
		l.lim.refuse(c)
	}
}

// refuse answers c with busyResponse on a goroutine of its own, which
// ends within refuseTimeout, or closes c at once if maxRefusing such
// goroutines are running.
func (lim *connLimit) refuse(c net.Conn) {
	if lim.refusing.Add(1) > maxRefusing {
		lim.refusing.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer lim.refusing.Add(-1)
		defer c.Close()
		c.SetDeadline(time.Now().Add(refuseTimeout))
		if _, err := io.WriteString(c, busyResponse); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		// Read the request (and anything else, up to a header's worth)
		// until the client closes, so our close does not reset the
		// connection under the answer.
		io.Copy(io.Discard, io.LimitReader(c, maxHeaderBytes))
	}()
}

// limitConn is a connection counted in connLimit.open until closed.
type limitConn struct {
	net.Conn
	lim    *connLimit
	closed atomic.Bool
}

// Close implements net.Conn.
func (c *limitConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.lim.open.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite shuts down the writing side of the connection if it has one
// (*net.TCPConn, gonet.TCPConn), as http.Server does before closing.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
