package status

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
	// Cipher is the cipher suite, e.g. "gcm-aes-128".
	Cipher string `json:"cipher"`
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
