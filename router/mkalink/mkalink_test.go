package mkalink

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/mka/mkatest"
	"github.com/gvrouter/gvrouter/stack"
)

// pipe is a Lower whose WriteFrame delivers to the tap of its far end,
// as a point-to-point link would.
type pipe struct {
	mu     sync.Mutex
	far    *pipe
	tap    stack.Tap
	taps   int // AddTap calls minus removals
	down   bool
	frames int
}

func (p *pipe) AddTap(m stack.TapMatch, t stack.Tap) (func(), error) {
	if m.EtherType != mka.EtherType {
		return nil, errors.New("want the EAPOL ethertype")
	}
	p.mu.Lock()
	p.tap, p.taps = t, p.taps+1
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.tap, p.taps = nil, p.taps-1
		p.mu.Unlock()
	}, nil
}

func (p *pipe) WriteFrame(frame []byte) error {
	p.mu.Lock()
	p.frames++
	down := p.down
	p.mu.Unlock()
	if down {
		return nil
	}
	f := p.far
	f.mu.Lock()
	t := f.tap
	f.mu.Unlock()
	if t != nil {
		t.Deliver(append([]byte(nil), frame...))
	}
	return nil
}

func newPair() (*pipe, *pipe) {
	a, b := &pipe{}, &pipe{}
	a.far, b.far = b, a
	return a, b
}

func testCAK(t *testing.T) mka.CAK {
	t.Helper()
	c, err := mka.ParseCAK("135bd758b0ee5c11c55ff6ab19fdb199", "96437a93ccf10d9dfe347846cce52c7d")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startLink(t *testing.T, sci macsec.SCI, prio uint8, secy mka.SecY, rekey time.Duration) *Link {
	t.Helper()
	l, err := Start(Config{Name: sci.String(), Rekey: rekey, Participant: mka.Config{CAK: testCAK(t), SCI: sci, KeyServerPriority: prio}}, secy, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return l
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("after %v: %s did not happen", d, what)
}

func transmitting(s *mkatest.SecY) bool {
	_, _, _, tx := s.Snapshot()
	return tx
}

func TestLinkComesUpRekeysAndFollowsLower(t *testing.T) {
	before := runtime.NumGoroutine()
	sa, sb := &mkatest.SecY{}, &mkatest.SecY{}
	a := startLink(t, 0x0200000000010001, 0, sa, 5*time.Second)
	b := startLink(t, 0x0200000000020001, 16, sb, 0)
	pa, pb := newPair()
	if err := a.Bind(pa); err != nil {
		t.Fatal(err)
	}
	if err := b.Bind(pb); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "both sides transmitting on a distributed SAK", func() bool {
		return transmitting(sa) && transmitting(sb)
	})
	st := a.Participant().State()
	if !st.KeyServer || len(st.Live) != 1 || st.Live[0].SCI != 0x0200000000020001 {
		t.Errorf("a.State() = key server %v, live %v; want key server with live peer b", st.KeyServer, st.Live)
	}
	if b.Participant().State().KeyServer {
		t.Error("b is key server, want a (priority 0)")
	}
	kn := st.Latest.KI.KN
	waitFor(t, 10*time.Second, "a periodic rekey", func() bool {
		l := b.Participant().State().Latest
		return l != nil && l.KI.KN > kn && l.TX && a.Stats().Rekeys.Load() > 0
	})

	// The lower interface is recreated: the tap moves.
	pa2, pb2 := newPair()
	if err := a.Bind(pa2); err != nil {
		t.Fatal(err)
	}
	if err := b.Bind(pb2); err != nil {
		t.Fatal(err)
	}
	if pa.taps != 0 || pa2.taps != 1 {
		t.Errorf("taps after rebind: old %d new %d, want 0 and 1", pa.taps, pa2.taps)
	}
	recv := b.Participant().Stats().MKPDUsAccepted.Load()
	waitFor(t, 5*time.Second, "MKPDUs on the new lower interface", func() bool {
		return b.Participant().Stats().MKPDUsAccepted.Load() > recv
	})

	// a goes silent: b drops it after the life time.
	pa2.mu.Lock()
	pa2.down = true
	pa2.mu.Unlock()
	waitFor(t, mka.LifeTime+3*time.Second, "b dropping silent a", func() bool {
		return len(b.Participant().State().Live) == 0 && b.Participant().Stats().PeerTimeouts.Load() > 0
	})

	a.Close()
	b.Close()
	if pa2.taps != 0 || pb2.taps != 0 {
		t.Errorf("taps after Close = %d, %d, want 0", pa2.taps, pb2.taps)
	}
	waitFor(t, 2*time.Second, "goroutines gone", func() bool { return runtime.NumGoroutine() <= before })
}

func TestDeliverDropsWithoutBlocking(t *testing.T) {
	l := startLink(t, 0x0200000000010001, 0, &mkatest.SecY{}, 0)
	defer l.Close()
	long := make([]byte, maxFrame+1)
	tap{l}.Deliver(long)
	if got := l.Stats().RxTooLong.Load(); got != 1 {
		t.Errorf("RxTooLong = %d, want 1", got)
	}
	// Without a lower interface, MKPDUs are counted, not sent.
	waitFor(t, 2*time.Second, "a hello counted as NoLower", func() bool { return l.Stats().NoLower.Load() > 0 })
}

func TestDeliverAllocs(t *testing.T) {
	l := &Link{}
	l.rxInit()
	frame := make([]byte, 100)
	allocs := testing.AllocsPerRun(100, func() {
		tap{l}.Deliver(frame)
		f := <-l.rx
		l.free <- f.buf
	})
	if allocs != 0 {
		t.Errorf("Deliver allocates %v times per frame, want 0", allocs)
	}
}

// TestSetRekey: a running link's rekey interval changes in place (a
// reload that changes only mka.rekey): rekeys start when it is set and
// stop when it is 0, with the same participant throughout.
func TestSetRekey(t *testing.T) {
	sa, sb := &mkatest.SecY{}, &mkatest.SecY{}
	a := startLink(t, 0x0200000000010001, 0, sa, 0)
	defer a.Close()
	b := startLink(t, 0x0200000000020001, 16, sb, 0)
	defer b.Close()
	pa, pb := newPair()
	if err := a.Bind(pa); err != nil {
		t.Fatal(err)
	}
	if err := b.Bind(pb); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "both sides transmitting", func() bool { return transmitting(sa) && transmitting(sb) })
	mi := a.Participant().State().MI
	time.Sleep(time.Second)
	if n := a.Stats().Rekeys.Load(); n != 0 {
		t.Fatalf("%d periodic rekeys with rekey 0", n)
	}
	a.SetRekey(200 * time.Millisecond)
	waitFor(t, 8*time.Second, "two periodic rekeys after SetRekey(200ms)", func() bool {
		l := b.Participant().State().Latest
		return a.Stats().Rekeys.Load() >= 2 && l != nil && l.KI.KN >= 3 && l.TX
	})
	a.SetRekey(0)
	time.Sleep(300 * time.Millisecond)
	n := a.Stats().Rekeys.Load()
	time.Sleep(time.Second)
	if got := a.Stats().Rekeys.Load(); got != n {
		t.Errorf("rekeys rose from %d to %d after SetRekey(0)", n, got)
	}
	if got := a.Participant().State().MI; got != mi {
		t.Errorf("MI changed from %v to %v: SetRekey rebuilt the participant", mi, got)
	}
}
