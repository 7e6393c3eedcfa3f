package mka

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/macsec"
)

// Timers and thresholds (802.1X-2020 9.4.4, Table 9-3; wpa_supplicant's
// ieee802_1x_kay.h has the same values).
const (
	// HelloTime is the MKA Hello Time: an MKPDU every 2 s.
	HelloTime = 2 * time.Second
	// BoundedHelloTime is the hello interval with delay protection
	// (Config.BoundedHello): 0.5 s, so lowest PNs are at most that stale.
	BoundedHelloTime = 500 * time.Millisecond
	// LifeTime is the MKA Life Time: a peer not heard from for 6 s (three
	// hellos) is removed.
	LifeTime = 6 * time.Second
	// RetireDelay is how long the old SAK's receive SAs stay installed
	// after every live peer reports transmitting with the latest one
	// (wpa_supplicant waits 3 s, MKA_SAK_RETIRE_TIME): frames protected
	// with the old SA just before a peer's switch still verify. A rollover
	// thus takes at least this long; the next SAK waits for it.
	RetireDelay = time.Second
	// PNExhaustion is the transmit PN at which the key server distributes
	// a new SAK for the 32-bit PN suites: three quarters of the PN space,
	// as wpa_supplicant's PENDING_PN_EXHAUSTION, leaving 2^30 frames (over
	// a minute at 10 Gb/s of minimum-size frames) to finish the rollover.
	PNExhaustion = 0xC0000000
	// PNExhaustionXPN is the same threshold for the 64-bit PN suites.
	PNExhaustionXPN = 0xC000000000000000
	// tickInterval is how often Run calls Tick: a fifth of the bounded
	// hello time, so a hello is at most 20% late.
	tickInterval = 100 * time.Millisecond
)

// ErrNotKeyServer is returned by Rekey when this participant is not the
// elected key server; only the key server distributes SAKs.
var ErrNotKeyServer = errors.New("mka: not the key server")

// Config configures a Participant.
type Config struct {
	// CAK is the pre-shared CAK and its name; required.
	CAK CAK
	// SCI is our SecY's SCI, e.g. 0x5254001301560001 (MAC || port 1).
	SCI macsec.SCI
	// MAC is the source address of our MKPDUs; zero means SCI.MAC().
	MAC [6]byte
	// DA is the destination of our MKPDUs; zero means PAEGroupAddress.
	DA [6]byte
	// KeyServerPriority, e.g. 16: the live participant with the lowest
	// value (then the lowest SCI) is key server; 0 is the highest
	// priority, 0xff never key server (wpa_supplicant's mka_priority).
	KeyServerPriority uint8
	// CipherSuite is our SecY's cipher suite (macsec.Config.Cipher); zero
	// means GCM-AES-128. As key server we distribute SAKs of this suite
	// (switching the SecY back to it first if a former key server moved
	// it); SAKs of a suite neither this nor in CipherSuites are rejected
	// (counted SAKRejected).
	CipherSuite macsec.CipherSuite
	// CipherSuites lists further suites we accept in a Distributed SAK,
	// e.g. {macsec.GCMAES128} for a GCM-AES-256 SecY whose key server
	// (wpa_supplicant 2.10) distributes only GCM-AES-128. Accepting one
	// switches the SecY to it (SuiteSwitcher, which the SecY must then
	// implement) before any SA of it is installed; the MI, MN and peers
	// stay. Empty: only CipherSuite.
	CipherSuites []macsec.CipherSuite
	// Capability is our MACsec capability; zero means
	// CapabilityConfidentiality (integrity, or confidentiality with
	// offset 0: what macsec.SecY does).
	Capability Capability
	// Confidentiality makes us, as key server, ask for confidentiality
	// (offset 0) when every live peer is capable of it; otherwise, or
	// when a peer offers integrity only, SAKs are for integrity only.
	Confidentiality bool
	// NotDesired clears MACsec Desired: we take part in MKA but no SAK is
	// distributed while we are a member (802.1X 9.6), and a SAK a key
	// server distributes anyway is rejected (counted SAKRejected).
	NotDesired bool
	// BoundedHello sends an MKPDU every BoundedHelloTime and sets Delay
	// Protect in SAK Use.
	BoundedHello bool
	// Version is the MKA version we send, 1..3; zero means 3.
	Version uint8
	// Rand is the source of MIs and SAKs; nil means crypto/rand.Reader.
	Rand io.Reader
	// Clock tells the time; nil means the system clock.
	Clock Clock
	// PNExhaustion overrides the rekey threshold; zero means
	// PNExhaustion or PNExhaustionXPN for the cipher suite of the SAK.
	PNExhaustion uint64
}

