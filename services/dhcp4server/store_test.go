package dhcp4server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

func fileConfig(t testing.TB, size int) (Config, *fakeclock.Clock) {
	cfg := testConfig(size)
	cfg.LeaseFile = filepath.Join(t.TempDir(), "leases.json")
	clk := fakeclock.New()
	cfg.Clock = clk
	return cfg, clk
}

// TestLeaseFileRestart checks that every lease, the previous-address
// records and the quarantines survive a restart, and the client's
// INIT-REBOOT is answered from them.
func TestLeaseFileRestart(t *testing.T) {
	cfg, clk := fileConfig(t, 5)
	s, _ := newTestServer(t, cfg)
	a := dora(t, s, mac(1), dhcpv4.WithOption(dhcpv4.OptHostName("one")))
	cid := dhcpv4.WithOption(dhcpv4.OptClientIdentifier([]byte{0xff, 0, 0, 0, 1, 0, 1}))
	b := dora(t, s, mac(2), cid)
	c := dora(t, s, mac(3))
	exchange(t, s, unicast(msg(dhcpv4.MessageTypeRelease, mac(3), withCI(c.String()))))
	d := dora(t, s, mac(4))
	exchange(t, s, bcast(msg(dhcpv4.MessageTypeDecline, mac(4), withReq(d.String()), withSID(srvAddr))))
	dora(t, s, staticMAC)
	exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(5)))) // an offer: not kept
	before := s.Status()

	s2, _ := newTestServer(t, cfg)
	after := s2.Status()
	if after.LeaseFileProblem != "" || s2.Stats().LeaseFileCorrupt.Load() != 0 {
		t.Fatalf("restart: problem %q", after.LeaseFileProblem)
	}
	if len(after.Leases) != len(before.Leases) {
		t.Fatalf("leases after restart = %+v, want %+v", after.Leases, before.Leases)
	}
	for i, l := range after.Leases {
		w := before.Leases[i]
		if l.Addr != w.Addr || !bytes.Equal(l.MAC, w.MAC) || !bytes.Equal(l.ClientID, w.ClientID) || l.Hostname != w.Hostname ||
			!l.Expiry.Equal(w.Expiry) || l.State != w.State || l.Static != w.Static {
			t.Errorf("lease %d after restart = %+v, want %+v", i, l, w)
		}
	}
	if after.Declined != 1 || after.Offered != 0 {
		t.Errorf("after restart Declined, Offered = %d, %d, want 1, 0", after.Declined, after.Offered)
	}
	for _, tc := range []struct {
		hw   int
		addr netip.Addr
		mods []dhcpv4.Modifier
	}{{1, a, nil}, {2, b, []dhcpv4.Modifier{cid}}, {3, c, nil}} {
		m, _ := exchange(t, s2, bcast(msg(dhcpv4.MessageTypeRequest, mac(tc.hw), append(tc.mods, withReq(tc.addr.String()))...)))
		if typeOf(m) != "ACK" {
			t.Errorf("INIT-REBOOT of client %d's %v after restart = %s, want ACK", tc.hw, tc.addr, typeOf(m))
		}
	}
	if m, _ := exchange(t, s2, bcast(msg(dhcpv4.MessageTypeDiscover, mac(9), withReq(d.String())))); m != nil && ip4(m.YourIPAddr) == d {
		t.Errorf("quarantined %v offered after restart", d)
	}
	clk.Forward(time.Hour)
	checkInvariants(t, s2)
}

