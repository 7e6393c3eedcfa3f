package macsec

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The ratio benchmarks interleave the two variants they compare in short
// rounds (one batch of 128 frames each, alternating which goes first), so
// that load from other processes on the machine hits both alike. They
// report each variant's ns/frame and the ratio.

// ratioBatch is the batch size of one round: 128 (the default batch size
// of the router's ports), or MACSEC_BENCH_BATCH.
var ratioBatch = func() int {
	if n, err := strconv.Atoi(os.Getenv("MACSEC_BENCH_BATCH")); err == nil && n > 0 {
		return n
	}
	return 128
}()

// benchPipe is a Protect -> Verify pair; run is synchronous because
// Protect returns only after Config.TX (which calls Verify, which returns
// after Config.RX) has run for every frame.
type benchPipe struct {
	tx, rx  *SecY
	frames  [][]byte
	n       uint64
	inPlace bool
}

// newBenchPipe builds the pair; inPlace uses ProtectInPlace (frames built
// with headroom, as a link endpoint would) instead of Protect (one copy
// for integrity-only frames).
func newBenchPipe(b *testing.B, size int, enc bool, workers int, inPlace bool) *benchPipe {
	p := &benchPipe{inPlace: inPlace}
	cs := GCMAES128
	txCfg := testConfig(cs, enc, func(frames [][]byte) { p.rx.Verify(frames) }, func([][]byte) {})
	txCfg.Workers, txCfg.LowerMTU, txCfg.AlwaysParallel = workers, 9100, false
	rxCfg := testConfig(cs, false, func([][]byte) {}, func(frames [][]byte) { p.n += uint64(len(frames)) })
	rxCfg.SCI = peerSCI
	rxCfg.ReplayProtect = true // window 0: any reordering shows as InPktsLate
	rxCfg.Workers, rxCfg.LowerMTU, rxCfg.AlwaysParallel = workers, 9100, false
	var err error
	if p.rx, err = New(rxCfg, nil); err != nil {
		b.Fatal(err)
	}
	if p.tx, err = New(txCfg, nil); err != nil {
		b.Fatal(err)
	}
	sa := SAConfig{AN: 0, Key: testKey(cs)}
	if err := p.rx.AddRXSC(txCfg.SCI); err != nil {
		b.Fatal(err)
	}
	if err := p.rx.InstallRXSA(txCfg.SCI, sa); err != nil {
		b.Fatal(err)
	}
	if err := p.tx.InstallTXSA(sa); err != nil {
		b.Fatal(err)
	}
	p.frames = make([][]byte, ratioBatch)
	for i := range p.frames {
		p.frames[i] = headroomFrame(size-Overhead, uint32(i), inPlace)
	}
	return p
}

// headroomFrame returns testFrame(n, seq), with Headroom and Tailroom
// around it if inPlace. After ProtectInPlace the buffer holds a protected
// frame, and the next round protects that as if it were plaintext: the
// bytes do not matter to the cost.
func headroomFrame(n int, seq uint32, inPlace bool) []byte {
	if !inPlace {
		return testFrame(n, seq)
	}
	b := make([]byte, Headroom+n, Headroom+n+Tailroom)
	copy(b[Headroom:], testFrame(n, seq))
	return b
}

func (p *benchPipe) run() {
	if p.inPlace {
		p.tx.ProtectInPlace(p.frames)
		return
	}
	p.tx.Protect(p.frames)
}

// close stops the pair and checks that every frame arrived, in order.
func (p *benchPipe) close(b *testing.B) {
	p.tx.Close()
	p.rx.Close()
	sc := p.rx.RXSCStats(p.tx.cfg.SCI)
	if late, ok := sc.InPktsLate.Load(), sc.InPktsOK.Load(); late != 0 || ok != p.n {
		b.Fatalf("InPktsLate %d, InPktsOK %d, delivered %d", late, ok, p.n)
	}
}

