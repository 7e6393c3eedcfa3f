package ra

import (
	"context"

	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// packetLink is a Link on a kernel interface through an AF_PACKET
// socket, which also hands every received frame to deliver.
type packetLink struct {
	fd  int
	ifi *net.Interface
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openPacketLink(t *testing.T, n *netnstest.Netns, ifname string) *packetLink {
	t.Helper()
	var l *packetLink
	var err error
	n.Do(t, func() {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByName(ifname); err != nil {
			return
		}
		var fd int
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IPV6))); err != nil {
			return
		}
		if err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return
		}
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		l = &packetLink{fd: fd, ifi: ifi}
	})
	if err != nil {
		t.Fatalf("packet socket on %s: %v", ifname, err)
	}
	t.Cleanup(func() { unix.Close(l.fd) })
	return l
}

func (l *packetLink) WriteFrame(f []byte) error {
	return unix.Sendto(l.fd, f, 0, &unix.SockaddrLinklayer{Ifindex: l.ifi.Index})
}

func (l *packetLink) HardwareAddr() net.HardwareAddr { return l.ifi.HardwareAddr }

// run hands received frames (not our own) to deliver until ctx ends.
func (l *packetLink) run(ctx context.Context, deliver func([]byte) bool) {
	buf := make([]byte, 9000)
	for ctx.Err() == nil {
		n, from, err := unix.Recvfrom(l.fd, buf, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		deliver(buf[:n])
	}
}

// linkLocal is the EUI-64 link-local address of mac.
func linkLocal(mac net.HardwareAddr) netip.Addr {
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]})
}

// slaacLab is a router namespace (its kernel's IPv6 off on r0, as the
// router keeps its ports) and a host namespace whose kernel does SLAAC
// on h0 from the RAs (accept_ra 1, autoconf 1, not forwarding).
type slaacLab struct {
	rtr, host *netnstest.Netns
	link      *packetLink
}

func newSLAACLab(t *testing.T) *slaacLab {
	netnstest.Privileged(t, "ip")
	l := &slaacLab{rtr: netnstest.New(t, "rar"), host: netnstest.New(t, "rah")}
	l.rtr.IP(t, "link", "add", "r0", "address", "02:00:5e:10:00:01", "type", "veth", "peer", "name", "h0", "address", "02:00:5e:10:00:02", "netns", l.host.Name())
	l.rtr.Run(t, "sysctl", "-qw", "net.ipv6.conf.r0.disable_ipv6=1")
	for _, kv := range []string{"net.ipv6.conf.h0.accept_ra=1", "net.ipv6.conf.h0.autoconf=1", "net.ipv6.conf.h0.forwarding=0",
		"net.ipv6.conf.h0.accept_dad=0"} {
		l.host.Run(t, "sysctl", "-qw", kv)
	}
	l.rtr.IP(t, "link", "set", "r0", "up")
	l.host.IP(t, "link", "set", "h0", "up")
	l.link = openPacketLink(t, l.rtr, "r0")
	return l
}

// waitFor polls f until it returns "" or d passes, then fails t with the
// last message.
func waitFor(t *testing.T, d time.Duration, f func() string) {
	t.Helper()
	var msg string
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if msg = f(); msg == "" {
			return
		}
	}
	t.Fatal(msg)
}

