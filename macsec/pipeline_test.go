package macsec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// link joins a transmitting SecY to a receiving one: TX output goes
// straight into rx.Verify.
type link struct {
	tx, rx *SecY
	got    sink
	pnMu   sync.Mutex
	lastPN map[uint8]uint64
	pnErr  error
}

// newLink connects two SecYs with workers crypto workers each (or
// testWorkers, under bothModes).
func newLink(t *testing.T, cs CipherSuite, encrypt bool, workers int, hook func()) *link {
	t.Helper()
	if testWorkers != 0 {
		workers = testWorkers
	}
	l := &link{lastPN: map[uint8]uint64{}}
	txCfg := testConfig(cs, encrypt, func(frames [][]byte) {
		l.checkPNs(frames)
		l.rx.Verify(frames)
	}, func([][]byte) {})
	txCfg.Workers = workers
	txCfg.workerHook = hook
	rxCfg := testConfig(cs, false, func([][]byte) {}, l.got.handler)
	rxCfg.SCI = peerSCI
	rxCfg.ReplayProtect = true
	rxCfg.Workers = workers
	rxCfg.workerHook = hook
	var err error
	if l.rx, err = New(rxCfg, nil); err != nil {
		t.Fatal(err)
	}
	if l.tx, err = New(txCfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.rx.AddRXSC(txCfg.SCI); err != nil {
		t.Fatal(err)
	}
	for an := range uint8(2) {
		sa := SAConfig{AN: an, Key: testKey(cs), SSCI: 1, Salt: testSalt}
		sa.Key = NewKey(append(testKey(cs).bytes()[:0:0], testKey(cs).bytes()...))
		sa.Key.bytes()[0] ^= an
		if err := l.rx.InstallRXSA(txCfg.SCI, sa); err != nil {
			t.Fatal(err)
		}
		if an == 0 {
			if err := l.tx.InstallTXSA(sa); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l
}

// checkPNs records an error unless PNs of each SA strictly increase.
func (l *link) checkPNs(frames [][]byte) {
	l.pnMu.Lock()
	defer l.pnMu.Unlock()
	for _, f := range frames {
		tag := SecTAG(f[12:])
		pn := uint64(tag.PN())
		if pn <= l.lastPN[tag.AN()] && l.pnErr == nil {
			l.pnErr = fmt.Errorf("AN %d: PN %d after %d", tag.AN(), pn, l.lastPN[tag.AN()])
		}
		l.lastPN[tag.AN()] = pn
	}
}

func (l *link) close() {
	l.tx.Close() // drains TX into rx.Verify
	l.rx.Close()
}

func seqs(frames [][]byte) []uint32 {
	out := make([]uint32, len(frames))
	for i, f := range frames {
		out[i] = binary.BigEndian.Uint32(f[14:18])
	}
	return out
}

// TestOrderWithRandomDelays delays every worker at random; frames must
// still leave TX in PN order and leave RX in input order, all accepted by
// a receiver with replay window 0.
func TestOrderWithRandomDelays(t *testing.T) {
	goroutineLeakCheck(t)
	hook := func() { time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond) }
	for _, cs := range allSuites {
		for _, enc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/encrypt=%v", cs, enc), func(t *testing.T) {
				l := newLink(t, cs, enc, 4, hook)
				n := uint32(3000)
				if testing.Short() {
					n = 500
				}
				var want []uint32
				batch := make([][]byte, 0, 200)
				for seq := uint32(0); seq < n; {
					batch = batch[:0]
					for k := rand.IntN(200) + 1; k > 0 && seq < n; k-- {
						batch = append(batch, testFrame(60+rand.IntN(1400), seq))
						want = append(want, seq)
						seq++
					}
					l.tx.Protect(batch)
				}
				l.close()
				if l.pnErr != nil {
					t.Fatal(l.pnErr)
				}
				got := seqs(l.got.get())
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("received %d frames out of order or lost (want %d)", len(got), len(want))
				}
				sc := l.rx.RXSCStats(l.tx.cfg.SCI)
				if sc.InPktsOK.Load() != uint64(n) || sc.InPktsLate.Load() != 0 {
					t.Errorf("InPktsOK %d InPktsLate %d, want %d, 0", sc.InPktsOK.Load(), sc.InPktsLate.Load(), n)
				}
				busy := 0
				for _, w := range l.tx.WorkerFrames() {
					if w > 0 {
						busy++
					}
				}
				if busy < 2 {
					t.Errorf("WorkerFrames() = %v: crypto not spread over workers", l.tx.WorkerFrames())
				}
			})
		}
	}
}