func newBare(b *testing.B, size int, enc, batched bool) func() {
	aead, err := newAEAD(GCMAES128, testKey(GCMAES128))
	if err != nil {
		b.Fatal(err)
	}
	frames := make([][]byte, ratioBatch)
	for i := range frames {
		frames[i] = make([]byte, size)
	}
	var iv [12]byte
	hdr, end := 12+SecTAGSCILen, size-ICVLen
	seal := func(i int, f []byte) {
		iv[11] = byte(i)
		if enc {
			aead.Seal(f[hdr:hdr], iv[:], f[hdr:end], f[:hdr])
		} else {
			aead.Seal(f[end:end], iv[:], nil, f[:end])
		}
	}
	open := func(i int, f []byte) {
		iv[11] = byte(i)
		var err error
		if enc {
			_, err = aead.Open(f[hdr:hdr], iv[:], f[hdr:], f[:hdr])
		} else {
			_, err = aead.Open(nil, iv[:], f[end:], f[:end])
		}
		if err != nil {
			panic(err)
		}
	}
	if batched {
		return func() {
			for i, f := range frames {
				seal(i, f)
			}
			for i, f := range frames {
				open(i, f)
			}
		}
	}
	return func() {
		for i, f := range frames {
			seal(i, f)
			open(i, f)
		}
	}
}

// cost is the wall-clock time and the process CPU time (all threads,
// getrusage) a round took. On a machine shared with other work, CPU time
// is what the round itself consumed; wall time also includes time the
// process was not scheduled.
type cost struct{ wall, cpu time.Duration }

func (c *cost) add(d cost) { c.wall += d.wall; c.cpu += d.cpu }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f and returns what it cost.
func measure(f func()) cost {
	c0, t0 := cpuNow(), time.Now()
	f()
	return cost{time.Since(t0), cpuNow() - c0}
}

// timed wraps f into a function that returns what it cost.
func timed(f func()) func() cost {
	return func() cost { return measure(f) }
}

// interleave runs a and c alternately, one batch of ratioBatch frames per
// call, until each processed b.N frames, and returns the total time each
// reported.
func interleave(b *testing.B, a, c func() cost) (ta, tc cost) {
	ta, tc, _, _ = interleaveRuns(b, 1, a, c)
	return ta, tc
}

// interleaveRuns is interleave with runs calls of a, then runs calls of c,
// and so on: each variant sees calls back to back, as from a loaded port,
// while slow drifts of the machine still hit both alike. fa and fc are
// what the first call of each run cost (included in ta and tc).
func interleaveRuns(b *testing.B, runs int, a, c func() cost) (ta, tc, fa, fc cost) {
	// Collect the setup's garbage now: a collection still marking during
	// the timed calls would take one of the cores (GOMAXPROCS/4 of them
	// are the collector's while it runs) from the variant using all.
	runtime.GC()
	for range (8 + runs - 1) / runs * runs { // warm up: whole runs (rxOnly seals a run at a time)
		a()
		c()
	}
	run := func(f func() cost, total, first *cost) {
		for i := range runs {
			d := f()
			total.add(d)
			if i == 0 {
				first.add(d)
			}
		}
		settle(runs)
	}
	b.ResetTimer()
	for r := 0; r*ratioBatch < b.N; r += runs {
		run(a, &ta, &fa)
		run(c, &tc, &fc)
	}
	return ta, tc, fa, fc
}

// settle pauses between the runs of interleaveRuns (runs > 1) for longer
// than a helper polls for work after a call (maxSpin), so that one
// variant's helpers are parked before the other variant's run starts:
// otherwise they polled on a core through its first call, and the
// kernel, which brings other threads' CPU time up to date only at its
// ticks, credited their last milliseconds to that variant's calls (the
// one-worker TX variant read 1.17-1.27 cores of process CPU).
func settle(runs int) {
	if runs > 1 {
		time.Sleep(2 * maxSpin)
	}
}

