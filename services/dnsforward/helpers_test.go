package dnsforward

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
)

// seenQuery is one query a fake upstream received.
type seenQuery struct {
	id    uint16
	from  netip.AddrPort
	name  string
	qtype uint16
	tcp   bool
	opt   *dns.OPT
	cd    bool
}

// upstream is a fake recursive resolver on loopback, UDP and TCP on one
// port, answering from a zone given as text records. Names starting with
// "nx" are NXDOMAIN, names of the zone without the type asked are
// NODATA, both with the SOA of soa; "servfail." names get SERVFAIL;
// an answer larger than 512 bytes (or the query's EDNS size) is
// truncated over UDP with TC set.
type upstream struct {
	addr   netip.AddrPort
	soa    dns.RR
	noSOA  bool // negative answers without the SOA
	mu     sync.Mutex
	zone   map[string][]dns.RR // by lower-case name
	seen   []seenQuery
	gate   chan struct{} // when set, each query waits for a receive on it
	rcode  int           // when set, every answer has this rcode
	noEDNS bool          // answer FORMERR to queries with EDNS, as an old server
	lower  bool          // echo the question in lower case (a resolver without 0x20)
}

func newUpstream(t testing.TB, records ...string) *upstream {
	t.Helper()
	u := &upstream{zone: make(map[string][]dns.RR)}
	u.soa = mustRR(t, "test. 3600 IN SOA ns.test. admin.test. 1 7200 900 1209600 300")
	for _, r := range records {
		u.add(t, r)
	}
	pc, l := listenUDPTCP(t)
	u.addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	var wg sync.WaitGroup
	wg.Add(2)
	us := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(u.serve), NotifyStartedFunc: wg.Done}
	ts := &dns.Server{Listener: l, Handler: dns.HandlerFunc(u.serve), NotifyStartedFunc: wg.Done}
	go us.ActivateAndServe()
	go ts.ActivateAndServe()
	wg.Wait()
	t.Cleanup(func() {
		u.mu.Lock()
		if u.gate != nil {
			close(u.gate)
			u.gate = nil
		}
		u.mu.Unlock()
		us.Shutdown()
		ts.Shutdown()
	})
	return u
}

// listenUDPTCP listens on one loopback port for UDP and TCP.
func listenUDPTCP(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	for try := 0; ; try++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l
		}
		pc.Close()
		if try > 10 {
			t.Fatalf("listen tcp: %v", err)
		}
	}
}

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("dns.NewRR(%q): %v", s, err)
	}
	return rr
}

func (u *upstream) add(t testing.TB, record string) {
	rr := mustRR(t, record)
	u.mu.Lock()
	defer u.mu.Unlock()
	n := strings.ToLower(rr.Header().Name)
	u.zone[n] = append(u.zone[n], rr)
}

// configure changes the upstream's behaviour fields under its lock.
func (u *upstream) configure(f func(u *upstream)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f(u)
}

// queries returns what the upstream received so far.
func (u *upstream) queries() []seenQuery {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenQuery(nil), u.seen...)
}

func (u *upstream) count() int { return len(u.queries()) }

func (u *upstream) serve(w dns.ResponseWriter, r *dns.Msg) {
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	from, _ := netip.ParseAddrPort(w.RemoteAddr().String())
	q := r.Question[0]
	u.mu.Lock()
	u.seen = append(u.seen, seenQuery{id: r.Id, from: from, name: q.Name, qtype: q.Qtype, tcp: tcp, opt: r.IsEdns0(), cd: r.CheckingDisabled})
	gate, rcode, noEDNS, lower, soa, noSOA := u.gate, u.rcode, u.noEDNS, u.lower, u.soa, u.noSOA
	rrs := u.zone[strings.ToLower(q.Name)]
	u.mu.Unlock()
	if gate != nil {
		<-gate
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	if lower {
		m.Question[0].Name = strings.ToLower(q.Name)
	}
	switch {
	case noEDNS && r.IsEdns0() != nil:
		m.Rcode = dns.RcodeFormatError
		w.WriteMsg(m)
		return
	case rcode != 0:
		m.Rcode = rcode
	case strings.HasPrefix(strings.ToLower(q.Name), "servfail."):
		m.Rcode = dns.RcodeServerFailure
	case strings.HasPrefix(strings.ToLower(q.Name), "nx"):
		m.Rcode = dns.RcodeNameError
		if !noSOA {
			m.Ns = append(m.Ns, dns.Copy(soa))
		}
	default:
		for _, rr := range rrs {
			if rr.Header().Rrtype == q.Qtype || q.Qtype == dns.TypeANY || rr.Header().Rrtype == dns.TypeCNAME {
				m.Answer = append(m.Answer, dns.Copy(rr))
			}
		}
		if len(m.Answer) == 0 {
			if len(rrs) == 0 {
				m.Rcode = dns.RcodeNameError
			}
			if !noSOA {
				m.Ns = append(m.Ns, dns.Copy(soa))
			}
		}
	}
	if opt := r.IsEdns0(); opt != nil {
		m.SetEdns0(4096, opt.Do())
	}
	if !tcp {
		size := 512
		if opt := r.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		if m.Len() > size {
			m.Answer, m.Ns, m.Extra = nil, nil, nil
			m.Truncated = true
		}
	}
	w.WriteMsg(m)
}

// holdQueries makes the upstream wait before each answer until release.
func (u *upstream) holdQueries() (release func()) {
	g := make(chan struct{})
	u.mu.Lock()
	u.gate = g
	u.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			if u.gate == g {
				u.gate = nil
			}
			u.mu.Unlock()
			close(g)
		})
	}
}

