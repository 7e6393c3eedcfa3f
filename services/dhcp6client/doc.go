// Package dhcp6client is the router's DHCPv6 client for a WAN interface:
// it asks the ISP for a delegated prefix (IA_PD, RFC 8415 §6.3) and,
// optionally, an address (IA_NA), and keeps them: the RFC 8415 exchanges
// Solicit/Advertise, Request/Reply, Renew at T1, Rebind at T2 and
// Release, their randomized retransmissions (§15), and the loss of each
// prefix when its valid lifetime ends.
//
// # States
//
// INIT waits the random delay before the first Solicit (§18.2.1).
// SOLICIT collects Advertises for the first retransmission time and takes
// the most preferred (one with preference 255 at once). REQUEST asks that
// server. BOUND holds the lease until T1; RENEW asks the same server
// until T2, REBIND any server until the last valid lifetime ends, after
// which the lease is lost and the client solicits again. CONFIRMING is
// the start with a saved, unexpired lease: it is confirmed with Rebind
// (§18.2.12; Confirm is for addresses only) before it is applied.
//
// # Wiring
//
// The wire format is github.com/insomniacslk/dhcp/dhcpv6 (messages and
// options only); the state machine, the timers, the DUID and the lease
// file are this package's. The client takes its datagrams through a
// Transport (a services/rawudp IPv6 Conn on UDP port 546, below netstack
// and NAT), its time from a Clock and its randomness from a rand.Source,
// so that its tests run on a fake clock; it never imports netstack or
// router config types. It sends from its link-local address
// (Config.SrcAddr) to All_DHCP_Relay_Agents_and_Servers (ff02::1:2) port
// 547, always by multicast: it does not take the Server Unicast option.
//
// What it hands the router is a Lease (the delegated prefixes with their
// lifetimes, the address if one was asked for, DNS servers and search
// domains, the server's DUID, T1 and T2) through Config.OnChange, called
// from the client's goroutine whenever the lease changes, with nil when
// it is lost, so that the router applies it by difference.
package dhcp6client
