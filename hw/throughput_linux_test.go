package hw

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// TestBridgeThroughput compares Bridge with the kernel's bridge on the
// same veths: one iperf3 TCP stream, 5 s each, TSO/GSO/GRO and checksum
// offload off on the hosts. It runs only with GVROUTER_HW_THROUGHPUT=1.
func TestBridgeThroughput(t *testing.T) {
	if os.Getenv("GVROUTER_HW_THROUGHPUT") != "1" {
		t.Skip("set GVROUTER_HW_THROUGHPUT=1 to measure")
	}
	privileged(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("needs iperf3")
	}
	a, r, b := newNetns(t), newNetns(t), newNetns(t)
	r.IP(t, "link", "add", "a0", "type", "veth", "peer", "name", "p1")
	r.IP(t, "link", "add", "b0", "type", "veth", "peer", "name", "q1")
	r.IP(t, "link", "set", "a0", "netns", a.Name())
	r.IP(t, "link", "set", "b0", "netns", b.Name())
	a.IP(t, "addr", "add", "10.77.0.1/24", "dev", "a0")
	b.IP(t, "addr", "add", "10.77.0.2/24", "dev", "b0")
	for _, x := range []struct {
		ns  *netnstest.Netns
		dev string
	}{{a, "a0"}, {r, "p1"}, {r, "q1"}, {b, "b0"}} {
		x.ns.IP(t, "link", "set", x.dev, "up")
		x.ns.Do(t, func() {
			if err := SetOffloads(x.dev, Offloads{}); err != nil {
				t.Errorf("SetOffloads(%s): %v", x.dev, err)
			}
		})
	}
	srv := exec.Command("ip", "netns", "exec", b.Name(), "iperf3", "-s", "-B", "10.77.0.2")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	time.Sleep(300 * time.Millisecond)
	measure := func() float64 {
		t.Helper()
		out, err := exec.Command("ip", "netns", "exec", a.Name(), "iperf3", "-c", "10.77.0.2", "-t", "5", "-J").Output()
		if err != nil {
			t.Fatalf("iperf3: %v: %s", err, out)
		}
		var res struct {
			End struct {
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
			} `json:"end"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("iperf3 output: %v", err)
		}
		return res.End.SumReceived.BitsPerSecond / 1e9
	}

	// Ours.
	pa := openIn(t, r, Config{Name: "p1"})
	pb := openIn(t, r, Config{Name: "q1"})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { Bridge(ctx, pa, pb) })
	ours := measure()
	cancel()
	wg.Wait()
	sa, sb := pa.Stats(), pb.Stats()
	pa.Close()
	pb.Close()

	// The kernel's.
	r.IP(t, "link", "add", "br0", "type", "bridge")
	r.IP(t, "link", "set", "p1", "master", "br0")
	r.IP(t, "link", "set", "q1", "master", "br0")
	r.IP(t, "link", "set", "br0", "up")
	time.Sleep(500 * time.Millisecond)
	kernel := measure()
	t.Logf("hw.Bridge %.2f Gbit/s, kernel bridge %.2f Gbit/s, ratio %.2f", ours, kernel, ours/kernel)
	t.Logf("p1 stats %+v", sa)
	t.Logf("q1 stats %+v", sb)
}