// TestConcurrentProtect calls Protect from several goroutines: PNs on the
// wire must still strictly increase.
func TestConcurrentProtect(t *testing.T) {
	goroutineLeakCheck(t)
	l := newLink(t, GCMAES128, true, 3, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				l.tx.Protect([][]byte{testFrame(100, uint32(g*1000+i)), testFrame(200, uint32(g*1000+i))})
			}
		})
	}
	wg.Wait()
	l.close()
	if l.pnErr != nil {
		t.Fatal(l.pnErr)
	}
	if n := len(l.got.get()); n != 800 {
		t.Errorf("received %d frames, want 800", n)
	}
}

// TestKeyRollover installs SA 1 and moves encoding_sa to it while frames
// are in flight: no frame is lost, order is kept.
func TestKeyRollover(t *testing.T) { bothModes(t, testKeyRollover) }

func testKeyRollover(t *testing.T) {
	goroutineLeakCheck(t)
	for _, cs := range allSuites {
		t.Run(cs.String(), func(t *testing.T) {
			hook := func() { time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond) }
			l := newLink(t, cs, true, 4, hook)
			const n = 2000
			done := make(chan struct{})
			go func() {
				defer close(done)
				for seq := uint32(0); seq < n; seq += 10 {
					b := make([][]byte, 10)
					for i := range b {
						b[i] = testFrame(300, seq+uint32(i))
					}
					l.tx.Protect(b)
				}
			}()
			time.Sleep(2 * time.Millisecond)
			sa := SAConfig{AN: 1, Key: testKey(cs), SSCI: 1, Salt: testSalt}
			sa.Key = NewKey(append([]byte(nil), testKey(cs).bytes()...))
			sa.Key.bytes()[0] ^= 1
			if err := l.tx.InstallTXSA(sa); err != nil {
				t.Fatal(err)
			}
			if err := l.tx.SetEncodingSA(1); err != nil {
				t.Fatal(err)
			}
			<-done
			l.close()
			got := seqs(l.got.get())
			if len(got) != n {
				t.Fatalf("received %d frames, want %d", len(got), n)
			}
			for i, s := range got {
				if s != uint32(i) {
					t.Fatalf("frame %d has seq %d", i, s)
				}
			}
			a0, a1 := l.tx.TXSAStats(0).OutPktsEncrypted.Load(), l.tx.TXSAStats(1).OutPktsEncrypted.Load()
			r0, r1 := l.rx.RXSAStats(l.tx.cfg.SCI, 0).InPktsOK.Load(), l.rx.RXSAStats(l.tx.cfg.SCI, 1).InPktsOK.Load()
			if a0+a1 != n || a1 == 0 || r0 != a0 || r1 != a1 {
				t.Errorf("tx SA0 %d SA1 %d, rx SA0 %d SA1 %d", a0, a1, r0, r1)
			}
		})
	}
}

// TestAllocs checks that frames through TX (Protect and ProtectInPlace)
// and RX allocate nothing, also under -race (the pools are our own).
func TestAllocs(t *testing.T) { bothModes(t, testAllocs) }

