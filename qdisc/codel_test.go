package qdisc

import (
	"math"
	"math/rand/v2"
	"testing"
)

const ms = int64(1_000_000)

// testPkt is a packet in the tests' own queue.
type testPkt struct {
	id       int
	enqueued int64
	size     int
	ect      bool
}

// fifo is a plain packet FIFO that tracks its byte count, like the RFC's queue_t.
type fifo struct {
	pkts  []testPkt
	bytes int
}

func (q *fifo) push(p testPkt) { q.pkts = append(q.pkts, p); q.bytes += p.size }

func (q *fifo) pop() (testPkt, bool) {
	if len(q.pkts) == 0 {
		return testPkt{}, false
	}
	p := q.pkts[0]
	q.pkts = q.pkts[1:]
	q.bytes -= p.size
	return p, true
}

// outcome records what one dequeue did.
type outcome struct {
	dropped []int
	marked  []int
	sent    int // id, -1 if nothing
}

// codelDequeue is the caller loop documented on CoDel.
func codelDequeue(c *CoDel, p *CoDelParams, q *fifo, now int64) outcome {
	var o outcome
	for {
		pkt, ok := q.pop()
		if !ok {
			c.Empty()
			o.sent = -1
			return o
		}
		switch c.Judge(p, now, now-pkt.enqueued, q.bytes, pkt.ect) {
		case Drop:
			o.dropped = append(o.dropped, pkt.id)
			continue
		case Mark:
			o.marked = append(o.marked, pkt.id)
		}
		o.sent = pkt.id
		return o
	}
}

// rfcCoDel is a line-by-line transcription of the pseudocode of RFC 8289
// §5 (dodequeue, dequeue, control_law), kept as the reference model. It has no
// ECN (the RFC's pseudocode only drops).
type rfcCoDel struct {
	q                        *fifo
	target, interval         int64
	maxpacket                int
	firstAboveTime, dropNext int64
	count, lastcount         uint32
	dropping                 bool
}

type dodequeueResult struct {
	p        testPkt
	ok       bool // p valid
	okToDrop bool
}

func (r *rfcCoDel) dodequeue(now int64) dodequeueResult {
	p, ok := r.q.pop()
	res := dodequeueResult{p: p, ok: ok}
	if !ok {
		r.firstAboveTime = 0
		return res
	}
	sojourn := now - p.enqueued
	if sojourn < r.target || r.q.bytes <= r.maxpacket {
		r.firstAboveTime = 0
	} else {
		if r.firstAboveTime == 0 {
			r.firstAboveTime = now + r.interval
		} else if now >= r.firstAboveTime {
			res.okToDrop = true
		}
	}
	return res
}

func (r *rfcCoDel) controlLaw(t int64) int64 {
	return t + int64(float64(r.interval)/math.Sqrt(float64(r.count)))
}

func (r *rfcCoDel) dequeue(now int64) outcome {
	var o outcome
	res := r.dodequeue(now)
	if !res.ok {
		r.dropping = false
		o.sent = -1
		return o
	}
	if r.dropping {
		if !res.okToDrop {
			r.dropping = false
		}
		for now >= r.dropNext && r.dropping {
			o.dropped = append(o.dropped, res.p.id)
			r.count++
			res = r.dodequeue(now)
			if !res.okToDrop {
				r.dropping = false
			} else {
				r.dropNext = r.controlLaw(r.dropNext)
			}
		}
	} else if res.okToDrop {
		o.dropped = append(o.dropped, res.p.id)
		res = r.dodequeue(now)
		r.dropping = true
		delta := r.count - r.lastcount
		r.count = 1
		if delta > 1 && now-r.dropNext < 16*r.interval {
			r.count = delta
		}
		r.dropNext = r.controlLaw(now)
		r.lastcount = r.count
	}
	o.sent = -1
	if res.ok {
		o.sent = res.p.id
	}
	return o
}

func sameOutcome(a, b outcome) bool {
	if a.sent != b.sent || len(a.dropped) != len(b.dropped) || len(a.marked) != len(b.marked) {
		return false
	}
	for i := range a.dropped {
		if a.dropped[i] != b.dropped[i] {
			return false
		}
	}
	return true
}

