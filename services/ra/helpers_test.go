package ra

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// epoch is where newFakeClock starts.
var epoch = fakeclock.Epoch

// fakeClock is a fakeclock.Clock as a Clock: the time moves only when a
// test says so (Advance, AdvanceTo, Set).
type fakeClock struct{ *fakeclock.Clock }

func newFakeClock() fakeClock { return newFakeClockAt(epoch) }

func newFakeClockAt(t time.Time) fakeClock { return fakeClock{fakeclock.NewAt(t)} }

// AfterFunc implements Clock.
func (c fakeClock) AfterFunc(d time.Duration, f func()) Timer { return c.Clock.AfterFunc(d, f) }

// since is the time passed since epoch.
func (c fakeClock) since() time.Duration { return c.Now().Sub(epoch) }

// constSource is a rand.Source that always returns its value: with
// drawMin every Int64N(n) is 0, with drawMax n-1 (math/rand/v2 draws by
// multiplying, so neither loops).
type constSource uint64

func (s constSource) Uint64() uint64 { return uint64(s) }

const (
	drawMin = constSource(1)
	drawMax = constSource(math.MaxUint64)
)

// recLink is a Link that records the frames written, each with the fake
// time it was written at.
type recLink struct {
	mac net.HardwareAddr
	clk fakeClock

	mu     sync.Mutex
	frames []sentFrame
	err    error
	// answer, if set, is called with each frame written, after it is
	// recorded (a neighbour that answers).
	answer func(frame []byte)
}

type sentFrame struct {
	at   time.Duration // since epoch
	data []byte
}

func newRecLink(clk fakeClock) *recLink {
	return &recLink{mac: net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}, clk: clk}
}

func (l *recLink) WriteFrame(b []byte) error {
	l.mu.Lock()
	if l.err != nil {
		defer l.mu.Unlock()
		return l.err
	}
	var at time.Duration
	if l.clk.Clock != nil {
		at = l.clk.since()
	}
	l.frames = append(l.frames, sentFrame{at: at, data: bytes.Clone(b)})
	answer := l.answer
	l.mu.Unlock()
	if answer != nil {
		answer(b)
	}
	return nil
}

func (l *recLink) HardwareAddr() net.HardwareAddr { return l.mac }

// take returns the frames written since the last take.
func (l *recLink) take() []sentFrame {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.frames
	l.frames = nil
	return f
}

var errLinkDown = errors.New("link down")

// Addresses of the tests' link.
var (
	ourLL     = netip.MustParseAddr("fe80::1")
	hostMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x22}
	hostLL    = netip.MustParseAddr("fe80::22")
	otherMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x33}
	otherLL   = netip.MustParseAddr("fe80::33")
	other2MAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x44}
	other2LL  = netip.MustParseAddr("fe80::44")
)

// gvFrame builds an IPv6 ICMPv6 frame with gVisor's header encoders and
// checksum code, not ours: icmp's checksum field is filled in, and then
// flipped if badSum. hopLimit is the IPv6 Hop Limit.
func gvFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, hopLimit uint8, icmp []byte, badSum bool) []byte {
	icmp = bytes.Clone(icmp)
	f := make([]byte, header.EthernetMinimumSize+header.IPv6MinimumSize+len(icmp))
	header.Ethernet(f).Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress(srcMAC), DstAddr: tcpip.LinkAddress(dstMAC), Type: header.IPv6ProtocolNumber,
	})
	s, d := tcpip.AddrFrom16(src.As16()), tcpip.AddrFrom16(dst.As16())
	header.IPv6(f[14:]).Encode(&header.IPv6Fields{
		PayloadLength: uint16(len(icmp)), TransportProtocol: header.ICMPv6ProtocolNumber, HopLimit: hopLimit,
		SrcAddr: s, DstAddr: d,
	})
	h := header.ICMPv6(icmp)
	if len(icmp) >= 4 {
		h.SetChecksum(0)
		sum := header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: h, Src: s, Dst: d})
		if badSum {
			sum ^= 0x5555
		}
		h.SetChecksum(sum)
	}
	copy(f[54:], icmp)
	return f
}

