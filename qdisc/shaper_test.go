package qdisc

import (
	"fmt"
	"strings"
	"testing"
)

func TestWireBytes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   ShaperConfig
		ipLen int
		want  int
	}{
		{"raw", ShaperConfig{}, 1500, 1500},
		{"ethernet full", ShaperConfig{Overhead: 38, MPU: 84}, 1500, 1538},
		{"ethernet tiny hits mpu", ShaperConfig{Overhead: 38, MPU: 84}, 40, 84},
		{"docsis", ShaperConfig{Overhead: 18, MPU: 64}, 46, 64},
		{"pppoe-vcmux atm 1500", ShaperConfig{Overhead: 32, Framing: FramingATM}, 1500, 32 * 53}, // 1532 B -> 32 cells
		{"atm one byte past a cell", ShaperConfig{Overhead: 0, Framing: FramingATM}, 49, 2 * 53},
		{"pppoe-ptm", ShaperConfig{Overhead: 30, Framing: FramingPTM}, 1500, 1554}, // ceil(1530*65/64)
		{"negative overhead floor", ShaperConfig{Overhead: -64}, 20, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.WireBytes(tc.ipLen); got != tc.want {
				t.Errorf("WireBytes(%d) = %d, want %d", tc.ipLen, got, tc.want)
			}
		})
	}
}

func TestShaperConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  ShaperConfig
		want string
	}{
		{ShaperConfig{}, "rate 0"},
		{ShaperConfig{Rate: 1, Overhead: 257}, "overhead 257 out of range -64..256"},
		{ShaperConfig{Rate: 1, Overhead: -65}, "overhead -65 out of range"},
		{ShaperConfig{Rate: 1, MPU: -1}, "mpu -1"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if err := (&ShaperConfig{Rate: 1, Overhead: 256}).Validate(); err != nil {
		t.Errorf("overhead 256: %v", err)
	}
}

// wire is the test's own statement of the link-layer arithmetic, kept apart
// from WireBytes: IP length + overhead, at least mpu, then ATM cells of 48
// payload bytes sent as 53, or PTM's 65 bytes per 64.
func wire(ip, overhead, mpu int, framing Framing) int {
	n := ip + overhead
	if n < mpu {
		n = mpu
	}
	switch framing {
	case FramingATM:
		cells := n / 48
		if n%48 != 0 {
			cells++
		}
		return cells * 53
	case FramingPTM:
		w := n * 65 / 64
		if n*65%64 != 0 {
			w++
		}
		return w
	}
	return n
}

// TestShaperRate: over 2 simulated seconds of backlog with mixed sizes the
// link-layer bits sent match the configured rate within 1 %, whether the
// caller wakes exactly at next or polls every 0.5 ms.
func TestShaperRate(t *testing.T) {
	sizes := []int{1514, 64, 576, 1514, 1514, 200, 1000, 90}
	for _, cfg := range []ShaperConfig{
		{Rate: 20_000_000, Overhead: 44},
		{Rate: 100_000_000, Overhead: 18, MPU: 64},
		{Rate: 8_000_000, Overhead: 32, Framing: FramingATM},
		{Rate: 50_000_000, Overhead: 30, Framing: FramingPTM},
		{Rate: 1_000_000_000, Overhead: 38, MPU: 84},
	} {
		for _, poll := range []int64{0, ms / 2} {
			t.Run(fmt.Sprintf("%d/%d/%d/%d/poll%d", cfg.Rate, cfg.Overhead, cfg.MPU, cfg.Framing, poll), func(t *testing.T) {
				q := mustNew(t, Config{Limit: 1024})
				s, err := NewShaper(cfg, q)
				if err != nil {
					t.Fatal(err)
				}
				var frames [][]byte
				for i, n := range sizes {
					frames = append(frames, udp4("10.0.0.1", "192.0.2.1", uint16(i), 9, n))
				}
				out := make([][]byte, 128)
				const dur = 2000 * ms
				var bits int64
				now := int64(0)
				for now < dur {
					for q.Backlog() < 200 {
						q.Enqueue(now, frames)
					}
					n, next := s.Dequeue(now, out)
					for _, f := range out[:n] {
						bits += int64(wire(len(f)-14, cfg.Overhead, cfg.MPU, cfg.Framing)) * 8
					}
					switch {
					case poll != 0:
						now += poll
					case next > now:
						now = next
					}
				}
				got := float64(bits) / (float64(dur) / 1e9)
				if d := got/float64(cfg.Rate) - 1; d < -0.01 || d > 0.01 {
					t.Errorf("rate %.0f bit/s, want %d within 1%% (off %.2f%%)", got, cfg.Rate, d*100)
				}
			})
		}
	}
}

// TestShaperIdle: an empty shaper reports Idle, and after idling it starts
// without saved-up credit: one frame now, the next one frame-time later.
func TestShaperIdle(t *testing.T) {
	q := mustNew(t, Config{})
	s, _ := NewShaper(ShaperConfig{Rate: 10_000_000}, q)
	out := make([][]byte, 16)
	if n, next := s.Dequeue(0, out); n != 0 || next != Idle {
		t.Fatalf("empty Dequeue = %d, %d; want 0, Idle", n, next)
	}
	f := udp4("10.0.0.1", "10.0.0.2", 1, 1, 1014) // 1000 B IP: 800 µs at 10 Mbit/s
	now := 10_000 * ms
	q.Enqueue(now, [][]byte{f, f, f})
	n, next := s.Dequeue(now, out)
	if n != 1 || next != now+800_000 {
		t.Errorf("Dequeue after idle = %d, next %d; want 1 frame, next now+800000 (%d)", n, next, now+800_000)
	}
	if n, _ := s.Dequeue(next-1, out); n != 0 {
		t.Errorf("Dequeue 1 ns early sent %d", n)
	}
	if n, _ := s.Dequeue(next, out); n != 1 {
		t.Errorf("Dequeue at next sent %d, want 1", n)
	}
}

// TestShaperIngressChargesDrops: in ingress mode the bits of packets CoDel
// dropped count toward the rate (they crossed the bottleneck already), so
// sent plus CoDel-dropped equals the rate; in egress mode sent alone does.
func TestShaperIngressChargesDrops(t *testing.T) {
	const rate = 10_000_000
	for _, ingress := range []bool{false, true} {
		q := mustNew(t, Config{CoDel: CoDelParams{ECN: false}})
		s, _ := NewShaper(ShaperConfig{Rate: rate, Ingress: ingress}, q)
		// 1.2x the shaped rate, as when the ISP's line is faster than the
		// configured download.
		src := &simSource{frame: udp4("10.0.0.1", "10.0.0.2", 1, 1, 1514), pps: 1000}
		var sent int64
		const dur = 4000 * ms
		runSim(q, s, []*simSource{src}, dur, ms/10, func(f []byte, now, soj int64) {
			sent += int64(len(f)-14) * 8
		})
		st := q.Stats().Tins[0]
		if st.CoDelDrops == 0 {
			t.Fatalf("ingress %v: no CoDel drops at 1.2x overload", ingress)
		}
		sentRate := float64(sent) / 4
		chargedRate := (float64(sent) + float64(st.CoDelDrops)*1500*8) / 4
		t.Logf("ingress %v: sent %.0f bit/s, sent+codel-dropped %.0f bit/s, %d codel drops, %d overlimit", ingress, sentRate, chargedRate, st.CoDelDrops, st.OverlimitDrops)
		if ingress {
			if sentRate > 0.99*rate {
				t.Errorf("ingress: sent %.0f bit/s, want below the rate by the dropped share", sentRate)
			}
			if chargedRate < 0.98*rate || chargedRate > 1.02*rate {
				t.Errorf("ingress: sent+dropped %.0f bit/s, want %d within 2%%", chargedRate, rate)
			}
		} else if sentRate < 0.99*rate || sentRate > 1.01*rate {
			t.Errorf("egress: sent %.0f bit/s, want %d within 1%%", sentRate, rate)
		}
	}
}