// TestCoDelMatchesRFC8289Pseudocode replays random arrival/departure traces
// through CoDel and through the RFC 8289 §5 pseudocode and requires the same
// packets to be dropped and sent, dequeue by dequeue.
func TestCoDelMatchesRFC8289Pseudocode(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		params := CoDelParams{Target: 5 * ms, Interval: 100 * ms, MaxPacket: 1514}
		var c CoDel
		mine := &fifo{}
		ref := &rfcCoDel{q: &fifo{}, target: params.Target, interval: params.Interval, maxpacket: params.MaxPacket}
		now := int64(1)
		id := 0
		drops := 0
		// Phases of overload and underload so the controller enters,
		// leaves and re-enters the dropping state.
		for step := 0; step < 20000; step++ {
			now += int64(rng.IntN(400_000)) + 50_000
			load := 3
			if (step/2000)%2 == 1 {
				load = 1 // drain
			}
			for range rng.IntN(load + 1) {
				p := testPkt{id: id, enqueued: now, size: 64 + rng.IntN(1451)}
				id++
				mine.push(p)
				ref.q.push(p)
			}
			got := codelDequeue(&c, &params, mine, now)
			want := ref.dequeue(now)
			if !sameOutcome(got, want) {
				t.Fatalf("seed %d step %d now %d: CoDel dequeue = %+v, RFC pseudocode %+v", seed, step, now, got, want)
			}
			drops += len(got.dropped)
			if c.count != ref.count || c.dropping != ref.dropping || c.dropNext != ref.dropNext {
				t.Fatalf("seed %d step %d: state count=%d dropping=%v dropNext=%d, RFC count=%d dropping=%v dropNext=%d",
					seed, step, c.count, c.dropping, c.dropNext, ref.count, ref.dropping, ref.dropNext)
			}
		}
		if drops == 0 {
			t.Fatalf("seed %d: no drops at all: the trace never exercised the control law", seed)
		}
	}
}

// standing feeds a queue whose head always has the given sojourn and a large
// backlog, and returns the drop times over [0, end) with one dequeue every step.
func standing(c *CoDel, p *CoDelParams, sojourn func(now int64) int64, step, end int64) []int64 {
	var drops []int64
	for now := int64(0); now < end; now += step {
		for {
			v := c.Judge(p, now, sojourn(now), 1<<20, false)
			if v != Drop {
				break
			}
			drops = append(drops, now)
		}
	}
	return drops
}

// TestCoDelControlLaw checks RFC 8289 §5's control law on a standing queue:
// the first drop one interval after the sojourn rose above target, then drop k+1
// interval/sqrt(k) after drop k's schedule.
func TestCoDelControlLaw(t *testing.T) {
	p := CoDelParams{Target: 5 * ms, Interval: 100 * ms, MaxPacket: 1514}
	var c CoDel
	drops := standing(&c, &p, func(int64) int64 { return 20 * ms }, ms/10, 2000*ms)
	if len(drops) < 10 {
		t.Fatalf("drops = %d, want many", len(drops))
	}
	if drops[0] != 100*ms {
		t.Errorf("first drop at %d ns, want %d (one interval after sojourn exceeded target at t=0)", drops[0], 100*ms)
	}
	sched := float64(100 * ms)
	for k := 1; k < len(drops); k++ {
		sched += float64(100*ms) / math.Sqrt(float64(k))
		if d := float64(drops[k]) - sched; d < -1000 || d > float64(ms/10) {
			t.Errorf("drop %d at %.3f ms, want the first dequeue at or after %.3f ms (interval/sqrt(%d) after the previous schedule)",
				k+1, float64(drops[k])/1e6, sched/1e6, k)
		}
	}
	if got, want := c.Count(), uint32(len(drops)); got != want {
		t.Errorf("Count() = %d, want %d (one per drop)", got, want)
	}
	// The spacing shrinks: interval/sqrt(k) is decreasing.
	for k := 2; k < len(drops); k++ {
		if drops[k]-drops[k-1] > drops[k-1]-drops[k-2]+ms/10 {
			t.Errorf("spacing grew between drops %d and %d: %d then %d ns", k-1, k+1, drops[k-1]-drops[k-2], drops[k]-drops[k-1])
		}
	}
}

