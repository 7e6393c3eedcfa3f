package rawudp

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// PacketLink is a Link over an AF_PACKET socket on a kernel interface: the
// way a service is run against real peers outside the router (tests, the
// lab). Use it only on an interface whose kernel IP stack is not also
// answering the same port.
type PacketLink struct {
	fd  int
	ifi *net.Interface
}

// OpenPacketLink opens a PacketLink for IPv4 frames on the kernel
// interface ifname (needs CAP_NET_RAW), for Conns from New.
func OpenPacketLink(ifname string) (*PacketLink, error) {
	return openPacketLink(ifname, unix.ETH_P_IP)
}

// OpenPacketLink6 opens a PacketLink for IPv6 frames on the kernel
// interface ifname (needs CAP_NET_RAW), for Conns from New6.
func OpenPacketLink6(ifname string) (*PacketLink, error) {
	return openPacketLink(ifname, unix.ETH_P_IPV6)
}

// openPacketLink opens a PacketLink for the frames of EtherType
// ethertype on ifname.
func openPacketLink(ifname string, ethertype uint16) (*PacketLink, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("rawudp: %w", err)
	}
	proto := htons(ethertype)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, fmt.Errorf("rawudp: socket on %s: %w", ifname, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rawudp: bind to %s: %w", ifname, err)
	}
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rawudp: SO_RCVTIMEO: %w", err)
	}
	return &PacketLink{fd: fd, ifi: ifi}, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// WriteFrame implements Link.
func (l *PacketLink) WriteFrame(frame []byte) error {
	return unix.Sendto(l.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: l.ifi.Index})
}

// HardwareAddr implements Link.
func (l *PacketLink) HardwareAddr() net.HardwareAddr { return l.ifi.HardwareAddr }

// Run hands every frame received (not the ones sent) to each of conns in
// turn until one takes it, until ctx is done. It closes the socket when
// it returns.
func (l *PacketLink) Run(ctx context.Context, conns ...*Conn) error {
	defer unix.Close(l.fd)
	buf := make([]byte, 65536)
	for ctx.Err() == nil {
		n, from, err := unix.Recvfrom(l.fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("rawudp: receive on %s: %w", l.ifi.Name, err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		for _, c := range conns {
			if c.Deliver(buf[:n]) {
				break
			}
		}
	}
	return nil
}
