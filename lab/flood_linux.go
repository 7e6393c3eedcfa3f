package lab

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Flood parameters: a table small enough to fill, a SYN rate above the
// 20,000/s the router must survive, for long enough to see the flow through
// it hold.
const (
	floodTableMax = 10000
	floodRate     = 25000 // SYN/s; the acceptance asks for >= 20,000
	floodFor      = 10 * time.Second
	floodMinRate  = 20000
	// floodRSSBudget is the most the router's RSS may grow by.
	floodRSSBudget = 16 << 20
	// floodLead is the iperf3 flow's time before the flood starts: 2 s
	// omitted for slow start and enough 1-s intervals for a median.
	floodLead = 8 * time.Second
)

// floodPort is the WAN host's TCP port the SYN flood targets; the WAN
// host drops what arrives there (nftables), so every SYN leaves an
// unanswered SYN_SENT entry in the router's table, the worst case for
// the table limit. The drop is in the netdev ingress hook of the WAN
// host's veth, before its IP stack: a veth delivers within the sender's
// sendmmsg, so whatever the WAN host's kernel does with a SYN (route
// lookup, early demux, an input-hook drop) would be charged to the
// router's CPU, which on real ports would be another machine's.
const floodPort = 9

// floodTable is the WAN host's nftables table that drops the flood.
const floodTable = "gvrouter_lab_flood"

// floodPorts is how many destination ports from floodPort on the floods
// may use: masquerade maps one LAN endpoint to one WAN port, so one LAN
// host has at most 64,512 mappings, and only several flows per mapping
// (different destinations) fill a 65,536-flow table.
const floodPorts = 16

// floodSources is how many LAN source addresses, from floodSource on,
// the floods spread over: the router limits each inside address's flows
// (nat.conntrack.per_host, a quarter of the table by default) and NAT
// ports, so a table fills only from several hosts. 80 addresses are far
// from the limits (125 flows each in a 10,000-flow table, 768 in one of
// 65,536), and none is the LAN host's, the static host's or in the DHCP
// pool. The WAN host drops the flood, so nothing answers these addresses.
const floodSources = 80

// floodSource is the first flood source address.
var floodSource = netip.MustParseAddr("10.77.1.20")