// TestInteropKernelSLAAC: the host's own kernel forms an address in the
// announced /64 with our lifetimes and a default route via our
// link-local address; rdisc6 reads prefix, lifetimes, MTU, RDNSS, DNSSL
// and the O flag; a changed prefix deprecates the old address
// (preferred_lft 0); the final RA on stop removes the default route.
func TestInteropKernelSLAAC(t *testing.T) {
	netnstest.Privileged(t, "ip", "rdisc6")
	l := newSLAACLab(t)
	src := linkLocal(l.link.HardwareAddr())
	p1 := netip.MustParsePrefix("2001:db8:77:1::/64")
	p2 := netip.MustParsePrefix("2001:db8:88:1::/64")
	a, err := New(Config{
		Link: l.link, SrcAddr: src, MTU: 1480, Other: true,
		RDNSS: []netip.Addr{netip.MustParseAddr("2001:db8:77:1::1")}, DNSSL: []string{"lan"},
		MaxInterval: 10 * time.Second, RouterLifetime: 90 * time.Second,
		Prefixes: []Prefix{{Prefix: p1, ValidUntil: time.Now().Add(3600 * time.Second), PreferredUntil: time.Now().Add(1800 * time.Second)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.link.run(ctx, a.Deliver)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	addrs := func() string { return l.host.Run(t, "ip", "-n", l.host.Name(), "-6", "addr", "show", "dev", "h0") }
	routes := func() string { return l.host.Run(t, "ip", "-n", l.host.Name(), "-6", "route", "show", "dev", "h0") }
	waitFor(t, 10*time.Second, func() string {
		if s := addrs(); !strings.Contains(s, "inet6 2001:db8:77:1:") {
			return "no SLAAC address in " + p1.String() + " on the host:\n" + s
		}
		return ""
	})
	if s := addrs(); !strings.Contains(s, "dynamic") || !strings.Contains(s, "valid_lft 3") {
		t.Errorf("the SLAAC address is not dynamic with our ~3600 s valid lifetime:\n%s", s)
	}
	waitFor(t, 5*time.Second, func() string {
		if s := routes(); !strings.Contains(s, "default via "+src.String()) {
			return "no default route via " + src.String() + ":\n" + s
		}
		return ""
	})

	// rdisc6 solicits (an RS: the solicited path) and prints the RA.
	out := l.host.Run(t, "rdisc6", "-1", "-w", "3000", "h0")
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"Stateful other conf. : Yes", "Stateful address conf. : No",
		"Router lifetime : 90 (0x0000005a) seconds",
		"Prefix : 2001:db8:77:1::/64 On-link : Yes Autonomous address conf.: Yes Valid time : 359",
		"Pref. time : 179",
		"MTU : 1480 bytes (valid)",
		"Recursive DNS server : 2001:db8:77:1::1 DNS server lifetime : 30 ",
		"DNS search list : lan",
		"from " + src.String(),
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("rdisc6 output lacks %q:\n%s", want, out)
		}
	}
	if a.Stats().RSReceived.Load() == 0 || a.Stats().SolicitedSent.Load() == 0 {
		t.Errorf("rs_received %d, solicited_sent %d after rdisc6, want both > 0", a.Stats().RSReceived.Load(), a.Stats().SolicitedSent.Load())
	}

	// Renumbered: p2 comes, p1 stays valid but deprecated.
	if err := a.SetPrefixes([]Prefix{{Prefix: p2}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() string {
		s := addrs()
		if !strings.Contains(s, "inet6 2001:db8:88:1:") {
			return "no address in the new prefix:\n" + s
		}
		for _, blk := range strings.Split(s, "inet6 ")[1:] {
			if strings.HasPrefix(blk, "2001:db8:77:1:") && !strings.Contains(blk, "preferred_lft 0sec") {
				return "the old prefix's address is not deprecated:\n" + s
			}
		}
		return ""
	})
	var st Status = a.Status()
	if len(st.Prefixes) != 2 || !st.Prefixes[1].Withdrawn || st.Prefixes[1].Prefix != p1 {
		t.Errorf("status prefixes = %+v, want p2 and p1 withdrawn", st.Prefixes)
	}

	// Stop: the final RA has router lifetime 0.
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() string {
		if s := routes(); strings.Contains(s, "default via") {
			return "the default route stayed after the final RA:\n" + s
		}
		return ""
	})
	t.Logf("sent %d (solicited %d), rs %d, coalesced %d", a.Stats().Sent.Load(), a.Stats().SolicitedSent.Load(),
		a.Stats().RSReceived.Load(), a.Stats().RSCoalesced.Load())
}

// TestNewErrors: what RFC 4861 §6.2.1 forbids is refused with a reason.
func TestNewErrors(t *testing.T) {
	link := &fakeLink{mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	ll := netip.MustParseAddr("fe80::1")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no link", Config{SrcAddr: ll}, "no link"},
		{"global source", Config{Link: link, SrcAddr: netip.MustParseAddr("2001:db8::1")}, "not an IPv6 link-local"},
		{"max too small", Config{Link: link, SrcAddr: ll, MaxInterval: time.Second}, "max interval"},
		{"min too big", Config{Link: link, SrcAddr: ll, MaxInterval: 10 * time.Second, MinInterval: 9 * time.Second}, "min interval"},
		{"lifetime too long", Config{Link: link, SrcAddr: ll, RouterLifetime: 3 * time.Hour}, "router lifetime"},
		{"mtu", Config{Link: link, SrcAddr: ll, MTU: 1000}, "MTU 1000"},
		{"prefix /56", Config{Link: link, SrcAddr: ll, Prefixes: []Prefix{{Prefix: netip.MustParsePrefix("2001:db8::/56")}}}, "not an IPv6 /64"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

type fakeLink struct {
	mac    net.HardwareAddr
	frames [][]byte
}

func (f *fakeLink) WriteFrame(b []byte) error {
	f.frames = append(f.frames, append([]byte(nil), b...))
	return nil
}
func (f *fakeLink) HardwareAddr() net.HardwareAddr { return f.mac }
