package netnstest

import "encoding/binary"

// Broadcast is the Ethernet broadcast address.
var Broadcast = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// EtherTypeExperimental is the IEEE 802 local experimental EtherType the
// test frames carry, so that no stack in a namespace answers them.
const EtherTypeExperimental = 0x88b5

// Frame builds an untagged frame from src to dst with the EtherType
// EtherTypeExperimental and payload, zero-padded to the 60-byte minimum.
func Frame(dst, src []byte, payload string) []byte {
	f := make([]byte, 14, 64)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], EtherTypeExperimental)
	f = append(f, payload...)
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

// Tag returns a copy of f with a VLAN tag (tpid, tci) inserted after the
// MAC addresses; f is left as it is.
func Tag(f []byte, tpid, tci uint16) []byte {
	out := make([]byte, 0, len(f)+4)
	out = append(out, f[:12]...)
	out = binary.BigEndian.AppendUint16(out, tpid)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, f[12:]...)
}
