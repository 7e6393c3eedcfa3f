package portmap

import "sync/atomic"

// Stats are the table's counters, read by the status page through
// services/svcstats (`counter:"GROUP/NAME"`). Safe for concurrent use.
type Stats struct {
	Created atomic.Uint64 `counter:"events/created"` // mappings made
	Renewed atomic.Uint64 `counter:"events/renewed"` // lifetimes extended by their owner
	Deleted atomic.Uint64 `counter:"events/deleted"` // mappings deleted on request
	Expired atomic.Uint64 `counter:"events/expired"` // mappings whose lifetime ran out
	// Restored counts mappings reinstalled from the state file.
	Restored atomic.Uint64 `counter:"events/restored"`

	Secure     atomic.Uint64 `counter:"refused/secure_mode"`    // a host asked to map another host (secure mode)
	Permission atomic.Uint64 `counter:"refused/permission"`     // no permission rule allows it
	HostLimit  atomic.Uint64 `counter:"refused/host_limit"`     // the internal host holds its limit of mappings
	TotalLimit atomic.Uint64 `counter:"refused/total_limit"`    // the table is full
	NoPort     atomic.Uint64 `counter:"refused/no_port"`        // no permitted external port was free
	Conflict   atomic.Uint64 `counter:"refused/conflict"`       // the exact external port asked for is another's
	Nonce      atomic.Uint64 `counter:"refused/nonce"`          // a PCP renewal or delete with another nonce
	NotOwner   atomic.Uint64 `counter:"refused/not_owner"`      // a delete of another host's mapping
	Invalid    atomic.Uint64 `counter:"refused/invalid"`        // a malformed request (protocol, port, address)
	NoExternal atomic.Uint64 `counter:"refused/no_external"`    // no external address yet
	NATError   atomic.Uint64 `counter:"refused/nat_engine"`     // the NAT engine refused the entry for another reason
	Zone       atomic.Uint64 `counter:"refused/zone"`           // a host of an inside zone that may not map ports (a guest zone), any request
	SaveErrors atomic.Uint64 `counter:"errors/state_file_save"` // the state file could not be written
}
