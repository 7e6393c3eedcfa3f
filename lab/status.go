package lab

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/router/status"
)

// ifCounters are the counters of one router interface the proofs compare.
type ifCounters struct {
	RxPackets, TxPackets uint64
}

// portDrivers returns the driver of each router port of a status
// snapshot (/api/status), by port name: "af_xdp" or "af_packet".
func portDrivers(body []byte) (map[string]string, error) {
	var s status.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("lab: status JSON: %w", err)
	}
	out := make(map[string]string, len(s.Ports))
	for _, p := range s.Ports {
		out[p.Name] = p.Driver
	}
	return out, nil
}

// parseStatus returns the interface counters of a status snapshot
// (/api/status), by interface name.
func parseStatus(body []byte) (map[string]ifCounters, error) {
	c, _, err := parseStatusTime(body)
	return c, err
}

// parseStatusTime is parseStatus that also returns the snapshot's time:
// the status server samples counters once a second, so a snapshot may
// predate the traffic just sent.
func parseStatusTime(body []byte) (map[string]ifCounters, time.Time, error) {
	var s status.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, time.Time{}, fmt.Errorf("lab: status JSON: %w", err)
	}
	if s.Interfaces == nil {
		return nil, s.Time, fmt.Errorf("lab: status JSON has no interfaces")
	}
	out := make(map[string]ifCounters, len(s.Interfaces))
	for _, i := range s.Interfaces {
		out[i.Name] = ifCounters{RxPackets: i.RxPackets, TxPackets: i.TxPackets}
	}
	return out, s.Time, nil
}

// parseSuperframes sums the superframe counters of a status snapshot's
// interfaces and the "oversize" drops of its ports, and returns the
// snapshot's time.
func parseSuperframes(body []byte) (superframeStats, time.Time, error) {
	var s status.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return superframeStats{}, time.Time{}, fmt.Errorf("lab: status JSON: %w", err)
	}
	return superframesOf(s), s.Time, nil
}

// superframesOf sums a snapshot's superframe counters and oversize drops.
func superframesOf(s status.Snapshot) superframeStats {
	var out superframeStats
	for _, p := range s.Ports {
		out.oversize += p.Drops[hw.DropOversize]
	}
	for _, i := range s.Interfaces {
		out.received += i.GSO.Received
		out.sentWhole += i.GSO.SentWhole
		out.segmented += i.GSO.Segmented
	}
	return out
}
