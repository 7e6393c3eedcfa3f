package pppoe

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// counter is one statistic; it is safe for concurrent use.
type counter = atomic.Uint64

// Defaults for Config fields left zero.
const (
	// DefaultEchoInterval and DefaultEchoFailures detect a silent AC in
	// about 30 s, the common pppd setting (lcp-echo-interval 10,
	// lcp-echo-failure 3) that rp-pppoe's server options also use.
	DefaultEchoInterval = 10 * time.Second
	DefaultEchoFailures = 3
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait before a
	// reconnect; it doubles after each failed attempt so that a down AC
	// is not flooded with PADIs, and resets once a session came up.
	DefaultMinBackoff = 1 * time.Second
	DefaultMaxBackoff = 64 * time.Second
)

// Config is what a Session needs. The zero value of each optional field
// picks its default.
type Config struct {
	// Local is our Ethernet address on the WAN port, e.g.
	// 02:00:00:00:00:01.
	Local [6]byte
	// VLAN is the 802.1Q VLAN ID for a WAN port whose frames carry the
	// tag (see Link.VLAN), e.g. 7; 0 for untagged frames or a port
	// that tags and strips itself.
	VLAN uint16
	// Service is the Service-Name to ask for, e.g. "internet"; "" takes
	// any service.
	Service string
	// ACName, if set, accepts only PADOs from that access
	// concentrator, e.g. "test-ac".
	ACName string
	// MaxPayload, if above 1492, asks for RFC 4638 PPP-Max-Payload, e.g.
	// 1500 on a link that carries 1508-byte Ethernet payloads (baby
	// jumbo). It is used only if the AC echoes the tag.
	MaxPayload uint16
	// Credentials authenticate us with PAP or CHAP-MD5 if the AC asks.
	Credentials Credentials
	// RefusePAP refuses PAP, which sends the password in clear.
	RefusePAP bool
	// EchoInterval is the LCP keepalive period, e.g. 10s.
	EchoInterval time.Duration
	// EchoFailures is how many unanswered echoes in a row end the
	// session, e.g. 3.
	EchoFailures int
	// IPv6 runs IPv6CP beside IPCP.
	IPv6 bool
	// MinBackoff and MaxBackoff bound the wait between reconnects.
	MinBackoff, MaxBackoff time.Duration
	// Rand returns random numbers for Host-Uniq, magic numbers and
	// interface identifiers; nil uses crypto/rand. Tests set it.
	Rand func() uint64
	// OnChange, if set, is called with the new Status whenever the
	// session's state changes (up, down, addresses). It is called
	// without the Session's lock, on the goroutine that called Handle,
	// Tick, Start or Stop.
	OnChange func(Status)
}

// Validate reports every problem of a Config at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Local == [6]byte{} || c.Local[0]&1 != 0 {
		errs = append(errs, fmt.Errorf("pppoe: local MAC %s is not a unicast address", net.HardwareAddr(c.Local[:])))
	}
	if c.VLAN > 4094 {
		errs = append(errs, fmt.Errorf("pppoe: vlan %d out of range 0-4094", c.VLAN))
	}
	if c.MaxPayload != 0 && (c.MaxPayload < DefaultMRU || c.MaxPayload > MaxMRU) {
		errs = append(errs, fmt.Errorf("pppoe: max_payload %d out of range %d-%d", c.MaxPayload, DefaultMRU, MaxMRU))
	}
	if len(c.Service) > 255 || len(c.ACName) > 255 {
		errs = append(errs, errors.New("pppoe: service or ac_name longer than 255 bytes"))
	}
	if c.EchoInterval < 0 || c.EchoFailures < 0 {
		errs = append(errs, errors.New("pppoe: echo interval and failures must not be negative"))
	}
	if c.Credentials != (Credentials{}) && !c.Credentials.Valid() {
		errs = append(errs, errors.New("pppoe: credentials need a username and a password of 1-255 bytes"))
	}
	return errors.Join(errs...)
}

// FrameSender transmits Ethernet frames on the WAN port. SendFrame must
// not keep frame after it returns (the Session reuses the buffer), and
// must not call back into the Session: it is called with the Session's
// lock held.
type FrameSender interface {
	SendFrame(frame []byte)
}

// Phase is where the session is (RFC 2516 discovery, then the RFC 1661
// §3.2 link phases).
type Phase uint8

// Phases in order of progress.
const (
	PhaseIdle      Phase = iota // not started
	PhaseDiscovery              // PADI sent, waiting for a PADO
	PhaseRequest                // PADR sent, waiting for the PADS
	PhaseEstablish              // PPPoE session up, LCP negotiating
	PhaseAuth                   // LCP opened, PAP or CHAP running
	PhaseNetwork                // NCPs negotiating
	PhaseUp                     // IPCP or IPv6CP opened: traffic flows
	PhaseBackoff                // waiting before the next discovery
	PhaseStopped                // stopped by Stop
)

