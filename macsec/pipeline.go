package macsec

import (
	"encoding/binary"
	"sync"
)

// slot is one frame in a container. buf keeps its storage across uses.
type slot struct {
	buf     []byte // tx: the frame being built in store; rx: the caller's frame up to the ICV
	src     []byte // tx: the caller's frame
	store   []byte // tx: pooled storage, kept across uses
	txsa    *txSA
	rxsa    *rxSA
	sci     SCI
	pn      uint64
	dataOff int  // offset of the Secure Data
	dataLen int  // Secure Data length
	enc     bool // E=1 (rx: C=1)
	skip    bool // rx: no crypto (validateFrames Disabled, C=0)
	ok      bool // rx: ICV verified
}

// container is the unit of work of the pipeline: up to SecY.batch frames
// of one SC, in arrival order. Its producer locks mu before it queues the
// container on the SC's ordered channel and on the work channel; the
// worker unlocks it when every frame has its verdict; the SC's sequential
// goroutine locks it, in queue order, consumes it and signals done; the
// producer, waiting on done, returns it to the pool.
type container struct {
	mu   sync.Mutex
	tx   bool
	sc   *rxSC // rx only
	n    int
	done chan struct{} // capacity 1; sent to once per use
	s    [maxBatchFrames]slot
	out  [maxBatchFrames][]byte
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
// storage, grown only in the slots used: at most 128 x 32 x 1536 octets
// for standard frames with several workers, 128 x 128 x 1536 with one).
const maxFreeContainers = 128

var containerPool = freeList[container]{
	max: maxFreeContainers,
	new: func() *container { return &container{done: make(chan struct{}, 1)} },
}

// maxPending is how many containers one Protect or Verify call keeps in
// flight before it waits for the oldest.
const maxPending = 16

// pending is a producer's list of queued containers, oldest first.
type pending struct {
	c [maxPending]*container
	n int
	w *worker // scratch for crypto done by the caller; from workerPool
}

// worker returns the caller's crypto scratch, taking it from the pool on
// first use (wait returns it).
func (p *pending) worker() *worker {
	if p.w == nil {
		p.w = workerPool.get()
	}
	return p.w
}

// add records c, first waiting for the oldest container if the list is
// full.
func (p *pending) add(s *SecY, c *container) {
	if p.n == maxPending {
		p.waitOldest(s)
	}
	p.c[p.n] = c
	p.n++
}

// waitOldest waits until the oldest container was consumed and returns it
// to the pool. While it waits, the caller does crypto work from the work
// channel itself (like a worker) instead of idling: that saves a wakeup
// and a goroutine switch per container and keeps a core busy while
// sleeping workers wake up. Order is unaffected: only the SC's sequential
// goroutine delivers. closeMu is held shared, so s.work is open.
func (p *pending) waitOldest(s *SecY) {
	c := p.c[0]
	for done := false; !done; {
		select {
		case <-c.done:
			done = true
		case wc := <-s.work:
			s.process(p.worker(), wc, len(s.workerCnt)-1)
		}
	}
	putContainer(c)
	copy(p.c[:], p.c[1:p.n])
	p.n--
	p.c[p.n] = nil
}

// wait waits until every recorded container was consumed.
func (p *pending) wait(s *SecY) {
	for p.n > 0 {
		p.waitOldest(s)
	}
	if p.w != nil {
		workerPool.put(p.w)
		p.w = nil
	}
}

func getContainer() *container { return containerPool.get() }

// putContainer empties c and returns it to the pool.
func putContainer(c *container) {
	c.reset()
	containerPool.put(c)
}

// reset empties c, clearing its pointers so that an idle container keeps
// no SA, SC or caller's frame alive. Frame storage is kept.
func (c *container) reset() {
	for i := range c.n {
		c.s[i].txsa, c.s[i].rxsa = nil, nil
		c.s[i].src, c.s[i].buf = nil, nil
		c.out[i] = nil
	}
	c.sc = nil
	c.n = 0
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

var workerPool = freeList[worker]{max: 64, new: func() *worker { return new(worker) }}

// routineWorker seals and opens containers from the shared work channel.
// Owner: SecY; stop: s.work closed by Close (after all producers left).
func (s *SecY) routineWorker(id int) {
	defer s.wg.Done()
	s.log.Debug("routineWorker started", "worker", id)
	defer s.log.Debug("routineWorker stopped", "worker", id)
	w := new(worker)
	for c := range s.work {
		s.process(w, c, id)
	}
}

// process seals or opens container c, counts its frames for worker id
// and unlocks it.
func (s *SecY) process(w *worker, c *container, id int) {
	if s.cfg.workerHook != nil {
		s.cfg.workerHook()
	}
	if c.tx {
		w.seal(c)
	} else {
		w.open(c)
	}
	s.workerCnt[id].v.Add(uint64(c.n))
	c.mu.Unlock()
}

// seal protects every frame of a tx container (see sealSlot).
func (w *worker) seal(c *container) {
	for i := range c.n {
		w.sealSlot(&c.s[i])
	}
}

// sealSlot protects one frame. sl.buf holds DA SA SecTAG, with room for
// the Secure Data and ICV; sl.src is the caller's frame (Protect) or nil
// when buf already holds the Secure Data (ProtectInPlace). Encryption
// reads the plaintext straight from src (no separate copy);
// integrity-only copies it first, here on the worker so that the copy is
// spread over the cores and GHASH reads it from cache.
func (w *worker) sealSlot(sl *slot) {
	sa := sl.txsa
	iv := nonce(&w.iv, sa.xpn, sl.sci, sl.pn, sa.ssci, &sa.salt)
	b := sl.buf
	end := sl.dataOff + sl.dataLen
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

// open verifies (and decrypts) every frame of an rx container in place
// and records the verdict in each slot.
func (w *worker) open(c *container) {
	for i := range c.n {
		w.openSlot(&c.s[i])
	}
}

// openSlot verifies (and decrypts) one received frame in place and
// records the verdict in sl.ok.
func (w *worker) openSlot(sl *slot) {
	if sl.skip {
		return
	}
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
	sl.ok = err == nil
}
