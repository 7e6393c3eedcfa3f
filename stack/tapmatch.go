package stack

import "gvisor.dev/gvisor/pkg/tcpip/header"

// The constructors below name the TapMatch values the services register,
// so that no call site spells an EtherType, protocol number or port in
// hex.

// MatchEtherType matches every frame of EtherType t, e.g. mka.EtherType
// (EAPOL, IEEE 802.1X clause 11.3).
func MatchEtherType(t uint16) TapMatch { return TapMatch{EtherType: t} }

// MatchARP matches ARP frames (EtherType 0x0806, RFC 826): a DHCPv4
// client's address probes and announcements (RFC 5227).
func MatchARP() TapMatch { return TapMatch{EtherType: uint16(header.ARPProtocolNumber)} }

// MatchUDP4 matches IPv4 UDP datagrams to port (EtherType 0x0800, RFC
// 791 protocol 17, RFC 768), e.g. 68 for a DHCPv4 client and 67 for a
// server (RFC 2131 §4.1). Port 0 matches every port.
func MatchUDP4(port uint16) TapMatch {
	return TapMatch{EtherType: uint16(header.IPv4ProtocolNumber), IPProto: uint8(header.UDPProtocolNumber), DstPort: port}
}

// MatchUDP6 matches IPv6 UDP datagrams to port (EtherType 0x86dd, RFC
// 8200 Next Header 17), e.g. 546 for a DHCPv6 client and 547 for a server
// (RFC 8415 §7.2). Port 0 matches every port.
func MatchUDP6(port uint16) TapMatch {
	return TapMatch{EtherType: uint16(header.IPv6ProtocolNumber), IPProto: uint8(header.UDPProtocolNumber), DstPort: port}
}

// MatchICMPv6 matches ICMPv6 messages (EtherType 0x86dd, Next Header 58,
// RFC 4443) of every type: Router Advertisements and Solicitations
// (RFC 4861) among them, which the tap sorts by type itself.
func MatchICMPv6() TapMatch {
	return TapMatch{EtherType: uint16(header.IPv6ProtocolNumber), IPProto: uint8(header.ICMPv6ProtocolNumber)}
}
