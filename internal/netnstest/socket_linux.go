package netnstest

import (
	"bytes"
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RawSocket is a plain AF_PACKET socket on one interface of a namespace,
// for injecting frames and watching what arrives. It asks for
// PACKET_AUXDATA, so that a received frame carries the VLAN tag the
// kernel stripped from it.
type RawSocket struct {
	// Netns is the name of the socket's namespace, for messages.
	Netns   string
	fd      int
	ifindex int
}

// RxFrame is a frame a RawSocket received: its data as the kernel shows
// it to a plain socket, and the tag the kernel stripped, if VLANValid.
type RxFrame struct {
	Data      []byte
	VLANValid bool
	TCI, TPID uint16
}

// recvTimeout is how long one receive waits, so that WaitFor sees its
// deadline.
const recvTimeout = 50 * time.Millisecond

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// RawSocket opens a RawSocket on ifname inside n, closed when tb ends.
func (n *Netns) RawSocket(tb testing.TB, ifname string) *RawSocket {
	tb.Helper()
	s := &RawSocket{Netns: n.name, fd: -1}
	var err error
	n.Do(tb, func() {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByName(ifname); err != nil {
			return
		}
		s.ifindex = ifi.Index
		proto := int(htons(unix.ETH_P_ALL))
		if s.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return
		}
		if err = unix.SetsockoptInt(s.fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return
		}
		err = unix.Bind(s.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if s.fd >= 0 {
		tb.Cleanup(func() { unix.Close(s.fd) })
	}
	if err != nil {
		SkipIfNotPermitted(tb, err, "raw socket on %s in %s: %v", ifname, n.name, err)
		tb.Fatalf("raw socket on %s in %s: %v", ifname, n.name, err)
	}
	tv := unix.NsecToTimeval(int64(recvTimeout))
	unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return s
}

// Send sends frame out of the socket's interface.
func (s *RawSocket) Send(tb testing.TB, frame []byte) {
	tb.Helper()
	if err := unix.Sendto(s.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: s.ifindex}); err != nil {
		tb.Fatalf("send in %s: %v", s.Netns, err)
	}
}

// WaitFor reads frames until one whose data contains marker arrives, and
// returns it, or until d passes. Frames the interface sends are passed
// over. It may be called from any goroutine.
func (s *RawSocket) WaitFor(marker string, d time.Duration) (RxFrame, bool) {
	buf := make([]byte, 65536)
	auxLen := int(unsafe.Sizeof(unix.TpacketAuxdata{}))
	oob := make([]byte, unix.CmsgSpace(auxLen))
	for end := time.Now().Add(d); time.Now().Before(end); {
		n, oobn, _, from, err := unix.Recvmsg(s.fd, buf, oob, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if !bytes.Contains(buf[:n], []byte(marker)) {
			continue
		}
		f := RxFrame{Data: bytes.Clone(buf[:n])}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < auxLen {
				continue
			}
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
			f.VLANValid = aux.Status&unix.TP_STATUS_VLAN_VALID != 0
			f.TCI, f.TPID = aux.Vlan_tci, aux.Vlan_tpid
		}
		return f, true
	}
	return RxFrame{}, false
}

// packetRecvTimeout is how long one receive on a PacketSocket waits, so
// that a reading loop sees its context end.
const packetRecvTimeout = 100 * time.Millisecond

// PacketSocket opens an AF_PACKET socket bound to ifname inside n for
// the EtherType proto (unix.ETH_P_ALL also sees the frames the interface
// sends), each receive waiting at most 100 ms. It returns the file
// descriptor, which the caller closes.
func (n *Netns) PacketSocket(tb testing.TB, ifname string, proto uint16) int {
	tb.Helper()
	fd := -1
	var err error
	n.Do(tb, func() {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByName(ifname); err != nil {
			return
		}
		p := htons(proto)
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(p)); err != nil {
			return
		}
		if err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: p, Ifindex: ifi.Index}); err != nil {
			return
		}
		tv := unix.NsecToTimeval(int64(packetRecvTimeout))
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		tb.Fatalf("AF_PACKET socket on %s in %s: %v", ifname, n.name, err)
	}
	return fd
}
