package macsec

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// slot is one frame in a container. buf keeps its storage across uses.
type slot struct {
	buf     []byte // tx: the frame being built in store; rx: the caller's frame up to the ICV
	src     []byte // tx: the caller's frame
	store   []byte // tx: pooled storage, kept across uses
	txsa    *txSA
	rxsa    *rxSA
	rxsc    *rxSC
	sci     SCI
	pn      uint64
	dataOff int   // offset of the Secure Data
	dataLen int   // Secure Data length
	tci     uint8 // tx: TCI bits, AN excluded
	enc     bool  // E=1 (rx: C=1)
	skip    bool  // rx: no crypto (validateFrames Disabled, C=0)
	pass    bool  // rx: no crypto, delivered as buf (untagged or no SA)
}

// container is one chunk of up to maxBatchFrames frames of a Protect or
// Verify call whose crypto the caller shares with the helper goroutines
// (see run). Its frames are numbered (tx) or classified
// (rx) by the caller before any helper sees it; helpers and the caller
// then claim runs of slots with ends (see claim) and each adds the
// slots it did to finished when none is left; the participant that
// finishes the last slot tells the caller through fin unless it is the
// caller. refs counts the caller and the helpers it woke: the last one
// to let go returns the container to the pool, so a helper that wakes
// after the work is done still finds the container it was given.
type container struct {
	tx       bool
	n        int
	ends     atomic.Uint64 // slots left to claim: [low 32 bits, high 32 bits)
	finished atomic.Int32  // slots sealed or opened
	refs     atomic.Int32  // participants still holding the container
	postedAt int64         // nanotime when offered to helpers; 0 if not
	firstAt  atomic.Int64  // traceOn: nanotime of a helper's first claim
	callerAt int64         // traceOn: nanotime the caller was done claiming
	spin     bool          // its call was worth a wakeup: helpers poll for more afterwards
	fin      chan struct{} // capacity 1; a helper finished the last slot
	s        [maxBatchFrames]slot
	out      [maxBatchFrames][]byte
	// ok holds the rx verdicts (ICV verified), apart from the slots: the
	// caller judges a container's frames after helpers opened them, and
	// reading each verdict from its slot pulled every slot's cache line
	// back from the helper's core.
	ok [maxBatchFrames]bool
}

// freeList is a bounded pool. Unlike sync.Pool it never drops items at
// random (sync.Pool does under the race detector, and empties itself at
// GC), so the steady state allocates nothing, and it bounds the memory it
// keeps: each container may hold up to maxBatchFrames frames of storage.
type freeList[T any] struct {
	mu    sync.Mutex
	items []*T // protected by mu
	max   int
	new   func() *T
}

func (l *freeList[T]) get() *T {
	l.mu.Lock()
	if n := len(l.items); n > 0 {
		it := l.items[n-1]
		l.items[n-1] = nil
		l.items = l.items[:n-1]
		l.mu.Unlock()
		return it
	}
	l.mu.Unlock()
	return l.new()
}

func (l *freeList[T]) put(it *T) {
	l.mu.Lock()
	if len(l.items) < l.max {
		l.items = append(l.items, it)
	}
	l.mu.Unlock()
}

// maxFreeContainers bounds the idle containers kept (with their TX frame
// storage, grown only in the slots used: at most 64 x 128 x 1536 octets
// for standard frames).
const maxFreeContainers = 64

var containerPool = freeList[container]{
	max: maxFreeContainers,
	new: func() *container { return &container{fin: make(chan struct{}, 1)} },
}

// getContainer returns an empty container held by its caller alone.
func getContainer() *container {
	c := containerPool.get()
	c.refs.Store(1)
	return c
}

// release lets go of c; the last holder empties it and returns it to the
// pool.
func (c *container) release() {
	if c.refs.Add(-1) == 0 {
		c.reset()
		containerPool.put(c)
	}
}