// synFlood sends TCP SYNs from the LAN host's namespace to the WAN host's
// floodPort (or, with ports > 1, one of the ports ports from it) at rate
// per second, from srcs source addresses (src and the ones after it; see
// floodSources) and random source ports, until ctx is done, through a
// raw IPv4 socket made in the LAN host's namespace (the kernel fills the
// IP checksum and length; the TCP checksum is ours). It returns the
// number sent.
func synFlood(ctx context.Context, ns string, src netip.Addr, srcs int, dst netip.Addr, rate, ports int) (int, error) {
	var fd int
	err := inNetns(ns, func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("lab: flood socket: %w", err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrInet4{Addr: dst.As4()}
	pkt := make([]byte, 40)
	// IPv4 header (RFC 791); total length, ID and checksum come from the kernel.
	pkt[0], pkt[8], pkt[9] = 0x45, 64, 6
	s4, d4 := src.As4(), dst.As4()
	base := binary.BigEndian.Uint32(s4[:])
	copy(pkt[12:16], s4[:])
	copy(pkt[16:20], d4[:])
	tcp := pkt[20:]
	binary.BigEndian.PutUint16(tcp[2:], floodPort)
	tcp[12], tcp[13] = 5<<4, 0x02 // data offset 5 words, SYN
	binary.BigEndian.PutUint16(tcp[14:], 64240)

	const tick = 10 * time.Millisecond
	perTick := max(1, rate/int(time.Second/tick))
	t := time.NewTicker(tick)
	defer t.Stop()
	sent := 0
	for {
		select {
		case <-ctx.Done():
			return sent, nil
		case <-t.C:
		}
		for range perTick {
			binary.BigEndian.PutUint32(s4[:], base+uint32(rand.IntN(srcs)))
			copy(pkt[12:16], s4[:])
			binary.BigEndian.PutUint16(tcp[0:], uint16(1024+rand.IntN(65536-1024)))
			binary.BigEndian.PutUint16(tcp[2:], uint16(floodPort+rand.IntN(ports)))
			binary.BigEndian.PutUint32(tcp[4:], rand.Uint32())
			binary.BigEndian.PutUint16(tcp[16:], 0)
			binary.BigEndian.PutUint16(tcp[16:], tcpChecksum(s4, d4, tcp))
			if err := unix.Sendto(fd, pkt, 0, to); err != nil {
				if err == unix.ENOBUFS || err == unix.EAGAIN {
					continue
				}
				return sent, fmt.Errorf("lab: flood sendto: %w", err)
			}
			sent++
		}
	}
}

// tcpChecksum is the TCP checksum of seg over the IPv4 pseudo-header
// (RFC 9293 section 3.1), for a checksum field already zero.
func tcpChecksum(src, dst [4]byte, seg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	sum += 6 + uint32(len(seg))
	add(seg)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// dropFlood makes the WAN host drop TCP to the flood's ports silently; the
// returned function removes the rule.
func (l *lab) dropFlood(ctx context.Context) (func(), error) {
	rules := fmt.Sprintf("add table netdev %[1]s\nadd chain netdev %[1]s in { type filter hook ingress device %[4]s priority 0; policy accept; }\nadd rule netdev %[1]s in ip protocol tcp tcp dport %[2]d-%[3]d drop\n", floodTable, floodPort, floodPort+floodPorts-1, hostIf)
	cmd := command(ctx, l.wanNS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("lab: nft drop rule: %v: %s", err, out)
	}
	return func() {
		if err := nsRun(context.Background(), l.wanNS, "nft", "delete", "table", "netdev", floodTable); err != nil {
			l.log.Warn("lab: remove flood drop rule", "err", err)
		}
	}, nil
}

// routerRSS returns the router process's resident set size in bytes.
func (l *lab) routerRSS() (int64, error) {
	if l.router == nil || l.router.cmd.Process == nil {
		return 0, fmt.Errorf("lab: router is not running")
	}
	return rssOf(l.router.cmd.Process.Pid)
}

// rssOf reads VmRSS of pid from /proc.
func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("lab: no VmRSS for pid %d", pid)
}

// iperfIntervals is the part of iperf3 -J -i 1 output the flood test reads.
type iperfIntervals struct {
	Intervals []struct {
		Sum struct {
			Start         float64 `json:"start"`
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int     `json:"retransmits"`
		} `json:"sum"`
	} `json:"intervals"`
}

// floodResult is what the flood measured.
type floodResult struct {
	Sent         int
	Took         time.Duration
	Flows        []int     // table sizes sampled once a second during the flood
	EarlyDropped uint64    // early drops counted during the flood
	TableFull    uint64    // table-full drops counted during the flood
	RSS0, RSS1   int64     // router RSS before and after the flood; 0 for the kernel
	PreMedian    float64   // bit/s, iperf3 1-s intervals before the flood (after 2 s of slow start)
	During       []float64 // bit/s, iperf3 1-s intervals inside the flood
	Retrans      []int     // the iperf3 sender's retransmits in those intervals
	// Drops are the router's drops during the flood by reason: its
	// ports' (all summed) and "nat_overload", the new flows its NAT
	// engine shed while a receive ring fell behind; nil for the kernel.
	Drops map[string]uint64
}

func (r floodResult) rate() float64 { return float64(r.Sent) / r.Took.Seconds() }

func (r floodResult) String() string {
	return fmt.Sprintf("flood: %s; table samples %v (limit %d); early-dropped %d, table-full drops %d; RSS %.1f → %.1f MiB (+%.1f); %s",
		r.sentString(), r.Flows, floodTableMax, r.EarlyDropped, r.TableFull,
		float64(r.RSS0)/(1<<20), float64(r.RSS1)/(1<<20), float64(r.RSS1-r.RSS0)/(1<<20), r.flowString())
}

// sentString describes the generator's work.
func (r floodResult) sentString() string {
	return fmt.Sprintf("%d SYNs in %v (%.0f/s)", r.Sent, r.Took.Round(time.Millisecond), r.rate())
}

// flowString describes the established iperf3 flow and, for the router,
// what its ports dropped meanwhile.
func (r floodResult) flowString() string {
	s := fmt.Sprintf("iperf3 pre-flood median %.0f Mbit/s, during %v Mbit/s (lowest %.2f of the median), retransmits %v",
		r.PreMedian/1e6, mbps(r.During), r.lowest(), r.Retrans)
	if r.Drops != nil {
		s += fmt.Sprintf("; router drops during the flood %v", r.Drops)
	}
	return s
}

// lowest is the smallest flood interval as a share of the pre-flood median.
func (r floodResult) lowest() float64 {
	if len(r.During) == 0 || r.PreMedian == 0 {
		return 0
	}
	return slices.Min(r.During) / r.PreMedian
}

// check applies the flood's pass criteria: the generator reaches its
// rate, the table fills to its limit and no further, the drops are
// counted, RSS stays within budget and the established flow keeps moving.
// throughput adds the performance criterion (no 1-s interval below half
// the pre-flood median).
func (r floodResult) check(throughput bool) error {
	errs := r.flowErrs(throughput)
	errs = append(errs, r.tableErrs()...)
	if r.RSS1-r.RSS0 > floodRSSBudget {
		errs = append(errs, fmt.Sprintf("RSS grew by %.1f MiB, want <= 16", float64(r.RSS1-r.RSS0)/(1<<20)))
	}
	return floodErr(errs)
}

// flowErrs are the criteria on the generator and the established flow,
// the part of check that applies to any forwarder.
func (r floodResult) flowErrs(throughput bool) []string {
	var errs []string
	if r.rate() < floodMinRate {
		errs = append(errs, fmt.Sprintf("generator reached %.0f SYN/s, want >= %d", r.rate(), floodMinRate))
	}
	if len(r.During) < int(floodFor.Seconds())-2 {
		errs = append(errs, fmt.Sprintf("iperf3 gave %d intervals inside the flood", len(r.During)))
	}
	for i, v := range r.During {
		switch {
		case v == 0:
			errs = append(errs, fmt.Sprintf("flood interval %d: the established flow stalled", i))
		case throughput && v < r.PreMedian/2:
			errs = append(errs, fmt.Sprintf("flood interval %d: %.0f Mbit/s < half the pre-flood median %.0f", i, v/1e6, r.PreMedian/1e6))
		}
	}
	return errs
}

// tableErrs are the criteria on a table limited to floodTableMax.
func (r floodResult) tableErrs() []string {
	var errs []string
	if len(r.Flows) == 0 || slices.Max(r.Flows) > floodTableMax || r.Flows[len(r.Flows)-1] < floodTableMax*9/10 {
		errs = append(errs, fmt.Sprintf("table sizes %v, want at the limit %d and never above", r.Flows, floodTableMax))
	}
	if r.EarlyDropped+r.TableFull == 0 {
		errs = append(errs, "no early drop or table-full drop counted")
	}
	return errs
}

func floodErr(errs []string) error {
	if len(errs) > 0 {
		return fmt.Errorf("flood: %s", strings.Join(errs, "; "))
	}
	return nil
}

// floodProbe reads, from whatever forwards the flood, what the flood
// measures besides the iperf3 flow.
type floodProbe struct {
	// rss returns the forwarder's resident set size; nil for the kernel,
	// whose memory is no one process's.
	rss func() (int64, error)
	// table returns the tracked flows and the early drops and table-full
	// drops counted so far.
	table func(ctx context.Context) (flows int, early, full uint64, err error)
	// drops returns the forwarder's drops so far by reason (see
	// floodResult.Drops); nil for the kernel.
	drops func(ctx context.Context) (map[string]uint64, error)
}

// routerProbe reads the running router's RSS and status page.
func (l *lab) routerProbe() floodProbe {
	return floodProbe{
		rss: l.routerRSS,
		table: func(ctx context.Context) (int, uint64, uint64, error) {
			v, err := l.natView(ctx)
			return v.Flows, v.EarlyDropped, v.TableFull, err
		},
		drops: func(ctx context.Context) (map[string]uint64, error) {
			v, err := l.natView(ctx)
			if err != nil {
				return nil, err
			}
			d := maps.Clone(v.PortDrops)
			d["nat_overload"] = v.Overload
			return d, nil
		},
	}
}

// flood runs the flood against the running router (started with a
// conntrack limit of floodTableMax) while an iperf3 flow crosses it.
func (l *lab) flood(ctx context.Context) (floodResult, error) {
	return l.floodThrough(ctx, l.routerProbe())
}

// floodThrough runs the flood LAN → WAN through whatever forwards it
// (read by p) while an iperf3 flow crosses it.
func (l *lab) floodThrough(ctx context.Context, p floodProbe) (floodResult, error) {
	var res floodResult
	undo, err := l.dropFlood(ctx)
	if err != nil {
		return res, err
	}
	defer undo()
	srv, err := startChild(l.log, "iperf3 server", l.wanNS, filepath.Join(l.dir, "iperf3-flood.log"),
		"iperf3", "-s", "-p", strconv.Itoa(benchPort))
	if err != nil {
		return res, err
	}
	defer srv.stop()
	if err := waitListening(ctx, l.wanNS, benchPort, srv); err != nil {
		return res, err
	}
	if _, err := ping(ctx, l.lanNS, wanHost4.Addr()); err != nil {
		return res, err
	}
	total := floodLead + floodFor + 4*time.Second
	var (
		wg       sync.WaitGroup
		iperfOut []byte
		iperfErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		iperfOut, iperfErr = output(ctx, l.lanNS, "iperf3", "-c", wanHost4.Addr().String(), "-p", strconv.Itoa(benchPort),
			"-t", strconv.Itoa(int(total/time.Second)), "-i", "1", "-J")
	}()
	time.Sleep(floodLead)
	// The size before the flood: with the iperf3 flow running, so the
	// receive rings it cycles through are already resident.
	if p.rss != nil {
		if res.RSS0, err = p.rss(); err != nil {
			return res, err
		}
	}
	_, early0, full0, err := p.table(ctx)
	if err != nil {
		return res, err
	}
	var drops0 map[string]uint64
	if p.drops != nil {
		if drops0, err = p.drops(ctx); err != nil {
			return res, err
		}
	}
	fctx, cancel := context.WithTimeout(ctx, floodFor)
	defer cancel()
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for fctx.Err() == nil {
			if flows, _, _, err := p.table(ctx); err == nil {
				res.Flows = append(res.Flows, flows)
			}
			select {
			case <-fctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	start := time.Now()
	res.Sent, err = synFlood(fctx, l.lanNS, floodSource, floodSources, wanHost4.Addr(), floodRate, 1)
	res.Took = time.Since(start)
	sampler.Wait()
	if err != nil {
		return res, err
	}
	if p.rss != nil {
		if res.RSS1, err = p.rss(); err != nil {
			return res, err
		}
	}
	_, early1, full1, err := p.table(ctx)
	if err != nil {
		return res, err
	}
	res.EarlyDropped, res.TableFull = early1-early0, full1-full0
	if p.drops != nil {
		drops1, err := p.drops(ctx)
		if err != nil {
			return res, err
		}
		res.Drops = map[string]uint64{}
		for k, v := range drops1 {
			if d := v - drops0[k]; d != 0 {
				res.Drops[k] = d
			}
		}
	}
	wg.Wait()
	if iperfErr != nil {
		return res, fmt.Errorf("iperf3: %v: %s", iperfErr, iperfOut)
	}
	var r iperfIntervals
	if err := json.Unmarshal(iperfOut, &r); err != nil {
		return res, fmt.Errorf("iperf3 JSON: %w", err)
	}
	var pre []float64
	floodStart := floodLead.Seconds()
	for _, iv := range r.Intervals {
		s := iv.Sum.Start
		switch {
		case s >= 2 && s+1 <= floodStart:
			pre = append(pre, iv.Sum.BitsPerSecond)
		case s >= floodStart+0.5 && s+1 <= floodStart+floodFor.Seconds():
			res.During = append(res.During, iv.Sum.BitsPerSecond)
			res.Retrans = append(res.Retrans, iv.Sum.Retransmits)
		}
	}
	res.PreMedian = median(pre)
	return res, nil
}