// Participant is one MKA participant (802.1X 9.4, the KaY's actor in one
// CA). It is safe for concurrent use: Receive, Tick, Rekey and State take
// its lock; it calls the SecY with the lock held and the Transport
// without it. Run ticks it on real time.
type Participant struct {
	cfg   Config
	log   *slog.Logger
	secy  SecY
	tr    Transport
	clock Clock
	rand  io.Reader
	stats Stats

	// sendMu serialises Transport.Send calls and keeps their order equal
	// to the order MKPDUs were built in; taken after mu is released.
	sendMu sync.Mutex

	// mu protects everything below.
	mu        sync.Mutex
	ick       *ICVKey
	kek       secret
	mi        MI
	mn        uint32
	sent      []mnStamp // MNs sent within the last LifeTime, oldest first
	peers     map[MI]*peer
	keyServer bool // we are the elected key server
	ks        *peer
	latest    *sakState
	old       *sakState
	retireAt  time.Time // when old goes: RetireDelay after every peer transmits with latest
	nextKN    uint32
	nextAN    uint8
	members   map[MI]bool // live peers when latest was generated (key server)
	rekey     bool        // a rekey is wanted as soon as the last one finished
	newInfo   bool        // send an MKPDU now
	lastSend  time.Time
	lastRoll  time.Time
	rxSCs     map[macsec.SCI]bool
	suite     macsec.CipherSuite    // the SecY's cipher suite now
	offset    ConfidentialityOffset // of the latest SAK
	frame     MKPDU                 // decode scratch
	outbox    [][]byte              // built under mu, sent after
}

// mnStamp is an MN we sent and when.
type mnStamp struct {
	at time.Time
	mn uint32
}

// peer is what we know of another participant's actor.
type peer struct {
	mi         MI
	mn         uint32
	sci        macsec.SCI
	priority   uint8
	ksFlag     bool
	desired    bool
	capability Capability
	live       bool
	expire     time.Time
	hasSAKUse  bool
	sakUse     SAKUse
	xpn        XPNParams
}

// sakState is a SAK we hold and how far its handshake has come.
type sakState struct {
	ki        KI
	an        uint8
	key       secret
	suite     macsec.CipherSuite
	offset    ConfidentialityOffset
	wrapped   []byte                // the Distributed SAK (key server only)
	ssci      map[macsec.SCI]uint32 // XPN suites
	rxFor     map[macsec.SCI]bool   // receive SAs installed
	rxOK      bool                  // we receive with it (every live peer's SC)
	tx        bool                  // we transmit with it
	installed time.Time
}

// New returns a Participant for cfg controlling secy and sending on tr.
// It chooses a random MI; nothing is sent before the first Tick.
func New(cfg Config, secy SecY, tr Transport, log *slog.Logger) (*Participant, error) {
	if cfg.CAK.Len() == 0 {
		return nil, errors.New("mka: a cak is required")
	}
	if cfg.CipherSuite == 0 {
		cfg.CipherSuite = macsec.GCMAES128
	}
	if !cfg.CipherSuite.Valid() {
		return nil, fmt.Errorf("mka: unsupported cipher suite %v", cfg.CipherSuite)
	}
	for _, cs := range cfg.CipherSuites {
		if !cs.Valid() {
			return nil, fmt.Errorf("mka: unsupported cipher suite %v", cs)
		}
	}
	if cfg.Capability == 0 {
		cfg.Capability = CapabilityConfidentiality
	}
	if cfg.Capability > CapabilityConfidentialityOffsets {
		return nil, fmt.Errorf("mka: macsec capability %d out of range", cfg.Capability)
	}
	if cfg.Version == 0 {
		cfg.Version = DefaultVersion
	}
	if cfg.MAC == [6]byte{} {
		cfg.MAC = cfg.SCI.MAC()
	}
	if cfg.DA == [6]byte{} {
		cfg.DA = PAEGroupAddress
	}
	if secy == nil || tr == nil {
		return nil, errors.New("mka: a secy and a transport are required")
	}
	if _, ok := secy.(SuiteSwitcher); len(cfg.CipherSuites) > 0 && !ok {
		return nil, errors.New("mka: further cipher suites need a secy that can switch suite (mka.SuiteSwitcher)")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Participant{cfg: cfg, secy: secy, tr: tr, clock: cfg.Clock, rand: cfg.Rand,
		log: log.With("sci", cfg.SCI.String()), peers: map[MI]*peer{}, rxSCs: map[macsec.SCI]bool{}, nextKN: 1,
		suite: cfg.CipherSuite}
	if p.clock == nil {
		p.clock = systemClock{}
	}
	if p.rand == nil {
		p.rand = rand.Reader
	}
	var err error
	if p.ick, err = NewICVKey(cfg.CAK); err != nil {
		return nil, err
	}
	kek, err := cfg.CAK.deriveKEK()
	if err != nil {
		return nil, err
	}
	p.kek = newSecret(kek)
	clear(kek)
	if err := p.newMILocked(); err != nil {
		return nil, err
	}
	return p, nil
}

// String describes the participant without any key.
func (p *Participant) String() string {
	return fmt.Sprintf("mka.Participant(sci %v, ckn %x)", p.cfg.SCI, p.cfg.CAK.ckn)
}

// GoString implements fmt.GoStringer like String.
func (p *Participant) GoString() string { return p.String() }

// Stats returns the participant's counters.
func (p *Participant) Stats() *Stats { return &p.stats }

// newMILocked picks a fresh random MI and restarts its MN (802.1X 9.4.2).
func (p *Participant) newMILocked() error {
	if _, err := io.ReadFull(p.rand, p.mi[:]); err != nil {
		return fmt.Errorf("mka: random source: %w", err)
	}
	p.mn = 0
	p.sent = p.sent[:0]
	return nil
}

// Run calls Tick every 100 ms until ctx is done, then returns ctx.Err().
func (p *Participant) Run(ctx context.Context) error {
	p.log.Debug("mka participant started")
	defer p.log.Debug("mka participant stopped")
	t := time.NewTicker(tickInterval)
	defer t.Stop()
	p.Tick()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			p.Tick()
		}
	}
}

