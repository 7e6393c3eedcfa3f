package dhcp4server

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/services/hwaddr"
	"github.com/gvrouter/gvrouter/services/svcstats"
)

// DropReason is why a received datagram got no answer and changed
// nothing.
type DropReason int

// Drop reasons, the index of Stats.Drops.
const (
	// DropMalformed: shorter than a BOOTP header, options that run past
	// the end or lack the end option, or no message type (option 53).
	DropMalformed DropReason = iota
	// DropWrongMagicCookie: not 99.130.83.99 after the BOOTP header (RFC
	// 2131 §3).
	DropWrongMagicCookie
	// DropWrongOp: op is not BOOTREQUEST.
	DropWrongOp
	// DropBadHardware: htype is not Ethernet or hlen is not 6.
	DropBadHardware
	// DropBadClientID: option 61 shorter than 2 bytes (RFC 2132 §9.14) or
	// longer than 255.
	DropBadClientID
	// DropNotOurs: addressed to another host, relayed from a subnet not
	// served, naming another server, or releasing or declining an address
	// that is not the sender's.
	DropNotOurs
	// DropWrongType: a message type a server does not receive (OFFER,
	// ACK, NAK, ...).
	DropWrongType
	// DropBadRequest: a DHCPREQUEST, DHCPDECLINE, DHCPRELEASE or
	// DHCPINFORM without the fields it needs (RFC 2131 §4.3.2 table 4,
	// table 5): no server identifier, requested address or ciaddr where
	// one is required, or one where it must be zero.
	DropBadRequest
	// DropBacklog: an ACK waiting for the lease file was dropped because
	// too many were already waiting.
	DropBacklog
	// DropStoreError: an ACK was not sent because its lease could not be
	// written.
	DropStoreError
	// DropRateLimited: the sender's MAC (the frame's Ethernet source, or
	// chaddr when relayed) sent more than clientBurst messages at once
	// and clientRate a second after (see the package doc, "Floods").
	DropRateLimited
	// DropNewLeaseLimited: a DISCOVER or REQUEST from a client holding no
	// address, unanswered because the interface's new leases
	// (Config.NewLeaseBurst, NewLeaseRate) were used up; the client's
	// retransmission gets one once the budget refills.
	DropNewLeaseLimited
	// NumDropReasons is the number of drop reasons.
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	"malformed", "wrong_magic_cookie", "wrong_op", "bad_hardware", "bad_client_id",
	"not_ours", "wrong_type", "bad_request", "backlog", "store_error",
	"rate_limited", "new_lease_limited",
}

// String returns the reason's metric label, e.g. "wrong_magic_cookie".
func (r DropReason) String() string {
	if r < 0 || r >= NumDropReasons {
		return "unknown"
	}
	return dropNames[r]
}

// Stats counts what the server did. Fields are read with Load; each
// event counter's tag names it for the status page and the metrics
// (Counters).
type Stats struct {
	Received atomic.Uint64 `counter:"events/received"` // datagrams handed to the server

	// Messages received, by type.
	Discover atomic.Uint64 `counter:"events/discover"`
	Request  atomic.Uint64 `counter:"events/request"`
	Decline  atomic.Uint64 `counter:"events/decline"`
	Release  atomic.Uint64 `counter:"events/release"`
	Inform   atomic.Uint64 `counter:"events/inform"`
	// Messages sent, by type.
	Offer atomic.Uint64 `counter:"events/offer"`
	Ack   atomic.Uint64 `counter:"events/ack"`
	Nak   atomic.Uint64 `counter:"events/nak"`

	// PoolExhausted counts DISCOVERs left unanswered because no address
	// of the range was free.
	PoolExhausted atomic.Uint64 `counter:"events/pool_exhausted"`
	// OtherServer counts REQUESTs in SELECTING that chose another server,
	// which released our offer (RFC 2131 §4.3.2).
	OtherServer atomic.Uint64 `counter:"events/other_server"`
	// NoRecord counts INIT-REBOOT REQUESTs from clients the server has no
	// record of, which it must not answer (RFC 2131 §4.3.2).
	NoRecord atomic.Uint64 `counter:"events/no_record"`
	// Expired counts bound leases that reached their expiry.
	Expired atomic.Uint64 `counter:"events/expired"`
	// Drops counts the datagrams dropped, by reason (DropCounts).
	Drops [NumDropReasons]atomic.Uint64
	// SendErrors counts replies the transport refused.
	SendErrors atomic.Uint64 `counter:"events/send_errors"`

	// LeaseWrites counts lease-file writes; LeaseWriteErrors the failed
	// ones.
	LeaseWrites      atomic.Uint64 `counter:"events/lease_writes"`
	LeaseWriteErrors atomic.Uint64 `counter:"events/lease_write_errors"`
	// LeaseFileCorrupt counts lease files found unreadable or inconsistent
	// at start and replaced.
	LeaseFileCorrupt atomic.Uint64 `counter:"events/lease_file_corrupt"`
}

