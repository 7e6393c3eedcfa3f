// Package dhcp6server is the router's stateless DHCPv6 server for a LAN
// interface (RFC 8415 §6.1, §18.3.6): it answers a host's
// Information-request with the DNS servers and search domains (RFC 3646)
// and an Information Refresh Time (RFC 8415 §21.23), and assigns nothing.
//
// LAN hosts take their addresses from the router's Router Advertisements
// (SLAAC); the RA's O flag ("other configuration") tells them to ask for
// the rest here. RA's own RDNSS and DNSSL options (RFC 8106) carry the same
// data, but not every host reads them, and those that run a DHCPv6 client
// (Windows, ISC dhclient, dhcpcd, NetworkManager) ask this way. A server
// that keeps no state cannot lose any: its DUID is the interface's DUID-LL
// (RFC 8415 §11.4), the same after every restart, and it writes nothing.
//
// The wire format is github.com/insomniacslk/dhcp/dhcpv6; the checks, the
// choice of options and the rate limits are this package's. Datagrams come
// and go through a Transport (in the router a rawudp IPv6 Conn on port
// 547, fed by the interface's frame tap), because the router's netstack
// must not see the LAN's DHCPv6 traffic and the Reply goes straight to the
// client's MAC, with no neighbour discovery first.
//
// # What is answered
//
// Only an Information-request, sent to ff02::1:2 (§7.1) or to the
// server's link-local address, from a link-local source (§5: with no relay
// agent the client is on the link and uses its link-local address), to
// port 547. It is dropped, and counted, when it carries an IA option or a
// Server Identifier other than ours (§16.12), or is malformed: options
// cut short or overrunning the message, bytes after the last option, a
// Client Identifier that is not a DUID of 3 to 130 bytes or appears twice,
// an odd-length Option Request option, or an identifier the wire library
// refuses. Options the server does not read are ignored, whatever their
// body: unknown ones as §16 requires, known ones as it allows.
//
// RFC 9915, 8415's successor, says in §16 that servers SHOULD NOT accept
// unicast from clients, having dropped the Server Unicast option. An
// Information-request unicast to the server's link-local address still
// comes from the link (its source must be link-local too) and costs what a
// multicast one does, so it is answered, rather than bounced with the
// UseMulticast status that RFC 9915 retires.
//
// The Reply (§18.3.6) carries the request's transaction ID, our Server
// Identifier and, byte for byte, the client's Client Identifier if it sent
// one; an Information-request without one is answered too (the SHOULD of
// §18.3.6), with none (§16.10). It goes to the client's source address and
// MAC, port 546, from Config.Addr port 547 (§7.2, §18.3.10).
//
// # Options sent
//
// DNS servers (23), domain search list (24) and Information Refresh Time
// (32) go only to a client whose Option Request option names them. §21.7
// says so for every option outside its list of never-requested ones:
// "Other top-level option codes MUST appear in the Option Request option
// or they will not be sent by the server"; §18.3.6 lets a server add
// options unrequested, but clients must request 32 in every
// Information-request (§21.23) and every client in our tests requests 23
// and 24, so following §21.7 costs nothing and keeps the Reply to what the
// client will read. A client that requests nothing gets a Reply with the
// identifiers only. The refresh time is Config.RefreshTime, IRT_DEFAULT
// (86400 s) when unset and never below IRT_MINIMUM (600 s): the option
// "MUST NOT be smaller" (§21.23). SetOptions changes DNS and domains at run
// time, say when a delegated prefix or the forwarder's address changes;
// clients learn it at their next refresh, so a router that expects such
// changes sets a shorter RefreshTime.
//
// # Stateful messages
//
// Solicit, Request, Confirm, Renew, Rebind, Release and Decline get no
// answer (Stats: stateful_ignored). §18.3.1 has a server discard a Solicit
// when its policy does not let it respond to the client, and this
// server's policy is to assign nothing. An Advertise could only say
// NoAddrsAvail (§18.3.9), and a client ignores an Advertise that holds no
// addresses and no prefixes (§18.2.9), so silence costs the client
// nothing and spares a Reply per retransmission. Hosts that read the RA
// (M flag clear, O flag set) never send these; a host that does keeps its
// SLAAC addresses. A Confirm with no server able to check it must get no
// Reply (§18.3.3), and Renew, Rebind, Release and Decline concern bindings
// this server never made. Relay-forward messages are dropped too: the
// server serves its own link only.
//
// # Floods
//
// Every datagram costs a few cheap checks (and a valid Information-request
// a parse); what costs more, building and sending a Reply, is rationed by
// token buckets, taken only once a message has passed every check, so the
// drop counters still say what a flooding host sent: each source address gets sourceBurst Replies and then
// sourceRate per second, so one looping client cannot crowd out the rest;
// each sending host, by the frame's Ethernet source, gets hostBurst and
// hostRate over all the source addresses it uses, so one host spoofing
// ever-new link-local sources spends its own budget, not the server's;
// and the server as a whole gets globalBurst and globalRate, so that a
// flood from ever-new spoofed MACs too costs at most that much. The
// tables of sources and hosts are bounded (maxSources); idle entries are
// forgotten when one fills. Withheld Replies are counted (rate_limited); the client's
// retransmission gets its answer once its bucket refills.
//
// # Wiring
//
// The router gives each LAN interface one Server: HWAddr the interface's
// MAC, Addr its link-local address (netstack's), DNS the router's own
// non-link-local addresses on the LAN (where its DNS forwarder listens),
// Domains the LAN's domain. Its Transport is a rawudp IPv6 Conn on UDP 547
// behind a frame tap (EtherType 0x86dd, IPProto 17, DstPort 547) that
// takes only frames to ff02::1:2 or Addr, so that a host's DHCPv6 traffic
// to some other server passes through, on a port that receives the
// multicast MAC 33:33:00:01:00:02. The router's RA sets the O flag.
package dhcp6server
