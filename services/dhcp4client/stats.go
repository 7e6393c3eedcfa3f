package dhcp4client

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// Stats counts what a Client did. Fields are read with Load; each
// counter's tag names it for the status page and the metrics (Counters,
// DropCounts).
type Stats struct {
	Discovers atomic.Uint64 `counter:"events/discover"` // DHCPDISCOVERs sent, retransmissions included
	Offers    atomic.Uint64 `counter:"events/offer"`    // DHCPOFFERs accepted
	Requests  atomic.Uint64 `counter:"events/request"`  // DHCPREQUESTs sent, in every state, retransmissions included
	Acks      atomic.Uint64 `counter:"events/ack"`      // DHCPACKs accepted
	Naks      atomic.Uint64 `counter:"events/nak"`      // DHCPNAKs accepted
	Declines  atomic.Uint64 `counter:"events/decline"`  // DHCPDECLINEs sent: the ARP probe found the address in use
	Releases  atomic.Uint64 `counter:"events/release"`  // DHCPRELEASEs sent
	Renewals  atomic.Uint64 `counter:"events/renew"`    // times the client entered RENEWING (at T1)
	Rebinds   atomic.Uint64 `counter:"events/rebind"`   // times the client entered REBINDING (at T2)
	Expiries  atomic.Uint64 `counter:"events/expired"`  // leases that ran out (back to INIT, address removed)

	MTUIgnored      atomic.Uint64 `counter:"events/mtu_ignored"`       // DHCPACKs whose option 26 was below Config.MinMTU
	LeaseFileErrors atomic.Uint64 `counter:"events/lease_file_errors"` // lease files unreadable, corrupt or truncated; failed writes
	SendErrors      atomic.Uint64 `counter:"events/send_errors"`       // messages the Transport refused
	ProbeErrors     atomic.Uint64 `counter:"events/probe_errors"`      // ARP probes that failed (the address is then taken as free)

	// Drops are the messages received and not used, by reason.
	Drops Drops
}

// Drops counts received messages the client did not use, by reason.
type Drops struct {
	Malformed  atomic.Uint64 `counter:"drops/malformed"`  // not a DHCP message (dhcpv4.FromBytes failed, bad cookie, no option 53)
	NotReply   atomic.Uint64 `counter:"drops/not_reply"`  // op is not BOOTREPLY, or not from UDP port 67
	HWAddr     atomic.Uint64 `counter:"drops/hwaddr"`     // chaddr (htype, hlen, address) is not ours
	Unexpected atomic.Uint64 `counter:"drops/unexpected"` // no exchange is pending (INIT, BOUND)
	XID        atomic.Uint64 `counter:"drops/xid"`        // xid is not the pending exchange's
	Type       atomic.Uint64 `counter:"drops/type"`       // a message type the state does not take (e.g. an ACK in SELECTING)
	ServerID   atomic.Uint64 `counter:"drops/server_id"`  // option 54 missing, or not the server the exchange is with
	ClientID   atomic.Uint64 `counter:"drops/client_id"`  // option 61 echoed (RFC 6842) but not ours
	Address    atomic.Uint64 `counter:"drops/address"`    // yiaddr not a usable unicast address, or a bad subnet mask
	LeaseTime  atomic.Uint64 `counter:"drops/lease_time"` // a DHCPACK without option 51 (RFC 2131 Table 3: MUST)
}

// Counters returns the event counters by their tag's name, e.g.
// {"discover": 1, "ack": 1, "renew": 0}: the status page's events and
// gvrouter_dhcp_client_events_total.
func (s *Stats) Counters() map[string]uint64 { return svcstats.Counters(s, "events") }

// DropCounts returns Drops by reason, e.g. {"xid": 2, "malformed": 0}.
func (s *Stats) DropCounts() map[string]uint64 { return svcstats.Counters(s, "drops") }

// Total is the sum of the drops.
func (d *Drops) Total() uint64 {
	return d.Malformed.Load() + d.NotReply.Load() + d.HWAddr.Load() + d.Unexpected.Load() + d.XID.Load() +
		d.Type.Load() + d.ServerID.Load() + d.ClientID.Load() + d.Address.Load() + d.LeaseTime.Load()
}

// Status is a snapshot of a Client: the status page shows it and
// /api/status encodes it as it is (router/status DHCPClient), so a new
// field or counter needs no glue in the router.
type Status struct {
	// State is the RFC 2131 §4.4 state in lower case, e.g. "bound",
	// "init-reboot"; "stopped" once Run returned.
	State string `json:"state"`
	// Since is when the client entered State.
	Since time.Time `json:"since,omitzero"`
	// Lease is the applied lease, nil when there is none. Its times are
	// T1, T2 and Expiry. Its fields are at the top of the JSON object
	// (address, server, routers, routes, dns, domain, mtu, acquired,
	// renew, rebind, expiry), left out when there is no lease.
	*Lease
	// Offered is the address being asked for in REQUESTING or REBOOTING.
	Offered netip.Addr `json:"offered"`
	// Next is when the client next acts by itself (a retransmission, T1,
	// T2, expiry, the end of a wait); zero when it only waits for Run.
	Next time.Time `json:"next,omitzero"`
	// LastError is the last error the client logged (a failed send, a
	// failed probe, a lease file error), "" if none. The router adds the
	// note of a lost lease.
	LastError string `json:"last_error"`
	// LeaseFileError is the last lease file error (a corrupt or truncated
	// file, which was ignored and is replaced at the next DHCPACK, or a
	// failed write), "" if none.
	LeaseFileError string `json:"lease_file_error"`
	// Counters are Stats.Counters: messages sent and received, renew,
	// rebind, expired, mtu_ignored and the like.
	Counters map[string]uint64 `json:"counters"`
	// Drops are Stats.DropCounts, e.g. {"wrong_xid": 2}.
	Drops map[string]uint64 `json:"drops"`
}
