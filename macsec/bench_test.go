package macsec

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

var benchSizes = []int{1514, 9000}

func modeName(enc bool) string {
	if enc {
		return "encrypt"
	}
	return "integrity"
}

// BenchmarkBareGCM is the baseline: one AES-GCM Seal and one Open per
// frame, shaped like a MACsec frame of the given wire size (SecTAG with
// SCI): encrypt = AAD 28 octets + ciphertext; integrity = AAD the whole
// frame, no ciphertext.
func BenchmarkBareGCM(b *testing.B) {
	for _, size := range benchSizes {
		for _, enc := range []bool{false, true} {
			b.Run(fmt.Sprintf("%d/%s", size, modeName(enc)), func(b *testing.B) {
				aead, err := newAEAD(GCMAES128, testKey(GCMAES128))
				if err != nil {
					b.Fatal(err)
				}
				frame := make([]byte, size)
				var iv [12]byte
				hdr := 12 + SecTAGSCILen
				end := size - ICVLen
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					iv[11] = byte(i)
					if enc {
						aead.Seal(frame[hdr:hdr], iv[:], frame[hdr:end], frame[:hdr])
						if _, err := aead.Open(frame[hdr:hdr], iv[:], frame[hdr:], frame[:hdr]); err != nil {
							b.Fatal(err)
						}
					} else {
						aead.Seal(frame[end:end], iv[:], nil, frame[:end])
						if _, err := aead.Open(nil, iv[:], frame[end:], frame[:end]); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkTXRX pushes frames through Protect on one SecY and Verify on
// another (replay protection on, window 0, so any reordering would show
// as InPktsLate) and reports ns per frame for TX+RX. workers=1 uses one
// crypto worker per SecY; workers=N uses runtime.NumCPU().
func BenchmarkTXRX(b *testing.B) {
	for _, size := range benchSizes {
		for _, enc := range []bool{false, true} {
			for _, workers := range []int{1, runtime.NumCPU()} {
				b.Run(fmt.Sprintf("%d/%s/workers=%d", size, modeName(enc), workers), func(b *testing.B) {
					benchTXRX(b, size, enc, workers)
				})
			}
		}
	}
}

func benchTXRX(b *testing.B, size int, enc bool, workers int) {
	cs := GCMAES128
	var got atomic.Int64
	done := make(chan struct{}, 1)
	var want atomic.Int64
	var rx *SecY
	txCfg := testConfig(cs, enc, func(frames [][]byte) { rx.Verify(frames) }, func([][]byte) {})
	txCfg.Workers = workers
	txCfg.LowerMTU = 9100
	rxCfg := testConfig(cs, false, func([][]byte) {}, func(frames [][]byte) {
		if got.Add(int64(len(frames))) == want.Load() {
			done <- struct{}{}
		}
	})
	rxCfg.SCI = peerSCI
	rxCfg.ReplayProtect = true
	rxCfg.Workers = workers
	rxCfg.LowerMTU = 9100
	var err error
	if rx, err = New(rxCfg, nil); err != nil {
		b.Fatal(err)
	}
	tx, err := New(txCfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	sa := SAConfig{AN: 0, Key: testKey(cs)}
	if err := rx.AddRXSC(txCfg.SCI); err != nil {
		b.Fatal(err)
	}
	if err := rx.InstallRXSA(txCfg.SCI, sa); err != nil {
		b.Fatal(err)
	}
	if err := tx.InstallTXSA(sa); err != nil {
		b.Fatal(err)
	}
	const batch = 128
	frames := make([][]byte, batch)
	for i := range frames {
		frames[i] = testFrame(size-Overhead, uint32(i))
	}
	run := func(n int) {
		got.Store(0)
		want.Store(int64(n))
		for n > 0 {
			k := min(n, batch)
			tx.Protect(frames[:k])
			n -= k
		}
		<-done
	}
	run(16384) // warm the pools
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	tx.Close()
	rx.Close()
	sc := rx.RXSCStats(txCfg.SCI)
	if late, ok := sc.InPktsLate.Load(), sc.InPktsOK.Load(); late != 0 || ok != int64ToU(b.N+16384) {
		b.Fatalf("InPktsLate %d InPktsOK %d, want 0, %d", late, ok, b.N+16384)
	}
	wf := tx.WorkerFrames()
	for i, n := range wf {
		name := fmt.Sprintf("tx-worker%d-share", i)
		if i == len(wf)-1 {
			name = "tx-callers-share"
		}
		b.ReportMetric(float64(n)/float64(b.N+16384), name)
	}
}

func int64ToU(n int) uint64 { return uint64(n) }

// nullAEAD stands in for AES-GCM in BenchmarkOverhead: Seal appends a
// zero ICV, Open accepts everything. It is never used outside benchmarks.
type nullAEAD struct{}

func (nullAEAD) NonceSize() int { return 12 }
func (nullAEAD) Overhead() int  { return ICVLen }
func (nullAEAD) Seal(dst, _, plaintext, _ []byte) []byte {
	dst = append(dst, plaintext...)
	var icv [ICVLen]byte
	return append(dst, icv[:]...)
}
func (nullAEAD) Open(dst, _, ciphertext, _ []byte) ([]byte, error) {
	return append(dst, ciphertext[:len(ciphertext)-ICVLen]...), nil
}

// BenchmarkOverhead is our TX+RX per frame with the crypto taken out
// (nullAEAD), one worker, ProtectInPlace: what (a) of
// BenchmarkRatioVsBare adds to bare Seal+Open, measured on its own so
// that the machine's noise, proportional to the crypto's time, does not
// hide it. Run with -cpu 1.
func BenchmarkOverhead(b *testing.B) {
	for _, size := range benchSizes {
		for _, enc := range []bool{false, true} {
			b.Run(fmt.Sprintf("%d/%s", size, modeName(enc)), func(b *testing.B) {
				p := newBenchPipe(b, size, enc, 1, true)
				p.tx.txSAs[0].aead = nullAEAD{}
				for _, sc := range *p.rx.rxSCs.Load() {
					sc.sas[0].Load().aead = nullAEAD{}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i*ratioBatch < b.N; i++ {
					p.run()
				}
				b.StopTimer()
				p.close(b)
			})
		}
	}
}