// Tick runs the timers: it removes peers not heard from for LifeTime,
// advances the key handshake and sends an MKPDU when the hello time has
// passed or there is news.
func (p *Participant) Tick() {
	p.mu.Lock()
	now := p.clock.Now()
	p.expireLocked(now)
	p.stepLocked(now)
	hello := HelloTime
	if p.cfg.BoundedHello {
		hello = BoundedHelloTime
	}
	if p.newInfo || p.lastSend.IsZero() || now.Sub(p.lastSend) >= hello {
		p.transmitLocked(now)
	}
	p.flushUnlock()
}

// Rekey makes the key server distribute a new SAK, as soon as the previous
// rollover has finished. It returns ErrNotKeyServer on other participants.
func (p *Participant) Rekey() error {
	p.mu.Lock()
	if !p.keyServer {
		p.mu.Unlock()
		return ErrNotKeyServer
	}
	p.rekey = true
	now := p.clock.Now()
	p.stepLocked(now)
	if p.newInfo {
		p.transmitLocked(now)
	}
	p.flushUnlock()
	return nil
}

// CancelRekey withdraws a rekey that Rekey asked for and that still
// waits for the previous rollover to finish: the owner's periodic rekey
// was switched off.
func (p *Participant) CancelRekey() {
	p.mu.Lock()
	p.rekey = false
	p.mu.Unlock()
}

// Receive processes one received frame (from the destination address on,
// VLAN tags removed). It keeps no reference to frame. Bad frames are
// counted and dropped.
func (p *Participant) Receive(frame []byte) {
	p.stats.MKPDUsReceived.Add(1)
	p.mu.Lock()
	now := p.clock.Now()
	if p.receiveLocked(frame, now) {
		p.stepLocked(now)
		if p.newInfo {
			p.transmitLocked(now)
		}
	}
	p.flushUnlock()
}

// flushUnlock releases mu and sends what transmitLocked built, in order.
func (p *Participant) flushUnlock() {
	out := p.outbox
	p.outbox = nil
	p.sendMu.Lock()
	p.mu.Unlock()
	defer p.sendMu.Unlock()
	for _, f := range out {
		if err := p.tr.Send(f); err != nil {
			p.stats.SendErrors.Add(1)
			p.log.Warn("mkpdu send failed", "err", err)
			continue
		}
		p.stats.MKPDUsSent.Add(1)
	}
}

