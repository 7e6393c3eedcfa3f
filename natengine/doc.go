// Package natengine is the router's connection tracking, NAT and fast path.
// It works on byte slices that start at the IP header (the fast path on
// untagged Ethernet frames) and knows no netstack types, so it can be tested
// and benchmarked alone.
//
// # Hooks
//
// The integration calls, for every forwarded or local packet:
//
//   - FastPath (or FastPathBatch, one clock read per receive batch) on
//     receive, before anything else; on success the frame is ready to
//     transmit on the returned interface.
//   - Prerouting before routing (netstack input): finds or creates the
//     flow, applies DNAT and reverses NAT on replies and ICMP errors.
//     PreroutingCT also reports the packet's conntrack state (CTState)
//     for the router's input policy, and whether the zones' input chain
//     refused it (the caller's firewall_input drop).
//   - Postrouting after routing (NIC write): confirms new flows, applies
//     SNAT (masquerade, pools, hairpin), clamps the TCP MSS;
//     PostroutingLocal for packets the router originated, which also
//     tracks the router's own flows (output.go).
//   - Offload after a packet has been written with its L2 header: hands an
//     assured flow direction to the fast path.
//   - DrainHeld after each receive batch, Sweep every few seconds,
//     InvalidateFastPath on route or neighbour changes, SetRules on reload.
//   - ReservePort or ReservePortAny before one of the router's own
//     sockets uses a port (the DHCP client's 68, DNS upstream query
//     ports), so SNAT never maps a LAN flow onto it (reserve.go).
//
// Every protocol is tracked: TCP, UDP and ICMP queries by ports or
// identifier, the rest by addresses and protocol (generic.go); IGMP and
// ICMP messages that are not queries stay untracked.
//
// # Buffers
//
// Every method borrows the packet for the duration of the call, may rewrite
// it in place, and keeps no reference afterwards. Out-of-order fragments are
// copied (Verdict Stolen) and returned through DrainHeld.
//
// # Locking
//
// The table is sharded, each shard with its own mutex (lock order in
// conntrack.go). Rules are an immutable snapshot behind an atomic pointer;
// counters are atomics. The fast path takes one shard lock for the lookup
// and reads the flow's immutable, atomically published rewrite.
//
// # Limits
//
// One inside host cannot take the whole table or port range: per inside
// source address, at most Config.MaxConnsPerHost flows and
// Config.MaxPortsPerHost NAT mappings (RFC 6888 REQ-4), and
// Config.RouterReserve slots are the router's own flows' alone
// (limits.go). Each refusal is a counted drop.
//
// # Standards
//
// RFC 4787 (UDP), RFC 5382 (TCP), RFC 5508 (ICMP) NAT behaviour, RFC 6888
// resource exhaustion, RFC 4890 ICMPv6 filtering, RFC 1624 incremental
// checksums. The checklist tests in rfc_test.go name the requirement IDs.
package natengine
