package dhcp4client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

// RFC 5227 §1.1 timing constants.
const (
	ProbeWait    = 1 * time.Second // initial random delay
	ProbeNum     = 3               // number of probe packets
	ProbeMin     = 1 * time.Second // minimum delay until repeated probe
	ProbeMax     = 2 * time.Second // maximum delay until repeated probe
	AnnounceWait = 2 * time.Second // delay before announcing: the end of the probe period
)

// ARPProberConfig configures an ARPProber. Zero durations and counts
// take the RFC 5227 §1.1 values; tests shorten them.
type ARPProberConfig struct {
	// Link sends the probes; its HardwareAddr is the sender's. Required.
	Link rawudp.Link
	// ProbeWait, ProbeNum, ProbeMin, ProbeMax and AnnounceWait are the
	// RFC 5227 timing (the constants of the same names by default).
	ProbeWait, ProbeMin, ProbeMax, AnnounceWait time.Duration
	ProbeNum                                    int
	// Clock and Rand are as in Config.
	Clock Clock
	Rand  mrand.Source
}

// ARPProberStats counts what an ARPProber did. Fields are read with Load.
type ARPProberStats struct {
	Probes    atomic.Uint64 // ARP probes sent
	Conflicts atomic.Uint64 // probes that found their address in use
	Frames    atomic.Uint64 // ARP frames watched (Deliver returned true)
	Malformed atomic.Uint64 // frames of EtherType 0x0806 that are not Ethernet/IPv4 ARP
}

// ARPProber is a Prober that probes with ARP as RFC 5227 §2.1.1 says:
// after a random wait of up to PROBE_WAIT, PROBE_NUM ARP requests with
// sender IP 0.0.0.0 and the probed address as target, PROBE_MIN to
// PROBE_MAX apart, then ANNOUNCE_WAIT more; the address is in use if,
// during that time, any ARP packet from another MAC has it as sender IP,
// or is another host's probe for it (§2.1.1's "SHOULD similarly treat
// this as an address conflict"). The caller hands it every ARP frame of
// the link through Deliver.
type ARPProber struct {
	cfg   ARPProberConfig
	stats ARPProberStats
	mac   net.HardwareAddr

	run sync.Mutex // one probe at a time

	mu       sync.Mutex
	target   netip.Addr    // probed address, zero when idle
	conflict chan struct{} // closed on the first conflict
}

// NewARPProber returns an ARPProber for cfg.
func NewARPProber(cfg ARPProberConfig) (*ARPProber, error) {
	if cfg.Link == nil {
		return nil, errors.New("dhcp4client: ARPProber needs a Link")
	}
	mac := cfg.Link.HardwareAddr()
	if len(mac) != 6 {
		return nil, errors.New("dhcp4client: ARPProber needs an Ethernet link")
	}
	if cfg.ProbeWait == 0 {
		cfg.ProbeWait = ProbeWait
	}
	if cfg.ProbeNum == 0 {
		cfg.ProbeNum = ProbeNum
	}
	if cfg.ProbeMin == 0 {
		cfg.ProbeMin = ProbeMin
	}
	if cfg.ProbeMax == 0 {
		cfg.ProbeMax = ProbeMax
	}
	if cfg.ProbeMax < cfg.ProbeMin {
		return nil, errors.New("dhcp4client: ARPProber ProbeMax below ProbeMin")
	}
	if cfg.AnnounceWait == 0 {
		cfg.AnnounceWait = AnnounceWait
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Rand == nil {
		var seed [32]byte
		rand.Read(seed[:])
		cfg.Rand = mrand.NewChaCha8(seed)
	}
	return &ARPProber{cfg: cfg, mac: append(net.HardwareAddr(nil), mac...)}, nil
}

// Stats returns the prober's counters.
func (p *ARPProber) Stats() *ARPProberStats { return &p.stats }

// InUse implements Prober. It takes about ProbeWait/2 + (ProbeNum-1) ×
// (ProbeMin+ProbeMax)/2 + AnnounceWait (5.5 s with the RFC's values)
// when the address is free, and returns as soon as a conflict is seen.
func (p *ARPProber) InUse(ctx context.Context, addr netip.Addr) (bool, error) {
	if !addr.Is4() {
		return false, errors.New("dhcp4client: ARP probes IPv4 addresses only")
	}
	p.run.Lock()
	defer p.run.Unlock()
	conflict := make(chan struct{})
	p.mu.Lock()
	p.target, p.conflict = addr, conflict
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.target, p.conflict = netip.Addr{}, nil
		p.mu.Unlock()
	}()

	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { close(done) })
	defer stop()
	// wait reports a conflict or the end of ctx, else waits d.
	wait := func(d time.Duration) (bool, error) {
		ch := make(chan struct{})
		t := p.cfg.Clock.AfterFunc(d, func() { close(ch) })
		defer t.Stop()
		select {
		case <-ch:
			return false, nil
		case <-conflict:
			return true, nil
		case <-done:
			return false, ctx.Err()
		}
	}
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(uniform(p.cfg.Rand, uint64(hi-lo)+1)) // Rand is used under p.run only
	}
	if c, err := wait(between(0, p.cfg.ProbeWait)); c || err != nil {
		return p.found(c), err
	}
	probe := Probe(p.mac, addr)
	for i := range p.cfg.ProbeNum {
		if err := p.cfg.Link.WriteFrame(probe); err != nil {
			return false, err
		}
		p.stats.Probes.Add(1)
		d := p.cfg.AnnounceWait
		if i < p.cfg.ProbeNum-1 {
			d = between(p.cfg.ProbeMin, p.cfg.ProbeMax)
		}
		if c, err := wait(d); c || err != nil {
			return p.found(c), err
		}
	}
	return false, nil
}

