// Package rawudp carries UDP datagrams over a link's raw Ethernet frames,
// below any IP stack. DHCPv4 needs it: a client without an address sends
// from 0.0.0.0 and hears replies to an address it does not have yet, and
// a server answers a client that cannot yet answer ARP (RFC 2131 §4.1).
// Netstack sockets can do neither, and the NAT engine would drop both.
// The WAN's DHCPv6 client uses it over IPv6 (New6) for the same reason of
// ownership: its exchange on UDP port 546 is the router's own and must
// not be translated, and the client picks its source (the link-local
// address) and destination (ff02::1:2) itself.
//
// A Link is whatever gives the frames: the router's per-interface frame
// hook, or in tests an AF_PACKET socket (PacketLink). A Conn parses the
// frames the link hands it with Deliver, keeps those for its UDP port in a
// bounded queue, and builds whole frames for Send. Every frame refused is
// counted in Stats.
package rawudp