// report prints wall ns/frame of both variants and the ratio f(a, c) of
// their wall times; with cpu it also prints the ratio of their CPU times.
func report(b *testing.B, nameA string, ta cost, nameC string, tc cost, ratioName string, f func(a, c float64) float64, cpu bool) {
	frames := float64((b.N + ratioBatch - 1) / ratioBatch * ratioBatch)
	b.ReportMetric(float64(ta.wall.Nanoseconds())/frames, nameA+"-ns/frame")
	b.ReportMetric(float64(tc.wall.Nanoseconds())/frames, nameC+"-ns/frame")
	b.ReportMetric(f(float64(ta.wall), float64(tc.wall)), ratioName)
	if cpu {
		b.ReportMetric(f(float64(ta.cpu), float64(tc.cpu)), ratioName+"-cpu")
	} else {
		// How many cores each variant actually kept busy: on a machine
		// shared with other work this bounds the speedup.
		b.ReportMetric(float64(ta.cpu)/float64(ta.wall), nameA+"-cores")
		b.ReportMetric(float64(tc.cpu)/float64(tc.wall), nameC+"-cores")
	}
	b.ReportMetric(0, "ns/op")
}

// reportSteady prints the speedup of RatioWorkers without the first call
// of each run (ta, tc and the first calls' fa, fc): the steady state of a
// loaded port, whose helpers poll between calls instead of parking. The
// first call of a run starts with them parked (the other variant ran
// meanwhile) and pays a wakeup, 0.1-0.9 ms on this VM.
func reportSteady(b *testing.B, ta, fa, tc, fc cost) {
	if steady := tc.wall - fc.wall; steady > 0 {
		b.ReportMetric(float64(ta.wall-fa.wall)/float64(steady), "steady-speedup")
	}
}

func div(a, c float64) float64  { return a / c }
func rdiv(a, c float64) float64 { return c / a }

// BenchmarkRatioVsBare is acceptance benchmark (a): our TX+RX per frame
// (one crypto worker per SecY) against bare AES-GCM Seal+Open on frames of
// the same size. Run with -cpu 1. Target: ratio <= 1.1. "inplace" is
// ProtectInPlace (no copy anywhere), "copy" is Protect (integrity-only
// frames are copied once, on the worker). The baseline seals and opens
// each frame back to back (the Open reads a frame still in L1); the
// "inplace-vs-batched" variant compares with a baseline that seals the
// batch of 128 frames and then opens it, the memory access pattern of any
// batched pipeline.
func BenchmarkRatioVsBare(b *testing.B) {
	for _, size := range benchSizes {
		for _, enc := range []bool{false, true} {
			for _, v := range []struct {
				name             string
				inPlace, batched bool
			}{{"inplace", true, false}, {"copy", false, false}, {"inplace-vs-batched", true, true}} {
				b.Run(fmt.Sprintf("%d/%s/%s", size, modeName(enc), v.name), func(b *testing.B) {
					p := newBenchPipe(b, size, enc, 1, v.inPlace)
					bare := newBare(b, size, enc, v.batched)
					b.ReportAllocs()
					ours, base := interleave(b, timed(p.run), timed(bare))
					b.StopTimer()
					p.close(b)
					report(b, "ours", ours, "bare", base, "ours/bare", div, true)
				})
			}
		}
	}
}

// txOnly is a transmitting SecY whose Config.TX only checks PN order.
type txOnly struct {
	s      *SecY
	frames [][]byte
	// pristine, if set, is written over frames before every call, in the
	// timed part: the router's netstack writes each frame fresh into the
	// link endpoint's buffer on the calling core, so a helper reads lines
	// the caller just wrote, and the caller then rewrites lines a helper
	// read. Without it each buffer keeps the frame sealed the call before.
	pristine [][]byte
	last     uint32
	bad      bool
}

func newTXOnly(b *testing.B, size int, enc bool, workers int, fresh bool) *txOnly { // uses ProtectInPlace
	t := &txOnly{}
	cfg := testConfig(GCMAES128, enc, func(frames [][]byte) {
		for _, f := range frames {
			pn := SecTAG(f[12:]).PN()
			t.bad = t.bad || pn <= t.last
			t.last = pn
		}
	}, func([][]byte) {})
	cfg.Workers, cfg.LowerMTU, cfg.AlwaysParallel = workers, 9100, false
	var err error
	if t.s, err = New(cfg, nil); err != nil {
		b.Fatal(err)
	}
	if err := t.s.InstallTXSA(SAConfig{AN: 0, Key: testKey(GCMAES128)}); err != nil {
		b.Fatal(err)
	}
	t.frames = make([][]byte, ratioBatch)
	for i := range t.frames {
		t.frames[i] = headroomFrame(size-Overhead, uint32(i), true)
		if fresh {
			t.pristine = append(t.pristine, slices.Clone(t.frames[i]))
		}
	}
	return t
}