// reset empties c, clearing its pointers so that an idle container keeps
// no SA, SC or caller's frame alive. Frame storage is kept.
func (c *container) reset() {
	for i := range c.n {
		c.s[i].txsa, c.s[i].rxsa, c.s[i].rxsc = nil, nil, nil
		c.s[i].src, c.s[i].buf = nil, nil
		c.out[i] = nil
	}
	c.n = 0
	c.tx, c.spin = false, false
	c.ends.Store(0)
	c.finished.Store(0)
	c.postedAt, c.callerAt = 0, 0
	c.firstAt.Store(0)
}

// claimFrames is the fewest slots a participant claims at a time (see
// claim): a few, so that the shared counter is touched once per several
// microseconds of crypto, and few enough that the last claims leave
// little imbalance.
const claimFrames = 8

// maxInflight is how many containers (of up to maxBatchFrames frames)
// one call numbers and posts before it delivers the oldest: enough that
// a helper, once awake, finds work queued behind the chunk it joined
// (waking a goroutine on an idle core takes tens of microseconds on a
// VM, the time of dozens of frames), few enough to bound the memory and
// the latency of a call.
const maxInflight = 16

// inflight is one call's containers in flight, oldest first, with their
// tickets, and whether the caller itself finished each one's last frame
// (then no helper sends on its fin).
type inflight struct {
	c      [maxInflight]*container
	ticket [maxInflight]uint64
	last   [maxInflight]bool
	n      int
	help   bool // offer the containers to helpers (helpPolicy.worth)
	spin   bool // helpers that join poll for the next call afterwards
}

// post records c with its ticket and offers it to as many helpers as can
// usefully join (at most Config.Workers - 1: the caller is the other
// one). Helpers then work on it while the caller fills the next
// container or works on earlier ones.
func (s *SecY) post(f *inflight, c *container, ticket uint64) {
	n := int32(c.n)
	nothing := c.finished.Load() == n // see noCrypto
	f.c[f.n], f.ticket[f.n], f.last[f.n] = c, ticket, nothing
	f.n++
	if nothing {
		return
	}
	c.ends.Store(uint64(n) << 32)
	if !f.help {
		return
	}
	if want := min(int32(s.cfg.Workers-1), (n-1)/claimFrames); want > 0 {
		c.postedAt, c.spin = nanotime(), f.spin
		c.refs.Add(want)
		for range want {
			select {
			case s.work <- c:
			default: // the queue is full: fewer join
				c.refs.Add(-1)
			}
		}
	}
}

// run seals or opens the containers of f together with the helpers and
// delivers them, oldest first, each when its crypto is done and its
// ticket's turn came; then f is empty. The caller claims runs of frames
// from the oldest container on, so it never waits for a helper to wake
// up before its first frame is done, and a caller whose helpers are busy
// does all the work itself. Having claimed all it could, it drains the
// work channel: its own posts that no helper took yet (so stale posts
// never pile up ahead of fresh ones, each holding a container) and other
// callers' containers, which it helps with like a helper would.
func (s *SecY) run(f *inflight) {
	w := workerPool.get() // not a container's: they are released as they go
	defer workerPool.put(w)
	var done int32
	head := 0
	for i := range f.n {
		d, l := s.claimAll(w, f.c[i], false)
		if traceOn {
			f.c[i].callerAt = nanotime()
		}
		done += d
		f.last[i] = f.last[i] || l
		for head <= i && s.ready(f, head) {
			s.deliverHead(f, head)
			head++
		}
	}
	for drained := false; !drained; {
		select {
		case o := <-s.work:
			if i := f.index(o); i >= 0 { // an own post no helper took
				d, l := s.claimAll(w, o, false)
				if traceOn {
					o.callerAt = nanotime()
				}
				done += d
				f.last[i] = f.last[i] || l
				o.release()
			} else {
				done += s.join(w, o)
			}
		default:
			drained = true
		}
	}
	s.workerCnt[len(s.workerCnt)-1].v.Add(uint64(done))
	for ; head < f.n; head++ {
		s.deliverHead(f, head)
	}
	f.n = 0
}

// index returns the position of c in f, or -1.
func (f *inflight) index(c *container) int {
	for i := range f.n {
		if f.c[i] == c {
			return i
		}
	}
	return -1
}