var phaseNames = [...]string{"idle", "discovery", "request", "establish", "auth", "network", "up", "backoff", "stopped"}

func (p Phase) String() string { return phaseNames[p] }

// Stats are the Session's counters. Every drop of bad input has one.
// They are safe for concurrent use.
type Stats struct {
	PADITx, PADORx, PADRTx, PADSRx, PADTRx, PADTTx counter
	// PADOIgnored: PADOs not taken (wrong Host-Uniq, service or AC name,
	// error tags, a second offer).
	PADOIgnored counter
	// PADSIgnored: PADSs not from the chosen AC or with a wrong Host-Uniq.
	PADSIgnored counter
	// PADTSpoofed: PADTs with a wrong session id or source MAC, ignored.
	PADTSpoofed counter
	// DiscoveryMalformed: discovery packets the tag codec rejected.
	DiscoveryMalformed counter
	// DiscoveryIgnored: discovery packets not for us (PADI/PADR of other
	// hosts, unknown codes, wrong phase).
	DiscoveryIgnored counter
	// FrameMalformed: short Ethernet frames, bad PPP control packets.
	FrameMalformed counter
	// WrongVLAN: frames tagged with another VLAN.
	WrongVLAN counter
	// ProtoRejTx: Protocol-Rejects we sent for unknown PPP protocols.
	ProtoRejTx counter
	// EchoReqTx, EchoReplyRx, EchoReqRx, EchoMissed: LCP keepalive.
	EchoReqTx, EchoReplyRx, EchoReqRx, EchoMissed counter
	// Loopbacks: a peer's magic number equal to ours (looped link).
	Loopbacks counter
	// MRURejected: absurd MRU values from the peer, Nak'd or ignored.
	MRURejected counter
	// AuthFailures: PAP/CHAP refusals and timeouts.
	AuthFailures counter
	// Reconnects: sessions ended and restarted.
	Reconnects counter
	// LCP, IPCP and IPv6CP count each automaton's packets.
	LCP, IPCP, IPv6CP fsmStats
	// Data counts Decap results of session frames.
	Data DecapStats
}

// Counters returns the counters by name, for the status page and
// metrics.
func (s *Stats) Counters() map[string]uint64 {
	m := map[string]uint64{
		"padi_tx": s.PADITx.Load(), "pado_rx": s.PADORx.Load(), "padr_tx": s.PADRTx.Load(),
		"pads_rx": s.PADSRx.Load(), "padt_rx": s.PADTRx.Load(), "padt_tx": s.PADTTx.Load(),
		"pado_ignored": s.PADOIgnored.Load(), "pads_ignored": s.PADSIgnored.Load(),
		"padt_spoofed": s.PADTSpoofed.Load(), "discovery_malformed": s.DiscoveryMalformed.Load(),
		"discovery_ignored": s.DiscoveryIgnored.Load(), "frame_malformed": s.FrameMalformed.Load(),
		"wrong_vlan": s.WrongVLAN.Load(), "proto_rej_tx": s.ProtoRejTx.Load(),
		"echo_req_tx": s.EchoReqTx.Load(), "echo_reply_rx": s.EchoReplyRx.Load(),
		"echo_req_rx": s.EchoReqRx.Load(), "echo_missed": s.EchoMissed.Load(),
		"loopbacks": s.Loopbacks.Load(), "mru_rejected": s.MRURejected.Load(),
		"auth_failures": s.AuthFailures.Load(), "reconnects": s.Reconnects.Load(),
	}
	for name, f := range map[string]*fsmStats{"lcp": &s.LCP, "ipcp": &s.IPCP, "ipv6cp": &s.IPv6CP} {
		m[name+"_conf_req_rx"] = f.ConfReqRx.Load()
		m[name+"_conf_req_tx"] = f.ConfReqTx.Load()
		m[name+"_conf_ack_rx"] = f.ConfAckRx.Load()
		m[name+"_conf_nak_rx"] = f.ConfNakRx.Load()
		m[name+"_conf_rej_rx"] = f.ConfRejRx.Load()
		m[name+"_nak_tx"] = f.NakTx.Load()
		m[name+"_rej_tx"] = f.RejTx.Load()
		m[name+"_term_req_rx"] = f.TermReqRx.Load()
		m[name+"_code_rej_rx"] = f.CodeRejRx.Load()
		m[name+"_bad_packet"] = f.BadPacket.Load()
		m[name+"_loops_ended"] = f.LoopsEnded.Load()
	}
	for r := DecapResult(0); r < numDecapResults; r++ {
		m["data_"+r.String()] = s.Data.Get(r)
	}
	return m
}

