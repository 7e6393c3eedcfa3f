// Package dhcp4server is the router's LAN DHCPv4 server (RFC 2131): it
// hands out addresses from one range of one subnet, plus static leases by
// MAC, with the router, DNS, domain, MTU, classless-route (RFC 3442) and
// NTP options.
//
// The wire format is github.com/insomniacslk/dhcp/dhcpv4; the server's
// state machine, address choice, lease table and lease file are this
// package's. It receives and sends whole UDP datagrams through a Transport
// (in the router, a rawudp.Conn on port 67 fed by the interface's raw
// frame hook), because a server must answer a client that has no address
// yet and so cannot answer ARP (RFC 2131 §4.1): replies to such a client
// go straight to its hardware address.
//
// # Leases
//
// Every address of the range is held by at most one binding, and every
// client (by client identifier, RFC 2132 §9.14, else by hardware address)
// has at most one, so two clients never share an address and the table
// never grows beyond the range plus the static leases, whatever a flood
// of random MACs sends. An OFFER holds its address for Config.OfferHold
// only; a lease that expired or was released stays recorded as its
// client's previous address (RFC 2131 §4.3.1) until the range has no
// never-used address left, when the least recently used one is reused.
//
// Bound leases are kept in Config.LeaseFile, written atomically through
// package statedir, and a DHCPACK leaves only once the lease it grants is
// on disk; writes that arrive while one is in progress are committed
// together, so a burst costs one fsync, not one per client. A lease file
// that cannot be read is reported (Status, Stats) and replaced, never
// fatal.
package dhcp4server