func (t *txOnly) run() cost {
	return measure(func() {
		for i, p := range t.pristine {
			t.frames[i] = t.frames[i][:len(p)]
			copy(t.frames[i], p)
		}
		t.s.ProtectInPlace(t.frames)
	})
}

// rxOnly is a receiving SecY (replay window 0) fed the same 128
// protected frames with increasing PNs every round; the frames are
// restored (Verify works in place) outside the timed part, as a receive
// ring would hold fresh frames.
type rxOnly struct {
	s        *SecY
	pristine [][]byte
	frames   [][]byte // workerRuns() batches, sealed together
	next     int      // the next batch to verify
	in       [][]byte // the batch handed to Verify, which may rewrite it
	pn       uint64
	poolPN   uint64 // PN of frames[0]
	key      Key
	aead     cipher.AEAD
	iv       [12]byte
	enc      bool
	n        uint64
}

func newRXOnly(b *testing.B, size int, enc bool, workers int) *rxOnly {
	r := &rxOnly{key: testKey(GCMAES128), enc: enc, pn: 1}
	cfg := testConfig(GCMAES128, false, func([][]byte) {}, func(frames [][]byte) { r.n += uint64(len(frames)) })
	cfg.ReplayProtect = true
	cfg.Workers, cfg.LowerMTU, cfg.AlwaysParallel = workers, 9100, false
	var err error
	if r.s, err = New(cfg, nil); err != nil {
		b.Fatal(err)
	}
	if err := r.s.AddRXSC(peerSCI); err != nil {
		b.Fatal(err)
	}
	if err := r.s.InstallRXSA(peerSCI, SAConfig{AN: 0, Key: r.key}); err != nil {
		b.Fatal(err)
	}
	if r.aead, err = newAEAD(GCMAES128, r.key); err != nil {
		b.Fatal(err)
	}
	for i := range ratioBatch {
		r.pristine = append(r.pristine, testFrame(size-Overhead, uint32(i)))
	}
	for range workerRuns() * ratioBatch {
		r.frames = append(r.frames, make([]byte, size))
	}
	r.in = make([][]byte, ratioBatch)
	return r
}

// seal builds in f (exactly the protected frame's length) what
// sealFrame would return for plain at PN r.pn, without allocating:
// garbage made between the timed calls would make the collector compete
// with them for the cores.
func (r *rxOnly) seal(f, plain []byte) {
	sealInto(f[:0], r.aead, false, &r.iv, 0, r.pn, r.enc, plain)
}

// run times Verify on the next batch of ratioBatch frames. Every
// workerRuns() calls it first seals the next workerRuns() batches (untimed),
// so that the calls of one run of interleaveRuns follow each other
// closely, as on a loaded port.
func (r *rxOnly) run(b *testing.B) cost {
	return r.runWith(func(frames [][]byte, _ uint64) { r.s.Verify(frames) })
}

// runWith is run with verify in place of Verify; pn0 is the PN of the
// batch's first frame (the others follow in order).
func (r *rxOnly) runWith(verify func(frames [][]byte, pn0 uint64)) cost {
	if r.next == 0 {
		r.poolPN = r.pn
		for i, f := range r.frames {
			r.seal(f, r.pristine[i%ratioBatch])
			r.pn++
		}
	}
	copy(r.in, r.frames[r.next*ratioBatch:])
	pn0 := r.poolPN + uint64(r.next*ratioBatch)
	r.next = (r.next + 1) % workerRuns()
	return measure(func() { verify(r.in, pn0) })
}

