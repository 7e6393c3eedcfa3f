package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// benchCase is one iperf3 configuration.
type benchCase struct {
	Streams int  // -P
	Reverse bool // -R: WAN host sends to LAN host
}

func (c benchCase) String() string {
	dir := "LAN→WAN"
	if c.Reverse {
		dir = "WAN→LAN"
	}
	return fmt.Sprintf("-P %d %s", c.Streams, dir)
}

// benchCases are the fixed cases of every bench mode.
var benchCases = []benchCase{{1, false}, {1, true}, {4, false}, {4, true}}

// benchModeNames name the bench modes by letter.
var benchModeNames = map[rune]string{
	'a': "(a) router NAT (masquerade)",
	'b': "(b) kernel forwarding",
	'n': "(n) kernel nftables masquerade",
	'c': "(c) hw port bridge",
	'd': "(d) kernel bridge",
	'A': "(A) baseline router NAT",
	'C': "(C) baseline port bridge",
	'x': "(x) router NAT on af_xdp",
	'y': "(y) hw port bridge on af_xdp",
	't': "(t) router NAT, TX ring",
	'u': "(u) router NAT, TX ring+bypass",
	'w': "(w) router NAT, 2 RX queues",
	'g': "(g) router per GRO mode",
	'm': "(m) conntrack memory",
	's': "(s) services memory: 1,000 DHCP leases and a full DNS cache",
	'f': "(f) SYN flood",
	'k': "(k) SYN flood against kernel nftables masquerade",
	'l': "(l) latency under load: n, a and x",
	'q': "(q) SQM behind a bloated modem",
}

// benchOrder is the order the modes a–d and n run and print in; A and C
// (the same as a and c with Options.BaselineBinary) follow their own, x
// and y (a and c on af_xdp ports) and t and u (a with the af_packet TX
// ring, without and with PACKET_QDISC_BYPASS) and w (a with two receive
// queues per port) theirs.
const benchOrder = "aAxtuwbncCyd"

// benchRatios are the printed ratios: router NAT / kernel forwarding,
// port bridge / kernel bridge, router NAT / kernel NAT (required ≥ 0.35,
// goal 0.5) and router NAT / our own port bridge, the ceiling of anything
// built on these ports (≥ 0.8, goal 0.9); with a baseline build, the same
// for it and this build / the baseline, measured in the same sitting.
var benchRatios = [][2]rune{{'a', 'b'}, {'c', 'd'}, {'a', 'n'}, {'a', 'c'},
	{'A', 'n'}, {'C', 'd'}, {'a', 'A'}, {'c', 'C'},
	{'x', 'n'}, {'y', 'd'}, {'x', 'y'}, {'x', 'a'}, {'y', 'c'}, {'t', 'a'}, {'u', 'a'}, {'w', 'a'}}

// benchModeLetters are the bench modes -bench-modes takes.
const benchModeLetters = "abncdgmfksACxytuwlq"

// benchPairOnly are the modes whose ratios print only when both figures
// of the pair were measured: the baseline's and the variants'.
const benchPairOnly = "ACxytuw"

// labNATTable is the nftables table of bench mode n.
const labNATTable = "gvrouter_lab_nat"

// iperfResult is the part of iperf3 -J output the bench reads.
type iperfResult struct {
	End struct {
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		SumSent struct {
			Retransmits int `json:"retransmits"`
		} `json:"sum_sent"`
	} `json:"end"`
	// Intervals are the sender's per-second sums (-i 1, iperf3's
	// default); the -O seconds are marked omitted.
	Intervals []struct {
		Sum struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			Omitted       bool    `json:"omitted"`
		} `json:"sum"`
	} `json:"intervals"`
	Error string `json:"error"`
}

// parseIperf returns the receiver's throughput in bit/s from iperf3 -J
// output (sum over streams, without the -O seconds).
func parseIperf(b []byte) (float64, error) {
	var r iperfResult
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("iperf3 JSON: %w", err)
	}
	if r.Error != "" {
		return 0, errors.New("iperf3: " + r.Error)
	}
	if r.End.SumReceived.BitsPerSecond <= 0 {
		return 0, errors.New("iperf3: no receiver throughput")
	}
	return r.End.SumReceived.BitsPerSecond, nil
}

// parseIperfIntervals returns the sender's throughput in bit/s of each
// interval after the -O seconds, in order.
func parseIperfIntervals(b []byte) ([]float64, error) {
	var r iperfResult
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("iperf3 JSON: %w", err)
	}
	if r.Error != "" {
		return nil, errors.New("iperf3: " + r.Error)
	}
	var bps []float64
	for _, iv := range r.Intervals {
		if !iv.Sum.Omitted {
			bps = append(bps, iv.Sum.BitsPerSecond)
		}
	}
	if len(bps) == 0 {
		return nil, errors.New("iperf3: no intervals")
	}
	return bps, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio formats a/b, or "n/a" when either is missing.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}
