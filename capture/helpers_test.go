package capture

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

// serialize builds a frame with gopacket's encoders (lengths and
// checksums computed), an encoder independent of ours.
func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tcp4Frame(t testing.TB, src, dst string, sport, dport uint16) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP,
		SrcIP: netip.MustParseAddr(src).AsSlice(), DstIP: netip.MustParseAddr(dst).AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: 1, SYN: true, Window: 64240}
	tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}, ip, tcp)
}

func tcp6Frame(t testing.TB, src, dst string, sport, dport uint16) []byte {
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
		SrcIP: netip.MustParseAddr(src).AsSlice(), DstIP: netip.MustParseAddr(dst).AsSlice()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: 1, ACK: true, Window: 64240}
	tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6}, ip, tcp, gopacket.Payload("hello"))
}

// tagged inserts a tag (tpid, vid) after frame's MAC addresses.
func tagged(frame []byte, tpid, vid uint16) []byte {
	out := append([]byte{}, frame[:12]...)
	out = binary.BigEndian.AppendUint16(out, tpid)
	out = binary.BigEndian.AppendUint16(out, vid)
	return append(out, frame[12:]...)
}

// macsecFrame is an IEEE 802.1AE frame: EtherType 0x88e5, a SecTAG with
// SCI (TCI SC=1, E=1, C=1, AN 0; SL 0; PN 1; SCI 02:00:00:00:00:0a port 1),
// 48 octets of "ciphertext" and a 16-octet ICV (clause 9).
func macsecFrame() []byte {
	f := append([]byte{}, macB...)
	f = append(f, macA...)
	f = append(f, 0x88, 0xe5, 0x2c, 0x00, 0, 0, 0, 1)
	f = append(f, macA...)
	f = append(f, 0, 1)
	f = append(f, make([]byte, 48+16)...)
	return f
}
