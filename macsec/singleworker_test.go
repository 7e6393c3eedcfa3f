package macsec

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestSingleWorkerInline covers Config.Workers = 1, where callers seal
// open and deliver their own chunks (protectInline, verifyInline) of up to maxBatchFrames
// frames: with concurrent callers, random delays in the crypto and
// batches larger than a container, PNs must strictly increase on the
// wire, every frame must pass a receiver with replay window 0, each
// caller's frames must arrive in its order, and no frame may go through
// a helper goroutine (there is none).
func TestSingleWorkerInline(t *testing.T) {
	goroutineLeakCheck(t)
	hook := func() { time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond) }
	for _, cs := range allSuites {
		for _, enc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/encrypt=%v", cs, enc), func(t *testing.T) {
				l := newLink(t, cs, enc, 1, hook)
				const callers, perCaller = 3, 600
				var wg sync.WaitGroup
				for g := range uint32(callers) {
					wg.Go(func() {
						for seq := uint32(0); seq < perCaller; {
							var batch [][]byte
							for k := rand.IntN(2*maxBatchFrames+10) + 1; k > 0 && seq < perCaller; k-- {
								batch = append(batch, testFrame(60+rand.IntN(1400), g<<16|seq))
								seq++
							}
							l.tx.Protect(batch)
						}
					})
				}
				wg.Wait()
				l.close()
				if l.pnErr != nil {
					t.Fatal(l.pnErr)
				}
				got := seqs(l.got.get())
				if len(got) != callers*perCaller {
					t.Fatalf("received %d frames, want %d", len(got), callers*perCaller)
				}
				next := map[uint32]uint32{}
				for _, s := range got {
					if g := s >> 16; s&0xffff != next[g] {
						t.Fatalf("caller %d: frame %d arrived when %d was expected", g, s&0xffff, next[g])
					}
					next[s>>16]++
				}
				sc := l.rx.RXSCStats(l.tx.cfg.SCI)
				if sc.InPktsOK.Load() != callers*perCaller || sc.InPktsLate.Load() != 0 {
					t.Errorf("InPktsOK %d InPktsLate %d, want %d, 0", sc.InPktsOK.Load(), sc.InPktsLate.Load(), callers*perCaller)
				}
				for _, s := range []*SecY{l.tx, l.rx} {
					if wf := s.WorkerFrames(); len(wf) != 1 || wf[0] != callers*perCaller {
						t.Errorf("WorkerFrames() = %v, want [%d]", wf, callers*perCaller)
					}
				}
			})
		}
	}
}
