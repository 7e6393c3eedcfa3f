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
// # What the next stage wires
//
//   - The WAN port (or its VLAN sub-interface) feeding EtherType
//     0x8863/0x8864 frames to Session.Handle and a FrameSender writing
//     to the port; a goroutine calling Tick at NextDeadline.
//   - A netstack NIC for the PPP link (a point-to-point endpoint with
//     MTU Status.MTU whose WritePackets call Link.Encap and whose receive
//     side is Link.Decap on the port's dispatch), carrying the IPCP
//     address and the IPv6CP link-local address.
//   - Config: a WAN `addresses: [pppoe]` with service, ac_name,
//     max_payload, credentials_file, echo interval/failures, in
//     router/config with file:line:col errors, mapped onto Config.
//   - Status.IPv4.DNS to the DNS forwarder as upstreams (OnChange);
//     Status and Stats.Counters on the status page and metrics.
//   - The NAT fast path over Link.Encap/Decap, and the TCP MSS clamp to
//     MTU-40 (1452 for IPv4, 1432 for IPv6 at MTU 1492).
//   - Interop in the lab against pppoe-server + pppd in the linuxpeer
//     QEMU guest (discovery, CHAP and PAP, IPCP+DNS, IPv6CP, echo
//     timeout, PADT on restart, RFC 4638).
package pppoe