// TestLeaseFileCorrupt checks that a truncated, garbled or inconsistent
// lease file is reported, kept as .corrupt and replaced, never fatal.
func TestLeaseFileCorrupt(t *testing.T) {
	cfg, _ := fileConfig(t, 5)
	s, _ := newTestServer(t, cfg)
	dora(t, s, mac(1))
	dora(t, s, mac(2))
	valid, err := os.ReadFile(cfg.LeaseFile)
	if err != nil {
		t.Fatal(err)
	}
	var f leaseFile
	json.Unmarshal(valid, &f)
	dup := f
	dup.Leases = append(dup.Leases, dup.Leases[0])
	dup.Leases[2].MAC = "02:10:00:00:00:09"
	dupData, _ := json.Marshal(dup)
	badMAC := f
	badMAC.Leases = append([]fileLease(nil), f.Leases...)
	badMAC.Leases[1].MAC = "zz"
	badMACData, _ := json.Marshal(badMAC)
	for _, tc := range []struct {
		name string
		data []byte
		kept int // leases read
	}{
		{"empty", nil, 0},
		{"truncated", valid[:len(valid)/2], 0},
		{"garbage", []byte("\x00\xffnot json"), 0},
		{"trailing data", append(bytes.Clone(valid), "{}"...), 0},
		{"wrong version", bytes.Replace(valid, []byte(`"version": 1`), []byte(`"version": 7`), 1), 0},
		{"unknown field", bytes.Replace(valid, []byte(`"leases"`), []byte(`"x": 1, "leases"`), 1), 0},
		{"two leases for one address", dupData, 2},
		{"bad MAC", badMACData, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.LeaseFile = filepath.Join(t.TempDir(), "leases.json")
			if err := os.WriteFile(c.LeaseFile, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, _ := newTestServer(t, c)
			st := s.Status()
			if s.Stats().LeaseFileCorrupt.Load() != 1 || !strings.Contains(st.LeaseFileProblem, "corrupt") {
				t.Errorf("LeaseFileCorrupt = %d, problem %q; want 1 and a report", s.Stats().LeaseFileCorrupt.Load(), st.LeaseFileProblem)
			}
			if n := len(st.Leases) - 1; n != tc.kept { // less the static one
				t.Errorf("leases read = %d, want %d", n, tc.kept)
			}
			if got, _ := os.ReadFile(c.LeaseFile + ".corrupt"); !bytes.Equal(got, tc.data) {
				t.Errorf(".corrupt = %q, want the original", got)
			}
			again, _ := newTestServer(t, c)
			if p := again.Status().LeaseFileProblem; p != "" || len(again.Status().Leases)-1 != tc.kept {
				t.Errorf("the replaced file: problem %q, %d leases; want none and %d", p, len(again.Status().Leases)-1, tc.kept)
			}
			dora(t, again, mac(7)) // and serving goes on
		})
	}
}

// TestLeaseFileConfigChange checks that leases the new config does not
// allow are dropped without calling the file corrupt, and that a crash's
// leftover temporary file is removed.
func TestLeaseFileConfigChange(t *testing.T) {
	cfg, _ := fileConfig(t, 5)
	s, _ := newTestServer(t, cfg)
	dora(t, s, mac(1))
	b := dora(t, s, mac(2))
	dora(t, s, staticMAC)
	stale := filepath.Join(filepath.Dir(cfg.LeaseFile), ".leases.json.tmp12345")
	os.WriteFile(stale, []byte("half"), 0o600)

	cfg.Static = []StaticLease{{MAC: mac(1), Addr: ip("192.168.1.20")}}
	s2, _ := newTestServer(t, cfg)
	st := s2.Status()
	if st.LeaseFileProblem != "" || s2.Stats().LeaseFileCorrupt.Load() != 0 {
		t.Errorf("config change reported as %q", st.LeaseFileProblem)
	}
	if len(st.Leases) != 2 || st.Leases[0].Addr != ip("192.168.1.20") || st.Leases[0].State != LeaseUnused || st.Leases[1].Addr != b {
		t.Errorf("leases = %+v, want the new static (unused) and %v", st.Leases, b)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file: %v, want removed", err)
	}
	data, _ := os.ReadFile(cfg.LeaseFile)
	if strings.Contains(string(data), staticMAC.String()) || strings.Contains(string(data), mac(1).String()) {
		t.Errorf("lease file still has the dropped leases:\n%s", data)
	}
}

// TestLeaseFileWriteError checks that an ACK whose lease cannot be
// written is not sent, the error is shown, and a later write clears it.
func TestLeaseFileWriteError(t *testing.T) {
	cfg, _ := fileConfig(t, 5)
	dir := filepath.Join(t.TempDir(), "gone")
	cfg.LeaseFile = filepath.Join(dir, "leases.json")
	s, _ := newTestServer(t, cfg)
	off, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, mac(1))))
	tr := newChanTransport(8)
	s.t = tr
	r := s.handle(bcast(msg(dhcpv4.MessageTypeRequest, mac(1), withReq(off.YourIPAddr.String()), withSID(srvAddr))))
	s.enqueue(r)
	s.flush()
	if len(tr.out) != 0 || s.Stats().Drops[DropStoreError].Load() != 1 {
		t.Errorf("ACK sent = %d, Drops[store_error] = %d; want 0 and 1", len(tr.out), s.Stats().Drops[DropStoreError].Load())
	}
	if st := s.Status(); st.LeaseFileError == "" || s.Stats().LeaseWriteErrors.Load() != 1 {
		t.Errorf("LeaseFileError = %q, LeaseWriteErrors = %d; want an error and 1", st.LeaseFileError, s.Stats().LeaseWriteErrors.Load())
	}
	os.Mkdir(dir, 0o700)
	s.sweep() // retries
	s.flush()
	if st := s.Status(); st.LeaseFileError != "" {
		t.Errorf("LeaseFileError after a good write = %q", st.LeaseFileError)
	}
	s2, _ := newTestServer(t, cfg)
	if l := leaseOf(t, s2, ip4(off.YourIPAddr)); l.State != LeaseBound {
		t.Errorf("lease after the retried write = %+v", l)
	}
}