func (p *ARPProber) found(c bool) bool {
	if c {
		p.stats.Conflicts.Add(1)
	}
	return c
}

// Deliver watches one Ethernet frame and always returns false: the
// prober only reads ARP, never consumes it, because the interface's IP
// stack must see every ARP frame too (a tap that kept them would leave
// the router unable to resolve any neighbour). frame is not kept.
func (p *ARPProber) Deliver(frame []byte) bool {
	if len(frame) < 14 || binary.BigEndian.Uint16(frame[12:]) != 0x0806 {
		return false
	}
	p.stats.Frames.Add(1)
	a, ok := parseARP(frame[14:])
	if !ok {
		p.stats.Malformed.Add(1)
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.target.IsValid() || string(a.senderMAC) == string(p.mac) {
		return false
	}
	// RFC 5227 §2.1.1: the address is someone's, or someone else is
	// probing for it.
	if a.senderIP == p.target || (a.op == 1 && a.senderIP.IsUnspecified() && a.targetIP == p.target) {
		select {
		case <-p.conflict:
		default:
			close(p.conflict)
		}
	}
	return false
}

// arp is the part of an Ethernet/IPv4 ARP packet (RFC 826) a probe needs.
type arp struct {
	op                 uint16
	senderMAC          []byte
	senderIP, targetIP netip.Addr
}

func parseARP(b []byte) (arp, bool) {
	// htype 1, ptype 0x0800, hlen 6, plen 4.
	if len(b) < 28 || binary.BigEndian.Uint16(b[0:]) != 1 || binary.BigEndian.Uint16(b[2:]) != 0x0800 || b[4] != 6 || b[5] != 4 {
		return arp{}, false
	}
	return arp{
		op:        binary.BigEndian.Uint16(b[6:]),
		senderMAC: b[8:14],
		senderIP:  netip.AddrFrom4([4]byte(b[14:18])),
		targetIP:  netip.AddrFrom4([4]byte(b[24:28])),
	}, true
}

// Probe returns the Ethernet frame of an ARP probe for addr from mac
// (RFC 5227 §2.1.1): a broadcast ARP request with sender IP 0.0.0.0, an
// all-zero target MAC and addr as target IP.
func Probe(mac net.HardwareAddr, addr netip.Addr) []byte {
	f := make([]byte, 14+28)
	copy(f[0:6], rawudp.Broadcast)
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	a := f[14:]
	binary.BigEndian.PutUint16(a[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(a[2:], 0x0800) // IPv4
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], 1) // request
	copy(a[8:14], mac)
	// a[14:18], sender IP, and a[18:24], target MAC, stay zero.
	t := addr.As4()
	copy(a[24:28], t[:])
	return f
}