// loopbackDialUDP is Config.DialUDP on kernel loopback sockets.
func loopbackDialUDP(ctx context.Context, server netip.AddrPort, port uint16) (net.Conn, error) {
	return net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)),
		net.UDPAddrFromAddrPort(server))
}

// loopbackDialTCP is Config.DialTCP on kernel sockets.
func loopbackDialTCP(ctx context.Context, server netip.AddrPort) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", server.String())
}

// testForwarder is a Forwarder serving on loopback UDP and TCP.
type testForwarder struct {
	*Forwarder
	clock *fakeclock.Clock
	addr  string // UDP and TCP address
}

// startForwarder starts a forwarder with cfg (Dial functions, clock and
// short timeouts filled in when unset) asking ups, stopped when t ends.
func startForwarder(t testing.TB, cfg Config, ups ...*upstream) *testForwarder {
	t.Helper()
	goroutineLeakCheck(t)
	for _, u := range ups {
		cfg.Upstreams = append(cfg.Upstreams, u.addr)
	}
	if cfg.DialUDP == nil {
		cfg.DialUDP = loopbackDialUDP
	}
	if cfg.DialTCP == nil {
		cfg.DialTCP = loopbackDialTCP
	}
	clock := fakeclock.New()
	if cfg.Clock == nil {
		cfg.Clock = clock
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 300 * time.Millisecond
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	pc, l := listenUDPTCP(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); f.Serve(ctx, pc) }()
	go func() { defer wg.Done(); f.ServeTCP(ctx, l) }()
	go func() { defer wg.Done(); f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		pc.Close()
	})
	return &testForwarder{Forwarder: f, clock: clock, addr: pc.LocalAddr().String()}
}

// ask sends m over net ("udp" or "tcp") and returns the reply.
func (tf *testForwarder) ask(t testing.TB, network string, m *dns.Msg) *dns.Msg {
	t.Helper()
	r, err := tf.exchange(network, m)
	if err != nil {
		t.Fatalf("%s query %s: %v", network, m.Question[0].String(), err)
	}
	return r
}

func (tf *testForwarder) exchange(network string, m *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: 3 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, tf.addr)
	return r, err
}

// question returns a query for name and qtype with RD set.
func question(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// rawAsk sends b over UDP and returns the reply, or nil after wait.
func (tf *testForwarder) rawAsk(t testing.TB, b []byte, wait time.Duration) []byte {
	t.Helper()
	c, err := net.Dial("udp", tf.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

// waitFor polls cond for up to 3 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// goroutineLeakCheck fails t if goroutines started during it outlive its
// cleanups (wireguard-go device_test.go).
func goroutineLeakCheck(t testing.TB) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		var after int
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if after = runtime.NumGoroutine(); after <= before {
				return
			}
		}
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
	})
}

// counter is an atomic counter for fakes.
type counter = atomic.Int64

// captureConn is a net.PacketConn and addrPortConn that keeps what is
// written to it and reads nothing.
type captureConn struct {
	mu      sync.Mutex
	writes  [][]byte
	discard bool // keep nothing (benchmarks)
}

func (c *captureConn) ReadFromUDPAddrPort([]byte) (int, netip.AddrPort, error) {
	return 0, netip.AddrPort{}, net.ErrClosed
}

func (c *captureConn) WriteToUDPAddrPort(b []byte, _ netip.AddrPort) (int, error) {
	if c.discard {
		return len(b), nil
	}
	c.mu.Lock()
	c.writes = append(c.writes, append([]byte(nil), b...))
	c.mu.Unlock()
	return len(b), nil
}

func (c *captureConn) ReadFrom([]byte) (int, net.Addr, error) { return 0, nil, net.ErrClosed }
func (c *captureConn) WriteTo(b []byte, _ net.Addr) (int, error) {
	return c.WriteToUDPAddrPort(b, netip.AddrPort{})
}
func (c *captureConn) Close() error                     { return nil }
func (c *captureConn) LocalAddr() net.Addr              { return &net.UDPAddr{} }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }

// take returns and forgets the writes so far.
func (c *captureConn) take() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

// last waits up to 3 s for a write and returns the last one unpacked.
func (c *captureConn) last(t testing.TB) *dns.Msg {
	t.Helper()
	var w [][]byte
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && len(w) == 0; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		w = c.writes
		c.mu.Unlock()
	}
	if len(w) == 0 {
		return nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(w[len(w)-1]); err != nil {
		t.Fatalf("reply does not unpack: %v", err)
	}
	return m
}