// ready reports whether container i of f could be delivered now without
// waiting: its crypto is done and its ticket is being served.
func (s *SecY) ready(f *inflight, i int) bool {
	c := f.c[i]
	return c.finished.Load() == int32(c.n) && s.turn(c).ready(f.ticket[i])
}

// turn returns the turnstile of c's direction.
func (s *SecY) turn(c *container) *turnstile {
	if c.tx {
		return &s.txTurn
	}
	return &s.rxTurn
}

// deliverHead waits until container i of f is sealed or opened and its
// turn came, delivers it and lets go of it.
func (s *SecY) deliverHead(f *inflight, i int) {
	c := f.c[i]
	if !f.last[i] {
		awaitFin(c)
	}
	var t0 int64
	if traceOn {
		t0 = nanotime()
	}
	t := s.turn(c)
	t.wait(f.ticket[i])
	if c.tx {
		s.deliverTX(c)
	} else {
		s.deliverRX(c)
	}
	t.done()
	if traceOn && c.postedAt != 0 {
		c.trace(t0, nanotime())
	}
	c.release()
	f.c[i] = nil
}

// trace adds an offered container's timeline (traceOn): its last slot
// was done at doneAt, its delivery ended at delivered.
func (c *container) trace(doneAt, delivered int64) {
	tl := &timeline
	tl.containers.Add(1)
	if fa := c.firstAt.Load(); fa != 0 {
		tl.joined.Add(1)
		tl.pickupNs.Add(fa - c.postedAt)
	}
	if c.callerAt != 0 {
		tl.callerNs.Add(c.callerAt - c.postedAt)
		tl.finNs.Add(max(0, doneAt-c.callerAt))
	}
	tl.delvNs.Add(delivered - doneAt)
}

// traceCall adds a call with helpers that started at start (traceOn).
func traceCall(start int64) {
	timeline.calls.Add(1)
	timeline.callNs.Add(nanotime() - start)
}

// finSpin bounds how long a caller polls for a helper to finish the last
// claim of a container before it parks: longer than a claim of 8 jumbo
// frames takes (12 us here), shorter than a wakeup on a VM.
const finSpin = 50 * time.Microsecond

// awaitFin waits for the helper that finishes c's last slot. It polls
// first, yielding the core, because parking would cost more than the
// wait: the helper would ready the caller onto its own core, and then
// wait itself for an idle core to wake up and take it (100-170 us here)
// before it could join the next call.
func awaitFin(c *container) {
	if _, _, got := pollRecv(c.fin, int64(finSpin)); !got {
		<-c.fin
	}
}

// pollRecv receives from ch, polling for up to d nanoseconds and yielding
// the core between polls; got reports whether anything (or the close,
// ok false) came in time.
func pollRecv[T any](ch <-chan T, d int64) (v T, ok, got bool) {
	for end := nanotime() + d; nanotime() < end; {
		select {
		case v, ok = <-ch:
			return v, ok, true
		default:
		}
		for k := 0; k < pollSpins && len(ch) == 0; k++ {
		}
		runtime.Gosched()
	}
	return v, true, false
}

// pollSpins is how many times pollRecv rereads the channel's length
// (about 2 us here) before it yields: a yield takes the scheduler's
// global lock, which the other core's poller takes too, and on this VM
// a cache line took up to ~240 ns to cross between the vCPUs. Yielding
// after every poll cost more than the reads it saved: 6 alternating pairs
// of RatioWorkers 1514 ran 1.05-1.22 times as fast at calls of 128
// frames and 1.02-1.16 at 2,048 in 7 of 8 cases (tx encrypted 2,048:
// 0.97).
const pollSpins = 1000

// noCrypto marks the filled container c as needing no crypto (received
// frames that are all delivered without it): nothing to claim, and no
// helper is offered it.
func (c *container) noCrypto() {
	c.finished.Store(int32(c.n))
}