// receiveLocked validates an MKPDU (802.1X 11.11.2, 9.4) and updates the
// peer that sent it. It reports whether the MKPDU was accepted.
func (p *Participant) receiveLocked(frame []byte, now time.Time) bool {
	m := &p.frame
	if err := Decode(frame, m); err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			p.stats.Malformed[de.Reason].Add(1)
		}
		return false
	}
	b := &m.Basic
	if string(b.CKN) != string(p.cfg.CAK.ckn) {
		p.stats.UnknownCKN.Add(1)
		return false
	}
	if b.AlgorithmAgility != AlgorithmAgility {
		p.stats.BadAlgorithmAgility.Add(1)
		return false
	}
	if !p.ick.Verify(frame, m) {
		p.stats.InvalidICV.Add(1)
		return false
	}
	if b.MI == p.mi {
		if b.SCI == p.cfg.SCI {
			p.stats.Loopback.Add(1)
			return false
		}
		// Another participant uses our MI: choose a new one (9.4.2).
		p.stats.MICollisions.Add(1)
		p.log.Warn("mi collision, choosing a new mi", "peer", b.SCI.String())
		if err := p.newMILocked(); err != nil {
			p.log.Error("new mi", "err", err)
		}
		p.newInfo = true
		return false
	}
	pr := p.peers[b.MI]
	if pr != nil && b.MN <= pr.mn {
		p.stats.Replayed.Add(1)
		return false
	}
	if pr == nil {
		// A new MI from a known SCI is that peer restarted: forget its
		// old instance rather than wait for it to time out.
		for mi, old := range p.peers {
			if old.sci == b.SCI {
				p.removePeerLocked(mi, old)
			}
		}
		pr = &peer{mi: b.MI}
		p.peers[b.MI] = pr
		p.newInfo = true // echo it in our Potential Peer List soon
		p.log.Info("new potential peer", "peer", b.SCI.String(), "mi", b.MI.String())
	}
	p.stats.MKPDUsAccepted.Add(1)
	pr.mn = b.MN
	pr.sci = b.SCI
	pr.priority = b.KeyServerPriority
	pr.ksFlag = b.KeyServer
	pr.desired = b.MACsecDesired
	pr.capability = b.Capability

	// Does it list us with an MN we sent recently? Then it is live
	// (9.4.3); a potential peer's timer runs from any MKPDU, a live
	// peer's only from those that still list us.
	mn, ok := m.Live.Find(p.mi)
	if !ok {
		mn, ok = m.Potential.Find(p.mi)
	}
	if ok && p.freshLocked(mn) {
		if !pr.live {
			pr.live = true
			p.newInfo = true
			p.log.Info("peer live", "peer", pr.sci.String(), "mi", pr.mi.String())
		}
		pr.expire = now.Add(LifeTime)
	} else if !pr.live {
		pr.expire = now.Add(LifeTime)
	}
	if !pr.live {
		return true
	}
	pr.hasSAKUse = m.HasSAKUse
	pr.sakUse = m.SAKUse
	pr.xpn = m.XPN
	p.electLocked()
	if m.HasDistSAK && pr == p.ks {
		p.takeSAKLocked(pr, &m.DistSAK, now)
	}
	return true
}

// freshLocked reports whether mn is one we sent within the last LifeTime.
func (p *Participant) freshLocked(mn uint32) bool {
	return len(p.sent) > 0 && mn >= p.sent[0].mn && mn <= p.mn
}

// expireLocked removes peers not heard from for LifeTime (9.4.3).
func (p *Participant) expireLocked(now time.Time) {
	for mi, pr := range p.peers {
		if !now.Before(pr.expire) {
			p.stats.PeerTimeouts.Add(1)
			p.log.Info("peer timed out", "peer", pr.sci.String(), "mi", mi.String(), "live", pr.live)
			p.removePeerLocked(mi, pr)
		}
	}
	p.electLocked()
}

// removePeerLocked forgets a peer and removes its receive SC.
func (p *Participant) removePeerLocked(mi MI, pr *peer) {
	delete(p.peers, mi)
	p.newInfo = true
	if !pr.live {
		return
	}
	for _, o := range p.peers {
		if o.live && o.sci == pr.sci {
			return // the SC is still used by another instance
		}
	}
	if p.rxSCs[pr.sci] {
		if err := p.secy.RemoveRXSC(pr.sci); err != nil {
			p.secyErr("RemoveRXSC", err)
		}
		delete(p.rxSCs, pr.sci)
	}
	for _, k := range []*sakState{p.latest, p.old} {
		if k != nil {
			delete(k.rxFor, pr.sci)
		}
	}
}

// electLocked elects the key server among us and the live peers: the
// lowest priority value, then the lowest SCI (9.5); priority 0xff never
// serves. We claim the role only with at least one live peer.
func (p *Participant) electLocked() {
	var best *peer
	for _, pr := range p.peers {
		if !pr.live || pr.priority == 0xff {
			continue
		}
		if best == nil || pr.priority < best.priority || (pr.priority == best.priority && pr.sci < best.sci) {
			best = pr
		}
	}
	live := p.liveCount() > 0
	self := p.cfg.KeyServerPriority != 0xff && live &&
		(best == nil || p.cfg.KeyServerPriority < best.priority ||
			(p.cfg.KeyServerPriority == best.priority && p.cfg.SCI < best.sci))
	if self {
		best = nil
	}
	if self != p.keyServer || best != p.ks {
		p.newInfo = true
		if self {
			p.log.Info("elected key server")
		} else if best != nil {
			p.log.Info("key server elected", "peer", best.sci.String())
		}
	}
	p.keyServer, p.ks = self, best
}

func (p *Participant) liveCount() int {
	n := 0
	for _, pr := range p.peers {
		if pr.live {
			n++
		}
	}
	return n
}

func (p *Participant) secyErr(op string, err error) {
	p.stats.SecYErrors.Add(1)
	p.log.Error("secy "+op+" failed", "err", err)
}
