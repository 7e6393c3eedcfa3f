package lab

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ifCounters are one router interface's counters from /api/status.
type ifCounters struct {
	RxPackets, TxPackets uint64
}

// parseStatus returns the interface counters of a router/status snapshot
// (/api/status), by interface name. It accepts the JSON field names
// "rx_packets", "rxPackets" and "RxPackets" alike, so it does not depend on
// the status package's tags.
func parseStatus(body []byte) (map[string]ifCounters, error) {
	c, _, err := parseStatusTime(body)
	return c, err
}

// parseStatusTime is parseStatus that also returns the snapshot's "time"
// field (zero if absent): the status server samples counters periodically,
// so a snapshot may predate the traffic just sent.
func parseStatusTime(body []byte) (map[string]ifCounters, time.Time, error) {
	var at time.Time
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, at, fmt.Errorf("lab: status JSON: %w", err)
	}
	if r, ok := lookup(top, "time"); ok {
		json.Unmarshal(r, &at)
	}
	out, err := parseInterfaces(top)
	return out, at, err
}

func parseInterfaces(top map[string]json.RawMessage) (map[string]ifCounters, error) {
	raw, ok := lookup(top, "interfaces")
	if !ok {
		return nil, fmt.Errorf("lab: status JSON has no interfaces")
	}
	var ifs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ifs); err != nil {
		return nil, fmt.Errorf("lab: status JSON interfaces: %w", err)
	}
	out := make(map[string]ifCounters, len(ifs))
	for _, i := range ifs {
		var name string
		if r, ok := lookup(i, "name"); ok {
			json.Unmarshal(r, &name)
		}
		var c ifCounters
		if r, ok := lookup(i, "rxpackets"); ok {
			json.Unmarshal(r, &c.RxPackets)
		}
		if r, ok := lookup(i, "txpackets"); ok {
			json.Unmarshal(r, &c.TxPackets)
		}
		out[name] = c
	}
	return out, nil
}

// lookup finds a key ignoring case and underscores.
func lookup(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	for k, v := range m {
		if strings.EqualFold(strings.ReplaceAll(k, "_", ""), key) {
			return v, true
		}
	}
	return nil, false
}