// Status is the session as the status page and the runtime see it.
type Status struct {
	State     string `json:"state"`
	SessionID uint16 `json:"session_id,omitempty"`
	ACMAC     string `json:"ac_mac,omitempty"`
	ACName    string `json:"ac_name,omitempty"`
	Service   string `json:"service,omitempty"`
	// UptimeSeconds is how long the session has been up (0 unless up).
	UptimeSeconds float64 `json:"uptime_seconds"`
	Reconnects    uint64  `json:"reconnects"`
	// LastDownReason says why the last session ended, e.g. "AC sent PADT".
	LastDownReason string `json:"last_down_reason,omitempty"`
	// EchoRTTMillis is the last LCP echo round trip.
	EchoRTTMillis float64 `json:"echo_rtt_ms"`
	// MTU is the largest IP packet we send (the peer's MRU); MRU the
	// largest we accept. 1492, or up to 1500 with RFC 4638.
	MTU int `json:"mtu,omitempty"`
	MRU int `json:"mru,omitempty"`
	// MaxPayload is the RFC 4638 PPP-Max-Payload the AC agreed, or 0.
	MaxPayload int    `json:"max_payload,omitempty"`
	Auth       string `json:"auth,omitempty"`
	// AuthMessage is the AC's last authentication failure message.
	AuthMessage string            `json:"auth_message,omitempty"`
	IPv4        *IPv4Status       `json:"ipv4,omitempty"`
	IPv6        *IPv6Status       `json:"ipv6,omitempty"`
	Counters    map[string]uint64 `json:"counters"`
}

// IPv4Status is the IPCP result.
type IPv4Status struct {
	Local netip.Addr `json:"local"`
	Peer  netip.Addr `json:"peer,omitzero"`
	// DNS are the servers the AC named (RFC 1877), for the DNS forwarder.
	DNS []netip.Addr `json:"dns,omitempty"`
}

// IPv6Status is the IPv6CP result: the link-local addresses built from
// the interface identifiers (RFC 5072 §5).
type IPv6Status struct {
	Local netip.Addr `json:"local"`
	Peer  netip.Addr `json:"peer,omitzero"`
}

// Session is a PPPoE client session on one WAN port: discovery, LCP,
// authentication, IPCP and IPv6CP, keepalive and reconnect. It is event
// driven and owns no goroutine or timer: the caller feeds it received
// frames (Handle) and the time (Tick, at NextDeadline), which keeps it
// deterministic under a fake clock. It is safe for concurrent use.
type Session struct {
	cfg   Config
	out   FrameSender
	stats Stats

	mu       sync.Mutex // protects everything below
	phase    Phase
	now      time.Time // time of the current event, for the automaton's callbacks
	changed  bool      // OnChange is due
	hostUniq [8]byte
	offer    offer
	attempts int
	timeout  time.Duration
	deadline time.Time // discovery retransmission or backoff end
	failRun  int       // failed attempts in a row, for the backoff
	link     Link      // valid from PADS on
	linkMax  uint16    // 1492, or the RFC 4638 payload agreed
	upSince  time.Time
	reason   string

	lcpNeg    lcp
	ipcpNeg   ipcp
	ipv6Neg   ipv6cp
	lcp       *fsm
	ipcp      *fsm
	ipv6cp    *fsm
	auth      auth
	ncpFailed [2]bool // IPCP, IPv6CP finished without opening

	echoNext    time.Time
	echoID      uint8
	echoPending bool
	echoSent    time.Time
	echoMissed  int
	echoRTT     time.Duration

	tx []byte // frame being built
}

// New returns a Session in PhaseIdle; Start begins discovery.
func New(cfg Config, out FrameSender) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.EchoInterval == 0 {
		cfg.EchoInterval = DefaultEchoInterval
	}
	if cfg.EchoFailures == 0 {
		cfg.EchoFailures = DefaultEchoFailures
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.Rand == nil {
		cfg.Rand = cryptoRand
	}
	s := &Session{cfg: cfg, out: out, tx: make([]byte, 0, 1600)}
	s.lcpNeg = lcp{rand: cfg.Rand, authCHAP: cfg.Credentials.Valid(), authPAP: cfg.Credentials.Valid() && !cfg.RefusePAP,
		loopbacks: &s.stats.Loopbacks, badMRU: &s.stats.MRURejected}
	s.ipv6Neg = ipv6cp{rand: cfg.Rand}
	s.auth.creds = cfg.Credentials
	ev := (*sessionEvents)(s)
	s.lcp = newFSM(ProtoLCP, &s.lcpNeg, ev, &s.stats.LCP)
	s.ipcp = newFSM(ProtoIPCP, &s.ipcpNeg, ev, &s.stats.IPCP)
	s.ipv6cp = newFSM(ProtoIPv6CP, &s.ipv6Neg, ev, &s.stats.IPv6CP)
	return s, nil
}

