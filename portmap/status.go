package portmap

import (
	"context"
	"net/netip"
	"time"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// sweepInterval is how often Run removes expired mappings: lifetimes
// are at least 120 s, so a second late is within a percent.
const sweepInterval = time.Second

// Run sweeps expired mappings every second until ctx is done. The
// runtime starts one per table.
func (t *Table) Run(ctx context.Context) {
	tick := time.NewTicker(sweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.Sweep()
		}
	}
}

// Status is the table for the status page and its JSON: the mappings
// with their owner, protocol and expiry, and the counters.
type Status struct {
	External string          `json:"external"` // e.g. "203.0.113.2", "" while none
	Epoch    uint32          `json:"epoch"`    // seconds since the epoch's start
	Mappings []MappingStatus `json:"mappings"`
	// Events, Refused and Errors are the Stats counters by name
	// (events/created, refused/secure_mode, ...).
	Events  map[string]uint64 `json:"events"`
	Refused map[string]uint64 `json:"refused"`
	Errors  map[string]uint64 `json:"errors"`
}

// MappingStatus is one mapping on the status page.
type MappingStatus struct {
	Owner       Owner            `json:"owner"`    // "natpmp", "pcp", "upnp"
	Protocol    string           `json:"protocol"` // "tcp", "udp"
	External    uint16           `json:"external"` // e.g. 3074
	Internal    netip.AddrPort   `json:"internal"` // e.g. 192.168.1.10:3074
	Peers       []netip.AddrPort `json:"peers,omitempty"`
	Client      netip.Addr       `json:"client"`
	Description string           `json:"description,omitempty"`
	Expires     time.Time        `json:"expires"`
	Remaining   int64            `json:"remaining_s"` // seconds left
}

// Status returns the table's status.
func (t *Table) Status() Status {
	now := t.cfg.Now()
	s := Status{
		Epoch:   t.Epoch(),
		Events:  svcstats.Counters(&t.stats, "events"),
		Refused: svcstats.Counters(&t.stats, "refused"),
		Errors:  svcstats.Counters(&t.stats, "errors"),
	}
	if e := t.External(); e.IsValid() {
		s.External = e.String()
	}
	for _, m := range t.Mappings() {
		s.Mappings = append(s.Mappings, MappingStatus{
			Owner: m.Owner, Protocol: protoName(m.Proto), External: m.External, Internal: m.Internal, Peers: m.Peers,
			Client: m.Client, Description: m.Description, Expires: m.Expires, Remaining: int64(m.Lifetime(now) / time.Second),
		})
	}
	return s
}