// openBare verifies (and decrypts) frames in place with bare AES-GCM Open,
// the first at PN pn0: the crypto of Verify, nothing else.
func (r *rxOnly) openBare(frames [][]byte, pn0 uint64, iv *[12]byte) {
	const hdr = addrsLen + SecTAGSCILen
	for i, f := range frames {
		nv := nonce(iv, false, peerSCI, pn0+uint64(i), 0, &testSalt)
		var err error
		if r.enc {
			_, err = r.aead.Open(f[hdr:hdr], nv, f[hdr:], f[:hdr])
		} else {
			end := len(f) - ICVLen
			_, err = r.aead.Open(nil, nv, f[end:], f[:end])
		}
		if err != nil {
			panic(err)
		}
	}
}

// BenchmarkRatioWorkers is acceptance benchmark (b): runtime.NumCPU()
// workers against one, per direction, with calls of 128 frames (a port's
// batch) and of 2,048 (a burst of 16 batches, as a loaded 10 GbE port
// delivers them); MACSEC_BENCH_BATCH picks one size instead. The SecYs
// decide themselves whether to wake their helpers (parallel: auto). Order
// is checked: PNs leaving TX must strictly increase, and RX runs with
// replay window 0 (any reordering would be InPktsLate). tx seals the
// same buffers call after call, so a frame's lines stay wherever they
// were sealed last; tx-fresh writes every frame anew on the caller first,
// as the router's netstack does, so that what moving frames between
// cores costs is counted. Run with -cpu $(nproc). Target: speedup >= 1.6
// on 2 cores.
func BenchmarkRatioWorkers(b *testing.B) {
	calls := []int{128, 2048}
	if os.Getenv("MACSEC_BENCH_BATCH") != "" {
		calls = []int{ratioBatch}
	}
	saved := ratioBatch
	defer func() { ratioBatch = saved }()
	for _, n := range calls {
		ratioBatch = n // sub-benchmarks run one after another
		b.Run(fmt.Sprintf("calls=%d", n), benchRatioWorkers)
	}
}

// workerRunFrames is how many frames each variant of
// BenchmarkRatioWorkers takes in a row, in calls of ratioBatch frames: a
// SecY under load sees calls back to back, so its helpers are mostly
// awake; the first call of each run starts with them parked. A run is the
// same stretch of load whatever the call size (8 calls of 2,048 frames,
// 128 of 128): counted in calls, 8 calls of 128 frames (0.4 ms) were over
// before a parked helper had woken up.
const workerRunFrames = 16384

// workerRuns is how many calls in a row each variant makes.
func workerRuns() int { return max(1, workerRunFrames/ratioBatch) }

