package dhcp6client

import (
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// Stats counts what a Client did. Fields are read with Load.
type Stats struct {
	Solicits   atomic.Uint64 `counter:"events/solicit"`   // Solicits sent, retransmissions included
	Advertises atomic.Uint64 `counter:"events/advertise"` // Advertises accepted (usable, whether chosen or not)
	Requests   atomic.Uint64 `counter:"events/request"`   // Requests sent, retransmissions included
	Renews     atomic.Uint64 `counter:"events/renew"`     // Renews sent, retransmissions included
	Rebinds    atomic.Uint64 `counter:"events/rebind"`    // Rebinds sent (at T2 and to confirm a saved lease), retransmissions included
	Releases   atomic.Uint64 `counter:"events/release"`   // Releases sent, retransmissions included
	Replies    atomic.Uint64 `counter:"events/reply"`     // Replies accepted, to every kind of message

	Renewals       atomic.Uint64 `counter:"events/renewals"`        // times the client entered RENEW (at T1)
	Rebindings     atomic.Uint64 `counter:"events/rebindings"`      // times the client entered REBIND (at T2)
	Expiries       atomic.Uint64 `counter:"events/expired"`         // prefixes and addresses withdrawn at the end of their valid lifetime
	Losses         atomic.Uint64 `counter:"events/lost"`            // leases lost entirely (every prefix expired), back to SOLICIT
	NoPrefixAvail  atomic.Uint64 `counter:"events/no_prefix_avail"` // IA_PDs with status NoPrefixAvail, in Advertises and Replies
	NoBinding      atomic.Uint64 `counter:"events/no_binding"`      // Replies to Renew or Rebind whose IA_PD had status NoBinding (then Request)
	RequestRefused atomic.Uint64 `counter:"events/request_refused"` // Replies to Request without a usable prefix: back to SOLICIT after a back-off
	Exhausted      atomic.Uint64 `counter:"events/exhausted"`       // exchanges given up after MRC or MRD (RFC 8415 §15)

	LeaseFileErrors atomic.Uint64 `counter:"events/lease_file_errors"` // lease files unreadable, corrupt or truncated; failed writes
	DUIDFileErrors  atomic.Uint64 `counter:"events/duid_file_errors"`  // DUID files unreadable or corrupt (replaced); failed writes
	SendErrors      atomic.Uint64 `counter:"events/send_errors"`       // messages the Transport refused

	// Drops are the messages received and not used, by reason. A drop
	// changes nothing: the exchange in flight carries on.
	Drops Drops
}

// Drops counts received messages the client did not use, by reason.
type Drops struct {
	Malformed  atomic.Uint64 `counter:"drops/malformed"`  // not a DHCPv6 message: too short, truncated or unparsable options
	Relay      atomic.Uint64 `counter:"drops/relay"`      // Relay-forward or Relay-reply, which are never for a client (RFC 8415 §19)
	NotServer  atomic.Uint64 `counter:"drops/not_server"` // not from UDP port 547
	Type       atomic.Uint64 `counter:"drops/type"`       // a type the state does not take: an Advertise after SOLICIT, a Reply in SOLICIT, Reconfigure, a client's message
	Unexpected atomic.Uint64 `counter:"drops/unexpected"` // no exchange pending (INIT, BOUND)
	XID        atomic.Uint64 `counter:"drops/xid"`        // transaction id not the pending exchange's (RFC 8415 §16.3, §16.10)
	ClientID   atomic.Uint64 `counter:"drops/client_id"`  // Client Identifier missing or not our DUID (RFC 8415 §16.3, §16.10)
	ServerID   atomic.Uint64 `counter:"drops/server_id"`  // Server Identifier missing or invalid, or not the server REQUEST, RENEW or RELEASE is with
	NoPrefix   atomic.Uint64 `counter:"drops/no_prefix"`  // no usable prefix in our IA_PD: an Advertise (RFC 8415 §18.2.9), or a Reply to Renew or Rebind that renews nothing
	Status     atomic.Uint64 `counter:"drops/status"`     // a message-level Status Code other than Success (UnspecFail, UseMulticast, NoAddrsAvail, ...)
}

// Counters returns the event counters by their tag's name, e.g.
// {"solicit": 1, "reply": 1}: the status page's events and the metrics.
func (s *Stats) Counters() map[string]uint64 { return svcstats.Counters(s, "events") }

// DropCounts returns Drops by reason, e.g. {"xid": 2, "malformed": 0}.
func (s *Stats) DropCounts() map[string]uint64 { return svcstats.Counters(s, "drops") }

// Total is the sum of the drops.
func (d *Drops) Total() uint64 {
	return d.Malformed.Load() + d.Relay.Load() + d.NotServer.Load() + d.Type.Load() + d.Unexpected.Load() +
		d.XID.Load() + d.ClientID.Load() + d.ServerID.Load() + d.NoPrefix.Load() + d.Status.Load()
}

// Status is a snapshot of a Client: the status page shows it and
// /api/status encodes it as it is (router/status DHCPv6Client), so a new
// field or counter needs no glue in the router.
type Status struct {
	// State is the state's name in lower case, e.g. "bound" (see the
	// package doc).
	State string `json:"state"`
	// Since is when the client entered State.
	Since time.Time `json:"since,omitzero"`
	// Lease is the applied lease (prefixes and their lifetimes, T1, T2,
	// DNS, domains), nil when there is none. Its fields are at the top of
	// the JSON object (prefixes, address, dns, domains, server_addr,
	// acquired, renew, rebind), left out when there is no lease.
	*Lease
	// DUID is the client's own DUID, hex in JSON.
	DUID DUID `json:"duid"`
	// Server is the DUID of the server the client is asking in REQUEST
	// (the chosen Advertise's), else the lease's; nil when none.
	Server DUID `json:"server_duid"`
	// Next is when the client next acts by itself (a transmission, T1,
	// T2, an expiry); zero when it only waits.
	Next time.Time `json:"next,omitzero"`
	// LastError is the last error the client logged (a failed send, a
	// lease or DUID file error), "" if none.
	LastError string `json:"last_error"`
	// LeaseFileError is the last lease file error (a corrupt or truncated
	// file, which was ignored and is replaced at the next Reply, or a
	// failed write), "" if none.
	LeaseFileError string `json:"lease_file_error"`
	// DUIDFileError is the last DUID file error (a corrupt file, which
	// was replaced by a new DUID, or a failed write), "" if none.
	DUIDFileError string `json:"duid_file_error"`
	// Counters are Stats.Counters: messages sent and received, renewals,
	// expiries and the like.
	Counters map[string]uint64 `json:"counters"`
	// Drops are Stats.DropCounts, e.g. {"wrong_xid": 2}.
	Drops map[string]uint64 `json:"drops"`
}

// DUID is a DHCP unique identifier (RFC 8415 §11); it reads as hex, in
// JSON and on the status page.
type DUID []byte

// String is d in hex, "" for none.
func (d DUID) String() string { return hex.EncodeToString(d) }

// MarshalText is d in hex.
func (d DUID) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads d from hex.
func (d *DUID) UnmarshalText(b []byte) error {
	v, err := hex.DecodeString(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
