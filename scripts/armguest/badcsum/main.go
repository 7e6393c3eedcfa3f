// Command badcsum sends one TCP SYN whose checksum is wrong, through a
// raw socket, so that scripts/armguest.sh can show the receiver counts
// it in TcpInCsumErrors: the board's port validates checksums in
// software (the bgmac has no receive checksum offload), and so must the
// guest's veth.
//
//	badcsum 192.168.1.1 9
package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: badcsum ADDR PORT")
		os.Exit(2)
	}
	dst, err := netip.ParseAddr(os.Args[1])
	port, perr := strconv.ParseUint(os.Args[2], 10, 16)
	if err != nil || perr != nil || !dst.Is4() {
		fmt.Fprintln(os.Stderr, "badcsum: want an IPv4 address and a port")
		os.Exit(2)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_TCP)
	if err != nil {
		fmt.Fprintln(os.Stderr, "badcsum:", err)
		os.Exit(1)
	}
	defer syscall.Close(fd)
	var seg [20]byte
	binary.BigEndian.PutUint16(seg[0:], 40000)
	binary.BigEndian.PutUint16(seg[2:], uint16(port))
	binary.BigEndian.PutUint32(seg[4:], 1)
	seg[12] = 5 << 4 // data offset: 5 words
	seg[13] = 0x02   // SYN
	binary.BigEndian.PutUint16(seg[14:], 1024)
	// The source address the kernel will pick, for the pseudo-header.
	probe, err := net.Dial("udp4", netip.AddrPortFrom(dst, uint16(port)).String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "badcsum:", err)
		os.Exit(1)
	}
	src := probe.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
	probe.Close()
	good := checksum(src, dst, seg[:])
	bad := good + 1 // never good, nor its other ones'-complement spelling
	if bad == 0xffff || bad == 0 {
		bad = 0x1234
	}
	binary.BigEndian.PutUint16(seg[16:], bad)
	if err := syscall.Sendto(fd, seg[:], 0, &syscall.SockaddrInet4{Addr: dst.As4()}); err != nil {
		fmt.Fprintln(os.Stderr, "badcsum:", err)
		os.Exit(1)
	}
}

// checksum returns the TCP checksum of seg (its checksum field zero)
// from src to dst (RFC 793's pseudo-header).
func checksum(src, dst netip.Addr, seg []byte) uint16 {
	s, d := src.As4(), dst.As4()
	sum := uint32(syscall.IPPROTO_TCP) + uint32(len(seg))
	for _, b := range [][]byte{s[:], d[:], seg} {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
