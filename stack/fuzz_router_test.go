package stack

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/refs"
)

// fuzzTrackLeaks makes FuzzRouter note, after each input, which
// reference-counted objects came alive, so that one a closed router leaks
// is reported with the input that made it (slow: it lists every live
// object after each input).
var fuzzTrackLeaks = flag.Bool("fuzzrouter.trackleaks", false, "FuzzRouter: find the input that made a leaked object")

// fuzzLogSent logs every frame the router sends, for investigating a crasher.
var fuzzLogSent = flag.Bool("fuzzrouter.log", false, "FuzzRouter: log every frame the router sends")

const (
	// fuzzRebuildEvery is how many inputs one router takes while fuzzing
	// before it is closed, checked for leaked packet buffers and built
	// again: often enough to bound the harness's flow history and the
	// conntrack table, rarely enough that building (a few hundred
	// microseconds) stays small beside the inputs.
	fuzzRebuildEvery = 2000
	// fuzzAnswerRounds bounds the rounds of answering the router's ARP and
	// neighbour solicitations per input (each answer releases the
	// packets waiting for it, which may need another next hop).
	fuzzAnswerRounds = 4
	// fuzzGoroutineSlack is how many goroutines an input may leave behind
	// for a while (netstack's timers, the accept loop's connections).
	fuzzGoroutineSlack = 64
	// fuzzResolveWait bounds the wait for a solicitation netstack is
	// about to send (it takes microseconds; the bound is for a loaded
	// machine).
	fuzzResolveWait = 20 * time.Millisecond
)

