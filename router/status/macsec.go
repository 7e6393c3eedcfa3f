package status

import "time"

// MACsec is one SecY, as `ip -s macsec show` shows it: its settings, its
// transmit SC and receive SCs with their SAs, and every 802.1AE MIB
// counter. It never holds a key, only key ids.
type MACsec struct {
	// Name is the SecY's interface name, e.g. "ms1".
	Name string `json:"name"`
	// On is the interface below it, e.g. "eth0.2".
	On string `json:"on"`
	// SCI is the SecY's SCI in hex, e.g. "0200000000010001".
	SCI string `json:"sci"`
	// Cipher is the cipher suite in use, e.g. "gcm-aes-128".
	Cipher string `json:"cipher"`
	// CipherConfigured is the configured cipher suite, e.g.
	// "gcm-aes-256"; set only when it differs from Cipher because the MKA
	// key server distributed SAKs of another suite.
	CipherConfigured string `json:"cipher_configured,omitempty"`
	// Encrypt, Protect, SendSCI, EndStation, SCB and Replay are the
	// on/off settings of `ip link ... type macsec`.
	Encrypt    bool `json:"encrypt"`
	Protect    bool `json:"protect"`
	SendSCI    bool `json:"send_sci"`
	EndStation bool `json:"end_station"`
	SCB        bool `json:"scb"`
	Replay     bool `json:"replay"`
	// Window is the replay window, e.g. 0.
	Window uint32 `json:"window"`
	// Validate is validateFrames: "strict", "check" or "disabled".
	Validate string `json:"validate"`
	// EncodingSA is the transmit SA in use, 0..3.
	EncodingSA int `json:"encoding_sa"`
	// Counters holds the SecY-wide 802.1AE counters, e.g.
	// {"InPktsBadTag": 0}.
	Counters map[string]uint64 `json:"counters"`
	// TXSC is the transmit SC's counters, e.g. {"OutPktsEncrypted": 9}.
	TXSC map[string]uint64 `json:"tx_sc"`
	// TXSA are the transmit SAs by AN.
	TXSA []MACsecSA `json:"tx_sa"`
	// RXSC are the receive SCs.
	RXSC []MACsecRXSC `json:"rx_sc"`
	// WorkerFrames is how many frames each crypto worker handled (the
	// last entry: callers that did crypto themselves).
	WorkerFrames []uint64 `json:"worker_frames"`
	// MKA is the SecY's key agreement, nil with static SAs.
	MKA *MACsecMKA `json:"mka,omitempty"`
}

// MACsecMKA is a SecY's MKA participant (IEEE 802.1X-2020 clause 9): who
// serves the keys, the peers, which SAKs it holds by key number and AN
// (never the keys), and its counters.
type MACsecMKA struct {
	// CKN is the CA's key name in hex, e.g. "96437a93...".
	CKN string `json:"ckn"`
	// Priority is our key server priority, e.g. 16.
	Priority int `json:"priority"`
	// MI and MN are our member identifier (hex) and last MN sent.
	MI string `json:"mi"`
	MN uint32 `json:"mn"`
	// KeyServer: we are the elected key server; KeyServerSCI names the
	// elected one (ours when KeyServer), "" when there is none.
	KeyServer    bool   `json:"key_server"`
	KeyServerSCI string `json:"key_server_sci"`
	// Live and Potential are the peers.
	Live      []MKAPeer `json:"live_peers"`
	Potential []MKAPeer `json:"potential_peers"`
	// Latest and Previous are the SAKs held, nil when none.
	Latest   *MKAKey `json:"latest_key"`
	Previous *MKAKey `json:"previous_key"`
	// LastRoll is when transmission last moved to a new SAK; zero
	// before the first.
	LastRoll time.Time `json:"last_roll"`
	// Counters, e.g. {"mkpdus_sent": 9, "invalid_icv": 0, "sak_rolls": 1}.
	Counters map[string]uint64 `json:"counters"`
}

// MKAPeer is one MKA peer.
type MKAPeer struct {
	SCI      string `json:"sci"` // e.g. "0200000000020001"
	MI       string `json:"mi"`  // hex
	MN       uint32 `json:"mn"`  // its last MN accepted
	Priority int    `json:"priority"`
	// KeyServer: the peer claims the key server role.
	KeyServer bool `json:"key_server"`
}

// MKAKey is one SAK by name: the key server's MI and key number, the AN
// it uses, whether it receives and transmits.
type MKAKey struct {
	KeyServerMI string    `json:"key_server_mi"`
	KN          uint32    `json:"kn"`
	AN          int       `json:"an"`
	RX          bool      `json:"rx"`
	TX          bool      `json:"tx"`
	Installed   time.Time `json:"installed"`
}

// MACsecSA is one SA: its AN, state, next PN and key id, never the key.
type MACsecSA struct {
	// AN is the association number, 0..3.
	AN int `json:"an"`
	// State is "on" (in use) or "off".
	State string `json:"state"`
	// NextPN is the next PN to send, or the lowest PN accepted next.
	NextPN uint64 `json:"next_pn"`
	// KeyID is the key's id in hex, e.g. "01".
	KeyID string `json:"key_id"`
	// Counters holds the SA's 802.1AE counters.
	Counters map[string]uint64 `json:"counters"`
}

// MACsecRXSC is one receive SC.
type MACsecRXSC struct {
	// SCI is the peer's SCI in hex.
	SCI string `json:"sci"`
	// Counters holds the SC's 802.1AE counters, e.g. {"InPktsLate": 0}.
	Counters map[string]uint64 `json:"counters"`
	// SA are its SAs by AN.
	SA []MACsecSA `json:"sa"`
}
