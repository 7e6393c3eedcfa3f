// Package ra is the router's LAN router-advertisement sender (RFC 4861
// §6.2): on each lan interface it announces the router as default router,
// the interface's /64 prefixes for SLAAC (RFC 4862) with lifetimes tied to
// the delegation they come from, the MTU, and the router's DNS forwarder
// by RDNSS and DNSSL (RFC 8106), so that a LAN host autoconfigures IPv6
// with no other help.
//
// It works on whole Ethernet frames: the router hands it the ICMPv6
// frames its lan interface receives (a raw-frame tap below netstack) and
// it writes its RAs with the interface's frame writer. Netstack, a
// forwarding stack, neither sends RAs nor answers RSs itself. The wire
// format is github.com/mdlayher/ndp; timers, validation and the
// deprecation of withdrawn prefixes are this package's.
//
// Unsolicited RAs go to all-nodes at random intervals in [MinInterval,
// MaxInterval], the first three at most 16 s apart (§6.2.4). A valid RS
// (§6.1.1) is answered by a multicast RA after a random delay of up to
// 0.5 s, and never sooner than 3 s after the last multicast RA (§6.2.6):
// a flood of RSs costs a counter each and at most one RA every 3 s. A
// prefix removed by SetPrefixes is still announced with preferred
// lifetime 0 and a valid lifetime of at most two hours (RFC 7084 L-13,
// RFC 4862 §5.5.3 e) until that ends, so hosts stop using it for new
// connections at once. When Run ends the router sends a final RA with
// router lifetime 0 (§6.2.5) and its prefixes deprecated.
package ra
