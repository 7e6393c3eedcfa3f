package lab

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPU cost per forwarded bit.
//
// On a 2-core machine shared by the iperf3 client, its server and the
// forwarder, the throughput of one run swings by a factor of two with
// where the scheduler puts the threads (the same build, runs of one
// sitting: 664 to 1487 Mbit/s), so a median of five throughputs cannot
// tell a 5 % change. The forwarder's CPU time per bit it moved is far
// steadier: it is what a change to the data path costs, whatever the
// neighbours did meanwhile. The bench prints it beside the throughput for
// the modes whose forwarder is our process: (a), (A), (c) and (C).

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/PID/stat: 100 on every Linux architecture the router runs on.
const clockTicks = 100

// procCPUSeconds returns the user plus system CPU time process pid has
// used, from /proc/PID/stat (fields 14 and 15, proc(5)).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(b)
}

// parseProcStatCPU returns utime + stime of a /proc/PID/stat line, in
// seconds.
func parseProcStatCPU(b []byte) (float64, error) {
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after its closing one start at field 3.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("lab: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("lab: short /proc stat")
	}
	var ticks float64
	for _, s := range f[11:13] { // utime, stime
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("lab: /proc stat: %w", err)
		}
		ticks += float64(n)
	}
	return ticks / clockTicks, nil
}

// cpuMsPerGbit is the forwarder's cost of one iperf3 run: cpu seconds of
// CPU while it moved bps for seconds (the omitted warm-up included: the
// forwarder works through it too), in CPU milliseconds per Gbit.
func cpuMsPerGbit(cpu, bps, seconds float64) float64 {
	if bps <= 0 || seconds <= 0 {
		return -1
	}
	return cpu * 1e3 / (bps * seconds / 1e9)
}

// benchForwarderPID returns the PID of the process that forwards in bench
// mode m, or 0 for the kernel's modes.
func (l *lab) benchForwarderPID(m rune) int {
	if _, routed := routerVariants[m]; routed {
		if l.router != nil {
			return l.router.cmd.Process.Pid
		}
		return 0
	}
	switch m {
	case 'c', 'C', 'y':
		if l.benchBridge != nil {
			return l.benchBridge.cmd.Process.Pid
		}
	}
	return 0
}

// printBenchCost prints the forwarder's median CPU cost per mode and case
// and, for each baseline pair, the ratio of the two (below 1: this build
// spends less per bit than the baseline).
func (l *lab) printBenchCost(modes string) {
	med := map[rune][]float64{}
	for _, m := range benchOrder {
		if !strings.ContainsRune(modes, m) || l.benchCost[m] == nil {
			continue
		}
		med[m] = make([]float64, len(benchCases))
		for i, c := range benchCases {
			xs := l.benchCost[m][i]
			med[m][i] = -1
			if len(xs) > 0 {
				med[m][i] = median(xs)
			}
			fmt.Fprintf(l.out, "  %-22s %-14s median %8.0f CPU ms/Gbit  runs %s\n", benchModeNames[m], c, med[m][i], rounded(xs, 1))
		}
	}
	for _, p := range [][2]rune{{'a', 'A'}, {'c', 'C'}, {'x', 'a'}, {'y', 'c'}, {'t', 'a'}, {'u', 'a'}, {'w', 'a'}} {
		x, y := med[p[0]], med[p[1]]
		if x == nil || y == nil {
			continue
		}
		for i, c := range benchCases {
			fmt.Fprintf(l.out, "cost ratio (%c)/(%c) %s: %s (CPU per bit; lower is cheaper)\n", p[0], p[1], c, ratio(x[i], y[i]))
		}
	}
}
