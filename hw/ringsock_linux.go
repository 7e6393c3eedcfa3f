package hw

import (
	"syscall"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// ringSocket is an AF_PACKET socket and its mmap'ed ring: a receive
// queue's TPACKET_V3 ring and its light ring (lightring_linux.go) each
// hold one.
type ringSocket struct {
	// conn is the socket, opened and bound by github.com/mdlayher/packet:
	// non-blocking, in the Go runtime's poller.
	conn *packet.Conn
	// rc is conn's SyscallConn, taken once (each call allocates): the
	// ring code waits on it without a syscall.
	rc syscall.RawConn
	// fd is conn's descriptor, for the setsockopts, mmap and sendmmsg the
	// library has no call for. It is valid until conn is closed, which
	// the owner does only after every data-path user is gone (Port.mu).
	fd int
	// mapping is the socket's mmap.
	mapping []byte
}

// closeSocket unmaps the ring and closes the socket; fd is -1 after.
func (s *ringSocket) closeSocket() {
	if s.mapping != nil {
		unix.Munmap(s.mapping)
		s.mapping = nil
	}
	if s.conn != nil {
		s.conn.Close()
		s.conn, s.rc = nil, nil
	}
	s.fd = -1
}