// TestRunGroupCommit runs the server and checks that every ACK leaves
// only after the lease file holds its lease, that a burst shares writes,
// and that OnChange follows the writes.
func TestRunGroupCommit(t *testing.T) {
	const n = 150
	cfg, _ := fileConfig(t, n)
	cfg = noLimit(cfg) // n new clients at once
	var changes atomic.Int64
	cfg.OnChange = func() { changes.Add(1) }
	s, _ := newTestServer(t, cfg)
	tr := newChanTransport(2 * n)
	s.t = tr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	for !s.running.Load() {
		time.Sleep(time.Millisecond)
	}
	if err := s.Run(ctx); err != ErrRunning {
		t.Errorf("second Run = %v, want ErrRunning", err)
	}
	offers := map[string]string{}
	for i := range n {
		tr.in <- bcast(msg(dhcpv4.MessageTypeDiscover, mac(i)))
	}
	for range n {
		m := recvMsg(t, tr)
		offers[m.ClientHWAddr.String()] = m.YourIPAddr.String()
	}
	for i := range n {
		tr.in <- bcast(msg(dhcpv4.MessageTypeRequest, mac(i), withReq(offers[mac(i).String()]), withSID(srvAddr)))
	}
	for range n {
		m := recvMsg(t, tr)
		if typeOf(m) != "ACK" {
			t.Fatalf("reply %s, want ACK", typeOf(m))
		}
		data, err := os.ReadFile(cfg.LeaseFile)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `"mac": "`+m.ClientHWAddr.String()+`"`) {
			t.Fatalf("ACK for %v left before the lease file held it", m.ClientHWAddr)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	w := s.Stats().LeaseWrites.Load()
	t.Logf("%d ACKs, %d lease writes, %d OnChange calls", n, w, changes.Load())
	if w >= n {
		t.Errorf("LeaseWrites = %d for %d ACKs: want fewer (group commit)", w, n)
	}
	if changes.Load() == 0 {
		t.Errorf("OnChange calls = 0, want some")
	}
}

func recvMsg(t testing.TB, tr *chanTransport) *dhcpv4.DHCPv4 {
	t.Helper()
	select {
	case p := <-tr.out:
		m, err := dhcpv4.FromBytes(p.Payload)
		if err != nil {
			t.Fatal(err)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no reply in 10 s")
		return nil
	}
}

// frameLink is a rawudp.Link that keeps the frames written.
type frameLink struct{ frames chan []byte }

func (l *frameLink) WriteFrame(f []byte) error {
	l.frames <- bytes.Clone(f)
	return nil
}

func (l *frameLink) HardwareAddr() net.HardwareAddr { return net.HardwareAddr{0x02, 0x53, 0, 0, 0, 1} }

// TestRunOverRawUDP runs the server on a rawudp.Conn, as the router
// does: a DISCOVER frame in, an OFFER frame out to the client's MAC and
// the offered address (RFC 2131 §4.1), from the server's MAC and address.
func TestRunOverRawUDP(t *testing.T) {
	link := &frameLink{frames: make(chan []byte, 4)}
	conn := rawudp.New(link, ServerPort, 4)
	cfg := testConfig(5)
	s, err := New(cfg, conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	m := msg(dhcpv4.MessageTypeDiscover, mac(1))
	frame := rawudp.Build(rawudp.Broadcast, mac(1), netip.MustParseAddrPort("0.0.0.0:68"), netip.MustParseAddrPort("255.255.255.255:67"), 1, m.ToBytes())
	if !conn.Deliver(frame) {
		t.Fatal("Deliver(DISCOVER) = false")
	}
	var out []byte
	select {
	case out = <-link.frames:
	case <-time.After(5 * time.Second):
		t.Fatal("no OFFER frame")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if !bytes.Equal(out[0:6], mac(1)) || !bytes.Equal(out[6:12], link.HardwareAddr()) {
		t.Errorf("OFFER frame to %x from %x, want %x from %x", out[0:6], out[6:12], []byte(mac(1)), []byte(link.HardwareAddr()))
	}
	ipSrc, _ := netip.AddrFromSlice(out[14+12 : 14+16])
	ipDst, _ := netip.AddrFromSlice(out[14+16 : 14+20])
	if ipSrc != srvAddr || !s.inPool(ipDst) || binary.BigEndian.Uint16(out[34:]) != 67 || binary.BigEndian.Uint16(out[36:]) != 68 {
		t.Errorf("OFFER datagram %v:%d → %v:%d, want %v:67 → an address of the range:68", ipSrc, binary.BigEndian.Uint16(out[34:]), ipDst, binary.BigEndian.Uint16(out[36:]), srvAddr)
	}
	if got := s.Stats().Offer.Load(); got != 1 {
		t.Errorf("Offer = %d, want 1", got)
	}
}
