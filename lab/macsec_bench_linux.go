package lab

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// macsecBenchVariant is one configuration of the MACsec lab's link.
type macsecBenchVariant struct {
	name string
	opt  macsecOptions
}

// macsecBenchVariants are what `gvlab -topology macsec -bench`
// compares: the same two routers without MACsec, with integrity-only
// MACsec and with encrypted MACsec (GCM-AES-128, Linux's default suite).
var macsecBenchVariants = []macsecBenchVariant{
	{"no MACsec", macsecOptions{off: true}},
	{"MACsec integrity-only", macsecOptions{cipher: msCipher, encrypt: false}},
	{"MACsec encrypted", macsecOptions{cipher: msCipher, encrypt: true}},
}

// benchMACsec runs iperf3 from host A to host B across the MACsec lab for
// each variant (the routers restarted with it) and prints the table and
// the ratios: (d) encrypted MACsec / no MACsec (goal >= 0.9, not
// enforced) and (c) integrity-only / encrypted, in throughput and in the
// routers' CPU time per gigabit.
func (l *lab) benchMACsec(ctx context.Context) error {
	fmt.Fprintf(l.out, "bench: MACsec lab, iperf3 TCP -t %d -O %d, median of %d runs; each run restarts the routers in every variant in turn\n",
		l.opt.benchSeconds(), benchOmitSeconds, l.opt.benchRuns())
	// runs[i][j] are variant i's results for case j. The variants take
	// turns within each run, so that the machine's drift over the bench
	// (the two routers, both hosts and iperf3 share two cores) hits them
	// alike rather than whichever ran last.
	// cpuRuns[i][j] are the milliseconds of CPU both routers used per
	// gigabit carried, per run: what the variant costs the routers, which
	// the throughput alone hides when the hosts' and kernel's work on the
	// same two cores dominates.
	runs := make([][][]float64, len(macsecBenchVariants))
	cpuRuns := make([][][]float64, len(macsecBenchVariants))
	for i := range runs {
		runs[i] = make([][]float64, len(benchCases))
		cpuRuns[i] = make([][]float64, len(benchCases))
	}
	var errs []error
	saved := l.msOpt
	defer func() { l.msOpt = saved }()
	for r := 0; r < l.opt.benchRuns() && ctx.Err() == nil; r++ {
		for i, v := range macsecBenchVariants {
			if ctx.Err() != nil {
				break
			}
			l.proxy.close()
			l.proxy = nil
			if err := errors.Join(l.stopRouter(), l.stopRouter2()); err != nil {
				return errors.Join(append(errs, err)...)
			}
			l.msOpt = v.opt
			if err := l.startRouter(ctx); err != nil {
				errs = append(errs, fmt.Errorf("lab: bench %s: %w", v.name, err))
				continue
			}
			if _, err := ping(ctx, l.lanNS, wanHost4.Addr()); err != nil {
				errs = append(errs, fmt.Errorf("lab: bench %s: no path before iperf3: %w", v.name, err))
				continue
			}
			// A fresh server for every variant: one left "busy" by a test
			// whose routers were restarted under it would refuse the rest.
			if err := l.startBenchServer(ctx); err != nil {
				errs = append(errs, fmt.Errorf("lab: bench %s: %w", v.name, err))
				continue
			}
			for j, c := range benchCases {
				cpu0, cerr0 := l.routersCPU()
				bps, err := l.iperf(ctx, wanHost4.Addr(), c)
				if err != nil {
					errs = append(errs, fmt.Errorf("lab: bench %s %s run %d: %w", v.name, c, r+1, err))
					continue
				}
				runs[i][j] = append(runs[i][j], bps)
				cpu1, cerr1 := l.routersCPU()
				if err := errors.Join(cerr0, cerr1); err != nil {
					errs = append(errs, fmt.Errorf("lab: bench %s %s run %d: %w", v.name, c, r+1, err))
					continue
				}
				// iperf3 reports the rate of its -t seconds; the routers'
				// CPU also covers the -O seconds before, at about the same
				// rate.
				gbit := bps * float64(l.opt.benchSeconds()+benchOmitSeconds) / 1e9
				cpuRuns[i][j] = append(cpuRuns[i][j], float64((cpu1-cpu0).Milliseconds())/gbit)
			}
		}
	}
	results := make([][]float64, len(macsecBenchVariants))
	cpuMed := make([][]float64, len(macsecBenchVariants))
	for i, v := range macsecBenchVariants {
		med := make([]float64, len(benchCases))
		cpuMed[i] = make([]float64, len(benchCases))
		for j, c := range benchCases {
			med[j] = median(runs[i][j])
			cpuMed[i][j] = median(cpuRuns[i][j])
			fmt.Fprintf(l.out, "  %-22s %-14s median %8.0f Mbit/s  runs %s; routers' CPU ms/Gbit median %.0f runs %s\n",
				v.name, c, med[j]/1e6, mbps(runs[i][j]), cpuMed[i][j], rounded(cpuRuns[i][j], 1))
		}
		results[i] = med
	}
	l.printVariantTable("Mbit/s (median)", results, 1e6)
	at := func(i, j int) float64 {
		if results[i] == nil {
			return 0
		}
		return results[i][j]
	}
	l.printVariantTable("routers' CPU ms/Gbit", cpuMed, 1)
	for j, c := range benchCases {
		fmt.Fprintf(l.out, "ratio (d) MACsec encrypted / no MACsec %s: %s (goal >= 0.9)\n", c, ratio(at(2, j), at(0, j)))
		fmt.Fprintf(l.out, "ratio (c) MACsec integrity-only / encrypted %s: %s; routers' CPU per Gbit, encrypted / integrity-only: %s\n",
			c, ratio(at(1, j), at(2, j)), ratio(cpuMed[2][j], cpuMed[1][j]))
	}
	return errors.Join(errs...)
}

// routersCPU returns the CPU time both lab routers have used so far.
func (l *lab) routersCPU() (time.Duration, error) {
	var sum time.Duration
	for _, c := range []*child{l.router, l.router2} {
		if c == nil {
			return 0, errors.New("lab: a router is not running")
		}
		d, err := procCPU(c.cmd.Process.Pid)
		if err != nil {
			return 0, fmt.Errorf("lab: %s: %w", c.name, err)
		}
		sum += d
	}
	return sum, nil
}

// printVariantTable prints a table with a row per MACsec bench variant
// and a column per bench case: vals[i][j] / unit, rounded, or n/a.
func (l *lab) printVariantTable(title string, vals [][]float64, unit float64) {
	fmt.Fprintf(l.out, "\n%-24s", title)
	for _, c := range benchCases {
		fmt.Fprintf(l.out, " %14s", c)
	}
	fmt.Fprintln(l.out)
	for i, v := range macsecBenchVariants {
		fmt.Fprintf(l.out, "%-24s", v.name)
		for j := range benchCases {
			s := "n/a"
			if vals[i] != nil && vals[i][j] > 0 {
				s = fmt.Sprintf("%.0f", vals[i][j]/unit)
			}
			fmt.Fprintf(l.out, " %14s", s)
		}
		fmt.Fprintln(l.out)
	}
}
