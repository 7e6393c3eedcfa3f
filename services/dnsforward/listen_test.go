package dnsforward

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
)

// fakeListen maps the addresses SetListen is given (documentation
// addresses, as the router's netstack ones would be) to kernel sockets
// on loopback, and remembers what it opened.
type fakeListen struct {
	mu     sync.Mutex
	udp    map[netip.AddrPort]string // the bound address of each opened one
	tcp    map[netip.AddrPort]string
	opened map[netip.AddrPort]int  // how often each was opened
	fail   map[netip.AddrPort]bool // addresses that cannot be opened
	pcs    map[netip.AddrPort]net.PacketConn
	lns    map[netip.AddrPort]net.Listener
	used   map[string]bool // every loopback address handed out
}

func newFakeListen() *fakeListen {
	return &fakeListen{udp: map[netip.AddrPort]string{}, tcp: map[netip.AddrPort]string{},
		opened: map[netip.AddrPort]int{}, fail: map[netip.AddrPort]bool{},
		pcs: map[netip.AddrPort]net.PacketConn{}, lns: map[netip.AddrPort]net.Listener{}, used: map[string]bool{}}
}

// fresh opens sockets with open until one gets a loopback address never
// handed out before: the kernel may give a just-closed socket's port to
// the next one, and the test tells the addresses apart by port.
func fresh[S io.Closer](fl *fakeListen, network string, open func() (S, error), addr func(S) string) (S, error) {
	var dups []S
	defer func() {
		for _, d := range dups {
			d.Close()
		}
	}()
	for {
		s, err := open()
		if err != nil {
			return s, err
		}
		if a := network + " " + addr(s); !fl.used[a] {
			fl.used[a] = true
			return s, nil
		}
		dups = append(dups, s)
	}
}

func (fl *fakeListen) listenUDP(ap netip.AddrPort) (net.PacketConn, error) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.fail[ap] {
		return nil, errors.New("address not available")
	}
	pc, err := fresh(fl, "udp", func() (net.PacketConn, error) { return net.ListenPacket("udp", "127.0.0.1:0") },
		func(pc net.PacketConn) string { return pc.LocalAddr().String() })
	if err != nil {
		return nil, err
	}
	fl.udp[ap], fl.opened[ap], fl.pcs[ap] = pc.LocalAddr().String(), fl.opened[ap]+1, pc
	return pc, nil
}

func (fl *fakeListen) listenTCP(ap netip.AddrPort) (net.Listener, error) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	l, err := fresh(fl, "tcp", func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") },
		func(l net.Listener) string { return l.Addr().String() })
	if err != nil {
		return nil, err
	}
	fl.tcp[ap], fl.lns[ap] = l.Addr().String(), l
	return l, nil
}

// closed reports whether the sockets opened for ap are closed: setting a
// deadline on a closed socket fails with net.ErrClosed.
func (fl *fakeListen) closed(ap netip.AddrPort) (udp, tcp bool) {
	fl.mu.Lock()
	pc, l := fl.pcs[ap], fl.lns[ap]
	fl.mu.Unlock()
	udp = errors.Is(pc.SetDeadline(time.Now()), net.ErrClosed)
	tcp = errors.Is(l.(*net.TCPListener).SetDeadline(time.Now()), net.ErrClosed)
	return udp, tcp
}

func (fl *fakeListen) addrs(ap netip.AddrPort) (udp, tcp string) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.udp[ap], fl.tcp[ap]
}

