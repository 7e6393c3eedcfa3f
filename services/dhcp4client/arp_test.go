package dhcp4client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

// frameLink is a rawudp.Link that records frames with their times and
// may answer each one.
type frameLink struct {
	clk    Clock
	mu     sync.Mutex
	frames [][]byte
	at     []time.Duration
	answer func([]byte)
	fail   error
}

func (l *frameLink) WriteFrame(f []byte) error {
	l.mu.Lock()
	if l.fail != nil {
		l.mu.Unlock()
		return l.fail
	}
	l.frames = append(l.frames, bytes.Clone(f))
	l.at = append(l.at, l.clk.Now().Sub(epoch))
	answer := l.answer
	l.mu.Unlock()
	if answer != nil {
		answer(f)
	}
	return nil
}

func (l *frameLink) HardwareAddr() net.HardwareAddr { return clientMAC }

// arpFrame builds an Ethernet/IPv4 ARP packet (RFC 826).
func arpFrame(op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) []byte {
	f := make([]byte, 14+28)
	copy(f[0:6], rawudp.Broadcast)
	copy(f[6:12], sha)
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	a := f[14:]
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], 0x0800)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:14], sha)
	s, t := spa.As4(), tpa.As4()
	copy(a[14:18], s[:])
	copy(a[18:24], tha)
	copy(a[24:28], t[:])
	return f
}

// TestRFC5227_2_1_1_Probe checks the probe's frames and timing for a
// free address: a wait of up to PROBE_WAIT, PROBE_NUM probes PROBE_MIN
// to PROBE_MAX apart, ANNOUNCE_WAIT after the last.
func TestRFC5227_2_1_1_Probe(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  uint64
		at   []time.Duration
		end  time.Duration
	}{
		{"earliest", 0, []time.Duration{0, time.Second, 2 * time.Second}, 4 * time.Second},
		{"middle", 1 << 63, []time.Duration{500 * time.Millisecond, 2 * time.Second, 3500 * time.Millisecond}, 5500 * time.Millisecond},
		{"latest", ^uint64(0) - 10, []time.Duration{time.Second, 3 * time.Second, 5 * time.Second}, 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := newFakeClock()
				link := &frameLink{clk: clk}
				p, err := NewARPProber(ARPProberConfig{Link: link, Clock: clk, Rand: fakeclock.NewCounting(tc.src)})
				if err != nil {
					t.Fatal(err)
				}
				var inUse bool
				var end time.Duration
				done := make(chan struct{})
				go func() {
					defer close(done)
					inUse, err = p.InUse(context.Background(), offered)
					end = clk.Now().Sub(epoch)
				}()
				clk.Advance(10 * time.Second)
				<-done
				if inUse || err != nil {
					t.Errorf("InUse(free address) = %v, %v; want false, nil", inUse, err)
				}
				if !slices.Equal(link.at, tc.at) || end != tc.end {
					t.Errorf("probes at %v, done at %v; want %v, %v", link.at, end, tc.at, tc.end)
				}
				want := arpFrame(1, clientMAC, netip.IPv4Unspecified(), make(net.HardwareAddr, 6), offered)
				for _, f := range link.frames {
					if !bytes.Equal(f, want) {
						t.Errorf("probe = %x, want %x (sender IP 0.0.0.0, RFC 5227 §2.1.1)", f, want)
					}
				}
				if got := p.Stats().Probes.Load(); got != ProbeNum {
					t.Errorf("Probes = %d, want %d", got, ProbeNum)
				}
			})
		})
	}
}

