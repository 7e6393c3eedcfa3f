package xdpport

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// udpChecksumOK verifies the UDP checksum of an untagged IPv4 frame
// with a 20-byte header (RFC 768, RFC 1071).
func udpChecksumOK(f []byte) bool {
	udp := f[34:]
	n := int(binary.BigEndian.Uint16(udp[4:]))
	if n < 8 || n > len(udp) {
		return false
	}
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(f[26:34])
	sum += 17 + uint32(n)
	add(udp[:n])
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

// TestPartialChecksum records what AF_XDP gives the router from a local
// peer: veth with TX checksum offload on (its default) hands a UDP
// datagram over with only the pseudo-header sum in its checksum field
// (CHECKSUM_PARTIAL), and AF_XDP, unlike the TPACKET_V3 ring's
// TP_STATUS_CSUMNOTREADY, has no way to say so. With the offload off
// the checksum is complete. The stack must therefore not drop such
// frames on a bad checksum from an af_xdp port on veth (or the peer's
// tx checksumming must be off, as the lab can do).
func TestPartialChecksum(t *testing.T) {
	netnstest.Privileged(t, "ethtool", "bash")
	for _, tc := range []struct {
		txCsum string
		wantOK bool
	}{
		{"on", false},
		{"off", true},
	} {
		t.Run("tx="+tc.txCsum, func(t *testing.T) {
			ns := newLab(t)
			ns.Run(t, "ethtool", "-K", "vb", "tx", tc.txCsum)
			p := open(t, ns, "va")
			got := make(chan []byte, 1)
			run(t, p, func(_ int, fs []hw.Frame) {
				for _, f := range fs {
					if len(f.Data) >= 42 && binary.BigEndian.Uint16(f.Data[12:]) == 0x0800 && f.Data[14] == 0x45 && f.Data[23] == 17 {
						select {
						case got <- append([]byte(nil), f.Data...):
						default:
						}
					}
				}
			})
			ns.IP(t, "addr", "add", "10.9.0.2/24", "dev", "vb")
			ns.IP(t, "neigh", "add", "10.9.0.1", "lladdr", "02:00:00:00:00:0a", "dev", "vb")
			ns.Run(t, "bash", "-c", "echo hello > /dev/udp/10.9.0.1/9")
			select {
			case f := <-got:
				if ok := udpChecksumOK(f); ok != tc.wantOK {
					t.Errorf("tx checksumming %s on the peer: UDP checksum complete = %v, want %v", tc.txCsum, ok, tc.wantOK)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("no UDP datagram reached the port")
			}
		})
	}
}