// rsICMP is a Router Solicitation (RFC 4861 §4.1) with code and options,
// checksum zero.
func rsICMP(code uint8, opts ...[]byte) []byte {
	return slices.Concat([]byte{typeRS, code, 0, 0, 0, 0, 0, 0}, slices.Concat(opts...))
}

// rsFrame is an RS from hostLL (or src) to ff02::2.
func rsFrame(src netip.Addr, hopLimit, code uint8, badSum bool, opts ...[]byte) []byte {
	return gvFrame(MulticastMAC(AllRouters), hostMAC, src, AllRouters, hopLimit, rsICMP(code, opts...), badSum)
}

// raHdr is the fixed part of a Router Advertisement (RFC 4861 §4.2, RFC
// 4191 §2.2), written by hand.
type raHdr struct {
	curHopLimit    uint8
	m, o           bool
	prf            uint8 // 0 medium, 1 high, 2 reserved, 3 low
	lifetime       uint16
	reach, retrans uint32
}

// raICMP is an RA with h and options, checksum zero.
func raICMP(h raHdr, opts ...[]byte) []byte {
	b := []byte{typeRA, 0, 0, 0, h.curHopLimit, h.prf << 3}
	if h.m {
		b[5] |= 0x80
	}
	if h.o {
		b[5] |= 0x40
	}
	b = binary.BigEndian.AppendUint16(b, h.lifetime)
	b = binary.BigEndian.AppendUint32(b, h.reach)
	b = binary.BigEndian.AppendUint32(b, h.retrans)
	return slices.Concat(b, slices.Concat(opts...))
}

// raFrame is an RA from src at mac to ff02::1, hop limit 255.
func raFrame(mac net.HardwareAddr, src netip.Addr, icmp []byte) []byte {
	return gvFrame(MulticastMAC(AllNodes), mac, src, AllNodes, 255, icmp, false)
}

// Options by hand (RFC 4861 §4.6, RFC 8106 §5).
func optSLLAOf(mac net.HardwareAddr) []byte { return slices.Concat([]byte{1, 1}, mac) }

func optMTU(mtu uint32) []byte { return binary.BigEndian.AppendUint32([]byte{5, 1, 0, 0}, mtu) }

func optPrefix(p string, l, a bool, valid, preferred uint32) []byte {
	pfx := netip.MustParsePrefix(p)
	b := []byte{3, 4, byte(pfx.Bits()), 0}
	if l {
		b[3] |= 0x80
	}
	if a {
		b[3] |= 0x40
	}
	b = binary.BigEndian.AppendUint32(b, valid)
	b = binary.BigEndian.AppendUint32(b, preferred)
	b = append(b, 0, 0, 0, 0)
	return append(b, pfx.Addr().AsSlice()...)
}

func optRDNSS(lifetime uint32, addrs ...string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{25, byte(1 + 2*len(addrs)), 0, 0}, lifetime)
	for _, a := range addrs {
		b = append(b, netip.MustParseAddr(a).AsSlice()...)
	}
	return b
}

func optDNSSL(lifetime uint32, names ...string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{31, 0, 0, 0}, lifetime)
	for _, n := range names {
		for l := range strings.SplitSeq(n, ".") {
			b = append(b, byte(len(l)))
			b = append(b, l...)
		}
		b = append(b, 0)
	}
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	b[1] = byte(len(b) / 8)
	return b
}

// seenRA is an RA as gVisor's independent NDP code (and, for the MTU
// option, which gVisor skips, the test by hand) decodes it.
type seenRA struct {
	at               time.Duration
	dstMAC, srcMAC   net.HardwareAddr
	src, dst         netip.Addr
	hopLimit         uint8
	curHopLimit      uint8
	m, o             bool
	routerLifetime   time.Duration
	reach, retrans   time.Duration
	slla             net.HardwareAddr
	mtu              uint32
	prefixes         []seenPrefix
	rdnss            []netip.Addr
	rdnssLifetime    time.Duration
	dnssl            []string
	dnsslLifetime    time.Duration
	icmpLen          int
	unknownOptsTypes []uint8
}

