package dhcp6server

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// DropReason is why a received datagram got no answer. Every datagram the
// server receives ends in exactly one of: a Reply sent (Stats.Replied), a
// Reply the transport refused (Stats.SendErrors), or one drop reason.
type DropReason int

// Drop reasons, the index of Stats.Drops.
const (
	// DropMalformed: shorter than the 4-byte header (RFC 8415 §8), an
	// option header or body that runs past the end, bytes left over after
	// the last option, a Client Identifier that is not 3 to 130 bytes
	// (a DUID is a 2-byte type and at most 128 bytes, §11.1) or that
	// appears twice, a second Server Identifier, an odd-length Option
	// Request option (§21.7), or a Client Identifier, Server Identifier
	// or Option Request option the wire library refuses (a DUID-UUID that
	// is not 16 bytes). Options the server does not read are not
	// examined.
	DropMalformed DropReason = iota
	// DropWrongDestination: not to UDP port 547 at
	// All_DHCP_Relay_Agents_and_Servers (ff02::1:2, §7.1) or at the
	// server's own address.
	DropWrongDestination
	// DropBadSource: the source is not a link-local unicast address
	// (fe80::/10), or is the server's own, or comes from a multicast or
	// zero MAC. With no relay agents, every client is on the link and
	// sends from its link-local address (§5), and the Reply goes back to
	// it.
	DropBadSource
	// DropStatefulIgnored: Solicit, Request, Confirm, Renew, Rebind,
	// Release or Decline. The server assigns no addresses or prefixes and
	// stays silent (see the package doc, "Stateful messages").
	DropStatefulIgnored
	// DropRelay: a Relay-forward message. The server serves its own link
	// only and is never behind a relay agent.
	DropRelay
	// DropNotClientMessage: a message only a server or relay agent sends
	// (Advertise, Reply, Reconfigure, Relay-reply), which a server MUST
	// discard (§16.3, §16.10, §16.11, §16.14).
	DropNotClientMessage
	// DropUnsupportedType: any other message type (unknown ones MUST be
	// discarded, §16; Leasequery, DHCPv4-query, ADDR-REG-INFORM and the
	// like are not served).
	DropUnsupportedType
	// DropIAOption: an Information-request carrying an IA option (IA_NA,
	// IA_TA, IA_PD, IA_LL), which a server MUST discard (§16.12).
	DropIAOption
	// DropWrongServerID: an Information-request whose Server Identifier
	// is not this server's DUID, which a server MUST discard (§16.12).
	DropWrongServerID
	// DropRateLimited: an answer withheld because its source, or the
	// server as a whole, used up its rate (see the package doc,
	// "Floods").
	DropRateLimited
	// NumDropReasons is the number of drop reasons.
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	"malformed", "wrong_destination", "bad_source", "stateful_ignored", "relay",
	"not_client_message", "unsupported_type", "ia_option", "wrong_server_id", "rate_limited",
}

// String returns the reason's metric label, e.g. "stateful_ignored".
func (r DropReason) String() string {
	if r < 0 || r >= NumDropReasons {
		return "unknown"
	}
	return dropNames[r]
}

// Stats counts what the server did. Fields are read with Load; they only
// grow.
type Stats struct {
	// Received counts the datagrams the transport handed to the server.
	Received atomic.Uint64 `counter:"events/received"`
	// Replied counts the Replies the transport accepted.
	Replied atomic.Uint64 `counter:"events/replied"`
	// SendErrors counts the Replies the transport refused.
	SendErrors atomic.Uint64 `counter:"events/send_errors"`
	// Drops counts the datagrams dropped, by reason.
	Drops [NumDropReasons]atomic.Uint64
}

// Counters returns the event counters by their tag's name, e.g.
// {"received": 4, "replied": 3}: the status page's events and the
// metrics.
func (s *Stats) Counters() map[string]uint64 { return svcstats.Counters(s, "events") }

// DropCounts returns Drops by reason name (DropReason.String).
func (s *Stats) DropCounts() map[string]uint64 {
	return svcstats.ByName(s.Drops[:], func(i int) string { return DropReason(i).String() })
}

func (s *Stats) drop(r DropReason) { s.Drops[r].Add(1) }

// Status is a snapshot of the server for the status page.
type Status struct {
	// Addr is the link-local address the server answers from.
	Addr netip.Addr `json:"address"`
	// ServerID is the server's DUID (DUID-LL, RFC 8415 §11.4) as sent in
	// the Server Identifier option; the page does not show it.
	ServerID []byte `json:"-"`
	// DNS and Domains are the options in force (SetOptions).
	DNS     []netip.Addr `json:"dns"`
	Domains []string     `json:"domains"`
	// RefreshTime is the Information Refresh Time sent (RFC 8415
	// §21.23), in JSON as nanoseconds.
	RefreshTime time.Duration `json:"refresh_time"`
	// Running reports whether Run is in progress.
	Running bool `json:"running"`
	// Sources is the number of sources the rate limiter tracks now.
	Sources int `json:"sources"`
	// Counters are Stats.Counters: messages received and answered and
	// the like; Drops are Stats.DropCounts, by reason.
	Counters map[string]uint64 `json:"counters"`
	Drops    map[string]uint64 `json:"drops"`
}