// FuzzRouter is the whole-router fuzz target: frames go in at a port batch
// of a two-interface NAT router with IPv6 and a port forward (see
// routerfuzz_test.go), through the trunk, dispatch, NAT, selective GRO,
// netstack's forwarding and local delivery, and out of the egress
// endpoints to the fake ports. An input is up to eight frames, each a
// control byte (ctlWAN, ...), a 16-bit length and the frame or IP packet.
//
// Invariants: nothing panics; no goroutine or packet buffer leaks (gVisor's
// refs in LeaksPanic mode, checked each time a router is closed); every
// frame sent is well-formed Ethernet for its port (tags, MAC, lengths, IP
// header checksum) with no TTL or hop limit 0; a forwarded packet's TTL is
// one less than it came in with and its L4 checksum is right unless it came
// in wrong; and no TCP or UDP packet reaches a LAN host from outside unless
// a LAN host's flow, the port forward or the allow6 rule admits it.
//
// Without -fuzz every input gets a router of its own, so each seed and
// each saved crasher reproduces alone. While fuzzing, one router takes
// fuzzRebuildEvery inputs in a row, which lets flows opened by one input
// meet the next one.
func FuzzRouter(f *testing.F) {
	for _, s := range routerSeeds() {
		f.Add(s)
	}
	z := &routerFuzzer{fresh: flag.Lookup("test.fuzz").Value.String() == ""}
	f.Cleanup(func() {
		if z.n != nil {
			z.closeNet(f)
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) { z.run(t, data) })
}

// routerFuzzer carries the router from one input to the next.
type routerFuzzer struct {
	fresh bool
	n     *fuzzNet
	hist  *fuzzHistory
	runs  int
	// prev is the last input's packets.
	prev []ingress
	// born maps each live reference-counted object (as the leak check
	// names it) to the input after which it was first seen alive; inputs
	// holds those inputs (fuzzTrackLeaks).
	born   map[string]int
	inputs map[int][]byte
	// before is the goroutine count before the router was built,
	// goroutines the count once it was.
	before, goroutines int
}

func (z *routerFuzzer) build(tb testing.TB) {
	z.before = runtime.NumGoroutine()
	z.n = newFuzzNet(tb)
	z.hist = newFuzzHistory()
	z.runs = 0
	z.prev = nil
	z.born, z.inputs = make(map[string]int), make(map[int][]byte)
	z.goroutines = runtime.NumGoroutine()
}

// closeNet closes the router and fails tb if packet buffers or goroutines
// outlive it. Netstack releases some packets from timers (the queue of a
// resolved neighbour), so both get a moment to settle.
func (z *routerFuzzer) closeNet(tb testing.TB) {
	base := z.before
	z.n.Close()
	z.n = nil
	deadline := time.Now().Add(2 * time.Second)
	for {
		leak := leakCheck()
		if leak == "" {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %d inputs on one router: %s%s", z.runs, leak, z.leakOrigins(leak))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > base {
		buf := make([]byte, 1<<20)
		tb.Fatalf("%d goroutines outlive the router:\n%s", got-base, buf[:runtime.Stack(buf, true)])
	}
}

// leakCheck returns gVisor's report of the reference-counted objects
// still alive (LeaksPanic mode, set by TestMain), or "".
func leakCheck() (leak string) {
	defer func() {
		if p := recover(); p != nil {
			leak = fmt.Sprint(p)
		}
	}()
	refs.DoRepeatedLeakCheck()
	return ""
}

// noteLive records the objects alive after input z.runs.
func (z *routerFuzzer) noteLive(data []byte) {
	live := make(map[string]bool)
	for _, l := range strings.Split(leakCheck(), "\n") {
		if obj, _, ok := strings.Cut(strings.TrimSpace(l), "]"); ok && strings.HasPrefix(obj, "[") {
			live[obj] = true
		}
	}
	for obj := range z.born {
		if !live[obj] {
			delete(z.born, obj)
		}
	}
	for obj := range live {
		if _, ok := z.born[obj]; !ok {
			z.born[obj] = z.runs
			z.inputs[z.runs] = data
		}
	}
}

// leakOrigins names the inputs after which the objects in leak were
// first seen alive, when tracked.
func (z *routerFuzzer) leakOrigins(leak string) string {
	var b strings.Builder
	for _, l := range strings.Split(leak, "\n") {
		obj, _, ok := strings.Cut(strings.TrimSpace(l), "]")
		if i, found := z.born[obj]; ok && found {
			fmt.Fprintf(&b, "\n%s] alive since input %d: %q", obj, i, z.inputs[i])
		}
	}
	return b.String()
}

func (z *routerFuzzer) run(t *testing.T, data []byte) {
	if z.n == nil || z.runs >= fuzzRebuildEvery {
		if z.n != nil {
			z.closeNet(t)
		}
		z.build(t)
	}
	if z.fresh {
		defer func() {
			if p := recover(); p != nil {
				// Leave the router as the panic left it: its leaks and
				// locks are the panic's, not news.
				z.n = nil
				panic(p)
			}
			z.closeNet(t)
		}()
	}
	z.runs++
	n := z.n
	frames := n.splitInput(data)
	// Packets of the last input may leave late (netstack sends the first
	// solicitation and the packets waiting for its answer from timers), so
	// they are checked against both inputs' packets.
	in := append([]ingress(nil), z.prev...)
	for _, ff := range frames {
		if ff.ip.ok {
			ig := ingress{port: ff.port, info: ff.ip, partial: ff.f.CsumPartial}
			z.hist.record(&ig)
			in = append(in, ig)
		}
	}
	z.prev = in[len(z.prev):]
	late := n.takeSent(false)
	n.deliver(frames)
	answered := false
	for i := range fuzzAnswerRounds {
		var replies []fuzzFrame
		sent := n.takeSent(answered)
		if i == 0 {
			sent[0], sent[1] = append(late[0], sent[0]...), append(late[1], sent[1]...)
		}
		for port := range n.ports {
			sent := sent[port]
			for _, f := range sent {
				if *fuzzLogSent {
					t.Logf("sent on port %d: %x", port, f)
				}
				if msg := checkSent(port, f, in, z.hist); msg != "" {
					t.Fatalf("sent on port %d: %s\n%x\ninput %d on this router:\n%s", port, msg, f, z.runs, describe(frames))
				}
			}
			replies = append(replies, n.answer(port, sent)...)
		}
		if len(replies) == 0 {
			break
		}
		n.deliver(replies)
		answered = true
	}
	if *fuzzTrackLeaks {
		z.noteLive(append([]byte(nil), data...))
	}
	if got := runtime.NumGoroutine(); got > z.goroutines+fuzzGoroutineSlack {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > z.goroutines+fuzzGoroutineSlack && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := runtime.NumGoroutine(); got > z.goroutines+fuzzGoroutineSlack {
			t.Fatalf("%d goroutines, %d when the router was built", got, z.goroutines)
		}
	}
}

// takeSent returns what the router sent on each port. If it sent nothing
// while it is resolving a neighbour, or after answered solicitations, it
// waits up to fuzzResolveWait: netstack sends the first solicitation and
// the packets waiting for the answer from timers.
func (n *fuzzNet) takeSent(answered bool) [2][][]byte {
	deadline := time.Now().Add(fuzzResolveWait)
	for {
		sent := [2][][]byte{n.ports[0].take(), n.ports[1].take()}
		if len(sent[0])+len(sent[1]) > 0 || time.Now().After(deadline) || (!answered && !n.resolving()) {
			return sent
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func describe(frames []fuzzFrame) string {
	var b strings.Builder
	for _, ff := range frames {
		fmt.Fprintf(&b, "  %s\n", ff)
	}
	return b.String()
}
