package qdisc

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// A small TCP model to drive FQCoDel+Shaper as TCP would: ack-clocked
// senders with slow start, then CUBIC's TCP-friendly growth (0.53
// packets per round trip for beta 0.7) and its decrease to 0.7 of the
// window once per round trip on a CE echo or a loss, never below Linux's
// minimum window of 2 packets. The receiver acks every packet one base
// round trip after it leaves the shaper; a gap in sequence numbers is a
// loss.

// simTCP is one sender and its receiver.
type simTCP struct {
	port     uint16
	ect      bool
	cwnd     float64
	ssthresh float64
	inflight int
	nextSeq  uint32
	expect   uint32 // receiver's next expected seq
	cwrUntil int64
	frame    []byte
	// Over the second half: queueing delay and IP bytes delivered.
	sojSum, sojN int64
	bytes        int64
}

// simAck is an ack on its way back to flow's sender.
type simAck struct {
	at   int64
	flow int
	ce   bool
	lost int // packets found missing before this one
}

// tcpSimResult is what runTCPSim measured over its second half.
type tcpSimResult struct {
	bulkSojourn        []float64 // per flow mean, ms
	rate               float64   // delivered bit/s (IP bytes)
	marks, drops, over uint64
}

// runTCPSim runs n flows of 1514-byte frames through an FQCoDel shaped
// to rate for dur ns with a base round trip of rtt ns, in 20 µs steps.
// Acks are due in the order frames left, so the ack queue stays sorted.
func runTCPSim(t *testing.T, n int, rate uint64, rtt, dur int64, ecnOn bool) tcpSimResult {
	q := mustNew(t, Config{CoDel: CoDelParams{ECN: true}})
	s, err := NewShaper(ShaperConfig{Rate: rate, Overhead: 14, MaxLag: 4 * ms}, q)
	if err != nil {
		t.Fatal(err)
	}
	flows := make([]*simTCP, n)
	for i := range flows {
		tos := uint8(0)
		if ecnOn {
			tos = 2
		}
		flows[i] = &simTCP{port: uint16(40000 + i), ect: ecnOn, cwnd: 10, ssthresh: 1e9,
			frame: frame4("10.0.0.1", "192.0.2.1", protoTCP, uint16(40000+i), 5201, 1514, tos)}
	}
	var acks []simAck
	out := make([][]byte, 32)
	var batch, bufs [][]byte
	const step = 20_000 // 20 µs
	var deliveredBits int64
	half := dur / 2
	for now := int64(0); now < dur; now += step {
		// ACKs due.
		k := 0
		for ; k < len(acks) && acks[k].at <= now; k++ {
			a := acks[k]
			f := flows[a.flow]
			f.inflight -= 1 + a.lost
			if (a.ce || a.lost > 0) && now >= f.cwrUntil {
				f.cwnd = math.Max(f.cwnd*0.7, 2)
				f.ssthresh = f.cwnd
				// No second decrease for the packets already in flight.
				f.cwrUntil = now + rtt + int64(f.inflight)*int64(1514*8*1e9/float64(rate))
			} else if f.cwnd < f.ssthresh {
				f.cwnd++
			} else {
				f.cwnd += 0.53 / f.cwnd
			}
		}
		acks = acks[k:]
		// Senders.
		batch = batch[:0]
		for i, f := range flows {
			for float64(f.inflight) < math.Floor(f.cwnd) {
				// Enqueue copies the frame: the buffers serve every step.
				if len(batch) == len(bufs) {
					bufs = append(bufs, make([]byte, len(f.frame)))
				}
				fr := bufs[len(batch)]
				copy(fr, f.frame)
				stamp(fr, now)
				binary.BigEndian.PutUint32(fr[50:], f.nextSeq)
				binary.BigEndian.PutUint32(fr[54:], uint32(i))
				f.nextSeq++
				f.inflight++
				batch = append(batch, fr)
			}
		}
		q.Enqueue(now, batch)
		for {
			m, _ := s.Dequeue(now, out)
			for _, fr := range out[:m] {
				i := int(binary.BigEndian.Uint32(fr[54:]))
				seq := binary.BigEndian.Uint32(fr[50:])
				f := flows[i]
				lost := int(seq - f.expect)
				f.expect = seq + 1
				if now > half {
					f.sojSum += now - stamped(fr)
					f.sojN++
					f.bytes += int64(len(fr) - 14)
					deliveredBits += int64(len(fr)-14) * 8
				}
				acks = append(acks, simAck{at: now + rtt, flow: i, ce: fr[15]&3 == 3, lost: lost})
			}
			if m < len(out) {
				break
			}
		}
	}
	var r tcpSimResult
	for _, f := range flows {
		r.bulkSojourn = append(r.bulkSojourn, float64(f.sojSum)/float64(max(f.sojN, 1))/1e6)
	}
	r.rate = float64(deliveredBits) / (float64(dur-half) / 1e9)
	st := q.Stats().Tins[0]
	r.marks, r.drops, r.over = st.ECNMarks, st.CoDelDrops, st.OverlimitDrops
	return r
}

// TestTCPBulkDelay: TCP flows (the model above, 1 ms base round trip,
// ECN) through FQ-CoDel shaped to the bench's 19 and 95 Mbit/s: each
// flow's own queueing delay stays near where CoDel can hold it, the
// larger of twice the target and the floor TCP sets itself (its minimum
// window of 2 packets per flow, all queued: 2 x flows frame times), plus
// 2 ms, and the link stays full. Judged by each flow's own backlog
// instead of the whole queue's, 8 flows at 19 Mbit/s stood at 17.6 ms and
// 16 at 30.7 ms (TestCoDelJudgesByLinkBacklog).
func TestTCPBulkDelay(t *testing.T) {
	for _, c := range []struct {
		flows int
		rate  uint64
	}{{4, 19_000_000}, {8, 19_000_000}, {16, 19_000_000}, {4, 95_000_000}} {
		t.Run(fmt.Sprintf("%dx%dM", c.flows, c.rate/1_000_000), func(t *testing.T) {
			r := runTCPSim(t, c.flows, c.rate, 1*ms, 8000*ms, true)
			frame := float64((1500+14)*8) / float64(c.rate) * 1e3 // ms
			bound := math.Max(2*float64(DefaultTarget)/1e6, 2*float64(c.flows)*frame) + 2
			worst := 0.0
			for _, d := range r.bulkSojourn {
				worst = math.Max(worst, d)
			}
			t.Logf("per-flow mean sojourn %.2f ms (bound %.2f), %.1f %% of the rate, %d marks, %d drops, %d overlimit",
				r.bulkSojourn, bound, 100*r.rate/float64(c.rate), r.marks, r.drops, r.over)
			if worst > bound {
				t.Errorf("a bulk flow's mean queueing delay is %.2f ms, want <= %.2f ms", worst, bound)
			}
			if r.rate < 0.95*float64(c.rate) {
				t.Errorf("the flows moved %.1f %% of the rate, want >= 95 %%", 100*r.rate/float64(c.rate))
			}
			if r.marks == 0 || r.drops+r.over != 0 {
				t.Errorf("%d marks, %d drops, %d overlimit: want ECN marks alone", r.marks, r.drops, r.over)
			}
		})
	}
}