type seenPrefix struct {
	prefix           netip.Prefix
	l, a             bool
	valid, preferred time.Duration
}

// decodeRA decodes a frame the Advertiser wrote, failing t unless it is a
// well-formed RA with a right checksum by gVisor's code.
func decodeRA(t testing.TB, f sentFrame) seenRA {
	t.Helper()
	b := f.data
	if len(b) < 14+40+16 || binary.BigEndian.Uint16(b[12:]) != 0x86dd {
		t.Fatalf("frame % x is not IPv6", b)
	}
	ip := header.IPv6(b[14:])
	if !ip.IsValid(len(b)-14) || ip.TransportProtocol() != header.ICMPv6ProtocolNumber || int(ip.PayloadLength()) != len(b)-54 {
		t.Fatalf("frame % x: bad IPv6 header", b)
	}
	h := header.ICMPv6(ip.Payload())
	want := header.ICMPv6Checksum(header.ICMPv6ChecksumParams{
		Header: h, Src: ip.SourceAddress(), Dst: ip.DestinationAddress(),
	})
	if h.Checksum() != want || h.Type() != header.ICMPv6RouterAdvert || h.Code() != 0 {
		t.Fatalf("ICMPv6 type %d code %d checksum %#x (gVisor computes %#x), want an RA", h.Type(), h.Code(), h.Checksum(), want)
	}
	ra := header.NDPRouterAdvert(h.MessageBody())
	s := seenRA{
		at: f.at, dstMAC: net.HardwareAddr(b[0:6]), srcMAC: net.HardwareAddr(b[6:12]),
		src: netip.AddrFrom16(ip.SourceAddress().As16()), dst: netip.AddrFrom16(ip.DestinationAddress().As16()),
		hopLimit: ip.HopLimit(), curHopLimit: ra.CurrHopLimit(), m: ra.ManagedAddrConfFlag(), o: ra.OtherConfFlag(),
		routerLifetime: ra.RouterLifetime(), reach: ra.ReachableTime(), retrans: ra.RetransTimer(), icmpLen: len(h),
	}
	it, err := ra.Options().Iter(true)
	if err != nil {
		t.Fatalf("gVisor refuses the options: %v", err)
	}
	for {
		o, done, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		switch o := o.(type) {
		case header.NDPSourceLinkLayerAddressOption:
			s.slla = net.HardwareAddr(o.EthernetAddress())
		case header.NDPPrefixInformation:
			sub := o.Subnet()
			s.prefixes = append(s.prefixes, seenPrefix{
				prefix: netip.PrefixFrom(netip.AddrFrom16(sub.ID().As16()), sub.Prefix()),
				l:      o.OnLinkFlag(), a: o.AutonomousAddressConfigurationFlag(),
				valid: o.ValidLifetime(), preferred: o.PreferredLifetime(),
			})
		case header.NDPRecursiveDNSServer:
			addrs, err := o.Addresses()
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range addrs {
				s.rdnss = append(s.rdnss, netip.AddrFrom16(a.As16()))
			}
			s.rdnssLifetime = o.Lifetime()
		case header.NDPDNSSearchList:
			names, err := o.DomainNames()
			if err != nil {
				t.Fatal(err)
			}
			s.dnssl, s.dnsslLifetime = names, o.Lifetime()
		}
	}
	// The MTU option by hand: gVisor skips it.
	for opts := []byte(ra.Options()); len(opts) >= 8; opts = opts[int(opts[1])*8:] {
		if opts[0] == 5 {
			s.mtu = binary.BigEndian.Uint32(opts[4:])
		}
	}
	return s
}