func cryptoRand() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// Stats returns the Session's counters.
func (s *Session) Stats() *Stats { return &s.stats }

// Start begins discovery.
func (s *Session) Start(now time.Time) {
	s.mu.Lock()
	s.now = now
	s.startDiscoveryLocked(now)
	s.unlockAndNotify(now)
}

// Stop ends the session for good: it sends an LCP Terminate-Request if
// LCP is open and a PADT (RFC 2516 §5.5), and does not reconnect.
func (s *Session) Stop(now time.Time) {
	s.mu.Lock()
	s.now = now
	if s.lcp.opened() {
		s.lcp.close(now, "stopped")
	}
	s.endSessionLocked()
	s.phase, s.reason, s.changed = PhaseStopped, "stopped", true
	s.deadline = time.Time{}
	s.unlockAndNotify(now)
}

// Link returns the session's framing for the data path and whether the
// session is up.
func (s *Session) Link() (Link, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.link, s.phase == PhaseUp
}

// NextDeadline is when Tick must next be called; zero if no timer runs.
func (s *Session) NextDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	earliest(s.deadline)
	earliest(s.lcp.deadline)
	earliest(s.ipcp.deadline)
	earliest(s.ipv6cp.deadline)
	earliest(s.echoNext)
	if s.phase == PhaseAuth {
		earliest(s.auth.deadline)
		if s.auth.proto == ProtoPAP {
			earliest(s.auth.resend)
		}
	}
	return d
}

func (s *Session) unlockAndNotify(now time.Time) {
	var st Status
	notify := s.changed && s.cfg.OnChange != nil
	if notify {
		st = s.statusLocked(now)
	}
	s.changed = false
	s.mu.Unlock()
	if notify {
		s.cfg.OnChange(st)
	}
}

// Status returns the session's state at now.
func (s *Session) Status(now time.Time) Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked(now)
}

func (s *Session) statusLocked(now time.Time) Status {
	st := Status{
		State:          s.phase.String(),
		Reconnects:     s.stats.Reconnects.Load(),
		LastDownReason: s.reason,
		EchoRTTMillis:  float64(s.echoRTT) / float64(time.Millisecond),
		AuthMessage:    s.auth.message,
		Counters:       s.stats.Counters(),
	}
	if s.phase >= PhaseEstablish && s.phase <= PhaseUp {
		st.SessionID = s.link.SessionID
		st.ACMAC = net.HardwareAddr(s.offer.mac[:]).String()
		st.ACName = s.offer.acName
		st.Service = string(s.offer.service)
		if s.linkMax > DefaultMRU {
			st.MaxPayload = int(s.linkMax)
		}
	}
	if s.phase > PhaseEstablish && s.phase <= PhaseUp {
		st.MTU, st.MRU = int(s.lcpNeg.mtu()), int(s.lcpNeg.localMRU)
		switch s.lcpNeg.authProto {
		case ProtoPAP:
			st.Auth = "pap"
		case ProtoCHAP:
			st.Auth = "chap-md5"
		}
	}
	if s.phase == PhaseUp {
		st.UptimeSeconds = now.Sub(s.upSince).Seconds()
		if s.ipcp.opened() {
			l, p, dns := s.ipcpNeg.result()
			st.IPv4 = &IPv4Status{Local: l, Peer: p, DNS: dns}
		}
		if s.ipv6cp.opened() {
			st.IPv6 = &IPv6Status{Local: linkLocal(s.ipv6Neg.iid), Peer: linkLocal(s.ipv6Neg.peer)}
		}
	}
	return st
}

// linkLocal is fe80::/64 with the interface identifier (RFC 5072 §5).
func linkLocal(iid [8]byte) netip.Addr {
	if iid == [8]byte{} {
		return netip.Addr{}
	}
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	copy(a[8:], iid[:])
	return netip.AddrFrom16(a)
}

// Tick runs the timers due at now: discovery retransmission, the
// automatons' restart timers, authentication, keepalive and backoff.
func (s *Session) Tick(now time.Time) {
	s.mu.Lock()
	s.now = now
	s.tickLocked(now)
	s.unlockAndNotify(now)
}