func testAllocs(t *testing.T) {
	goroutineLeakCheck(t)
	for _, cs := range allSuites {
		for _, enc := range []bool{false, true} {
			for _, inPlace := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/encrypt=%v/inplace=%v", cs, enc, inPlace), func(t *testing.T) {
					l := newLink(t, cs, enc, 2, nil)
					defer l.close()
					var cnt atomic.Int64
					l.rx.cfg.RX = func(frames [][]byte) { cnt.Add(int64(len(frames))) }
					l.tx.cfg.TX = func(frames [][]byte) { l.rx.Verify(frames) }
					const batch = 64
					frames := make([][]byte, batch)
					for i := range frames {
						frames[i] = headroomFrame(1514-32, uint32(i), inPlace)
					}
					run := func() {
						if inPlace {
							l.tx.ProtectInPlace(frames)
						} else {
							l.tx.Protect(frames)
						}
					}
					for range 20 {
						run()
					}
					if a := testing.AllocsPerRun(200, run); a != 0 {
						t.Errorf("allocations per batch of %d frames = %v, want 0", batch, a)
					}
					if got := cnt.Load(); got != 221*batch {
						t.Errorf("received %d frames, want %d", got, 221*batch)
					}
				})
			}
		}
	}
}

// TestSharedAEAD uses one AEAD from many goroutines (-race).
func TestSharedAEAD(t *testing.T) {
	aead, err := newAEAD(GCMAES256, testKey(GCMAES256))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var iv [12]byte
			buf := make([]byte, 0, 2048)
			for i := range 200 {
				iv[0], iv[1] = byte(g), byte(i)
				ct := aead.Seal(buf[:0], iv[:], testFrame(1000, uint32(i)), nil)
				if _, err := aead.Open(ct[:0], iv[:], ct, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// recordingStore wraps a PNStore and remembers the highest durable mark.
type recordingStore struct {
	PNStore
	mark      atomic.Uint64
	loadErr   error
	resErr    error
	failAfter atomic.Int64 // > 0: Reserve fails once it was called this often
	calls     atomic.Int64
}

func (r *recordingStore) Load(id PNStoreID) (uint64, error) {
	if r.loadErr != nil {
		return 0, r.loadErr
	}
	return r.PNStore.Load(id)
}

func (r *recordingStore) Reserve(id PNStoreID, m uint64) error {
	if r.resErr != nil {
		return r.resErr
	}
	if fa := r.failAfter.Load(); fa > 0 && r.calls.Add(1) > fa {
		return errors.New("disk full")
	}
	if err := r.PNStore.Reserve(id, m); err != nil {
		return err
	}
	r.mark.Store(m)
	return nil
}

func TestFileStore(t *testing.T) {
	dir := t.TempDir()
	fs, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := PNStoreID{SCI: 0x1234, AN: 2, KeyID: "01"}
	if m, err := fs.Load(id); m != 0 || err != nil {
		t.Fatalf("Load(missing) = %d, %v, want 0, nil", m, err)
	}
	if err := fs.Reserve(id, 1<<40); err != nil {
		t.Fatal(err)
	}
	if m, err := fs.Load(id); m != 1<<40 || err != nil {
		t.Fatalf("Load = %d, %v, want %d, nil", m, err, uint64(1<<40))
	}
	if err := os.WriteFile(fs.path(id), []byte("garbage-data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Load(id); !errors.Is(err, ErrCorruptPNStore) {
		t.Fatalf("Load(corrupt) error = %v, want ErrCorruptPNStore", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPNPersistence checks that every PN sent is below a mark made
// durable before it was used, and that a restarted SecY starts above it.
func TestPNPersistence(t *testing.T) { bothModes(t, testPNPersistence) }

func testPNPersistence(t *testing.T) {
	goroutineLeakCheck(t)
	fs, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rs := &recordingStore{PNStore: fs}
	var maxPN uint64
	var bad error
	start := func() *SecY {
		cfg := testConfig(GCMAES128, true, func(frames [][]byte) {
			for _, f := range frames {
				pn := uint64(SecTAG(f[12:]).PN())
				if pn >= rs.mark.Load() && bad == nil {
					bad = fmt.Errorf("PN %d sent with durable mark %d", pn, rs.mark.Load())
				}
				if pn <= maxPN && bad == nil {
					bad = fmt.Errorf("PN %d reused (max so far %d)", pn, maxPN)
				}
				maxPN = max(maxPN, pn)
			}
		}, func([][]byte) {})
		cfg.PNStore = rs
		cfg.PNBlock = 8
		s, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.InstallTXSA(SAConfig{AN: 0, PN: 1, Key: testKey(GCMAES128), KeyID: []byte{1}}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for range 3 { // three "restarts"
		s := start()
		for i := range 50 {
			s.Protect([][]byte{testFrame(64, uint32(i))})
		}
		s.Close()
	}
	if bad != nil {
		t.Fatal(bad)
	}
	if maxPN < 150 {
		t.Errorf("max PN %d, want >= 150", maxPN)
	}

	cfg := testConfig(GCMAES128, true, func([][]byte) {}, func([][]byte) {})
	for _, tt := range []struct {
		name string
		rs   *recordingStore
	}{
		{"load fails", &recordingStore{PNStore: fs, loadErr: errors.New("disk on fire")}},
		{"reserve fails", &recordingStore{PNStore: fs, resErr: errors.New("read-only fs")}},
	} {
		cfg.PNStore = tt.rs
		s, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.InstallTXSA(SAConfig{AN: 1, Key: testKey(GCMAES128), KeyID: []byte{2}}); err == nil {
			t.Errorf("%s: InstallTXSA succeeded, want refusal", tt.name)
		}
		s.Protect([][]byte{testFrame(64, 0)})
		s.Close()
		if s.Stats().OutPktsNoActiveSA.Load() != 1 {
			t.Errorf("%s: OutPktsNoActiveSA = %d, want 1", tt.name, s.Stats().OutPktsNoActiveSA.Load())
		}
	}
}

// TestPNReservationFailure: when the store fails mid-run, frames are
// dropped and counted and no PN at or above the durable mark is sent.
func TestPNReservationFailure(t *testing.T) { bothModes(t, testPNReservationFailure) }

func testPNReservationFailure(t *testing.T) {
	goroutineLeakCheck(t)
	fs, err := NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rs := &recordingStore{PNStore: fs}
	rs.failAfter.Store(3)
	var out sink
	cfg := testConfig(GCMAES128, true, out.handler, out.handler)
	cfg.PNStore, cfg.PNBlock = rs, 10
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InstallTXSA(SAConfig{AN: 0, Key: testKey(GCMAES128), KeyID: []byte{9}}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		s.Protect([][]byte{testFrame(64, uint32(i))})
	}
	s.Close()
	got := out.get()
	for _, f := range got {
		if pn := uint64(SecTAG(f[12:]).PN()); pn >= rs.mark.Load() {
			t.Fatalf("PN %d sent, durable mark %d", pn, rs.mark.Load())
		}
	}
	if len(got) == 0 || len(got) == 100 || s.Stats().OutPktsNoActiveSA.Load() != uint64(100-len(got)) {
		t.Errorf("sent %d of 100, OutPktsNoActiveSA %d", len(got), s.Stats().OutPktsNoActiveSA.Load())
	}
	if n := s.TXSAStats(0).OutPktsPNExhausted.Load(); n != 0 {
		t.Errorf("OutPktsPNExhausted = %d, want 0 (store failure is not exhaustion)", n)
	}
}

func TestPNExhaustion(t *testing.T) { bothModes(t, testPNExhaustion) }

func testPNExhaustion(t *testing.T) {
	goroutineLeakCheck(t)
	var out sink
	s, err := New(testConfig(GCMAES128, false, out.handler, out.handler), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InstallTXSA(SAConfig{AN: 0, PN: 0xfffffffe, Key: testKey(GCMAES128)}); err != nil {
		t.Fatal(err)
	}
	s.Protect([][]byte{testFrame(64, 0), testFrame(64, 1), testFrame(64, 2)})
	s.Protect([][]byte{testFrame(64, 3)})
	s.Close()
	got := out.get()
	if len(got) != 2 || SecTAG(got[1][12:]).PN() != 0xffffffff {
		t.Fatalf("sent %d frames, want 2 ending with PN 0xffffffff", len(got))
	}
	if n := s.TXSAStats(0).OutPktsPNExhausted.Load(); n != 2 {
		t.Errorf("OutPktsPNExhausted = %d, want 2", n)
	}
}

func TestTooLongAndUntagged(t *testing.T) { bothModes(t, testTooLongAndUntagged) }

func testTooLongAndUntagged(t *testing.T) {
	goroutineLeakCheck(t)
	var out sink
	cfg := testConfig(GCMAES128, false, out.handler, out.handler)
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InstallTXSA(SAConfig{AN: 0, Key: testKey(GCMAES128)}); err != nil {
		t.Fatal(err)
	}
	s.Protect([][]byte{testFrame(1514-32, 0), testFrame(1514-31, 1), testFrame(10, 2)})
	s.Close()
	if len(out.get()) != 1 || s.Stats().OutPktsTooLong.Load() != 1 || s.Stats().OutPktsRunt.Load() != 1 {
		t.Errorf("sent %d, TooLong %d, Runt %d; want 1, 1, 1", len(out.get()), s.Stats().OutPktsTooLong.Load(), s.Stats().OutPktsRunt.Load())
	}
	if len(out.get()[0]) != 1514 {
		t.Errorf("protected frame length %d, want 1514", len(out.get()[0]))
	}

	var out2 sink
	cfg = testConfig(GCMAES128, false, out2.handler, out2.handler)
	cfg.Protect = false
	s, err = New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := testFrame(100, 0)
	s.Protect([][]byte{f})
	s.Close()
	if len(out2.get()) != 1 || !bytes.Equal(out2.get()[0], f) || s.Stats().OutPktsUntagged.Load() != 1 {
		t.Errorf("protect off: sent %x, OutPktsUntagged %d", out2.get(), s.Stats().OutPktsUntagged.Load())
	}
}

// TestCloseWithReentrantHandler closes a SecY while its receive handler
// sends replies through Protect of the same SecY (as netstack answering a
// ping would): Close must not deadlock.
func TestCloseWithReentrantHandler(t *testing.T) { bothModes(t, testCloseWithReentrantHandler) }

func testCloseWithReentrantHandler(t *testing.T) {
	goroutineLeakCheck(t)
	cs := GCMAES128
	var s *SecY
	var replies atomic.Int64
	cfg := testConfig(cs, true, func(frames [][]byte) { replies.Add(int64(len(frames))) }, func(frames [][]byte) {
		time.Sleep(50 * time.Microsecond)
		s.Protect(frames)
	})
	cfg.SCI = peerSCI + 1
	cfg.ReplayProtect = true
	var err error
	if s, err = New(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.AddRXSC(peerSCI); err != nil {
		t.Fatal(err)
	}
	if err := s.InstallRXSA(peerSCI, SAConfig{AN: 0, Key: testKey(cs)}); err != nil {
		t.Fatal(err)
	}
	if err := s.InstallTXSA(SAConfig{AN: 0, Key: testKey(cs)}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for pn := uint64(1); ; pn += 64 {
			select {
			case <-stop:
				return
			default:
			}
			var b [][]byte
			for i := range uint64(64) {
				b = append(b, sealFrame(t, cs, testKey(cs), 0, pn+i, true, testFrame(200, uint32(pn+i))))
			}
			s.Verify(b)
		}
	})
	time.Sleep(50 * time.Millisecond)
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close deadlocked")
	}
	close(stop)
	wg.Wait()
	if replies.Load() == 0 {
		t.Error("no replies sent before Close")
	}
}

func TestProtectInPlaceEdgeCases(t *testing.T) { bothModes(t, testProtectInPlaceEdgeCases) }

func testProtectInPlaceEdgeCases(t *testing.T) {
	goroutineLeakCheck(t)
	var out sink
	cfg := testConfig(GCMAES128, true, out.handler, out.handler)
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InstallTXSA(SAConfig{AN: 0, Key: testKey(GCMAES128)}); err != nil {
		t.Fatal(err)
	}
	good := headroomFrame(100, 1, true)
	noTail := append([]byte(nil), good...)[:len(good):len(good)]
	short := make([]byte, Headroom+10, Headroom+10+Tailroom)
	s.ProtectInPlace([][]byte{noTail, short, good})
	s.Close()
	if len(out.get()) != 1 || s.Stats().OutPktsRunt.Load() != 2 {
		t.Errorf("sent %d, OutPktsRunt %d; want 1, 2", len(out.get()), s.Stats().OutPktsRunt.Load())
	}
	if got := len(out.get()[0]); got != 100+Overhead {
		t.Errorf("protected length %d, want %d", got, 100+Overhead)
	}

	var out2 sink
	cfg = testConfig(GCMAES128, true, out2.handler, out2.handler)
	cfg.Protect = false
	s, err = New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.ProtectInPlace([][]byte{headroomFrame(100, 7, true)})
	s.Close()
	if d := out2.get(); len(d) != 1 || !bytes.Equal(d[0], testFrame(100, 7)) {
		t.Errorf("protect off: sent %x, want %x", d, testFrame(100, 7))
	}
}

// TestSCChurn adds and removes receive SCs while traffic flows: nothing
// panics, nothing leaks, Close still returns.
func TestSCChurn(t *testing.T) { bothModes(t, testSCChurn) }

func testSCChurn(t *testing.T) {
	goroutineLeakCheck(t)
	cs := GCMAES128
	s, _ := rxHarness(t, cs, ValidateStrict, true, 0, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for pn := uint64(1); ; pn++ {
			select {
			case <-stop:
				return
			default:
			}
			s.Verify([][]byte{sealFrame(t, cs, testKey(cs), 0, pn, false, testFrame(100, uint32(pn)))})
		}
	})
	for i := range 50 {
		sci := SCI(0x0500000000000001 + uint64(i))
		if err := s.AddRXSC(sci); err != nil {
			t.Fatal(err)
		}
		if err := s.InstallRXSA(sci, SAConfig{AN: 1, Key: testKey(cs)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := s.RemoveRXSC(sci); err != nil {
				t.Fatal(err)
			}
		}
		if i == 25 {
			if err := s.RemoveRXSC(peerSCI); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	s.Close()
	if err := s.AddRXSC(1); err == nil {
		t.Error("AddRXSC after Close succeeded")
	}
}

// TestClaimGuided checks that concurrent claims from both ends cover
// every slot of a container exactly once, that at most one run (the
// last) is shorter than claimFrames, and that a container of
// maxBatchFrames takes far fewer claims than runs of claimFrames would.
func TestClaimGuided(t *testing.T) {
	for _, n := range []int32{1, 7, 8, 9, 64, 100, maxBatchFrames} {
		var c container
		c.n = int(n)
		c.ends.Store(uint64(n) << 32)
		var runs [3][][2]int32
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Go(func() {
				for {
					i, end := c.claim(g > 0)
					if i == end {
						return
					}
					runs[g] = append(runs[g], [2]int32{i, end})
				}
			})
		}
		wg.Wait()
		var owner [maxBatchFrames]int
		claims, short := 0, 0
		for g := range runs {
			for _, r := range runs[g] {
				claims++
				if r[0] < 0 || r[1] > n || r[0] > r[1] {
					t.Fatalf("n=%d: run %v out of range", n, r)
				}
				if r[1]-r[0] < min(claimFrames, n) {
					short++
				}
				for j := r[0]; j < r[1]; j++ {
					owner[j]++
				}
			}
		}
		for j := range n {
			if owner[j] != 1 {
				t.Errorf("n=%d: slot %d claimed %d times", n, j, owner[j])
			}
		}
		if short > 1 {
			t.Errorf("n=%d: %d runs shorter than %d, want at most the last", n, short, claimFrames)
		}
		// Runs of claimFrames would take 16; a quarter of what is left
		// takes 9 (32, 24, 18, 13, 10, 8, 8, 8, 7) whatever the order
		// of the claims.
		if n == maxBatchFrames && claims > 9 {
			t.Errorf("n=%d: %d claims, want at most 9", n, claims)
		}
	}
}
