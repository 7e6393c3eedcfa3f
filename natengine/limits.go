package natengine

import "sync"

// Per-host limits and the router's reserve.
//
// One inside host must not be able to take the whole table: a guest that
// opens flows from tens of thousands of ports would otherwise fill it and
// the NAT's port range, and then every other host's new flows and the
// router's own (its DNS forwarder's upstream queries) fail. Three limits,
// all checked when a flow is created, never per packet:
//
//   - Config.MaxConnsPerHost bounds the flows one inside source address
//     (a LAN host, as the packets' source address says) holds; a new flow
//     past it is refused (DropHostFlows). Flows from wan interfaces and the
//     router's own are not any inside host's.
//   - Config.MaxPortsPerHost bounds the NAT mappings (external ports and
//     ICMP identifiers) one inside address holds (RFC 6888 REQ-4: a limit
//     on the external ports per subscriber); a new mapping past it is
//     refused (DropHostPorts; dropped, as REQ-11 has it for quotas), which
//     leaves the rest of the port range to the other hosts and to the
//     router's own sockets (reserve.go).
//   - Config.RouterReserve slots of the table are the router's own flows'
//     (PostroutingLocal): forwarded flows, the LAN's and the WAN's, fill at
//     most MaxConns-RouterReserve of it; a forwarded flow past that
//     early-drops another forwarded flow or is refused (DropTableFull).
//
// The per-host counts are maps under one mutex each (hosts.mu here,
// nat.mu for the ports), taken once when a flow is created and once when
// it is removed: the flows of one host are in every shard, and a new flow
// already takes nat.mu for its mapping.
//
// IPv6 hosts choose their own addresses (RFC 8981 temporary addresses,
// any of a /64), so the per-host flow limit bounds one address, not one
// machine: it stops a device that fills the table by accident, not one
// that rotates its source address on purpose; the router's reserve holds
// either way.

// hostKey is an inside source address.
type hostKey struct {
	addr [16]byte
	v6   bool
}

// hostCounts counts the flows of each inside address.
type hostCounts struct {
	max int32 // flows an address may hold; 0: no limit
	mu  sync.Mutex
	n   map[hostKey]int32 // flows by address, none at 0; protected by mu
}

// take counts one more flow for k; it reports false, counting nothing,
// if k holds max already.
func (h *hostCounts) take(k hostKey) bool {
	if h.max <= 0 {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[k] >= h.max {
		return false
	}
	h.n[k]++
	return true
}

// release undoes one take of k.
func (h *hostCounts) release(k hostKey) {
	if h.max <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[k]--; h.n[k] <= 0 {
		delete(h.n, k)
	}
}

// RouterFlows returns the number of tracked flows the router itself
// opened (PostroutingLocal).
func (e *Engine) RouterFlows() int { return int(e.tab.count.Load() - e.tab.fwd.Load()) }

// RouterReserve returns how many table slots only the router's own flows
// may take (Config.RouterReserve as applied).
func (e *Engine) RouterReserve() int { return int(e.tab.max - e.tab.fwdMax) }