func (s *Session) tickLocked(now time.Time) {
	due := !s.deadline.IsZero() && !now.Before(s.deadline)
	switch s.phase {
	case PhaseBackoff:
		if due {
			s.startDiscoveryLocked(now)
		}
		return
	case PhaseDiscovery, PhaseRequest:
		if !due {
			return
		}
		if s.attempts >= discoveryAttempts {
			if s.phase == PhaseDiscovery {
				s.failLocked(now, "no PADO from any access concentrator")
			} else {
				s.failLocked(now, "no PADS from the access concentrator")
			}
			return
		}
		s.timeout *= 2
		if s.phase == PhaseDiscovery {
			s.sendPADILocked(now)
		} else {
			s.sendPADRLocked(now)
		}
		return
	case PhaseIdle, PhaseStopped:
		return
	}
	s.lcp.tick(now)
	s.ipcp.tick(now)
	s.ipv6cp.tick(now)
	if s.phase == PhaseAuth {
		switch s.auth.tick(now, s.sendControlLocked) {
		case authFailed:
			s.stats.AuthFailures.Add(1)
			s.failLocked(now, "authentication failed: "+s.auth.message)
			return
		}
	}
	s.keepaliveLocked(now)
}

// keepaliveLocked sends an LCP Echo-Request each interval and ends the
// session after EchoFailures unanswered in a row (RFC 1661 §5.8).
func (s *Session) keepaliveLocked(now time.Time) {
	if s.echoNext.IsZero() || now.Before(s.echoNext) || !s.lcp.opened() {
		return
	}
	if s.echoPending {
		s.echoMissed++
		s.stats.EchoMissed.Add(1)
		if s.echoMissed >= s.cfg.EchoFailures {
			s.failLocked(now, fmt.Sprintf("no answer to %d LCP echo requests", s.echoMissed))
			return
		}
	}
	s.echoID++
	s.echoPending, s.echoSent = true, now
	s.echoNext = now.Add(s.cfg.EchoInterval)
	s.stats.EchoReqTx.Add(1)
	s.sendControlLocked(ProtoLCP, CodeEchoReq, s.echoID, binary.BigEndian.AppendUint32(nil, s.lcpNeg.magic))
}

func (s *Session) startDiscoveryLocked(now time.Time) {
	binary.BigEndian.PutUint64(s.hostUniq[:], s.cfg.Rand())
	s.offer = offer{}
	s.link = Link{Local: s.cfg.Local, VLAN: s.cfg.VLAN}
	s.phase, s.changed = PhaseDiscovery, true
	s.attempts, s.timeout = 0, discoveryTimeout
	s.sendPADILocked(now)
}

func (s *Session) wantMaxPayload() bool { return s.cfg.MaxPayload > DefaultMRU }

