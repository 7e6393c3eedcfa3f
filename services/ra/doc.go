// Package ra is the router's side of IPv6 router discovery (RFC 4861):
// an Advertiser sends a LAN interface's Router Advertisements, so that
// its hosts configure themselves by SLAAC (RFC 4862) with the router as
// default router and its DNS forwarder from RDNSS and DNSSL (RFC 8106);
// a Learner reads a WAN interface's RAs, as Linux does with accept_ra=2
// on a forwarding interface, so that the router learns its default
// route, the link's prefixes, DNS and MTU from the ISP.
//
// Netstack, a forwarding stack, neither sends RAs nor processes them, and
// the router must own both exchanges whatever the NAT engine does, so
// both parts work on whole Ethernet frames: the router hands them the
// ICMPv6 frames an interface receives through a frame tap (Deliver), and
// they write theirs with the interface's frame writer (Link). The wire
// format is github.com/mdlayher/ndp; the checks, timers, lifetimes and
// bounds are this package's.
//
// # Advertiser
//
// Unsolicited RAs go to all-nodes (ff02::1) at random intervals in
// [MinInterval, MaxInterval], the first three at most 16 s apart, after
// start and after each change (§6.2.4). MinInterval defaults to
// 0.33 × MaxInterval when MaxInterval is 9 s or more; RFC 4861 §6.2.1
// gives MaxInterval itself as the default below that, which breaks its
// own bound of 0.75 × MaxInterval, so 0.75 × MaxInterval it is. Every
// RA carries the Source Link-Layer Address option, the MTU option if
// set, each prefix with the L and A flags, RDNSS and DNSSL.
//
// A valid Router Solicitation (§6.1.1: hop limit 255, code 0, checksum,
// at least 8 octets, no option of length 0, no SLLA option from ::) is
// answered by a multicast RA after a random delay of up to 0.5 s, never
// sooner than 3 s after the previous multicast RA (§6.2.6), and by the
// next scheduled RA if that comes sooner. The answer is multicast, which
// §6.2.6 calls the usual case, rather than unicast, which it allows:
// one RA then answers every RS of its window and refreshes every host,
// and the router needs no neighbour entry for a host it has not heard
// from before.
//
// # Floods
//
// An RS costs its checks (a checksum over at most one frame) and two
// atomic adds on the receive goroutine; RSs that arrive while an answer
// is scheduled are counted (Stats.RSCoalesced) and cost nothing more, so
// a flood of any rate costs at most one RA every 3 s. A dropped RS is
// counted under its DropReason. RAs of other routers cost their checks,
// and one comparison with ours per 100 ms at most (see below).
//
// # Renumbering
//
// SetPrefixes replaces the prefixes; a Prefix's lifetimes are fixed
// durations, or ends (ValidUntil, PreferredUntil) taken from a
// delegation, so that what is announced counts down with it and never
// outlives it. A prefix removed from the set is announced withdrawn:
// preferred lifetime 0, so hosts stop using its addresses for new
// connections at once, and a valid lifetime of the lower of what it had
// left and two hours, counting down: RFC 7084 L-13 choice b). Choice a),
// valid lifetime 0, would be ignored by any host whose address has more
// than two hours left (RFC 4862 §5.5.3 e); two hours is what such a host
// accepts, and a host with less left keeps its own. It is announced so
// until that lifetime ends, so that a host that missed the first RA
// still hears it; at most 8 withdrawn prefixes are (the oldest are
// forgotten first, counted). A prefix whose own valid lifetime has ended
// is no longer announced.
//
// When Run ends (its context cancelled) the Advertiser sends a final RA
// (§6.2.5): Router Lifetime 0, so hosts drop the default route at once,
// every prefix deprecated as above and RDNSS and DNSSL with lifetime 0,
// since the router's forwarder stops too. It is one RA, sent at once, not
// the three §6.2.5 allows, which would hold a stop up for 6 s.
//
// # Other routers
//
// An RA from another router on the LAN is counted and left to the caller.
// If it is valid (§6.1.2) it is compared with ours, as §6.2.7 asks: the
// Cur Hop Limit and MTU (when both give one), the M and O flags, and the
// valid and preferred lifetimes of a prefix we announce, more than 10 s
// apart (ours may count down). A difference is counted and logged, at
// most every 10 s.
//
// # Learner
//
// An RA is taken if it passes §6.1.2: a link-local source, hop limit
// 255, code 0, checksum, at least 16 octets, no option of length 0. One
// from the Learner's own address or MAC is dropped. Each option is
// decoded on its own, so that one the wire library refuses costs only
// itself (LearnerStats.OptionsIgnored). Then (§6.3.4):
//
//   - The source becomes a default router for Router Lifetime, with the
//     RA's Default Router Preference (RFC 4191 §2.2) and MAC; a lifetime
//     of 0 removes it at once. Routers are used reachable ones first
//     (RFC 4861 §6.3.6, RFC 4191 §3.2): each is probed with neighbor
//     solicitations to its solicited-node group; one whose address
//     nobody answers for after three is unreachable, used only while no
//     other is reachable or still being probed (nud.go), so an RA from
//     an address nobody answers for cannot take the default route from
//     a router that answers.
//   - A non-zero Cur Hop Limit, the M and O flags and an MTU option of
//     1280 or more are kept; a smaller MTU is ignored and counted.
//   - A Prefix Information option with the L or the A flag (A only on a
//     /64, RFC 4862 §5.5.3 d) adds or renews a prefix with its flags and
//     lifetimes. The link-local prefix, a multicast one, a length over
//     128 and a preferred lifetime over the valid one (RFC 4862 §5.5.3
//     c) are ignored and counted; so are, each under its own counter, a
//     prefix shorter than MinOnLinkBits (/48) and one that overlaps a
//     prefix the router holds elsewhere (LearnerConfig.Owned: its LANs,
//     the delegation), which would route them, or a host in them, out
//     of this link. For an on-link prefix without A the
//     valid lifetime is taken as sent, and 0 removes it at once (§6.3.4).
//     For one with A, whose address the router may use, the two-hour rule
//     of RFC 4862 §5.5.3 e) applies to the valid lifetime: an RA may
//     shorten it to no less than two hours (or what remains, if less), so
//     a spoofed RA cannot end the address early. Its on-link route then
//     lives as long, which at worst sends a packet to a neighbour that
//     would have gone to the router.
//   - RDNSS addresses and DNSSL domains are added or renewed with their
//     lifetimes; 0 removes them (RFC 8106 §5.1, §5.2).
//
// Route Information options (RFC 4191) and the rest are ignored. At most
// 8 routers, 16 prefixes, 8 DNS servers and 8 domains are kept; a new one
// beyond is refused and counted, the ones kept stay, except that a new
// router takes the place of an unreachable one (counted), so that a flood
// of dead routers cannot keep a real one out. Each lifetime ends
// on a timer and takes its entry away; OnChange is called then and
// whenever an RA changes what the State holds, but not when an RA only
// renews lifetimes (State has the current ones). With Solicit, the
// Learner sends up to three Router Solicitations, 4 s apart, after a
// random delay of up to 1 s, until an RA with a router comes (§6.3.7).
//
// # Wiring
//
// On a LAN interface: an Advertiser with Link the interface (its
// WriteFrame and HardwareAddr), SrcAddr its link-local address
// (LinkLocal of its MAC), registered as a tap for stack.MatchICMPv6();
// the interface must receive ff02::2 (MAC
// 33:33:00:00:00:02), where RSs go, and its own link-local address. On a
// WAN interface: a Learner the same way, receiving ff02::1 (MAC
// 33:33:00:00:00:01), where RAs go; its OnChange installs the default
// route through the most preferred router (at the RA's MTU, capped by
// the interface's). Each consumes only its own message type, so both
// may sit on one interface, and NS, NA and echo frames go on to
// netstack.
package ra
