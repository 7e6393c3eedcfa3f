package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// SQM bench (mode q): the router behind a bloated modem, SQM off and on,
// under an rrul-like load. The probe is irtt (UDP, 50 packets a second,
// as flent's rrul probes a link), which measures each direction's
// one-way delay on its own: the lab's namespaces share one clock.
const (
	// sqmProbeInterval is irtt's -i: 50 samples a second give a p99
	// over a few seconds and load the path with 24 kbit/s.
	sqmProbeInterval = "20ms"
	// sqmIdleSeconds is how long the idle probe runs.
	sqmIdleSeconds = 2
	// sqmStreams is the load each way: iperf3 -P 4 up and -P 4 down at
	// once.
	sqmStreams = 4
	// sqmShareUp and sqmShareDown are the SQM rates as shares of the
	// modem's: shaping a little below the bottleneck moves the queue into
	// the router. The download is shaped after the bottleneck (ingress),
	// so what the modem's FIFO gathers in a sender's burst drains only at
	// the difference of the two rates: 90 %, as sqm-scripts advise for
	// ingress (TestSQMDownload: at 95 % CUBIC's bursts kept ~18 ms in the
	// modem, at 90 % 1.9 ms).
	sqmShareUp   = 0.95
	sqmShareDown = 0.90
	// sqmOverhead is the router's sqm overhead: the modem's htb counts
	// the Ethernet frame without FCS, 14 bytes more than the IP packet.
	sqmOverhead = 14
	// sqmFairManyFlows and sqmFairOneFlow are the fairness row's two
	// LAN hosts' upload streams.
	sqmFairManyFlows = 16
	sqmFairOneFlow   = 1
	// DefaultSQMRates is the modem of bench mode q, download/upload in
	// Mbit/s, as the cable line.
	DefaultSQMRates = "100/20"
)

// sqmRates is the modem's download and upload rates in Mbit/s.
type sqmRates struct{ Down, Up int }

// parseSQMRates reads "DOWN/UP" in Mbit/s, "100/20" for "" .
func parseSQMRates(s string) (sqmRates, error) {
	if s == "" {
		s = DefaultSQMRates
	}
	d, u, ok := strings.Cut(s, "/")
	down, err1 := strconv.Atoi(d)
	up, err2 := strconv.Atoi(u)
	if !ok || err1 != nil || err2 != nil || down <= 0 || up <= 0 || down > 10000 || up > 10000 {
		return sqmRates{}, fmt.Errorf("lab: sqm rates %q: want DOWN/UP in Mbit/s, e.g. %s", s, DefaultSQMRates)
	}
	return sqmRates{down, up}, nil
}

// shapedUpKbit and shapedDownKbit are the SQM rates (the router's and
// cake's) of the modem's upload and download rates, in kbit/s.
func shapedUpKbit(mbit int) int   { return int(math.Round(float64(mbit) * 1000 * sqmShareUp)) }
func shapedDownKbit(mbit int) int { return int(math.Round(float64(mbit) * 1000 * sqmShareDown)) }

// sqmConfig is the router's sqm: value for the modem r.
func (r sqmRates) sqmConfig() string {
	return fmt.Sprintf("{upload: %dkbit, download: %dkbit, overhead: %d}", shapedUpKbit(r.Up), shapedDownKbit(r.Down), sqmOverhead)
}

// irttStats is what one irtt client run says, delays in ms.
type irttStats struct {
	RTT, Up, Down    []float64 // per reply: round trip, client→server, server→client
	Sent             int
	LossUp, LossDown float64 // percent, irtt's own split by the server's counts
	Loss             float64 // percent of requests without a reply
}

// irttOutput is the part of irtt client -o JSON the bench reads.
type irttOutput struct {
	Stats struct {
		PacketsSent    int     `json:"packets_sent"`
		PacketLoss     float64 `json:"packet_loss_percent"`
		UpstreamLoss   float64 `json:"upstream_loss_percent"`
		DownstreamLoss float64 `json:"downstream_loss_percent"`
	} `json:"stats"`
	RoundTrips []struct {
		Lost  string `json:"lost"`
		Delay struct {
			RTT     *int64 `json:"rtt"`
			Send    *int64 `json:"send"`
			Receive *int64 `json:"receive"`
		} `json:"delay"`
	} `json:"round_trips"`
}

// parseIRTT reads irtt client's JSON output (delays in ns).
func parseIRTT(b []byte) (irttStats, error) {
	var o irttOutput
	var st irttStats
	if err := json.Unmarshal(b, &o); err != nil {
		return st, fmt.Errorf("irtt JSON: %w", err)
	}
	if o.Stats.PacketsSent == 0 {
		return st, errors.New("irtt: sent nothing")
	}
	st.Sent = o.Stats.PacketsSent
	st.Loss, st.LossUp, st.LossDown = o.Stats.PacketLoss, o.Stats.UpstreamLoss, o.Stats.DownstreamLoss
	ms := func(ns *int64) float64 { return float64(*ns) / 1e6 }
	for _, rt := range o.RoundTrips {
		if rt.Lost != "false" || rt.Delay.RTT == nil {
			continue
		}
		st.RTT = append(st.RTT, ms(rt.Delay.RTT))
		if rt.Delay.Send != nil && rt.Delay.Receive != nil {
			st.Up = append(st.Up, ms(rt.Delay.Send))
			st.Down = append(st.Down, ms(rt.Delay.Receive))
		}
	}
	return st, nil
}

