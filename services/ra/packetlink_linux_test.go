package ra

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// packetLink is a Link on a kernel interface through an AF_PACKET
// socket for IPv6 frames, which hands the frames it receives to taps as
// the router's interface does: only frames for this host (to its MAC or
// a group; not other hosts' unicast, not its own outgoing ones), each to
// the taps in turn until one consumes it.
type packetLink struct {
	fd  int
	ifi *net.Interface
	wg  sync.WaitGroup
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// rcvBuf is the socket's receive buffer: room for an RS flood from
// scapy, so that the kernel drops none before the taps see it.
const rcvBuf = 8 << 20

// openPacketLink opens a packetLink on ifname in n, closed when t ends
// (after the receive loop that run started has returned).
func openPacketLink(t *testing.T, n *netnstest.Netns, ifname string) *packetLink {
	t.Helper()
	var l *packetLink
	var err error
	n.Do(t, func() {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByName(ifname); err != nil {
			return
		}
		proto := htons(unix.ETH_P_IPV6)
		var fd int
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto)); err != nil {
			return
		}
		if err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return
		}
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf)
		tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		l = &packetLink{fd: fd, ifi: ifi}
	})
	if err != nil {
		netnstest.SkipIfNotPermitted(t, err, "packet socket on %s: %v", ifname, err)
		t.Fatalf("packet socket on %s: %v", ifname, err)
	}
	t.Cleanup(func() {
		l.wg.Wait()
		unix.Close(l.fd)
	})
	return l
}

// WriteFrame implements Link.
func (l *packetLink) WriteFrame(f []byte) error {
	return unix.Sendto(l.fd, f, 0, &unix.SockaddrLinklayer{Ifindex: l.ifi.Index})
}

// HardwareAddr implements Link.
func (l *packetLink) HardwareAddr() net.HardwareAddr { return l.ifi.HardwareAddr }

// run hands received frames to taps until ctx is done, on its own
// goroutine.
func (l *packetLink) run(ctx context.Context, taps ...func([]byte) bool) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		buf := make([]byte, 65536)
		for ctx.Err() == nil {
			n, from, err := unix.Recvfrom(l.fd, buf, 0)
			if err != nil {
				continue
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && (ll.Pkttype == unix.PACKET_OUTGOING || ll.Pkttype == unix.PACKET_OTHERHOST) {
				continue
			}
			for _, tap := range taps {
				if tap(buf[:n]) {
					break
				}
			}
		}
	}()
}