// TestCoDelNoDropBelowTarget: a sojourn under target never drops, nor one above
// target for less than an interval, nor a backlog of one packet or less.
func TestCoDelNoDropBelowTarget(t *testing.T) {
	p := CoDelParams{Target: 5 * ms, Interval: 100 * ms, MaxPacket: 1514}
	t.Run("below target", func(t *testing.T) {
		var c CoDel
		if d := standing(&c, &p, func(int64) int64 { return 5*ms - 1 }, ms, 10_000*ms); len(d) != 0 {
			t.Errorf("sojourn just below target: drops at %v, want none", d)
		}
	})
	t.Run("above for less than an interval", func(t *testing.T) {
		var c CoDel
		// 99 ms above, 1 ms below, repeated: the minimum never stays above for an interval.
		soj := func(now int64) int64 {
			if now%(100*ms) >= 99*ms {
				return ms
			}
			return 50 * ms
		}
		if d := standing(&c, &p, soj, ms, 10_000*ms); len(d) != 0 {
			t.Errorf("drops at %v, want none", d)
		}
	})
	t.Run("one packet backlog", func(t *testing.T) {
		var c CoDel
		for now := int64(0); now < 10_000*ms; now += ms {
			if v := c.Judge(&p, now, 50*ms, 1514, false); v != Deliver {
				t.Fatalf("Judge(backlog 1514 = maxpacket) at %d = %v, want deliver", now, v)
			}
		}
	})
}

// TestCoDelLeavesDropping: once the sojourn falls below target the state is
// left at the next dequeue, and an empty queue leaves it too.
func TestCoDelLeavesDropping(t *testing.T) {
	p := CoDelParams{Target: 5 * ms, Interval: 100 * ms, MaxPacket: 1514}
	var c CoDel
	high := true
	soj := func(int64) int64 {
		if high {
			return 30 * ms
		}
		return ms
	}
	standing(&c, &p, soj, ms, 300*ms)
	if !c.Dropping() {
		t.Fatal("not dropping after 300 ms at 30 ms sojourn")
	}
	high = false
	if v := c.Judge(&p, 300*ms, soj(0), 1<<20, false); v != Deliver || c.Dropping() {
		t.Errorf("Judge(sojourn 1 ms) = %v, dropping %v; want deliver, not dropping", v, c.Dropping())
	}
	high = true
	standing(&c, &p, soj, ms, 300*ms)
	c.Empty()
	if c.Dropping() {
		t.Error("still dropping after Empty")
	}
}

// TestCoDelReentryCount checks the count rule of RFC 8289 §5 on entering the
// dropping state: re-entering within 16 intervals of the last scheduled drop
// resumes with the previous cycle's drop count; later it restarts at 1.
func TestCoDelReentryCount(t *testing.T) {
	p := CoDelParams{Target: 5 * ms, Interval: 100 * ms, MaxPacket: 1514}
	run := func(gap int64) (first, second uint32) {
		var c CoDel
		now := int64(0)
		drive := func(soj int64, dur int64) {
			for end := now + dur; now < end; now += ms {
				for c.Judge(&p, now, soj, 1<<20, false) == Drop {
				}
			}
		}
		drive(30*ms, 1000*ms) // cycle 1
		first = c.Count()
		drive(ms, gap) // below target: leave dropping
		if c.Dropping() {
			t.Fatalf("gap %d: still dropping", gap)
		}
		// Sojourn rises again: dropping restarts one interval later.
		for c.Judge(&p, now, 30*ms, 1<<20, false) != Drop {
			now += ms
		}
		return first, c.Count()
	}
	// The re-entry drop comes one interval after the gap, so it is
	// gap+100 ms after the last scheduled drop of cycle 1 (give or take
	// the spacing, under 30 ms at this count).
	for _, gap := range []int64{200 * ms, 1400 * ms} {
		first, second := run(gap)
		if first < 3 {
			t.Fatalf("cycle 1 ended with count %d, want >= 3", first)
		}
		// delta = count - lastcount, where lastcount was 1 (set on entry).
		if want := first - 1; second != want {
			t.Errorf("re-entry %d ms after: count = %d, want %d (drops of the last cycle)", gap/ms, second, want)
		}
	}
	for _, gap := range []int64{1600 * ms, 5000 * ms} {
		if _, second := run(gap); second != 1 {
			t.Errorf("re-entry %d ms after (> 16 intervals): count = %d, want 1", gap/ms, second)
		}
	}
}

