package sqm

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/qdisc"
)

// TestSet: an unshaped direction writes straight to the port; a shaped
// one gets a Queue that survives a rate change (the same Queue,
// reconfigured) and is closed once the config drops it.
func TestSet(t *testing.T) {
	s := NewSet(nil, slog.New(slog.DiscardHandler))
	port := &sink{}
	if w := s.Writer("wan", nil, port); w != port {
		t.Fatalf("unshaped writer = %T, want the port itself", w)
	}
	p := Params{Rate: 20e6, FrameSize: qdisc.DefaultFrameSize, ECN: true}
	up := s.Writer("wan", &p, port)
	q, ok := up.(*Queue)
	if !ok {
		t.Fatalf("shaped writer = %T, want *Queue", up)
	}
	down := s.Download("wan", &p, &sink{})
	if down == nil || s.Download("lan", nil, &sink{}) != nil {
		t.Fatalf("Download = %v; lan unshaped, want nil", down)
	}
	p2 := p
	p2.Rate = 10e6
	if again := s.Writer("wan", &p2, port); again != q || q.Params().Rate != 10e6 {
		t.Errorf("after a rate change: %p rate %d, want the same Queue %p at 10e6", again, q.Params().Rate, q)
	}
	if st := s.Status(); len(st) != 2 || st[0].Interface != "wan" || st[0].Direction != "upload" || st[1].Direction != "download" {
		t.Errorf("Status = %+v, want wan upload then download", st)
	}
	s.Prune(func(string) (bool, bool) { return true, false })
	if st := s.Status(); len(st) != 1 || st[0].Direction != "upload" {
		t.Errorf("after pruning download: %+v", st)
	}
	// The pruned Queue is closed: a write is refused, not queued forever.
	done := make(chan struct{})
	go func() { down.WriteFrames([][]byte{udp4(hostA, remote, 1, 2, 200)}); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Error("a write to the pruned download Queue blocked")
	}
	s.Close()
	if st := s.Status(); len(st) != 0 {
		t.Errorf("after Close: %+v", st)
	}
}