func benchRatioWorkers(b *testing.B) {
	for _, size := range benchSizes {
		for _, enc := range []bool{false, true} {
			// Calibration: the same work with bare AES-GCM, on one
			// goroutine against runtime.NumCPU() goroutines that each take
			// a contiguous share of every call and poll between calls (so
			// no wakeup is paid): the speedup this machine gives right
			// now with the least coordination there can be, the ceiling
			// of the tx and rx speedups below. bare-tx seals the same
			// frames as tx and reads each one's PN on the caller after
			// the call, as tx's Config.TX does; bare-rx opens frames
			// sealed like rx's. The -fresh variants write every frame
			// anew on the caller before each call (the copy is timed in
			// both), as the router's netstack does.
			for _, fresh := range []bool{false, true} {
				b.Run(fmt.Sprintf("bare-%s/%d/%s", txName(fresh), size, modeName(enc)), func(b *testing.B) {
					seal, consume, refill := newBareSeal(b, size, enc, ratioBatch)
					if !fresh {
						refill = func() {}
					}
					pool := newSpinPool(runtime.NumCPU(), func(_, lo, hi int) { seal(lo, hi) })
					defer pool.close()
					t1, tn, f1, fn := interleaveRuns(b, workerRuns(), timed(func() {
						refill()
						seal(0, ratioBatch)
						consume()
					}), func() cost {
						c := measure(func() {
							refill()
							pool.run(ratioBatch)
							consume()
						})
						pool.ran()
						return c
					})
					report(b, "1goroutine", t1, fmt.Sprintf("%dgoroutines", runtime.NumCPU()), tn, "speedup", div, false)
					reportSteady(b, t1, f1, tn, fn)
				})
			}
			b.Run(fmt.Sprintf("bare-rx/%d/%s", size, modeName(enc)), func(b *testing.B) {
				one := newRXOnly(b, size, enc, 1)
				all := newRXOnly(b, size, enc, 1)
				defer one.s.Close()
				defer all.s.Close()
				var iv [12]byte
				var in [][]byte // the call's frames and first PN, for the shares
				var pn0 uint64
				ivs := make([][12]byte, runtime.NumCPU())
				pool := newSpinPool(runtime.NumCPU(), func(k, lo, hi int) {
					all.openBare(in[lo:hi], pn0+uint64(lo), &ivs[k])
				})
				defer pool.close()
				t1, tn, f1, fn := interleaveRuns(b, workerRuns(), func() cost {
					return one.runWith(func(frames [][]byte, pn uint64) { one.openBare(frames, pn, &iv) })
				}, func() cost {
					c := all.runWith(func(frames [][]byte, pn uint64) {
						in, pn0 = frames, pn
						pool.run(len(frames))
					})
					pool.ran()
					return c
				})
				report(b, "1goroutine", t1, fmt.Sprintf("%dgoroutines", runtime.NumCPU()), tn, "speedup", div, false)
				reportSteady(b, t1, f1, tn, fn)
			})
			for _, fresh := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/%d/%s", txName(fresh), size, modeName(enc)), func(b *testing.B) {
					one := newTXOnly(b, size, enc, 1, fresh)
					all := newTXOnly(b, size, enc, runtime.NumCPU(), fresh)
					b.ReportAllocs()
					t1, tn, f1, fn := interleaveRuns(b, workerRuns(), one.run, all.run)
					b.StopTimer()
					one.s.Close()
					all.s.Close()
					if one.bad || all.bad {
						b.Fatal("PNs out of order")
					}
					report(b, "1worker", t1, fmt.Sprintf("%dworkers", runtime.NumCPU()), tn, "speedup", div, false)
					reportSteady(b, t1, f1, tn, fn)
				})
			}
			b.Run(fmt.Sprintf("rx/%d/%s", size, modeName(enc)), func(b *testing.B) {
				one := newRXOnly(b, size, enc, 1)
				all := newRXOnly(b, size, enc, runtime.NumCPU())
				t1, tn, f1, fn := interleaveRuns(b, workerRuns(), func() cost { return one.run(b) }, func() cost { return all.run(b) })
				b.StopTimer()
				one.s.Close()
				all.s.Close()
				for _, r := range []*rxOnly{one, all} {
					if sc := r.s.RXSCStats(peerSCI); sc.InPktsLate.Load() != 0 || sc.InPktsOK.Load() != r.n || r.n != r.pn-1 {
						b.Fatalf("InPktsLate %d, InPktsOK %d, delivered %d of %d", sc.InPktsLate.Load(), sc.InPktsOK.Load(), r.n, r.pn-1)
					}
				}
				report(b, "1worker", t1, fmt.Sprintf("%dworkers", runtime.NumCPU()), tn, "speedup", div, false)
				reportSteady(b, t1, f1, tn, fn)
			})
		}
	}
}

// BenchmarkRatioIntegrityVsEncrypt is acceptance benchmark (c):
// throughput of integrity-only frames over encrypted ones, both through
// the full pipeline with all workers. Target: >= 1.0.
func BenchmarkRatioIntegrityVsEncrypt(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			integ := newBenchPipe(b, size, false, runtime.NumCPU(), true)
			enc := newBenchPipe(b, size, true, runtime.NumCPU(), true)
			b.ReportAllocs()
			ti, te := interleave(b, timed(integ.run), timed(enc.run))
			b.StopTimer()
			integ.close(b)
			enc.close(b)
			report(b, "integrity", ti, "encrypt", te, "integrity/encrypt-throughput", rdiv, true)
		})
	}
}