// TestCoDelECN: with ECN, an ECT packet that would be dropped is marked and
// sent instead, the next drop is scheduled by the control law, and non-ECT
// packets are still dropped. Without ECN in the params ECT packets are dropped.
func TestCoDelECN(t *testing.T) {
	p := CoDelParams{Target: 5 * ms, Interval: 100 * ms, MaxPacket: 1514, ECN: true}
	var c CoDel
	var marks []int64
	for now := int64(0); now < 1000*ms; now += ms / 10 {
		switch c.Judge(&p, now, 30*ms, 1<<20, true) {
		case Drop:
			t.Fatalf("ECT packet dropped at %d with ECN on", now)
		case Mark:
			marks = append(marks, now)
		}
	}
	if len(marks) < 5 || marks[0] != 100*ms {
		t.Fatalf("marks at %v, want the first at 100 ms and then more", marks)
	}
	sched := float64(100 * ms)
	for k := 1; k < len(marks); k++ {
		sched += float64(100*ms) / math.Sqrt(float64(k))
		if d := float64(marks[k]) - sched; d < -1000 || d > float64(ms/10) {
			t.Errorf("mark %d at %.3f ms, want at %.3f ms", k+1, float64(marks[k])/1e6, sched/1e6)
		}
	}
	// Non-ECT in the same state: dropped, not marked.
	c2 := c
	if v := c2.Judge(&p, 5000*ms, 30*ms, 1<<20, false); v != Drop {
		t.Errorf("non-ECT packet while dropping = %v, want drop", v)
	}
	p.ECN = false
	var c3 CoDel
	for now := int64(0); now < 300*ms; now += ms {
		if v := c3.Judge(&p, now, 30*ms, 1<<20, true); v == Mark {
			t.Fatal("marked with ECN off")
		}
	}
}

func TestCoDelJudgeAllocs(t *testing.T) {
	p := DefaultCoDelParams()
	var c CoDel
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		now += ms
		c.Judge(&p, now, 20*ms, 1<<20, now%2 == 0)
	}); n != 0 {
		t.Errorf("Judge allocs = %v, want 0", n)
	}
}

// TestCoDelMarkLimit: while dropping, an ECT packet that waited MarkLimit
// or more is dropped, not marked, and the state machine does not see it:
// count and the next mark's time stay, so the packets below the limit
// are marked on the control law's schedule. Below MarkLimit, outside the
// dropping state, or with the last packet of the queue, nothing changes;
// MarkLimit 0 is RFC 8289 as printed.
func TestCoDelMarkLimit(t *testing.T) {
	p := CoDelParams{Target: 5 * ms, Interval: 100 * ms, MaxPacket: 1514, ECN: true, MarkLimit: 100 * ms}
	var c CoDel
	// Above target but below the limit: marked on schedule (first at 100 ms).
	now := int64(0)
	for ; now <= 100*ms; now += ms {
		v := c.Judge(&p, now, 30*ms, 1<<20, true)
		if want := map[bool]Verdict{true: Mark, false: Deliver}[now == 100*ms]; v != want {
			t.Fatalf("at %d ms: %v, want %v", now/ms, v, want)
		}
	}
	count, next := c.Count(), c.DropNext()
	// A packet past the limit: dropped, the schedule untouched.
	if v := c.Judge(&p, now, 100*ms, 1<<20, true); v != Drop {
		t.Fatalf("ECT packet at the limit while dropping = %v, want drop", v)
	}
	if c.Count() != count || c.DropNext() != next || !c.Dropping() {
		t.Fatalf("after the overload drop count %d next %d dropping %v, want %d %d true", c.Count(), c.DropNext(), c.Dropping(), count, next)
	}
	// The next packet, below the limit, is judged as the first of the dequeue.
	if v := c.Judge(&p, now, 30*ms, 1<<20, true); v != Deliver {
		t.Fatalf("packet after the overload drop = %v, want deliver (next mark at %d ms)", v, next/ms)
	}
	if v := c.Judge(&p, next, 30*ms, 1<<20, true); v != Mark || c.Count() != count+1 {
		t.Fatalf("at the scheduled time = %v count %d, want mark, count %d", v, c.Count(), count+1)
	}
	// The last packet of the queue is sent, marked or not.
	if v := c.Judge(&p, next+ms, 500*ms, 1514, true); v == Drop {
		t.Fatal("the queue's last packet dropped")
	}
	// Not yet dropping: a packet past the limit is not dropped.
	var fresh CoDel
	if v := fresh.Judge(&p, 0, 500*ms, 1<<20, true); v != Deliver {
		t.Fatalf("first packet past the limit, not dropping = %v, want deliver", v)
	}
	// MarkLimit 0: marked whatever the sojourn, as RFC 8289 prints it.
	p.MarkLimit = 0
	var rfc CoDel
	for now := int64(0); now < 1000*ms; now += ms {
		if v := rfc.Judge(&p, now, 900*ms, 1<<20, true); v == Drop {
			t.Fatalf("MarkLimit 0: ECT packet dropped at %d ms", now/ms)
		}
	}
}