// Counters returns the event counters by their tag's name, e.g.
// {"discover": 3, "offer": 3, "pool_exhausted": 0}: the status page's
// events and gvrouter_dhcp_server_events_total.
func (s *Stats) Counters() map[string]uint64 { return svcstats.Counters(s, "events") }

// DropCounts returns Drops by reason name (DropReason.String), e.g.
// {"wrong_magic_cookie": 3}.
func (s *Stats) DropCounts() map[string]uint64 {
	return svcstats.ByName(s.Drops[:], func(i int) string { return DropReason(i).String() })
}

func (s *Stats) drop(r DropReason) { s.Drops[r].Add(1) }

// LeaseState is where a lease of Status stands.
type LeaseState string

// Lease states.
const (
	LeaseBound    LeaseState = "bound"    // acknowledged and not expired
	LeaseExpired  LeaseState = "expired"  // past its expiry, kept as the client's previous address
	LeaseReleased LeaseState = "released" // released by its client (RFC 2131 §4.3.4), kept likewise
	LeaseUnused   LeaseState = "unused"   // a static lease whose client has not been seen
)

// MAC is a client's hardware address that JSON and the page show as
// text, e.g. "02:00:00:00:01:0a".
type MAC = hwaddr.MAC

// Lease is one row of the lease table. Hostname comes from the client
// (option 12, sanitized) and is shown as text, never as markup.
type Lease struct {
	// MAC is the client's hardware address.
	MAC MAC `json:"mac"`
	// ClientID is option 61 as received; nil = keyed by MAC. The page
	// names clients by MAC, so the JSON leaves it out.
	ClientID []byte `json:"-"`
	// Addr is the leased address.
	Addr netip.Addr `json:"address"`
	// Hostname is the static lease's name, else option 12 sanitized; ""
	// = none.
	Hostname string `json:"hostname"`
	// Expiry is when the lease ends; zero for an unused static lease.
	Expiry time.Time `json:"expiry,omitzero"`
	// Static is true for a lease from Config.Static, false for one from
	// the range.
	Static bool `json:"static"`
	// State is where the lease stands; "" (a literal in a test) reads as
	// bound.
	State LeaseState `json:"state,omitempty"`
}

// LeaseState returns l.State, "bound" when it is empty.
func (l *Lease) LeaseState() LeaseState {
	if l.State == "" {
		return LeaseBound
	}
	return l.State
}

// Kind returns "static" or "dynamic".
func (l *Lease) Kind() string {
	if l.Static {
		return "static"
	}
	return "dynamic"
}

// Status is a snapshot of the server: the status page shows it and
// /api/status encodes it as it is (router/status DHCPServer), so a new
// field or counter needs no glue in the router.
type Status struct {
	// ServerAddr is the server's own address, e.g. 192.168.1.1; Subnet
	// the LAN it serves, e.g. 192.168.1.0/24.
	ServerAddr netip.Addr   `json:"server"`
	Subnet     netip.Prefix `json:"subnet"`
	// RangeStart and RangeEnd are the first and last address of the
	// dynamic range, e.g. 192.168.1.100 and 192.168.1.249.
	RangeStart netip.Addr `json:"pool_start"`
	RangeEnd   netip.Addr `json:"pool_end"`
	// PoolSize is the number of addresses in the range, e.g. 150.
	PoolSize int `json:"pool_size"`
	// PoolUsed is the range's addresses now bound, offered or
	// quarantined, e.g. 37.
	PoolUsed int `json:"pool_used"`
	// Offered and Declined are the range's addresses held by an OFFER or
	// quarantined after a DHCPDECLINE (RFC 2131 §4.3.3).
	Offered  int `json:"offered"`
	Declined int `json:"declined"`
	// Leases are the bound, expired and released leases and every static
	// one, by address.
	Leases []Lease `json:"leases"`
	// LeaseFile is Config.LeaseFile.
	LeaseFile string `json:"lease_file"`
	// LeaseFileError is the error of the last lease-file write when it
	// failed (ACKs then wait), "" once one succeeds. The router adds
	// its own lease-file problems here.
	LeaseFileError string `json:"lease_file_error"`
	// LeaseFileProblem is what was wrong with the lease file at start
	// (unreadable, or corrupt and replaced); "" = nothing.
	LeaseFileProblem string `json:"lease_file_problem"`
	// Counters are Stats.Counters: messages received (discover,
	// request, ...), sent (offer, ack, nak), pool_exhausted and the like.
	Counters map[string]uint64 `json:"counters"`
	// Drops are Stats.DropCounts, e.g. {"wrong_magic_cookie": 3}.
	Drops map[string]uint64 `json:"drops"`
}
