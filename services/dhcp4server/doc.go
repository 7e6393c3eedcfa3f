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
//
// # Floods
//
// A client with random MACs can ask for every address of the range (RFC
// 2131 §7). New leases, addresses given to clients that hold none, are
// rationed per interface by a token bucket (Config.NewLeaseBurst at once,
// Config.NewLeaseRate a second after), so such a flood takes a part of
// the range in its first second and the rest only over minutes, while a
// household's devices, new ones included, never wait. A client's
// renewal, INIT-REBOOT, live offer and static lease never spend from it.
// Every sender, by the frame's Ethernet source (chaddr when relayed), has
// its own small budget of messages too (clientBurst, clientRate), so one
// looping or hostile client cannot keep the server and its lease file
// busy. What either refuses gets silence, as a lost datagram would, and
// is counted (new_lease_limited, rate_limited); the client's
// retransmission is served once the budget refills.
package dhcp4server
