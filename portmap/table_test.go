package portmap

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
)

const (
	lanIf natengine.Iface = 1
	wanIf natengine.Iface = 2
)

var (
	wanAddr = netip.MustParseAddr("203.0.113.2")
	hostA   = netip.MustParseAddr("192.168.1.10")
	hostB   = netip.MustParseAddr("192.168.1.20")
	t0      = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newEngine returns a NAT engine with a LAN (1) and a WAN (2).
func newEngine(t testing.TB) *natengine.Engine {
	t.Helper()
	e := natengine.New(natengine.Config{})
	err := e.SetRules(natengine.Rules{Ifaces: []natengine.IfaceConfig{
		{ID: lanIf, Name: "lan", Addrs: []netip.Addr{netip.MustParseAddr("192.168.1.1")}, Subnets: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}},
		{ID: wanIf, Name: "wan", WAN: true, Masquerade: true, Addrs: []netip.Addr{wanAddr}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func newTable(t testing.TB, e *natengine.Engine, p Policy, stateFile string) (*Table, *clock) {
	t.Helper()
	clk := &clock{now: t0}
	tb, err := New(Config{Policy: p, NAT: e, WAN: wanIf, ExternalAddr: func() netip.Addr { return wanAddr }, StateFile: stateFile, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return tb, clk
}

func req(owner Owner, client netip.Addr, port, ext uint16, life time.Duration) Request {
	return Request{Owner: owner, Client: client, Proto: natengine.ProtoUDP, Internal: netip.AddrPortFrom(client, port), External: ext, Lifetime: life}
}

// installed reports whether the engine has a mapping on udp ext to to.
func installed(e *natengine.Engine, proto uint8, ext uint16, to netip.AddrPort) bool {
	for _, m := range e.PortMappings() {
		if m.Proto == proto && m.Port == ext && m.In == wanIf && m.To == to {
			return true
		}
	}
	return false
}

// TestLifetimeClampAndExpiry: lifetimes are clamped to 120 s - 86,400 s;
// a mapping leaves the table and the NAT engine when its lifetime ends.
func TestLifetimeClampAndExpiry(t *testing.T) {
	e := newEngine(t)
	tb, clk := newTable(t, e, Policy{}, "")
	for _, tc := range []struct {
		port      uint16
		ask, want time.Duration
	}{
		{5000, 10 * time.Second, 120 * time.Second},
		{5001, 3600 * time.Second, 3600 * time.Second},
		{5002, 1e6 * time.Second, 86400 * time.Second},
	} {
		m, err := tb.Map(req(NATPMP, hostA, tc.port, tc.port, tc.ask))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Lifetime(clk.Now()); got != tc.want {
			t.Errorf("lifetime asked %v = %v, want %v", tc.ask, got, tc.want)
		}
		if !installed(e, natengine.ProtoUDP, tc.port, netip.AddrPortFrom(hostA, tc.port)) {
			t.Errorf("port %d not in the NAT engine", tc.port)
		}
	}
	clk.Add(119 * time.Second)
	if n := tb.Sweep(); n != 0 {
		t.Fatalf("Sweep at 119 s expired %d, want 0", n)
	}
	clk.Add(time.Second)
	if n := tb.Sweep(); n != 1 {
		t.Fatalf("Sweep at 120 s expired %d, want 1", n)
	}
	if installed(e, natengine.ProtoUDP, 5000, netip.AddrPortFrom(hostA, 5000)) {
		t.Error("expired mapping still in the NAT engine")
	}
	if _, ok := tb.Lookup(natengine.ProtoUDP, netip.AddrPortFrom(hostA, 5000)); ok {
		t.Error("expired mapping still in the table")
	}
	if got := tb.Stats().Expired.Load(); got != 1 {
		t.Errorf("Expired = %d, want 1", got)
	}
	if got := tb.Epoch(); got != 120 {
		t.Errorf("Epoch() = %d, want 120", got)
	}
}

// TestSecureModeAndPermissions: in secure mode a host maps only to
// itself; the default rules refuse ports below 1024; custom rules in
// miniupnpd's order, first match deciding.
func TestSecureModeAndPermissions(t *testing.T) {
	e := newEngine(t)
	tb, _ := newTable(t, e, Policy{Secure: true}, "")
	r := req(UPnP, hostA, 5000, 5000, time.Hour)
	r.Internal = netip.AddrPortFrom(hostB, 5000)
	if _, err := tb.Map(r); !errors.Is(err, ErrSecureMode) {
		t.Errorf("map to another host = %v, want ErrSecureMode", err)
	}
	if _, err := tb.Map(req(NATPMP, hostA, 80, 80, time.Hour)); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("internal port 80 = %v, want ErrNotPermitted", err)
	}
	m, err := tb.Map(req(NATPMP, hostA, 5000, 80, time.Hour))
	if err != nil || m.External < 1024 {
		t.Errorf("external 80 suggested, not exact = %+v, %v; want a port >= 1024", m, err)
	}
	r = req(UPnP, hostA, 5001, 443, time.Hour)
	r.Exact = true
	if _, err := tb.Map(r); !errors.Is(err, ErrNotPermitted) {
		t.Errorf("exact external 443 = %v, want ErrNotPermitted", err)
	}
	if got := tb.Stats().Secure.Load(); got != 1 {
		t.Errorf("Stats.Secure = %d, want 1", got)
	}
	if got := tb.Stats().Permission.Load(); got != 2 {
		t.Errorf("Stats.Permission = %d, want 2", got)
	}

	rules := []Rule{
		{Allow: false, External: PortRange{2050, 2050}, Inside: netip.MustParsePrefix("0.0.0.0/0"), Internal: PortRange{1, 65535}},
		{Allow: true, External: PortRange{2000, 2100}, Inside: netip.MustParsePrefix("192.168.1.0/28"), Internal: PortRange{2000, 2100}},
	}
	tb2, _ := newTable(t, newEngine(t), Policy{Rules: rules}, "")
	for _, tc := range []struct {
		host     netip.Addr
		port     uint16
		exact    bool
		want     error
		wantPort uint16
	}{
		{hostA, 2000, true, nil, 2000},
		{hostB, 2001, true, ErrNotPermitted, 0}, // .20 is outside /28
		{hostA, 2050, true, ErrNotPermitted, 0}, // the deny rule comes first
		{hostA, 2050, false, nil, 0},            // not exact: another permitted port
		{hostA, 3000, false, ErrNotPermitted, 0},
	} {
		r := req(PCP, tc.host, tc.port, tc.port, time.Hour)
		r.Exact = tc.exact
		m, err := tb2.Map(r)
		okPort := m.External == tc.wantPort || tc.wantPort == 0 && m.External != 2050 && m.External >= 2000 && m.External <= 2100
		if !errors.Is(err, tc.want) || (err == nil && !okPort) {
			t.Errorf("Map(%v:%d exact=%v) = port %d, %v; want port %d, %v", tc.host, tc.port, tc.exact, m.External, err, tc.wantPort, tc.want)
		}
	}
}

// TestHostLimitFlood: 10,000 requests from one host for new ports leave
// it at its limit, with every refusal counted; another host still maps;
// the total limit holds too.
func TestHostLimitFlood(t *testing.T) {
	e := newEngine(t)
	tb, _ := newTable(t, e, Policy{MaxPerHost: 16, MaxTotal: 20}, "")
	refused := 0
	for i := range 10000 {
		p := uint16(10000 + i)
		if _, err := tb.Map(req(NATPMP, hostA, p, p, time.Hour)); err != nil {
			if !errors.Is(err, ErrHostLimit) {
				t.Fatalf("request %d: %v, want ErrHostLimit", i, err)
			}
			refused++
		}
	}
	if got := len(tb.Mappings()); got != 16 {
		t.Errorf("host A holds %d mappings, want 16", got)
	}
	if got := len(e.PortMappings()); got != 16 {
		t.Errorf("the NAT engine holds %d mappings, want 16", got)
	}
	if refused != 10000-16 || tb.Stats().HostLimit.Load() != uint64(refused) {
		t.Errorf("refused %d, counted %d; want %d", refused, tb.Stats().HostLimit.Load(), 10000-16)
	}
	for i := range 5 {
		_, err := tb.Map(req(NATPMP, hostB, uint16(20000+i), 0, time.Hour))
		if want := error(nil); i == 4 {
			want = ErrTotalLimit
			if !errors.Is(err, want) {
				t.Errorf("host B's 5th: %v, want ErrTotalLimit", err)
			}
		} else if err != nil {
			t.Errorf("host B's %dth: %v", i+1, err)
		}
	}
}

// TestConflictsAndNonce: two hosts asking for one external port get
// different ones unless exact; a UPnP re-add by another host conflicts;
// a PCP renewal or delete with another nonce is refused; NAT-PMP renews
// by internal endpoint; deletes are the owner's only.
func TestConflictsAndNonce(t *testing.T) {
	e := newEngine(t)
	tb, _ := newTable(t, e, Policy{}, "")
	a, err := tb.Map(req(NATPMP, hostA, 3074, 3074, time.Hour))
	if err != nil || a.External != 3074 {
		t.Fatalf("A: %+v, %v", a, err)
	}
	b, err := tb.Map(req(NATPMP, hostB, 3074, 3074, time.Hour))
	if err != nil || b.External == 3074 {
		t.Fatalf("B: %+v, %v; want another port", b, err)
	}
	r := req(UPnP, hostB, 3074, 3074, time.Hour)
	r.Exact, r.ByExternal = true, true
	if _, err := tb.Map(r); !errors.Is(err, ErrConflict) {
		t.Errorf("UPnP B on A's port: %v, want ErrConflict", err)
	}
	// UPnP: the same host re-adding its external port to another
	// internal port overwrites its entry.
	u := req(UPnP, hostA, 7000, 7000, time.Hour)
	u.Exact, u.ByExternal = true, true
	if _, err := tb.Map(u); err != nil {
		t.Fatal(err)
	}
	u.Internal = netip.AddrPortFrom(hostA, 7001)
	if m, err := tb.Map(u); err != nil || m.External != 7000 || !installed(e, natengine.ProtoUDP, 7000, u.Internal) {
		t.Errorf("UPnP overwrite: %+v, %v", m, err)
	}
	tb.DeleteExternal(UPnP, hostA, natengine.ProtoUDP, 7000)

	p := req(PCP, hostA, 6000, 6000, time.Hour)
	p.Nonce = [NonceLen]byte{1, 2, 3}
	if _, err := tb.Map(p); err != nil {
		t.Fatal(err)
	}
	p2 := p
	p2.Nonce = [NonceLen]byte{9}
	if _, err := tb.Map(p2); !errors.Is(err, ErrNonce) {
		t.Errorf("renewal with another nonce: %v, want ErrNonce", err)
	}
	if err := tb.Delete(PCP, hostA, natengine.ProtoUDP, p.Internal, p2.Nonce); !errors.Is(err, ErrNonce) {
		t.Errorf("delete with another nonce: %v, want ErrNonce", err)
	}
	if err := tb.Delete(NATPMP, hostB, natengine.ProtoUDP, a.Internal, [NonceLen]byte{}); !errors.Is(err, ErrNotOwner) {
		t.Errorf("B deletes A's: %v, want ErrNotOwner", err)
	}
	if err := tb.Delete(PCP, hostA, natengine.ProtoUDP, p.Internal, p.Nonce); err != nil {
		t.Errorf("delete with the nonce: %v", err)
	}
	if got := tb.Stats().Nonce.Load(); got != 2 {
		t.Errorf("Stats.Nonce = %d, want 2", got)
	}
	if n := tb.DeleteAll(NATPMP, hostA, 0); n != 1 {
		t.Errorf("DeleteAll(A) = %d, want 1", n)
	}
}

// TestPersistence: the mappings and the epoch survive a restart (a new
// engine and table reading the state file); expired ones do not; a
// corrupt file is reported, the table starts empty and the next save
// replaces it.
func TestPersistence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "portmap.json")
	tb, clk := newTable(t, newEngine(t), Policy{}, file)
	if _, err := tb.Map(req(NATPMP, hostA, 5000, 5000, 200*time.Second)); err != nil {
		t.Fatal(err)
	}
	p := req(PCP, hostB, 6000, 6000, time.Hour)
	p.Proto = natengine.ProtoTCP
	p.Nonce = [NonceLen]byte{7}
	if _, err := tb.Map(p); err != nil {
		t.Fatal(err)
	}

	e2 := newEngine(t)
	clk2 := &clock{now: clk.Now().Add(300 * time.Second)} // the UDP one expired meanwhile
	tb2, err := New(Config{NAT: e2, WAN: wanIf, ExternalAddr: func() netip.Addr { return wanAddr }, StateFile: file, Now: clk2.Now})
	if err != nil {
		t.Fatal(err)
	}
	n, err := tb2.Restore()
	if err != nil || n != 1 {
		t.Fatalf("Restore() = %d, %v; want 1", n, err)
	}
	if !installed(e2, natengine.ProtoTCP, 6000, netip.AddrPortFrom(hostB, 6000)) {
		t.Error("restored mapping not in the new NAT engine")
	}
	if got := tb2.Epoch(); got != 300 {
		t.Errorf("epoch after restart = %d, want 300 (continued)", got)
	}
	m, _ := tb2.Lookup(natengine.ProtoTCP, netip.AddrPortFrom(hostB, 6000))
	if m.Nonce != p.Nonce || m.Owner != PCP || m.Lifetime(clk2.Now()) != time.Hour-300*time.Second {
		t.Errorf("restored %+v", m)
	}

	if err := os.WriteFile(file, []byte(`{"version":1,"mappings":[{"proto":6,`), 0o600); err != nil {
		t.Fatal(err)
	}
	tb3, _ := newTable(t, newEngine(t), Policy{}, file)
	if n, err := tb3.Restore(); err == nil || n != 0 {
		t.Fatalf("Restore(corrupt) = %d, %v; want an error", n, err)
	}
	if _, err := tb3.Map(req(NATPMP, hostA, 5000, 5000, time.Hour)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	if s, err := DecodeState(b); err != nil || len(s.Mappings) != 1 {
		t.Errorf("state file after a save: %v, %v", s, err)
	}
}

// TestStatus: the status lists each mapping with owner, protocol and
// time left, and the refusal counters by name.
func TestStatus(t *testing.T) {
	tb, clk := newTable(t, newEngine(t), Policy{Secure: true}, "")
	if _, err := tb.Map(req(UPnP, hostA, 5000, 5000, time.Hour)); err != nil {
		t.Fatal(err)
	}
	r := req(UPnP, hostA, 5001, 5001, time.Hour)
	r.Internal = netip.AddrPortFrom(hostB, 5001)
	tb.Map(r)
	clk.Add(10 * time.Second)
	s := tb.Status()
	if len(s.Mappings) != 1 || s.Mappings[0].Owner != UPnP || s.Mappings[0].Protocol != "udp" || s.Mappings[0].Remaining != 3590 {
		t.Errorf("Status().Mappings = %+v", s.Mappings)
	}
	if s.Refused["secure_mode"] != 1 || s.Events["created"] != 1 || s.External != "203.0.113.2" || s.Epoch != 10 {
		t.Errorf("Status() = %+v", s)
	}
}

// TestLifetimeSecs: the lifetime an answer states is rounded to the
// nearest second, so a mapping granted 3600 s says 3600 a microsecond
// later (truncation said 3599, and a 120 s one 119, below the minimum).
func TestLifetimeSecs(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, c := range []struct {
		left time.Duration
		want uint32
	}{
		{3600*time.Second - time.Microsecond, 3600},
		{120*time.Second - 20*time.Millisecond, 120},
		{90*time.Second + 400*time.Millisecond, 90},
		{-time.Second, 0},
	} {
		m := &Mapping{Expires: now.Add(c.left)}
		if got := m.LifetimeSecs(now); got != c.want {
			t.Errorf("LifetimeSecs with %v left = %d, want %d", c.left, got, c.want)
		}
	}
}
