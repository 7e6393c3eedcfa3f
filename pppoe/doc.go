// Package pppoe is a PPPoE client (RFC 2516) with the PPP it carries:
// LCP (RFC 1661), PAP (RFC 1334) and CHAP-MD5 (RFC 1994), IPCP (RFC 1332,
// DNS servers per RFC 1877) and IPv6CP (RFC 5072), plus RFC 4638
// PPP-Max-Payload for a 1500-byte MTU on baby-jumbo links. It imports
// nothing of the router: it speaks Ethernet frames in and out.
//
// # What is here
//
//   - discovery.go: the discovery tag codec (bounded; every malformed
//     case is an error the Session counts) and PADO selection by
//     Host-Uniq, Service-Name and AC-Name.
//   - ppp.go: the control packet and option codecs and the RFC 1661 §4
//     automaton with restart counters (Max-Configure, Max-Terminate,
//     Max-Failure) and a round limit, so a Configure-Request or Nak loop
//     ends.
//   - lcp.go, auth.go, ipcp.go, ipv6cp.go: the option logic of each
//     protocol (MRU clamped to 128..1492, or 1500 with RFC 4638; magic
//     number loop detection; PAP/CHAP-MD5; address and DNS; interface
//     identifier).
//   - session.go: Session, the client. It owns no goroutine and no timer:
//     the caller passes each received frame to Handle and calls Tick at
//     NextDeadline, so tests drive it with plain time values. Frames go
//     out through a FrameSender. Status is JSON-tagged; Stats counts every
//     drop. A PADT from the AC (right MAC and session id), a
//     Terminate-Request, failed authentication or EchoFailures unanswered
//     LCP echoes end the session; it reconnects after a backoff that
//     doubles up to MaxBackoff.
//   - encap.go: Link.Encap and Link.Decap, the data path's 8-byte PPPoE
//     session header plus PPP protocol field, with an optional 802.1Q tag,
//     written in the headroom before a packet and checked by slicing:
//     no allocation.
//   - secrets.go: Credentials from a 0600 file; the password is never
//     formatted or marshalled.
//
// # Where it is wired
//
//   - router/config: a wan interface's `addresses: [pppoe]` with
//     `pppoe: {user, password_file, service, ac, mtu, lcp_echo}`, mapped
//     onto Config by PPPoE.Session.
//   - router/pppoelink: Link runs a Session on the WAN interface (taps
//     for 0x8863/0x8864, one goroutine, Tick at NextDeadline, WriteFrame
//     out). Its Endpoint (the PPP link as a netstack NIC of its own) is
//     not used by the router: the WAN interface carries the session.
//   - stack (pppoe.go): the WAN interface in PPPoE mode is point to point
//     and decapsulates the session's IP frames in place before the fast
//     path, NAT and the input policy (Link.Decap checks them), and
//     encapsulates what it sends in place after NAT (fast path included);
//     received SYNs get their MSS clamped to the MTU, sent ones are
//     clamped by NAT Postrouting.
//   - router/svc (pppoe.go): the service "pppoe IFACE" starts the Link,
//     moves the interface's data path into and out of the session on
//     every change, and hands IPCP's result to the runtime as a lease
//     (address /32, default route to the peer, MTU, DNS servers for the
//     DNS forwarder) with IPv6CP's link-local address fe80::IID, which
//     the wan's RA learner and DHCPv6 client then speak from (IPv6CP
//     runs when the wan's ipv6: learns RAs or asks for a delegation).
//   - router/status: Status and counters on the page and in /metrics.
//   - lab: TestPPPoEAgainstLinux (IPv6CP, DHCPv6-PD from kea and RAs
//     from radvd over the session included), TestPPPoEReconnectAgainstLinux
//     and TestPPPoEVLANAgainstLinux (RFC 4638 included) run it against
//     pppoe-server and pppd on Linux's kernel PPPoE in the
//     internal/linuxpeer guest.
//
// Not used by the router: the VLAN of Config (the router's WAN
// interface strips and pushes its own tags, so it leaves Config.VLAN 0).
package pppoe
