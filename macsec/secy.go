package macsec

import (
	"crypto/cipher"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ValidateFrames is the validateFrames control of a SecY (802.1AE 10.7.8).
type ValidateFrames uint8

// validateFrames values. The zero value is Strict, Linux's default.
const (
	// ValidateStrict drops every frame that is untagged or fails
	// verification.
	ValidateStrict ValidateFrames = iota
	// ValidateCheck verifies frames, delivers integrity-only frames that
	// fail (counted InPktsInvalid) and drops encrypted ones.
	ValidateCheck
	// ValidateDisabled does not verify integrity-only frames.
	ValidateDisabled
)

// String returns the iproute2 name: "strict", "check" or "disabled".
func (v ValidateFrames) String() string {
	switch v {
	case ValidateStrict:
		return "strict"
	case ValidateCheck:
		return "check"
	case ValidateDisabled:
		return "disabled"
	}
	return fmt.Sprintf("validate(%d)", uint8(v))
}

// ParseValidateFrames parses "strict", "check" or "disabled".
func ParseValidateFrames(s string) (ValidateFrames, error) {
	switch s {
	case "strict":
		return ValidateStrict, nil
	case "check":
		return ValidateCheck, nil
	case "disabled":
		return ValidateDisabled, nil
	}
	return 0, fmt.Errorf("macsec: unknown validate mode %q", s)
}

// Handler receives frames in order. The frames and their bytes are valid
// only until it returns; it must not keep them. Example: a function that
// copies them into a hw.FrameWriter batch.
type Handler func(frames [][]byte)

// Config configures a SecY. Field names follow `ip link ... type macsec`;
// [DefaultConfig] returns Linux's defaults.
type Config struct {
	// SCI is the SecY's SCI, e.g. 0x5254001301560001 (MAC || port 1).
	SCI SCI
	// Cipher is the cipher suite of all SAs, e.g. GCMAES128.
	Cipher CipherSuite
	// Encrypt sends encrypted frames (confidentiality offset 0); false
	// sends integrity-only frames.
	Encrypt bool
	// Protect is protectFrames: false sends frames untagged.
	Protect bool
	// SendSCI puts the SCI in every SecTAG (SC bit). Not with EndStation
	// or SCB.
	SendSCI bool
	// EndStation sets the ES bit; SCI must then be the source MAC address
	// || port 0x0001.
	EndStation bool
	// SCB sets the SCB bit.
	SCB bool
	// ReplayProtect enables the replay check with ReplayWindow.
	ReplayProtect bool
	// ReplayWindow is the replay window, e.g. 0 (PNs strictly increasing).
	ReplayWindow uint32
	// Validate is validateFrames, e.g. ValidateStrict.
	Validate ValidateFrames
	// LowerMTU is the MTU of the interface below, e.g. 1500; protected
	// frames longer than LowerMTU+14 are dropped (OutPktsTooLong).
	// 0 means 1500.
	LowerMTU int
	// Workers is how many cores one Protect or Verify call may use for
	// its crypto: the caller and up to Workers-1 helper goroutines (1: the
	// caller alone, no helpers); 0 means runtime.NumCPU().
	Workers int
	// AlwaysParallel offers every chunk big enough to share to the
	// helpers. Otherwise a call wakes helpers only when its crypto
	// outweighs the measured cost of waking them (see help.go).
	AlwaysParallel bool
	// YieldBetweenRuns makes every worker yield its core
	// (runtime.Gosched) before each run of frames it claims, so that a
	// helper the call just readied runs at once, on the caller's core,
	// and takes its share of the call whatever the machine's load. For
	// tests of order under parallel crypto (the lab's PN-order test); it
	// costs a trip through the scheduler per run of frames.
	YieldBetweenRuns bool
	// PNStore persists transmit PN high-water marks; nil keeps no state
	// (PNs then restart from the configured value after a restart).
	PNStore PNStore
	// PNBlock is how many PNs are reserved per PNStore write, e.g. 1<<20;
	// 0 means 1<<16.
	PNBlock uint64
	// TX receives protected frames, in PN order, from Protect's caller,
	// one call at a time (with Protect off: directly, concurrently if
	// Protect is called concurrently). It must not call Protect of the
	// same SecY.
	TX Handler
	// RX receives verified frames with SecTAG and ICV removed, each SC's
	// in the order Verify got them, with frames delivered without crypto
	// (untagged or unknown SA, when validateFrames allows) in their place,
	// from Verify's caller, one call at a time. It must not call Verify
	// of the same SecY (Protect is fine: a reply sent from the handler).
	RX Handler

	// workerHook, if set, runs before each run of frames a worker or
	// caller claims (tests use it to delay the crypto at random).
	workerHook func()
}

// DefaultConfig returns the defaults of a new Linux macsec device with SCI
// sci: GCM-AES-128, encrypt off, protect on, send_sci on, replay off,
// validate strict.
func DefaultConfig(sci SCI) Config {
	return Config{SCI: sci, Cipher: GCMAES128, Protect: true, SendSCI: true, Validate: ValidateStrict}
}

// Check reports every problem with c at once.
func (c *Config) Check() error {
	var errs []error
	if !c.Cipher.Valid() {
		errs = append(errs, fmt.Errorf("macsec: unsupported cipher suite %v", c.Cipher))
	}
	if c.SendSCI && (c.EndStation || c.SCB) {
		errs = append(errs, errors.New("macsec: send_sci cannot be combined with end_station or scb"))
	}
	if c.EndStation && c.SCI.Port() != PortES {
		errs = append(errs, fmt.Errorf("macsec: end_station needs SCI port %d, SCI is %v", PortES, c.SCI))
	}
	if c.Validate > ValidateDisabled {
		errs = append(errs, fmt.Errorf("macsec: unknown validate mode %v", c.Validate))
	}
	if c.Cipher.XPN() && c.ReplayWindow > 1<<30 {
		errs = append(errs, fmt.Errorf("macsec: replay window %d above 2^30 with XPN", c.ReplayWindow))
	}
	if c.LowerMTU < 0 || c.Workers < 0 {
		errs = append(errs, errors.New("macsec: negative lower MTU or worker count"))
	}
	if c.TX == nil || c.RX == nil {
		errs = append(errs, errors.New("macsec: TX and RX handlers are required"))
	}
	return errors.Join(errs...)
}

// SAConfig configures a transmit or receive SA (`ip macsec add ... sa`).
type SAConfig struct {
	// AN is the association number, 0..3.
	AN uint8
	// PN is, for a transmit SA, the first PN to use; for a receive SA, the
	// lowest PN accepted (nextPN). 0 means 1. With a PNStore a transmit SA
	// starts above the stored high-water mark if that is higher.
	PN uint64
	// Key is the SAK; 16 octets for the 128-bit suites, 32 for the 256-bit
	// ones.
	Key Key
	// KeyID identifies the key, e.g. []byte{0x01}; required with a
	// PNStore (it names the stored state).
	KeyID []byte
	// SSCI is the short SCI of the transmitter (XPN suites only), e.g.
	// 0x7a30c118.
	SSCI uint32
	// Salt is the 96-bit salt (XPN suites only).
	Salt [12]byte
}

// txSA is a transmit SA. Everything but stats, limit, prefetchAt and
// reserving is fixed after install or protected by SecY.txMu.
type txSA struct {
	an    uint8
	aead  cipher.AEAD
	xpn   bool
	ssci  uint32
	salt  [12]byte
	maxPN uint64

	// The fields above are read for every frame by every sealing worker;
	// those below are written for every frame (nextPN) or chunk (stats)
	// by the caller that numbers them. The padding keeps them off the
	// cache lines of the fields above, so that numbering one chunk does
	// not take those lines from the workers sealing the chunk before.
	_ [64]byte

	stats TXSAStats

	// nextPN and exhausted are protected by SecY.txMu.
	nextPN    uint64
	exhausted bool

	// PN persistence (store != nil): PNs below limit are durably reserved.
	store      PNStore
	id         PNStoreID
	resMu      sync.Mutex // serialises reservations
	limit      atomic.Uint64
	prefetchAt atomic.Uint64
	reserving  atomic.Bool
}

// rxSA is a receive SA. nextPN is only touched by the holder of rxTurn
// (rxInlineMu), the judge, which stores it once per run of frames
// (saAcc.flush) and publishes lowestPN and stats.NextPN for the PN
// recovery and replay pre-check of frames still being classified.
type rxSA struct {
	an       uint8
	aead     cipher.AEAD
	xpn      bool
	ssci     uint32
	salt     [12]byte
	active   atomic.Bool
	nextPN   uint64
	lowestPN atomic.Uint64
	stats    RXSAStats
}

// rxSC is a receive secure channel.
type rxSC struct {
	sci   SCI
	sas   [4]atomic.Pointer[rxSA]
	stats RXSCStats
}

// paddedCounter keeps per-worker counters on separate cache lines.
type paddedCounter struct {
	v atomic.Uint64
	_ [56]byte
}

// SecY is a MACsec Security Entity: one transmit SC with SAs by AN 0..3
// and any number of receive SCs with SAs by AN 0..3 (802.1AE clause 10).
// Protect and Verify run its ordered parallel crypto pipeline (see tx.go
// and rx.go). SecY is safe for concurrent use. Close stops its goroutines.
type SecY struct {
	cfg       Config
	log       *slog.Logger
	tci       uint8 // TCI bits of transmitted frames, AN excluded
	tagLen    int
	maxFrame  int // LowerMTU + 14
	xpn       bool
	window    uint64
	pnBlock   uint64
	stats     SecYStats
	txStats   TXSCStats
	workerCnt []paddedCounter // helpers by id, then callers

	// closeMu is held shared by Protect and Verify while they push work
	// and wait for it (see enter), and exclusively to close channels
	// (Close, RemoveRXSC). closed is protected by it. closing is set by
	// Close before it takes closeMu, so that new calls (possibly from a
	// handler that an in-flight call waits for) return at once instead of
	// queueing behind Close.
	closeMu sync.RWMutex
	closed  bool
	closing atomic.Bool

	lastLog atomic.Int64 // unix ns of the last rate-limited log message

	// txMu protects txSAs, encodingSA and each txSA's nextPN and
	// exhausted; it is held while PNs are assigned and a txTurn ticket is
	// taken, so ticket order is PN order.
	txMu       sync.Mutex
	txSAs      [4]*txSA
	encodingSA uint8

	// cfgMu serialises changes of the receive SC table.
	cfgMu sync.Mutex
	rxSCs atomic.Pointer[map[SCI]*rxSC]

	// inline is set with one worker: callers seal, open and deliver
	// their frames themselves (protectInline, verifyInline) under
	// txInlineMu and rxInlineMu, which keep delivery in PN and arrival
	// order; no helper goroutine is started.
	inline     bool
	txInlineMu sync.Mutex
	txInline   *container // protected by txInlineMu
	txWorker   worker     // protected by txInlineMu
	rxInlineMu sync.Mutex
	rxWorker   worker // protected by rxInlineMu

	// With helpers, callers deliver their chunks in ticket order.
	txTurn, rxTurn turnstile

	help      helpPolicy
	work      chan *container // callers' chunks for helpers; closed by Close
	reserveCh chan *txSA      // closed by Close
	wg        sync.WaitGroup  // all goroutines
}

// Pipeline sizes.
const (
	// maxBatchFrames is the capacity of a container: Protect and Verify
	// work in chunks of up to this many frames. Larger chunks spread the
	// cost of waking helpers and of each Config.TX or Config.RX call over
	// more frames (BenchmarkRatioVsBare, GOMAXPROCS=1, 1514 octets: ours /
	// bare 1.19 -> 1.14 integrity, 1.12 -> 1.09 encrypted going from 32
	// to 128 frames per container).
	maxBatchFrames = 128
	// workQueueLen bounds the chunks waiting for a helper; a caller that
	// finds it full does the work itself.
	workQueueLen = 64
)

// New returns a running SecY with no SAs. log may be nil. It starts the
// crypto helpers and the PN reservation goroutine; Close stops them.
func New(cfg Config, log *slog.Logger) (*SecY, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.LowerMTU == 0 {
		cfg.LowerMTU = 1500
	}
	if cfg.YieldBetweenRuns && cfg.workerHook == nil {
		cfg.workerHook = runtime.Gosched
	}
	if cfg.Workers == 0 {
		cfg.Workers = runtime.NumCPU()
	}
	if cfg.PNBlock == 0 {
		cfg.PNBlock = 1 << 16
	}
	s := &SecY{
		cfg:       cfg,
		log:       log.With("secy", cfg.SCI.String()),
		maxFrame:  cfg.LowerMTU + 14,
		xpn:       cfg.Cipher.XPN(),
		pnBlock:   cfg.PNBlock,
		workerCnt: make([]paddedCounter, cfg.Workers),
		work:      make(chan *container, workQueueLen),
		reserveCh: make(chan *txSA, 4),
	}
	s.txTurn.init()
	s.rxTurn.init()
	if cfg.Workers == 1 {
		s.inline = true
		s.txInline = &container{}
	}
	if cfg.ReplayProtect {
		s.window = uint64(cfg.ReplayWindow)
	}
	s.tagLen = SecTAGLen
	if cfg.SendSCI {
		s.tci |= TCISCIPresent
		s.tagLen = SecTAGSCILen
	}
	if cfg.EndStation {
		s.tci |= TCIEndStation
	}
	if cfg.SCB {
		s.tci |= TCISCB
	}
	if cfg.Encrypt {
		s.tci |= TCIEncrypted | TCIChanged
	}
	m := map[SCI]*rxSC{}
	s.rxSCs.Store(&m)
	if !s.inline {
		s.help.always = cfg.AlwaysParallel
		s.help.nsPerKiB = calibrateCrypto(cfg.Cipher, cfg.Encrypt)
		for i := range cfg.Workers - 1 { // the caller is the other worker
			s.wg.Add(1)
			go s.routineHelper(i)
		}
	}
	s.wg.Add(1)
	go s.routinePNReserve()
	return s, nil
}

// Close stops the SecY: frames already queued are still processed and
// delivered, later Protect and Verify calls drop their frames. It waits
// for all goroutines to exit. Handlers must not call Close.
func (s *SecY) Close() error {
	s.closing.Store(true)
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	close(s.work)
	close(s.reserveCh)
	s.closeMu.Unlock()
	s.wg.Wait()
	return nil
}

// enter takes closeMu shared for Protect or Verify and reports false if
// the SecY is closing. It never queues behind a waiting writer: Close may
// be waiting for an in-flight call whose frames are in a handler that
// calls Protect or Verify again (a reply sent from the receive handler),
// and RWMutex.RLock would then deadlock. While RemoveRXSC holds or waits
// for the lock, enter polls.
func (s *SecY) enter() bool {
	for {
		if s.closing.Load() {
			return false
		}
		if s.closeMu.TryRLock() {
			if s.closed {
				s.closeMu.RUnlock()
				return false
			}
			return true
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// logAllowed rate-limits data-path logging to one message per second.
func (s *SecY) logAllowed() bool {
	now := time.Now().UnixNano()
	last := s.lastLog.Load()
	return now-last >= int64(time.Second) && s.lastLog.CompareAndSwap(last, now)
}

// Config returns the SecY's configuration with defaults filled in.
func (s *SecY) Config() Config { return s.cfg }

// Stats returns the SecY-wide counters.
func (s *SecY) Stats() *SecYStats { return &s.stats }

// TXSCStats returns the transmit SC's counters.
func (s *SecY) TXSCStats() *TXSCStats { return &s.txStats }

// TXSAStats returns the counters of the transmit SA with association
// number an, or nil if none is installed.
func (s *SecY) TXSAStats(an uint8) *TXSAStats {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	if an > 3 || s.txSAs[an] == nil {
		return nil
	}
	return &s.txSAs[an].stats
}

// RXSCStats returns the counters of the receive SC sci, or nil.
func (s *SecY) RXSCStats(sci SCI) *RXSCStats {
	sc := (*s.rxSCs.Load())[sci]
	if sc == nil {
		return nil
	}
	return &sc.stats
}

// RXSAStats returns the counters of receive SA an of SC sci, or nil.
func (s *SecY) RXSAStats(sci SCI, an uint8) *RXSAStats {
	sc := (*s.rxSCs.Load())[sci]
	if sc == nil || an > 3 {
		return nil
	}
	sa := sc.sas[an].Load()
	if sa == nil {
		return nil
	}
	return &sa.stats
}

// WorkerFrames returns how many frames each crypto worker has processed:
// the Config.Workers-1 helper goroutines, then (last element) Protect
// and Verify callers, who do their share of their own frames.
func (s *SecY) WorkerFrames() []uint64 {
	out := make([]uint64, len(s.workerCnt))
	for i := range s.workerCnt {
		out[i] = s.workerCnt[i].v.Load()
	}
	return out
}

func (s *SecY) checkSA(c *SAConfig) (cipher.AEAD, uint64, error) {
	if c.AN > 3 {
		return nil, 0, fmt.Errorf("macsec: association number %d out of range 0..3", c.AN)
	}
	aead, err := newAEAD(s.cfg.Cipher, c.Key)
	if err != nil {
		return nil, 0, err
	}
	pn := c.PN
	if pn == 0 {
		pn = 1
	}
	if pn > s.cfg.Cipher.MaxPN() {
		return nil, 0, fmt.Errorf("macsec: pn %d above %d for %v", pn, s.cfg.Cipher.MaxPN(), s.cfg.Cipher)
	}
	return aead, pn, nil
}

// InstallTXSA installs (or replaces) the transmit SA c.AN. With a PNStore
// it starts above the stored high-water mark and durably reserves its
// first block of PNs first; if the state cannot be read or written the SA
// is not installed. Frames already in flight keep the SA they were given.
func (s *SecY) InstallTXSA(c SAConfig) error {
	aead, pn, err := s.checkSA(&c)
	if err != nil {
		return fmt.Errorf("tx sa %d: %w", c.AN, err)
	}
	sa := &txSA{an: c.AN, aead: aead, xpn: s.xpn, ssci: c.SSCI, salt: c.Salt, maxPN: s.cfg.Cipher.MaxPN(), store: s.cfg.PNStore}
	if sa.store != nil {
		if len(c.KeyID) == 0 {
			return fmt.Errorf("macsec: tx sa %d: a key id is required with a pn store", c.AN)
		}
		sa.id = PNStoreID{SCI: s.cfg.SCI, AN: c.AN, KeyID: hex.EncodeToString(c.KeyID)}
		mark, err := sa.store.Load(sa.id)
		if err != nil {
			return fmt.Errorf("macsec: tx sa %d: refusing to start: %w", c.AN, err)
		}
		if mark > pn {
			pn = mark
		}
		if pn > sa.maxPN {
			return fmt.Errorf("macsec: tx sa %d: refusing to start: pn space exhausted (stored mark %d)", c.AN, mark)
		}
		if err := s.reserve(sa, pn); err != nil {
			return fmt.Errorf("macsec: tx sa %d: refusing to start: %w", c.AN, err)
		}
	}
	sa.nextPN = pn
	sa.stats.NextPN.Store(pn)
	s.txMu.Lock()
	s.txSAs[c.AN] = sa
	s.txMu.Unlock()
	s.log.Info("tx sa installed", "an", c.AN, "pn", pn)
	return nil
}

// RemoveTXSA removes transmit SA an. Frames already in flight still use it.
func (s *SecY) RemoveTXSA(an uint8) {
	if an > 3 {
		return
	}
	s.txMu.Lock()
	s.txSAs[an] = nil
	s.txMu.Unlock()
}

// SetEncodingSA makes an the encoding SA (key rollover): frames handed to
// Protect after it returns use SA an; earlier frames keep their SA.
func (s *SecY) SetEncodingSA(an uint8) error {
	if an > 3 {
		return fmt.Errorf("macsec: encoding sa %d out of range 0..3", an)
	}
	s.txMu.Lock()
	s.encodingSA = an
	s.txMu.Unlock()
	return nil
}

// reserve makes sure PNs up to at least need are durably reserved: it
// writes need+PNBlock (saturating) to the store. Called with no lock, from
// the PN reservation goroutine, or with txMu held when a reservation is
// late.
func (s *SecY) reserve(sa *txSA, need uint64) error {
	sa.resMu.Lock()
	defer sa.resMu.Unlock()
	if sa.limit.Load() > need {
		return nil
	}
	mark := need + s.pnBlock
	if mark < need || mark > sa.maxPN {
		mark = sa.maxPN // saturate; the SA then stops one PN early
	}
	if err := sa.store.Reserve(sa.id, mark); err != nil {
		return err
	}
	sa.prefetchAt.Store(mark - min(s.pnBlock/2, mark-need))
	sa.limit.Store(mark)
	return nil
}

// routinePNReserve extends PN reservations ahead of use. Owner: SecY;
// stop: reserveCh closed by Close.
func (s *SecY) routinePNReserve() {
	defer s.wg.Done()
	s.log.Debug("routinePNReserve started")
	defer s.log.Debug("routinePNReserve stopped")
	for sa := range s.reserveCh {
		if err := s.reserve(sa, sa.limit.Load()); err != nil {
			s.log.Error("pn reservation failed", "an", sa.an, "err", err)
		}
		sa.reserving.Store(false)
	}
}

// nextPNLocked returns the PN for the next frame of sa, or false if the SA
// cannot send (exhausted, or its PN reservation failed). s.txMu is held.
func (s *SecY) nextPNLocked(sa *txSA) (uint64, bool) {
	if sa.exhausted {
		return 0, false
	}
	pn := sa.nextPN
	if sa.store != nil {
		if pn >= sa.limit.Load() {
			if pn >= sa.maxPN {
				sa.exhausted = true
				s.log.Warn("tx sa pn exhausted", "an", sa.an, "pn", pn)
				return 0, false
			}
			if err := s.reserve(sa, pn); err != nil {
				if s.logAllowed() {
					s.log.Error("pn reservation failed; dropping frames", "an", sa.an, "err", err)
				}
				return 0, false
			}
		} else if pn >= sa.prefetchAt.Load() && !sa.reserving.Swap(true) {
			select {
			case s.reserveCh <- sa:
			default:
				sa.reserving.Store(false)
			}
		}
	}
	if pn == sa.maxPN {
		sa.exhausted = true
		s.log.Warn("tx sa pn exhausted; last pn used", "an", sa.an, "pn", pn)
	} else {
		sa.nextPN = pn + 1
	}
	return pn, true
}

// AddRXSC adds a receive SC for sci.
func (s *SecY) AddRXSC(sci SCI) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return errors.New("macsec: secy closed")
	}
	old := *s.rxSCs.Load()
	if old[sci] != nil {
		return fmt.Errorf("macsec: rx sc %v exists", sci)
	}
	m := make(map[SCI]*rxSC, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[sci] = &rxSC{sci: sci}
	s.rxSCs.Store(&m)
	return nil
}

// RemoveRXSC removes receive SC sci; frames in flight are still delivered.
// It waits for Protect and Verify calls in flight, so handlers must not
// call it.
func (s *SecY) RemoveRXSC(sci SCI) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return errors.New("macsec: secy closed")
	}
	old := *s.rxSCs.Load()
	sc := old[sci]
	if sc == nil {
		return fmt.Errorf("macsec: no rx sc %v", sci)
	}
	m := make(map[SCI]*rxSC, len(old))
	for k, v := range old {
		if k != sci {
			m[k] = v
		}
	}
	s.rxSCs.Store(&m)
	return nil
}

// InstallRXSA installs (or replaces) receive SA c.AN of SC sci, in use.
func (s *SecY) InstallRXSA(sci SCI, c SAConfig) error {
	aead, pn, err := s.checkSA(&c)
	if err != nil {
		return fmt.Errorf("rx sc %v sa %d: %w", sci, c.AN, err)
	}
	sc := (*s.rxSCs.Load())[sci]
	if sc == nil {
		return fmt.Errorf("macsec: no rx sc %v", sci)
	}
	sa := &rxSA{an: c.AN, aead: aead, xpn: s.xpn, ssci: c.SSCI, salt: c.Salt, nextPN: pn}
	sa.active.Store(true)
	sa.lowestPN.Store(lowest(pn, s.window))
	sa.stats.NextPN.Store(pn)
	sc.sas[c.AN].Store(sa)
	s.log.Info("rx sa installed", "sci", sci.String(), "an", c.AN, "pn", pn)
	return nil
}

// SetRXSAActive switches receive SA an of SC sci on or off (`ip macsec
// set ... sa AN on|off`).
func (s *SecY) SetRXSAActive(sci SCI, an uint8, on bool) error {
	sc := (*s.rxSCs.Load())[sci]
	if sc == nil || an > 3 || sc.sas[an].Load() == nil {
		return fmt.Errorf("macsec: no rx sc %v sa %d", sci, an)
	}
	sc.sas[an].Load().active.Store(on)
	return nil
}

// RemoveRXSA removes receive SA an of SC sci.
func (s *SecY) RemoveRXSA(sci SCI, an uint8) {
	if sc := (*s.rxSCs.Load())[sci]; sc != nil && an <= 3 {
		sc.sas[an].Store(nil)
	}
}

// lowest returns nextPN - window, floored at 0.
func lowest(next, window uint64) uint64 {
	if next > window {
		return next - window
	}
	return 0
}