// sendPADILocked broadcasts a PADI with exactly one Service-Name, our
// Host-Uniq and, for RFC 4638, PPP-Max-Payload (RFC 2516 §5.1).
func (s *Session) sendPADILocked(now time.Time) {
	tags := []Tag{{TagServiceName, []byte(s.cfg.Service)}, {TagHostUniq, s.hostUniq[:]}}
	if s.wantMaxPayload() {
		tags = append(tags, maxPayloadTag(s.cfg.MaxPayload))
	}
	s.attempts++
	s.deadline = now.Add(s.timeout)
	s.stats.PADITx.Add(1)
	s.sendDiscoveryLocked([6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, CodePADI, 0, tags)
}

// sendPADRLocked asks the chosen AC for a session, echoing its AC-Cookie
// and Relay-Session-Id (RFC 2516 §5.3).
func (s *Session) sendPADRLocked(now time.Time) {
	tags := []Tag{{TagServiceName, s.offer.service}, {TagHostUniq, s.hostUniq[:]}}
	if s.offer.hasCookie {
		tags = append(tags, Tag{TagACCookie, s.offer.cookie})
	}
	if s.offer.hasRelayID {
		tags = append(tags, Tag{TagRelaySessionID, s.offer.relayID})
	}
	if s.wantMaxPayload() {
		tags = append(tags, maxPayloadTag(s.cfg.MaxPayload))
	}
	s.attempts++
	s.deadline = now.Add(s.timeout)
	s.stats.PADRTx.Add(1)
	s.sendDiscoveryLocked(s.offer.mac, CodePADR, 0, tags)
}

func (s *Session) ethHeader(b []byte, dst [6]byte, etherType uint16) []byte {
	b = append(b, dst[:]...)
	b = append(b, s.cfg.Local[:]...)
	if s.cfg.VLAN != 0 {
		b = binary.BigEndian.AppendUint16(b, etherTypeVLAN)
		b = binary.BigEndian.AppendUint16(b, s.cfg.VLAN)
	}
	return binary.BigEndian.AppendUint16(b, etherType)
}

func (s *Session) sendDiscoveryLocked(dst [6]byte, code uint8, sid uint16, tags []Tag) {
	b := s.ethHeader(s.tx[:0], dst, EtherTypeDiscovery)
	b = AppendDiscovery(b, code, sid, tags...)
	s.tx = b
	s.out.SendFrame(b)
}

// sendControlLocked sends a PPP control packet in the session.
func (s *Session) sendControlLocked(proto uint16, code, id uint8, data []byte) {
	if s.link.SessionID == 0 {
		return
	}
	b := s.ethHeader(s.tx[:0], s.link.Peer, EtherTypeSession)
	p := len(b)
	b = append(b, verType, CodeSession, byte(s.link.SessionID>>8), byte(s.link.SessionID), 0, 0)
	b = binary.BigEndian.AppendUint16(b, proto)
	b = AppendControl(b, code, id, data)
	binary.BigEndian.PutUint16(b[p+4:], uint16(len(b)-p-pppoeHeaderLen))
	s.tx = b
	s.out.SendFrame(b)
}

// endSessionLocked takes the PPP layers down and sends a PADT if a
// session exists.
func (s *Session) endSessionLocked() {
	s.lcp.down()
	s.ipcp.down()
	s.ipv6cp.down()
	s.auth.deadline = time.Time{}
	s.echoNext, s.echoPending, s.echoMissed = time.Time{}, false, 0
	if s.link.SessionID != 0 {
		s.stats.PADTTx.Add(1)
		s.sendDiscoveryLocked(s.link.Peer, CodePADT, s.link.SessionID, nil)
	}
	s.link.SessionID = 0
}

// failLocked ends the current attempt or session and schedules a
// reconnect after a backoff that doubles with each failure in a row.
func (s *Session) failLocked(now time.Time, reason string) {
	if s.phase == PhaseStopped {
		return
	}
	wasUp := s.phase == PhaseUp
	s.endSessionLocked()
	if wasUp {
		s.failRun = 0
	}
	s.stats.Reconnects.Add(1)
	wait := s.cfg.MinBackoff << min(s.failRun, 16)
	if wait > s.cfg.MaxBackoff || wait <= 0 {
		wait = s.cfg.MaxBackoff
	}
	s.failRun++
	s.reason, s.phase, s.changed = reason, PhaseBackoff, true
	s.deadline = now.Add(wait)
}

// Handle processes one received Ethernet frame from the WAN port: a
// discovery packet, a PPP control packet, or data. For an IPv4 or IPv6
// packet of the session it returns the PPP protocol and the packet (a
// slice of frame); for everything else 0 and nil. Bad input is counted,
// never returned as an error.
func (s *Session) Handle(now time.Time, frame []byte) (proto uint16, packet []byte) {
	s.mu.Lock()
	s.now = now
	proto, packet = s.handleLocked(now, frame)
	s.unlockAndNotify(now)
	return proto, packet
}

func (s *Session) handleLocked(now time.Time, frame []byte) (uint16, []byte) {
	src, vlan, et, p, ok := ethernet(frame)
	if !ok {
		s.stats.FrameMalformed.Add(1)
		return 0, nil
	}
	if vlan >= 0 && s.cfg.VLAN != 0 && uint16(vlan) != s.cfg.VLAN {
		s.stats.WrongVLAN.Add(1)
		return 0, nil
	}
	switch et {
	case EtherTypeDiscovery:
		s.handleDiscoveryLocked(now, src, p)
	case EtherTypeSession:
		if s.phase < PhaseEstablish || s.phase > PhaseUp {
			s.stats.Data.Count(DecapWrongSession)
			return 0, nil
		}
		proto, pkt, r := s.link.Decap(frame)
		if r != DecapOK {
			s.stats.Data.Count(r)
			return 0, nil
		}
		return s.handlePPPLocked(now, proto, pkt)
	}
	return 0, nil
}

func (s *Session) handleDiscoveryLocked(now time.Time, src [6]byte, p []byte) {
	var tags [MaxTags]Tag
	d, err := ParseDiscovery(p, tags[:])
	if err != nil {
		s.stats.DiscoveryMalformed.Add(1)
		return
	}
	switch d.Code {
	case CodePADO:
		s.stats.PADORx.Add(1)
		if s.phase != PhaseDiscovery || d.SessionID != 0 {
			s.stats.PADOIgnored.Add(1) // a later offer, or a stray one
			return
		}
		o, v := judgePADO(&d, src, s.hostUniq[:], s.cfg.Service, s.cfg.ACName)
		if v != padoTaken {
			s.stats.PADOIgnored.Add(1)
			return
		}
		s.offer = o
		s.phase, s.changed = PhaseRequest, true
		s.attempts, s.timeout = 0, discoveryTimeout
		s.sendPADRLocked(now)
	case CodePADS:
		s.stats.PADSRx.Add(1)
		hu, _ := d.Tag(TagHostUniq)
		if s.phase != PhaseRequest || src != s.offer.mac || string(hu) != string(s.hostUniq[:]) {
			s.stats.PADSIgnored.Add(1)
			return
		}
		for _, t := range d.Tags {
			switch t.Type {
			case TagServiceNameError, TagACSystemError, TagGenericError:
				s.failLocked(now, fmt.Sprintf("PADS error tag 0x%04x: %q", t.Type, printable(t.Value)))
				return
			}
		}
		if d.SessionID == 0 || d.SessionID == 0xffff {
			// RFC 2516 §4: 0xffff is reserved; 0 means refused.
			s.failLocked(now, "PADS without a session id")
			return
		}
		s.linkMax = DefaultMRU
		if v, ok := d.Tag(TagPPPMaxPayload); ok && s.wantMaxPayload() && len(v) == 2 {
			// RFC 4638 §5: the AC echoing the tag agrees to carry
			// payloads up to the value.
			if n := binary.BigEndian.Uint16(v); n > DefaultMRU {
				s.linkMax = min(n, s.cfg.MaxPayload)
			}
		}
		s.link = Link{Local: s.cfg.Local, Peer: s.offer.mac, VLAN: s.cfg.VLAN, SessionID: d.SessionID}
		s.phase, s.changed = PhaseEstablish, true
		s.deadline = time.Time{}
		s.lcpNeg.linkMax = s.linkMax
		s.ncpFailed = [2]bool{}
		s.lcp.open(now)
	case CodePADT:
		s.stats.PADTRx.Add(1)
		if s.link.SessionID == 0 || d.SessionID != s.link.SessionID || src != s.link.Peer {
			s.stats.PADTSpoofed.Add(1)
			return
		}
		s.link.SessionID = 0 // the AC ended it: no PADT back
		s.failLocked(now, "access concentrator sent PADT")
	default:
		s.stats.DiscoveryIgnored.Add(1)
	}
}

// printable bounds and cleans an AC's error text for a reason string.
func printable(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	r := []rune(string(b))
	for i, c := range r {
		if c < 0x20 || c == 0x7f {
			r[i] = '?'
		}
	}
	return string(r)
}

func (s *Session) handlePPPLocked(now time.Time, proto uint16, pkt []byte) (uint16, []byte) {
	switch proto {
	case ProtoIPv4:
		if s.ipcp.opened() {
			return proto, pkt
		}
		s.stats.Data.Count(DecapNotSession)
		return 0, nil
	case ProtoIPv6:
		if s.ipv6cp.opened() {
			return proto, pkt
		}
		s.stats.Data.Count(DecapNotSession)
		return 0, nil
	}
	c, err := ParseControl(pkt)
	if err != nil {
		s.stats.FrameMalformed.Add(1)
		return 0, nil
	}
	switch proto {
	case ProtoLCP:
		s.handleLCPLocked(now, c)
	case ProtoPAP, ProtoCHAP:
		if s.phase < PhaseAuth || s.lcpNeg.authProto != proto {
			s.stats.FrameMalformed.Add(1)
			return 0, nil
		}
		switch s.auth.input(now, proto, c, s.sendControlLocked) {
		case authOK:
			if s.phase == PhaseAuth {
				s.auth.deadline = time.Time{}
				s.networkLocked(now)
			}
		case authFailed:
			s.stats.AuthFailures.Add(1)
			s.failLocked(now, "authentication failed: "+printable([]byte(s.auth.message)))
		}
	case ProtoIPCP, ProtoIPv6CP:
		f := s.ipcp
		if proto == ProtoIPv6CP {
			if !s.cfg.IPv6 {
				s.protocolRejectLocked(proto, pkt)
				return 0, nil
			}
			f = s.ipv6cp
		}
		if s.phase < PhaseNetwork {
			// RFC 1661 §3.4: NCP packets before the network phase
			// are silently discarded.
			s.stats.FrameMalformed.Add(1)
			return 0, nil
		}
		f.input(now, c)
	default:
		s.protocolRejectLocked(proto, pkt)
	}
	return 0, nil
}

// protocolRejectLocked answers an unknown protocol with an LCP
// Protocol-Reject (RFC 1661 §5.7), only while LCP is opened.
func (s *Session) protocolRejectLocked(proto uint16, pkt []byte) {
	if !s.lcp.opened() {
		s.stats.FrameMalformed.Add(1)
		return
	}
	s.stats.ProtoRejTx.Add(1)
	maxData := int(s.lcpNeg.mtu()) - 4 - 2
	if len(pkt) > maxData {
		pkt = pkt[:maxData]
	}
	data := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(pkt)), proto)
	s.lcp.nextID++
	s.sendControlLocked(ProtoLCP, CodeProtoRej, s.lcp.nextID, append(data, pkt...))
}

