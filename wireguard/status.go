package wireguard

import (
	"bufio"
	"cmp"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// Status is one WireGuard interface as the status page and the metrics
// show it. It holds no private or preshared key.
type Status struct {
	// PublicKey is the interface's public key, for the peers' configs.
	PublicKey string `json:"public_key"`
	// ListenPort is the UDP port the Bind listens on.
	ListenPort uint16 `json:"listen_port"`
	// Peers are the configured peers by name, then public key (the
	// device lists them in no fixed order).
	Peers []PeerStatus `json:"peers"`
	// Counters are the Bind's, the TUN's and the device's counters by
	// group ("udp", "inside", "handshake", "drops", "errors") and name.
	Counters map[string]map[string]uint64 `json:"counters"`
}

// PeerStatus is one peer's state.
type PeerStatus struct {
	// Name is the peer's name from the config, "" if unknown.
	Name string `json:"name"`
	// PublicKey is the peer's public key.
	PublicKey string `json:"public_key"`
	// Endpoint is where the peer was last heard from (or configured),
	// e.g. "203.0.113.7:51820"; "" = not known yet.
	Endpoint string `json:"endpoint,omitempty"`
	// LastHandshake is when the last handshake completed; zero = never.
	LastHandshake time.Time `json:"last_handshake,omitzero"`
	// HandshakeAge is the time since LastHandshake, in seconds; -1 = never.
	HandshakeAge float64 `json:"handshake_age_seconds"`
	// RxBytes and TxBytes count the peer's encrypted bytes, as wg show's
	// transfer.
	RxBytes uint64 `json:"rx_bytes"`
	TxBytes uint64 `json:"tx_bytes"`
	// AllowedIPs are the peer's allowed IPs.
	AllowedIPs []netip.Prefix `json:"allowed_ips"`
	// PersistentKeepalive is the keepalive interval in seconds; 0 = off.
	PersistentKeepalive int `json:"persistent_keepalive_seconds"`
}

// Stats are the counters of one interface's three parts.
type Stats struct {
	Bind   *BindStats
	TUN    *TUNStats
	Device *DeviceStats
}

// counterGroups are the counter groups Status reports.
var counterGroups = []string{"udp", "inside", "handshake", "drops", "errors"}

// Counters returns s's counters by group and name.
func (s Stats) Counters() map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, g := range counterGroups {
		m := map[string]uint64{}
		for _, part := range []any{s.Bind, s.TUN, s.Device} {
			maps.Copy(m, svcstats.Counters(part, g))
		}
		out[g] = m
	}
	return out
}

// ReadStatus builds a Status from the device's UAPI text (device.IpcGet's
// output), names (peer public key → config name), the counters and now.
// The private and preshared keys in uapi are skipped, never stored.
func ReadStatus(uapi string, names map[Key]string, stats Stats, now time.Time) (Status, error) {
	st := Status{Counters: stats.Counters()}
	var p *PeerStatus
	var sec, nsec int64
	flush := func() {
		if p == nil {
			return
		}
		p.HandshakeAge = -1
		if sec != 0 || nsec != 0 {
			p.LastHandshake = time.Unix(sec, nsec)
			p.HandshakeAge = now.Sub(p.LastHandshake).Seconds()
		}
		sec, nsec = 0, 0
	}
	sc := bufio.NewScanner(strings.NewReader(uapi))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		var err error
		switch key {
		case "private_key":
			var k Key
			if _, err = hex.Decode(k[:], []byte(val)); err == nil {
				st.PublicKey = k.PublicKey().String()
			}
			clear(k[:])
		case "listen_port":
			var n uint64
			n, err = strconv.ParseUint(val, 10, 16)
			st.ListenPort = uint16(n)
		case "public_key":
			flush()
			var k Key
			if _, err = hex.Decode(k[:], []byte(val)); err == nil {
				st.Peers = append(st.Peers, PeerStatus{PublicKey: k.String(), Name: names[k], AllowedIPs: []netip.Prefix{}})
				p = &st.Peers[len(st.Peers)-1]
			}
		case "endpoint":
			if p != nil {
				p.Endpoint = val
			}
		case "last_handshake_time_sec":
			sec, err = strconv.ParseInt(val, 10, 64)
		case "last_handshake_time_nsec":
			nsec, err = strconv.ParseInt(val, 10, 64)
		case "rx_bytes":
			if p != nil {
				p.RxBytes, err = strconv.ParseUint(val, 10, 64)
			}
		case "tx_bytes":
			if p != nil {
				p.TxBytes, err = strconv.ParseUint(val, 10, 64)
			}
		case "persistent_keepalive_interval":
			if p != nil {
				p.PersistentKeepalive, err = strconv.Atoi(val)
			}
		case "allowed_ip":
			if p != nil {
				var a netip.Prefix
				if a, err = netip.ParsePrefix(val); err == nil {
					p.AllowedIPs = append(p.AllowedIPs, a)
				}
			}
		}
		if err != nil {
			return Status{}, fmt.Errorf("wireguard: status: %s: %w", key, err)
		}
	}
	flush()
	slices.SortFunc(st.Peers, func(a, b PeerStatus) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.PublicKey, b.PublicKey))
	})
	return st, nil
}
