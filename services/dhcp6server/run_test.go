package dhcp6server

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

// goroutineLeakCheck fails t if goroutines started during the test are
// still there when it ends.
func goroutineLeakCheck(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
				return
			}
		}
	})
}

// TestRun serves over an in-memory transport: every datagram is answered
// or counted, Run returns nil when its context ends and an error when
// the transport fails, and a second Run at once is refused.
func TestRun(t *testing.T) {
	goroutineLeakCheck(t)
	tr := newChanTransport(64)
	cfg := testConfig()
	s, err := New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for !s.Status().Running {
		time.Sleep(time.Millisecond)
	}
	if err := s.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run = %v, want ErrRunning", err)
	}
	good, bad := 5, 0
	for range good {
		tr.in <- pkt(infoReq())
	}
	for _, b := range [][]byte{msg(msgSolicit), msg(msgRelayForw), {1}} {
		tr.in <- pkt(b)
		bad++
	}
	for range good {
		select {
		case r := <-tr.out:
			if r.Dst != netip.AddrPortFrom(cliAddr, ClientPort) || r.Payload[0] != msgReply || r.Src != netip.AddrPortFrom(srvAddr, ServerPort) {
				t.Errorf("Reply to %v type %d", r.Dst, r.Payload[0])
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no Reply from Run")
		}
	}
	// Options change while Run serves (the race detector watches).
	for i := range 50 {
		s.SetOptions([]netip.Addr{netip.AddrFrom16([16]byte{0x20, 0x01, 15: byte(i)})}, []string{"lan"})
		tr.in <- fromHost(100+i, 100+i) // a source and host each: within their rates
		<-tr.out
	}
	good += 50
	for deadline := time.Now().Add(5 * time.Second); s.stats.Received.Load() < uint64(good+bad); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Received = %d, want %d", s.stats.Received.Load(), good+bad)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	if s.Status().Running {
		t.Error("Status().Running after Run returned")
	}
	st := &s.stats
	if st.Replied.Load() != uint64(good) || dropSum(s) != uint64(bad) || st.SendErrors.Load() != 0 {
		t.Errorf("replied %d drops %v send errors %d, want %d, %d drops, 0", st.Replied.Load(), dropCounts(s), st.SendErrors.Load(), good, bad)
	}

	// A transport that refuses to send: counted, Run goes on.
	tr.sendErr = errors.New("link down")
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- s.Run(ctx) }()
	tr.in <- pkt(infoReq())
	for deadline := time.Now().Add(5 * time.Second); st.SendErrors.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("SendErrors not counted")
		}
	}
	// A transport that fails: Run returns its error.
	close(tr.in)
	select {
	case err := <-done:
		if !errors.Is(err, rawudp.ErrClosed) {
			t.Errorf("Run on a closed transport = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return on a closed transport")
	}
	if got := st.Received.Load(); got != st.Replied.Load()+st.SendErrors.Load()+dropSum(s) {
		t.Errorf("Received %d != replied %d + send errors %d + drops %d", got, st.Replied.Load(), st.SendErrors.Load(), dropSum(s))
	}
}

// BenchmarkHandle measures one Information-request to Reply.
func BenchmarkHandle(b *testing.B) {
	s, clk := newTestServer(b, testConfig())
	p := pkt(infoReq())
	b.ReportAllocs()
	for b.Loop() {
		clk.Forward(time.Second) // stay within the rate limits
		if _, ok := s.handle(p); !ok {
			b.Fatal("no Reply")
		}
	}
}