// TestRFC5227_2_1_1_Conflict checks what counts as the address being in
// use: any ARP from another MAC with the address as sender IP, or
// another host's probe for it; and what does not.
func TestRFC5227_2_1_1_Conflict(t *testing.T) {
	other := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x33}
	zero := make(net.HardwareAddr, 6)
	elsewhere := netip.MustParseAddr("192.0.2.77")
	for _, tc := range []struct {
		name  string
		frame []byte
		inUse bool
	}{
		{"reply", arpFrame(2, other, offered, clientMAC, netip.IPv4Unspecified()), true},
		{"gratuitous request", arpFrame(1, other, offered, zero, offered), true},
		{"request from the address", arpFrame(1, other, offered, zero, elsewhere), true},
		{"other's probe", arpFrame(1, other, netip.IPv4Unspecified(), zero, offered), true},
		{"own probe echoed", arpFrame(1, clientMAC, netip.IPv4Unspecified(), zero, offered), false},
		{"own reply", arpFrame(2, clientMAC, offered, zero, offered), false},
		{"other address", arpFrame(2, other, elsewhere, clientMAC, offered), false},
		{"request for it from a host", arpFrame(1, other, elsewhere, zero, offered), false},
		{"truncated", arpFrame(2, other, offered, clientMAC, offered)[:30], false},
		{"not ethernet", func() []byte { f := arpFrame(2, other, offered, clientMAC, offered); f[15] = 6; return f }(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := newFakeClock()
				link := &frameLink{clk: clk}
				p, err := NewARPProber(ARPProberConfig{Link: link, Clock: clk, Rand: fakeclock.NewCounting(1 << 63)})
				if err != nil {
					t.Fatal(err)
				}
				link.answer = func([]byte) {
					if p.Deliver(tc.frame) {
						t.Errorf("Deliver(ARP) = true, want false (a watcher never consumes ARP)")
					}
				}
				var inUse bool
				var end time.Duration
				done := make(chan struct{})
				go func() {
					defer close(done)
					inUse, err = p.InUse(context.Background(), offered)
					end = clk.Now().Sub(epoch)
				}()
				clk.Advance(10 * time.Second)
				<-done
				if inUse != tc.inUse || err != nil {
					t.Errorf("InUse = %v, %v; want %v, nil", inUse, err, tc.inUse)
				}
				if tc.inUse && (end != 500*time.Millisecond || len(link.frames) != 1) {
					t.Errorf("conflict found at %v after %d probes, want at once (500ms, 1)", end, len(link.frames))
				}
				if got, want := p.Stats().Conflicts.Load(), map[bool]uint64{true: 1}[tc.inUse]; got != want {
					t.Errorf("Conflicts = %d, want %d", got, want)
				}
			})
		})
	}
}

// TestARPProberDeliver checks Deliver outside a probe and on frames that
// are not ARP.
func TestARPProberDeliver(t *testing.T) {
	p, err := NewARPProber(ARPProberConfig{Link: &frameLink{clk: SystemClock{}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Deliver(arpFrame(2, serverMAC, offered, clientMAC, offered)) {
		t.Errorf("Deliver(ARP) while idle = true, want false (a watcher never consumes ARP)")
	}
	ip := rawudp.Build(rawudp.Broadcast, serverMAC, netip.MustParseAddrPort("192.0.2.1:67"), netip.MustParseAddrPort("255.255.255.255:68"), 1, []byte("x"))
	for _, f := range [][]byte{ip, nil, {1, 2, 3}} {
		if p.Deliver(f) {
			t.Errorf("Deliver(%x) = true, want false", f)
		}
	}
	if got := p.Stats().Malformed.Load(); got != 0 {
		t.Errorf("Malformed = %d, want 0", got)
	}
	if _, err := NewARPProber(ARPProberConfig{}); err == nil {
		t.Errorf("NewARPProber without a link = nil error")
	}
	if _, err := NewARPProber(ARPProberConfig{Link: &frameLink{}, ProbeMin: 2 * time.Second, ProbeMax: time.Second}); err == nil {
		t.Errorf("NewARPProber with ProbeMax < ProbeMin = nil error")
	}
}

// TestARPProberErrors checks that a cancelled context and a failing link
// end the probe with an error.
func TestARPProberErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		link := &frameLink{clk: clk}
		p, _ := NewARPProber(ARPProberConfig{Link: link, Clock: clk})
		ctx, cancel := context.WithCancel(context.Background())
		var err error
		done := make(chan struct{})
		go func() {
			_, err = p.InUse(ctx, offered)
			close(done)
		}()
		synctest.Wait()
		cancel()
		<-done
		if !errors.Is(err, context.Canceled) {
			t.Errorf("InUse after cancel = %v, want context.Canceled", err)
		}
		link.mu.Lock()
		link.fail = errSend
		link.mu.Unlock()
		done = make(chan struct{})
		go func() {
			defer close(done)
			_, err = p.InUse(context.Background(), offered)
		}()
		clk.Advance(10 * time.Second)
		<-done
		if !errors.Is(err, errSend) {
			t.Errorf("InUse on a failing link = %v, want %v", err, errSend)
		}
		if _, err := p.InUse(context.Background(), netip.MustParseAddr("::1")); err == nil {
			t.Errorf("InUse(IPv6) = nil error")
		}
	})
}