// mean of xs; NaN for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// p99 of xs (nearest rank); NaN for none.
func p99(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[max(int(math.Ceil(0.99*float64(len(s))))-1, 0)]
}

// sqmRun is one run of one row of the SQM bench.
type sqmRun struct {
	Idle, Loaded irttStats
	UpBps, DnBps float64 // NaN if the iperf3 run failed
	CPUSeconds   float64 // the router's, over the loaded phase; NaN if unread
	Seconds      float64 // wall time of the loaded phase
	FairMany     float64 // bit/s of the 16-flow host, NaN if not run
	FairOne      float64 // bit/s of the 1-flow host
	// RingDrops are the frames the router's port receive rings dropped
	// (the kernel's tail drop before the router reads them, counted
	// in the ports' "ring" drops) over the run; NaN when not read.
	RingDrops float64
	// UpLinkBps and DnLinkBps are the rates the router's shapers sent
	// at each way while the probe ran under load (the flows past their
	// start), in bits as the shaper charges them (frame less its 14-byte
	// Ethernet header, plus the overhead): data and the other
	// direction's ACKs alike, the link's use. NaN without the router's
	// shaper (no sqm, cake).
	UpLinkBps, DnLinkBps float64
}

// sqmFigures are the printed columns of the SQM table. Shares are of the
// router's SQM rate (95 % of the modem's) in both rows, so the no-SQM
// row shows what the modem gives without it. Added latency is the
// loaded figure less the idle average.
func sqmFigures(r sqmRates) []struct {
	name string
	get  func(sqmRun) float64
	f    string
} {
	upBps, dnBps := float64(shapedUpKbit(r.Up))*1e3, float64(shapedDownKbit(r.Down))*1e3
	return []struct {
		name string
		get  func(sqmRun) float64
		f    string
	}{
		{"idle ms", func(x sqmRun) float64 { return mean(x.Idle.RTT) }, "%.2f"},
		{"load ms", func(x sqmRun) float64 { return mean(x.Loaded.RTT) }, "%.1f"},
		{"p99 ms", func(x sqmRun) float64 { return p99(x.Loaded.RTT) }, "%.1f"},
		{"+avg ms", func(x sqmRun) float64 { return mean(x.Loaded.RTT) - mean(x.Idle.RTT) }, "%.1f"},
		{"+p99 ms", func(x sqmRun) float64 { return p99(x.Loaded.RTT) - mean(x.Idle.RTT) }, "%.1f"},
		{"up owd", func(x sqmRun) float64 { return mean(x.Loaded.Up) }, "%.1f"},
		{"dn owd", func(x sqmRun) float64 { return mean(x.Loaded.Down) }, "%.1f"},
		// Where the tail is: each direction's one-way p99.
		{"up p99", func(x sqmRun) float64 { return p99(x.Loaded.Up) }, "%.1f"},
		{"dn p99", func(x sqmRun) float64 { return p99(x.Loaded.Down) }, "%.1f"},
		{"loss %", func(x sqmRun) float64 { return x.Loaded.Loss }, "%.1f"},
		{"up Mb/s", func(x sqmRun) float64 { return x.UpBps / 1e6 }, "%.1f"},
		{"up %", func(x sqmRun) float64 { return 100 * x.UpBps / upBps }, "%.0f"},
		{"dn Mb/s", func(x sqmRun) float64 { return x.DnBps / 1e6 }, "%.1f"},
		{"dn %", func(x sqmRun) float64 { return 100 * x.DnBps / dnBps }, "%.0f"},
		// The shaped link's use: goodput plus headers and the ACKs of
		// the other direction's load (a 90 Mbit/s download's ACKs take
		// ~2 Mbit/s of a 19 Mbit/s upload).
		{"up lnk%", func(x sqmRun) float64 { return 100 * x.UpLinkBps / upBps }, "%.0f"},
		{"dn lnk%", func(x sqmRun) float64 { return 100 * x.DnLinkBps / dnBps }, "%.0f"},
		{"cpu s/Gb", func(x sqmRun) float64 { return x.CPUSeconds / ((x.UpBps + x.DnBps) * x.Seconds / 1e9) }, "%.2f"},
		{"cpu %", func(x sqmRun) float64 { return 100 * x.CPUSeconds / x.Seconds }, "%.0f"},
		{"1-flow %", func(x sqmRun) float64 { return 100 * x.FairOne / (x.FairOne + x.FairMany) }, "%.1f"},
		{"ring drp", func(x sqmRun) float64 { return x.RingDrops }, "%.0f"},
	}
}

// medianOf is the median over runs of one figure, skipping runs without
// it (NaN or infinite: a failed iperf3 run, no reply).
func medianOf(runs []sqmRun, get func(sqmRun) float64) float64 {
	var xs []float64
	for _, r := range runs {
		if v := get(r); !math.IsNaN(v) && !math.IsInf(v, 0) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	return median(xs)
}