func (s *Session) handleLCPLocked(now time.Time, c Control) {
	switch c.Code {
	case CodeEchoReq:
		s.stats.EchoReqRx.Add(1)
		if !s.lcp.opened() || len(c.Data) < 4 {
			return // §5.8: only in the Opened state
		}
		if m := binary.BigEndian.Uint32(c.Data); m != 0 && m == s.lcpNeg.magic {
			s.stats.Loopbacks.Add(1)
			return
		}
		reply := binary.BigEndian.AppendUint32(make([]byte, 0, len(c.Data)), s.lcpNeg.magic)
		s.sendControlLocked(ProtoLCP, CodeEchoReply, c.ID, append(reply, c.Data[4:]...))
	case CodeEchoReply:
		if !s.echoPending || c.ID != s.echoID || len(c.Data) < 4 {
			s.stats.FrameMalformed.Add(1)
			return
		}
		if m := binary.BigEndian.Uint32(c.Data); m != 0 && m == s.lcpNeg.magic {
			s.stats.Loopbacks.Add(1)
			return
		}
		s.stats.EchoReplyRx.Add(1)
		s.echoPending, s.echoMissed = false, 0
		s.echoRTT = now.Sub(s.echoSent)
	case CodeDiscard:
	case CodeProtoRej:
		s.stats.LCP.CodeRejRx.Add(1)
		if len(c.Data) < 2 {
			return
		}
		switch binary.BigEndian.Uint16(c.Data) {
		case ProtoIPCP:
			s.ipcp.down()
			s.ncpFinishedLocked(now, 0, "peer rejected IPCP")
		case ProtoIPv6CP:
			s.ipv6cp.down()
			s.ncpFinishedLocked(now, 1, "peer rejected IPv6CP")
		case ProtoLCP:
			s.failLocked(now, "peer rejected LCP")
		}
	default:
		s.lcp.input(now, c)
	}
}

