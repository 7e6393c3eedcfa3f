package config

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ConntrackFlowBytes is the memory one tracked flow may take: 769 bytes
// of heap measured by natengine's TestMemoryPerFlow (a NATed UDP flow with
// its own mapping, its table keys included), times 1.5 for the heap growth
// the router's GOGC of 50 allows before a collection.
const ConntrackFlowBytes = 1160

// memTotal returns the machine's memory; tests replace it.
var memTotal = defaultMemTotal

// defaultMemTotal returns the machine's memory in bytes (MemTotal in
// /proc/meminfo); ok is false where there is none.
func defaultMemTotal() (total uint64, ok bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "MemTotal:       24683656 kB"
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// checkConntrackMemory reports a written conntrack limit whose full table
// would take more than half of the machine's memory (the rest is the
// kernel's, the ports' rings and netstack's). The table grows with its
// flows, so such a limit costs nothing at start, but a SYN flood fills it
// and the router is killed for memory instead of early-dropping flows.
func (c *Config) checkConntrackMemory(l *errorList) {
	nt := &c.NAT
	v := nt.Conntrack.Max
	if v < MinConntrackMax || v > MaxConntrackMax {
		return // unset, or reported as out of range
	}
	total, ok := memTotal()
	if !ok {
		return
	}
	need := uint64(v) * ConntrackFlowBytes
	if need <= total/2 {
		return
	}
	l.add(nt.src.at("max", nt.Pos), "nat: conntrack: max %d needs up to %s (%d bytes a flow), more than half of this machine's %s (MemTotal); at most %d fit",
		v, mib(need), ConntrackFlowBytes, mib(total), total/2/ConntrackFlowBytes)
}

// mib formats n bytes as MiB, e.g. "1160 MiB".
func mib(n uint64) string { return fmt.Sprintf("%d MiB", n>>20) }