// claimAll claims runs of slots of c until none is left and seals or
// opens them with scratch w. It returns how many frames it did and
// whether it finished the container's last frame. Received frames that
// need no crypto are not counted. It adds the slots it did to
// c.finished once, when nothing is left to claim, rather than per claim:
// every shared write is a cache line taken from the other core.
func (s *SecY) claimAll(w *worker, c *container, back bool) (done int32, last bool) {
	n := int32(c.n)
	var did int32
	who := 0 // timeline index: caller
	if back {
		who = 1
	}
	for {
		var t0 int64
		if traceOn {
			t0 = nanotime()
		}
		i, end := c.claim(back)
		if traceOn {
			t1 := nanotime()
			timeline.claims[who].Add(1)
			timeline.claimNs[who].Add(t1 - t0)
			t0 = t1
		}
		if i == end {
			break
		}
		if traceOn && back {
			c.firstAt.CompareAndSwap(0, t0)
		}
		if s.cfg.workerHook != nil {
			s.cfg.workerHook()
		}
		if c.tx {
			for j := i; j < end; j++ {
				if j+1 < end {
					prefetchHeader(c.s[j+1].buf)
				}
				w.sealSlot(&c.s[j])
			}
			done += end - i
		} else {
			c.prefetchSlots(i, end)
			prefetchWhole(c.s[i].buf, ICVLen)
			for j := i; j < end; j++ {
				if j+1 < end {
					prefetchWhole(c.s[j+1].buf, ICVLen)
				}
				opened, ok := w.openSlot(&c.s[j])
				c.ok[j] = ok
				if opened {
					done++
				}
			}
		}
		did += end - i
		if traceOn {
			timeline.frames[who].Add(int64(end - i))
			timeline.workNs[who].Add(nanotime() - t0)
		}
	}
	return done, did > 0 && c.finished.Add(did) == n
}

// claim takes a run of c's slots, [i, end), from the front of what is
// left (the caller) or from its back (helpers); i == end when none is
// left. Runs are guided: a quarter of what is left, at least
// claimFrames, so that the participants touch the shared word a few
// times per container while the last runs stay short (the one that
// finishes early waits at most one short run for the other). Taking
// from both ends gives the caller and a helper each a contiguous share
// of the container when both are there from the start, as a static
// split would, so each core reads slots and frames in order (prefetched)
// and, for frames it saw before, from its own cache.
func (c *container) claim(back bool) (i, end int32) {
	for {
		v := c.ends.Load()
		lo, hi := int32(uint32(v)), int32(v>>32)
		if lo >= hi {
			return 0, 0
		}
		size := min(hi-lo, max(claimFrames, (hi-lo)/4))
		if back {
			if c.ends.CompareAndSwap(v, uint64(hi-size)<<32|uint64(lo)) {
				return hi - size, hi
			}
		} else if c.ends.CompareAndSwap(v, uint64(hi)<<32|uint64(lo+size)) {
			return lo, lo + size
		}
	}
}

// routineHelper joins callers' containers from the work channel.
// Owner: SecY; stop: s.work closed by Close (after all callers left).
func (s *SecY) routineHelper(id int) {
	defer s.wg.Done()
	s.log.Debug("routineHelper started", "worker", id)
	defer s.log.Debug("routineHelper stopped", "worker", id)
	w := new(worker)
	var spin int64 // how long to poll before parking
	for {
		var c *container
		ok, parked := true, false
		select {
		case c, ok = <-s.work:
		default:
			if spin > 0 {
				c, ok = s.spinForWork(spin)
			}
			if c == nil && ok {
				parked = true
				c, ok = <-s.work
			}
		}
		if !ok {
			return
		}
		if parked {
			s.help.woke(c.postedAt)
		}
		spin = 0
		if c.spin {
			spin = s.help.spinTime()
		}
		if done := s.join(w, c); done > 0 {
			s.workerCnt[id].v.Add(uint64(done))
		}
	}
}

// spinForWork polls the work channel for d nanoseconds, yielding the
// core between polls, and returns the first container posted (ok false:
// the channel was closed) or nil.
func (s *SecY) spinForWork(d int64) (c *container, ok bool) {
	s.help.spinning.Add(1)
	defer s.help.spinning.Add(-1)
	c, ok, _ = pollRecv(s.work, d)
	return c, ok
}