// newBareSeal returns a function that seals frames [lo, hi) of n frames
// of the given size in place, like the transmit side of newBare, and
// one that reads each frame's PN field on the calling goroutine, as tx's
// Config.TX does (a port's transmit reads the whole frame): a frame
// sealed on the other core then crosses to the caller, in the ceiling
// as in tx; and one that writes every frame anew on the calling
// goroutine, for the ceiling of tx-fresh.
func newBareSeal(b *testing.B, size int, enc bool, n int) (seal func(lo, hi int), consume, refill func()) {
	aead, err := newAEAD(GCMAES128, testKey(GCMAES128))
	if err != nil {
		b.Fatal(err)
	}
	frames, pristine := make([][]byte, n), make([]byte, size)
	for i := range frames {
		frames[i] = make([]byte, size)
	}
	hdr, end := 12+SecTAGSCILen, size-ICVLen
	seal = func(lo, hi int) {
		var iv [12]byte
		for i := lo; i < hi; i++ {
			f := frames[i]
			binary.BigEndian.PutUint32(iv[8:], uint32(i))
			if enc {
				aead.Seal(f[hdr:hdr], iv[:], f[hdr:end], f[:hdr])
			} else {
				aead.Seal(f[end:end], iv[:], nil, f[:end])
			}
		}
	}
	consume = func() {
		for _, f := range frames {
			bareSink += SecTAG(f[addrsLen:]).PN()
		}
	}
	refill = func() {
		for _, f := range frames {
			copy(f, pristine)
		}
	}
	return seal, consume, refill
}

// txName names the transmit variants of BenchmarkRatioWorkers: tx seals
// the same buffers call after call, tx-fresh writes every frame anew
// first, as the router's netstack does (see txOnly.pristine).
func txName(fresh bool) string {
	if fresh {
		return "tx-fresh"
	}
	return "tx"
}

// bareSink keeps the consumer's reads from being optimized away.
var bareSink uint32

// spinPool splits each call's frames [0, n) into contiguous shares, one
// per goroutine: the caller's and helpers' that poll for the next call
// (yielding the core) instead of parking, as long as calls follow each
// other within a run of interleaveRuns; between runs they park, so that
// the one-goroutine variant has the machine to itself.
type spinPool struct {
	shares int
	work   func(k, lo, hi int) // share k: frames [lo, hi)
	n      int                 // the call's frames; written before gen moves
	gen    atomic.Uint64       // bumped per call
	done   atomic.Int32        // helpers finished with the current call
	active atomic.Bool         // helpers poll (else park on wake)
	calls  int                 // calls run, to park the helpers after a run's last
	wake   chan struct{}
	stop   atomic.Bool
	wg     sync.WaitGroup
}

func newSpinPool(shares int, work func(k, lo, hi int)) *spinPool {
	p := &spinPool{shares: shares, work: work, wake: make(chan struct{}, shares)}
	for k := 1; k < shares; k++ {
		p.wg.Go(func() { p.helper(k) })
	}
	return p
}

func (p *spinPool) helper(k int) {
	var seen uint64
	for !p.stop.Load() {
		if !p.active.Load() {
			<-p.wake
			continue
		}
		g := p.gen.Load()
		if g == seen {
			runtime.Gosched()
			continue
		}
		seen = g
		p.work(k, p.n*k/p.shares, p.n*(k+1)/p.shares)
		p.done.Add(1)
	}
}

// run splits frames [0, n) over the pool and returns when all are done.
func (p *spinPool) run(n int) {
	if !p.active.Load() {
		p.active.Store(true)
		for range p.shares - 1 {
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}
	p.n = n
	p.done.Store(0)
	p.gen.Add(1)
	p.work(0, 0, n/p.shares)
	for p.done.Load() != int32(p.shares-1) {
		runtime.Gosched()
	}
}

// ran counts a call of interleaveRuns: helpers poll through workerRuns()
// calls in a row and park after the last, so that they do not spin
// while the one-goroutine variant runs.
func (p *spinPool) ran() {
	if p.calls++; p.calls%workerRuns() == 0 {
		p.active.Store(false)
	}
}

func (p *spinPool) close() {
	p.stop.Store(true)
	p.active.Store(true)
	close(p.wake)
	p.wg.Wait()
}
