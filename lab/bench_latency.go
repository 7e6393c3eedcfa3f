package lab

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
)

// Latency bench (mode l): a 20 packets-per-second ping beside the load,
// as the bufferbloat tests (flent rrul, irtt) probe a link. 20 pps is
// enough samples for a p99 over a 10 s run and too little to load the
// path itself.
const (
	// probeInterval is the ping's -i.
	probeInterval = "0.05"
	// probesPerSecond is 1/probeInterval.
	probesPerSecond = 20
	// idleProbes is how many probes measure the idle RTT (2 s).
	idleProbes = 40
	// latencyStreams is the load: iperf3 -P, 4 TCP streams.
	latencyStreams = 4
)

// latencyModes are the bench modes the latency bench measures, in order:
// the kernel's masquerade, the router on its default port driver and on
// af_xdp.
const latencyModes = "nax"

// pingStats is what one ping run says: each reply's RTT in ms, and how
// many requests went out.
type pingStats struct {
	RTTs []float64
	Sent int
}

var (
	pingReplyRE = regexp.MustCompile(`time=([0-9.]+) ms`)
	pingSentRE  = regexp.MustCompile(`(?m)^(\d+) packets transmitted`)
)

// parsePing reads the output of iputils ping: one "time=X ms" per reply,
// and the summary's "N packets transmitted". Duplicates (DUP!) are not
// replies.
func parsePing(out []byte) (pingStats, error) {
	var st pingStats
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.Contains(line, []byte("DUP!")) {
			continue
		}
		if m := pingReplyRE.FindSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(string(m[1]), 64)
			if err != nil {
				return st, fmt.Errorf("ping: %q: %w", line, err)
			}
			st.RTTs = append(st.RTTs, v)
		}
	}
	m := pingSentRE.FindSubmatch(out)
	if m == nil {
		return st, errors.New("ping: no summary line")
	}
	st.Sent, _ = strconv.Atoi(string(m[1]))
	if st.Sent == 0 {
		return st, errors.New("ping: sent nothing")
	}
	return st, nil
}

// avg is the mean RTT; NaN without replies.
func (s pingStats) avg() float64 {
	if len(s.RTTs) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, v := range s.RTTs {
		sum += v
	}
	return sum / float64(len(s.RTTs))
}

// p99 is the 99th percentile RTT (nearest rank); NaN without replies.
func (s pingStats) p99() float64 {
	if len(s.RTTs) == 0 {
		return math.NaN()
	}
	x := append([]float64(nil), s.RTTs...)
	sort.Float64s(x)
	k := int(math.Ceil(0.99*float64(len(x)))) - 1
	return x[max(k, 0)]
}

// loss is the share of requests without a reply, in percent.
func (s pingStats) loss() float64 {
	if s.Sent == 0 {
		return math.NaN()
	}
	lost := max(s.Sent-len(s.RTTs), 0)
	return 100 * float64(lost) / float64(s.Sent)
}

// latencyRun is one run of one mode of the latency bench.
type latencyRun struct {
	Idle         pingStats
	Up, Down     pingStats // the probe beside 4 streams LAN→WAN, WAN→LAN
	UpBps, DnBps float64
}

// latencyFigures are the printed columns, in order, with their format.
var latencyFigures = []struct {
	name string
	get  func(latencyRun) float64
	f    string
}{
	{"idle avg ms", func(r latencyRun) float64 { return r.Idle.avg() }, "%.3f"},
	{"idle p99 ms", func(r latencyRun) float64 { return r.Idle.p99() }, "%.3f"},
	{"up avg ms", func(r latencyRun) float64 { return r.Up.avg() }, "%.2f"},
	{"up p99 ms", func(r latencyRun) float64 { return r.Up.p99() }, "%.2f"},
	{"up loss %", func(r latencyRun) float64 { return r.Up.loss() }, "%.1f"},
	{"up Mbit/s", func(r latencyRun) float64 { return r.UpBps / 1e6 }, "%.0f"},
	{"down avg ms", func(r latencyRun) float64 { return r.Down.avg() }, "%.2f"},
	{"down p99 ms", func(r latencyRun) float64 { return r.Down.p99() }, "%.2f"},
	{"down loss %", func(r latencyRun) float64 { return r.Down.loss() }, "%.1f"},
	{"down Mbit/s", func(r latencyRun) float64 { return r.DnBps / 1e6 }, "%.0f"},
}

// medianFigure is the median over runs of one figure, skipping runs
// that have none (NaN: no reply, or a failed iperf3 run).
func medianFigure(runs []latencyRun, get func(latencyRun) float64) float64 {
	var xs []float64
	for _, r := range runs {
		if v := get(r); !math.IsNaN(v) && v >= 0 {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	return median(xs)
}