// join claims what is left of another goroutine's container c, tells
// its caller if it finished the last frame, lets go of c and returns how
// many frames it did.
func (s *SecY) join(w *worker, c *container) int32 {
	done, last := s.claimAll(w, c, true)
	if last {
		c.fin <- struct{}{}
	}
	c.release()
	return done
}

// turnstile lets concurrent callers deliver in the order they took
// tickets while their crypto overlaps: a ticket lock whose holder hands
// its frames on.
type turnstile struct {
	issued  atomic.Uint64
	mu      sync.Mutex
	cond    sync.Cond     // on mu
	serving atomic.Uint64 // written under mu
}

// take returns the next ticket. Every ticket must be served: wait, then
// done.
func (t *turnstile) take() uint64 { return t.issued.Add(1) - 1 }

func (t *turnstile) init() { t.cond.L = &t.mu }

// ready reports whether ticket is being served.
func (t *turnstile) ready(ticket uint64) bool { return t.serving.Load() == ticket }

// wait returns, holding the turnstile, once every earlier ticket was
// served.
func (t *turnstile) wait(ticket uint64) {
	t.mu.Lock()
	for t.serving.Load() != ticket {
		t.cond.Wait()
	}
}

// done serves the next ticket.
func (t *turnstile) done() {
	t.serving.Add(1)
	t.cond.Broadcast()
	t.mu.Unlock()
}

// grow returns sl.store resized to n bytes, reallocating only if its
// capacity is too small (at least 1536 bytes, so that slots settle
// quickly).
func (sl *slot) grow(n int) []byte {
	if cap(sl.store) < n {
		sl.store = make([]byte, n, max(n, 1536))
	}
	sl.store = sl.store[:n]
	return sl.store
}

// nonce writes the 96-bit GCM IV of a frame into iv (802.1AE 14.5: SCI ||
// PN32; 802.1AEbw 14.7: (SSCI || PN64) XOR Salt) and returns it.
func nonce(iv *[12]byte, xpn bool, sci SCI, pn uint64, ssci uint32, salt *[12]byte) []byte {
	if !xpn {
		binary.BigEndian.PutUint64(iv[0:8], uint64(sci))
		binary.BigEndian.PutUint32(iv[8:12], uint32(pn))
		return iv[:]
	}
	binary.BigEndian.PutUint32(iv[0:4], ssci^binary.BigEndian.Uint32(salt[0:4]))
	binary.BigEndian.PutUint64(iv[4:12], pn^binary.BigEndian.Uint64(salt[4:12]))
	return iv[:]
}

// worker holds one worker's scratch space. The IV lives here rather than
// in a local variable because passing a stack array to cipher.AEAD (an
// interface) would make it escape to the heap on every frame.
type worker struct {
	iv [12]byte
}

// workerPool holds the crypto scratch of callers (helpers have their own).
var workerPool = freeList[worker]{max: 64, new: func() *worker { return new(worker) }}

// prefetchFrame starts loading the cache line that holds frame b's
// header, so that it arrives while the current frame's crypto runs:
// frames of a batch are far enough apart that each header is otherwise a
// cache miss the CPU waits for (perf: half of parseFrame's time was its
// first load). A plain load would not do: the CPU cannot retire past it
// until the line arrives.
func prefetchFrame(b []byte) {
	if len(b) > 0 {
		prefetch(&b[0])
	}
}

// prefetchWhole starts loading every cache line of frame b and of the
// after octets that follow it (a received slot's ICV), so that the lines
// arrive while the frame before it is opened. A received frame is cold:
// a ring's frames were written by whichever core ran the softirq, and
// the hardware prefetcher, which stops at page boundaries, left most of
// each frame's lines to be waited for one after the other. Receive ran
// 5-17 % faster per frame with one worker (5 alternating pairs of
// RatioWorkers, 1-worker ns/frame paired 0.84-0.98 in 8 cases) and up to
// 16 % with two; with frames still in L1 (RatioVsBare) it costs 0-3 %.
func prefetchWhole(b []byte, after int) {
	if len(b) > 0 {
		prefetchSpan(&b[0], len(b)+after)
	}
}