// networkLocked enters the network phase: IPCP and, if enabled, IPv6CP
// start (RFC 1661 §3.5).
func (s *Session) networkLocked(now time.Time) {
	s.phase, s.changed = PhaseNetwork, true
	s.ipcp.open(now)
	if s.cfg.IPv6 {
		s.ipv6cp.open(now)
	} else {
		s.ncpFailed[1] = true
	}
}

// ncpFinishedLocked records that an NCP ended; with no NCP left the
// session has no purpose and ends.
func (s *Session) ncpFinishedLocked(now time.Time, i int, reason string) {
	s.ncpFailed[i] = true
	if s.ncpFailed[0] && s.ncpFailed[1] {
		s.failLocked(now, reason)
		return
	}
	if s.phase == PhaseUp && !s.ipcp.opened() && !s.ipv6cp.opened() {
		s.phase = PhaseNetwork
	}
	s.changed = true
}

// sessionEvents is the Session as the automatons' layerEvents.
type sessionEvents Session

func (e *sessionEvents) send(proto uint16, code, id uint8, data []byte) {
	(*Session)(e).sendControlLocked(proto, code, id, data)
}

func (e *sessionEvents) layerUp(proto uint16) {
	s := (*Session)(e)
	now := s.now
	s.changed = true
	switch proto {
	case ProtoLCP:
		s.echoNext = now.Add(s.cfg.EchoInterval)
		if a := s.lcpNeg.authProto; a != 0 {
			s.phase = PhaseAuth
			s.auth.start(now, a, s.sendControlLocked)
			return
		}
		s.networkLocked(now)
	case ProtoIPCP:
		if s.ipcpNeg.addr == [4]byte{} {
			s.ipcp.close(now, "peer gave no IPv4 address")
			return
		}
		s.upLocked(now)
	case ProtoIPv6CP:
		s.upLocked(now)
	}
}

func (s *Session) upLocked(now time.Time) {
	if s.phase != PhaseUp {
		s.phase = PhaseUp
		s.upSince = now
		s.failRun = 0
	}
}

func (e *sessionEvents) layerDown(proto uint16) {
	s := (*Session)(e)
	s.changed = true
	if proto == ProtoLCP {
		s.ipcp.down()
		s.ipv6cp.down()
		if s.phase > PhaseEstablish && s.phase <= PhaseUp {
			s.phase = PhaseEstablish
		}
		s.echoNext, s.echoPending = time.Time{}, false
		return
	}
	if s.phase == PhaseUp && !s.ipcp.opened() && !s.ipv6cp.opened() {
		s.phase = PhaseNetwork
	}
}

func (e *sessionEvents) layerFinished(proto uint16, reason string) {
	s := (*Session)(e)
	switch proto {
	case ProtoLCP:
		s.failLocked(s.now, "LCP: "+reason)
	case ProtoIPCP:
		s.ncpFinishedLocked(s.now, 0, "IPCP: "+reason)
	case ProtoIPv6CP:
		s.ncpFinishedLocked(s.now, 1, "IPv6CP: "+reason)
	}
}
