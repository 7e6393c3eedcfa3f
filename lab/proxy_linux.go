package lab

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// proxyDialTimeout bounds a connection attempt to the router's status page.
const proxyDialTimeout = 5 * time.Second

// proxy forwards TCP connections accepted on a listener in the machine's
// own namespace to an address dialled from a socket made inside another
// namespace. It exposes the router's status page (served by netstack on
// the LAN interface) at 127.0.0.1:PORT.
type proxy struct {
	ln  net.Listener
	ns  string
	to  string
	log *slog.Logger
	// wg tracks routineAccept and one routineConn per open connection.
	wg sync.WaitGroup
	// mu protects conns.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// startProxy listens on listenAddr in the caller's namespace and forwards
// each connection to to, dialled from namespace ns.
func startProxy(log *slog.Logger, listenAddr, ns, to string) (*proxy, error) {
	ln, err := listenAgain(func() (net.Listener, error) { return net.Listen("tcp", listenAddr) })
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, ns: ns, to: to, log: log, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.routineAccept()
	return p, nil
}

// Addr returns the listening address.
func (p *proxy) Addr() *net.TCPAddr { return p.ln.Addr().(*net.TCPAddr) }

func (p *proxy) routineAccept() {
	defer p.wg.Done()
	p.log.Debug("lab: proxy started", "listen", p.ln.Addr(), "netns", p.ns, "to", p.to)
	defer p.log.Debug("lab: proxy stopped", "listen", p.ln.Addr())
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed by close
		}
		if !p.track(c, true) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.routineConn(c)
	}
}

// track adds or removes a connection; adding fails once the proxy is closed.
func (p *proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.conns == nil {
			return false
		}
		p.conns[c] = struct{}{}
	} else if p.conns != nil {
		delete(p.conns, c)
	}
	return true
}

func (p *proxy) routineConn(c net.Conn) {
	defer p.wg.Done()
	defer p.track(c, false)
	defer c.Close()
	up, err := dialIn(context.Background(), p.ns, p.to, proxyDialTimeout)
	if err != nil {
		p.log.Debug("lab: proxy dial", "to", p.to, "err", err)
		return
	}
	p.track(up, true)
	defer p.track(up, false)
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, up)
	c.(*net.TCPConn).CloseWrite()
	wg.Wait()
}

// close stops accepting, closes open connections and waits for the
// proxy's goroutines.
func (p *proxy) close() {
	if p == nil {
		return
	}
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// dialIn dials a TCP address from a socket created in namespace ns.
func dialIn(ctx context.Context, ns, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		// The socket is made on this thread, in ns; connect may finish on
		// another thread, which changes nothing for an existing socket.
		d := net.Dialer{Timeout: timeout}
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// listenIn listens on a TCP address with a socket created in namespace ns.
func listenIn(ns, addr string) (net.Listener, error) {
	return listenAgain(func() (ln net.Listener, err error) {
		err = inNetns(ns, func() error {
			ln, err = net.Listen("tcp", addr)
			return err
		})
		return ln, err
	})
}

// listenAgain calls listen until it fails with anything but an address
// in use, for up to listenRetry. A listener on the same address that was
// closed a moment ago (a proof's before, freePort's) may still listen: a
// child this process forked meanwhile holds the socket until it execs,
// when the close-on-exec flag closes it. With labs side by side the
// process forks all the time, and a re-listen right after a close failed
// now and then.
func listenAgain(listen func() (net.Listener, error)) (net.Listener, error) {
	ln, err := listen()
	for deadline := time.Now().Add(listenRetry); errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		ln, err = listen()
	}
	return ln, err
}

// listenRetry bounds listenAgain: a forked child execs within
// milliseconds, seconds on a loaded machine.
const listenRetry = 3 * time.Second