// prefetchSlots starts loading slots [i, end) of c, a run just claimed.
// The caller filled them on its own core, so for a helper each slot was
// otherwise a miss before its frame could even be located; for the
// caller the lines are usually still in cache and the prefetch is cheap.
func (c *container) prefetchSlots(i, end int32) {
	prefetchSpan((*byte)(unsafe.Pointer(&c.s[i])), int(end-i)*int(unsafe.Sizeof(slot{})))
}

// prefetchHeader starts taking the first cache line of frame b (where
// sealSlot writes the addresses and the SecTAG) for writing while the
// frame before it is sealed. A frame that Config.TX read on the caller's
// core after the last round had that line shared there, and the store
// that begins sealing it waited for the other core to give it up (up to
// ~240 ns a line on this VM, about as long as sealing a standard frame):
// 12 alternating pairs of RatioWorkers tx 1514 ran 1.01-1.13 times as
// fast (medians of 6 in two sets; the same on receive, where the caller
// only read the header before, was 0.98-1.02, not kept).
func prefetchHeader(b []byte) {
	if len(b) > 0 {
		prefetchWrite(&b[0])
	}
}

// sealSlot protects one frame: it writes the MAC addresses and the SecTAG
// into sl.buf, which has room for the Secure Data and ICV after them, and
// seals. sl.src is the caller's frame (Protect) or nil when buf already
// holds the Secure Data, preceded by the MAC addresses where the SecTAG
// goes (ProtectInPlace: they move into the headroom first). Encryption
// reads the plaintext straight from src (no separate copy);
// integrity-only copies it first, here on the worker so that the copy is
// spread over the cores and GHASH reads it from cache.
func (w *worker) sealSlot(sl *slot) {
	sa := sl.txsa
	b := sl.buf
	end := sl.dataOff + sl.dataLen
	if sl.src == nil {
		copy(b[:addrsLen], b[sl.dataOff-addrsLen:sl.dataOff])
	} else {
		copy(b[:addrsLen], sl.src[:addrsLen])
	}
	f := SecTAGFields{TCI: sl.tci, AN: sa.an, PN: uint32(sl.pn), SCI: sl.sci}
	if sl.dataLen < ShortLenLimit {
		f.SL = uint8(sl.dataLen)
	}
	SecTAG(b[addrsLen:]).Encode(&f)
	iv := nonce(&w.iv, sa.xpn, sl.sci, sl.pn, sa.ssci, &sa.salt)
	switch {
	case sl.src == nil && sl.enc: // ProtectInPlace
		sa.aead.Seal(b[sl.dataOff:sl.dataOff], iv, b[sl.dataOff:end], b[:sl.dataOff])
	case sl.enc:
		sa.aead.Seal(b[sl.dataOff:sl.dataOff], iv, sl.src[addrsLen:], b[:sl.dataOff])
	default:
		if sl.src != nil {
			copy(b[sl.dataOff:end], sl.src[addrsLen:])
		}
		sa.aead.Seal(b[end:end], iv, nil, b[:end])
	}
}

// openSlot verifies (and decrypts) one received frame in place and
// reports the verdict (ok); opened is false for a frame that needs no
// crypto. It also moves the MAC addresses up against the Secure Data,
// where judge cuts the frame it delivers: here, while the header is in
// this core's cache, rather than in judge, whose write had to take the
// line back from the helper's core.
func (w *worker) openSlot(sl *slot) (opened, ok bool) {
	if sl.pass {
		return false, false
	}
	if !sl.skip {
		sa := sl.rxsa
		iv := nonce(&w.iv, sa.xpn, sl.sci, sl.pn, sa.ssci, &sa.salt)
		b := sl.buf
		end := sl.dataOff + sl.dataLen
		var err error
		if sl.enc {
			_, err = sa.aead.Open(b[sl.dataOff:sl.dataOff], iv, b[sl.dataOff:end+ICVLen], b[:sl.dataOff])
		} else {
			_, err = sa.aead.Open(nil, iv, b[end:end+ICVLen], b[:end])
		}
		opened, ok = true, err == nil
	}
	tl := sl.dataOff - addrsLen
	copy(sl.buf[tl:tl+addrsLen], sl.buf[:addrsLen])
	return opened, ok
}