// TestSetListen: moving the forwarder to another address keeps it
// running: the answer cached through the old address is a cache hit at
// the new one (the upstream was asked once), the old address's sockets
// are closed, an address that cannot be opened is reported while the
// others are served, and Run's end closes the rest.
func TestSetListen(t *testing.T) {
	goroutineLeakCheck(t)
	u := newUpstream(t, "www.example. 300 IN A 192.0.2.1")
	fl := newFakeListen()
	f, err := New(Config{
		Upstreams: []netip.AddrPort{u.addr},
		DialUDP:   loopbackDialUDP, DialTCP: loopbackDialTCP,
		ListenUDP: fl.listenUDP, ListenTCP: fl.listenTCP,
		Clock: fakeclock.New(), Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	old := netip.MustParseAddrPort("192.0.2.53:53")
	moved := netip.MustParseAddrPort("[2001:db8::53]:53")
	if err := f.SetListen([]netip.AddrPort{old}); err != nil {
		t.Fatalf("SetListen([%v]) = %v", old, err)
	}
	ask := func(network, addr string) (*dns.Msg, error) {
		c := &dns.Client{Net: network, Timeout: time.Second}
		r, _, err := c.Exchange(question("www.example.", dns.TypeA), addr)
		return r, err
	}
	oldUDP, _ := fl.addrs(old)
	if r, err := ask("udp", oldUDP); err != nil || len(r.Answer) != 1 {
		t.Fatalf("query at %v: %v, %v; want an answer", old, r, err)
	}

	if err := f.SetListen([]netip.AddrPort{moved}); err != nil {
		t.Fatalf("SetListen([%v]) = %v", moved, err)
	}
	newUDP, newTCP := fl.addrs(moved)
	for _, network := range []string{"udp", "tcp"} {
		addr := map[string]string{"udp": newUDP, "tcp": newTCP}[network]
		if r, err := ask(network, addr); err != nil || len(r.Answer) != 1 {
			t.Errorf("%s query at %v after SetListen: %v, %v; want an answer", network, moved, r, err)
		}
	}
	st := f.Status()
	if st.CacheHits != 2 || st.CacheMisses != 1 || u.count() != 1 {
		t.Errorf("after SetListen: CacheHits %d CacheMisses %d, upstream saw %d; want 2, 1, 1 (the cache kept)",
			st.CacheHits, st.CacheMisses, u.count())
	}
	if diff := cmp.Diff([]netip.AddrPort{moved}, st.Listen, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("Status().Listen (-want +got):\n%s", diff)
	}
	// The old address is closed: its sockets are closed when SetListen
	// returns, and it answers nothing.
	if udp, tcp := fl.closed(old); !udp || !tcp {
		t.Errorf("removed address's sockets closed: UDP %v, TCP %v; want both", udp, tcp)
	}
	if r, err := ask("udp", oldUDP); err == nil {
		t.Errorf("query at the removed %v answered: %v", old, r)
	}

	// One address fails: the other stays served, on its first sockets.
	bad := netip.MustParseAddrPort("192.0.2.54:53")
	fl.mu.Lock()
	fl.fail[bad] = true
	fl.mu.Unlock()
	if err := f.SetListen([]netip.AddrPort{moved, bad}); err == nil || !strings.Contains(err.Error(), bad.String()) {
		t.Errorf("SetListen with a failing address = %v, want an error naming %v", err, bad)
	}
	if got := f.Listening(); len(got) != 1 || got[0] != moved {
		t.Errorf("Listening() = %v, want [%v]", got, moved)
	}
	fl.mu.Lock()
	n := fl.opened[moved]
	fl.mu.Unlock()
	if n != 1 {
		t.Errorf("%v opened %d times, want 1 (kept across SetListen)", moved, n)
	}
	if r, err := ask("udp", newUDP); err != nil || len(r.Answer) != 1 {
		t.Errorf("query at the kept %v: %v, %v; want an answer", moved, r, err)
	}

	// Run's end closes the sockets; SetListen then refuses.
	cancel()
	<-done
	if _, err := ask("udp", newUDP); err == nil {
		t.Errorf("query at %v answered after Run returned", moved)
	}
	if got := f.Listening(); len(got) != 0 {
		t.Errorf("Listening() after Run = %v, want none", got)
	}
	if err := f.SetListen([]netip.AddrPort{moved}); !errors.Is(err, errStopped) {
		t.Errorf("SetListen after Run = %v, want %v", err, errStopped)
	}
}
