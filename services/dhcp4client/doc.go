// Package dhcp4client is the router's DHCPv4 client for a WAN interface:
// the RFC 2131 state machine (INIT, SELECTING, REQUESTING, BOUND,
// RENEWING, REBINDING, and INIT-REBOOT from a lease saved across
// restarts), its randomized retransmissions and its T1, T2 and expiry
// timers, over raw frames so that it can speak before it has an address.
//
// The wire format is github.com/insomniacslk/dhcp/dhcpv4 (messages and
// options only); the state machine, the timers and the lease file are
// this package's. The client takes its frames through a Transport (a
// rawudp.Conn on UDP port 68, below netstack and NAT), its time from a
// Clock and its randomness from a rand.Source, so that its tests run on
// a fake clock; it never imports netstack or router config types.
//
// What it hands the router is a Lease (address and mask, routes from
// option 121 or else 3, DNS servers, domain, MTU and the lease times)
// through Config.OnLease, called from the client's goroutine whenever
// the applied lease changes, with a nil new lease when the address must
// be removed (expiry, DHCPNAK, DHCPDECLINE, DHCPRELEASE).
//
// Before an address is applied the client checks it with an RFC 5227 ARP
// probe (a Prober; ARPProber is one over a rawudp.Link) and declines it
// when another host answers for it (RFC 2131 §3.1.5).
package dhcp4client
