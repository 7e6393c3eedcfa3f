package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The diagnostics of mkaIperf: what a roll costs TCP when no SecY
// counter shows a lost frame. Each flow prints the loss-like counters of
// both routers' whole status snapshot that rose, the TCP counters of
// sender and receiver that tell loss from reordering and stalls, and the
// seconds in which iperf3 retransmitted beside the routers' SA switches.

// statusLeaves flattens router ns's /api/status into path -> number.
func statusLeaves(ctx context.Context, ns string) (map[string]float64, error) {
	b, err := routerStatus(ctx, ns, "/api/status")
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(p+"."+k, c)
			}
		case []any:
			for i, c := range x {
				name := strconv.Itoa(i)
				if m, ok := c.(map[string]any); ok {
					if n, ok := m["name"].(string); ok {
						name = n
					}
				}
				walk(p+"["+name+"]", c)
			}
		case float64:
			out[p] = x
		}
	}
	walk("", v)
	return out, nil
}

// lossy matches the status paths that count a dropped or refused frame.
var lossy = regexp.MustCompile(`(?i)drop|err|pktslate|invalid|fail|overrun|full|lost|nosa|discard|reject|timeout|oversize`)

// lossRise returns the lossy leaves that rose from before to after.
func lossRise(before, after map[string]float64) []string {
	var out []string
	for k, v := range after {
		if lossy.MatchString(k) && v > before[k] {
			out = append(out, fmt.Sprintf("%s +%.0f", k, v-before[k]))
		}
	}
	sort.Strings(out)
	return out
}

// tcpCounters reads ns's TCP counters (nstat -asz: absolute, history
// untouched).
func tcpCounters(ctx context.Context, ns string) (map[string]uint64, error) {
	b, err := output(ctx, ns, "nstat", "-asz")
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "Tcp") {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, sc.Err()
}

// tcpTold are the TCP counters that tell loss, reordering and stalls apart.
var tcpTold = []string{"TcpRetransSegs", "TcpExtTCPFastRetrans", "TcpExtTCPTimeouts", "TcpExtTCPLossProbes",
	"TcpExtTCPLostRetransmit", "TcpExtTCPSpuriousRTOs", "TcpExtTCPSACKReorder", "TcpExtTCPTSReorder",
	"TcpExtTCPRenoReorder", "TcpExtTCPDSACKRecv", "TcpExtTCPDSACKOfoRecv", "TcpExtTCPOFOQueue",
	"TcpExtTCPDSACKUndo", "TcpExtTCPDSACKRecvSegs", "TcpExtTCPDSACKOldSent", "TcpExtTCPLossUndo", "TcpExtTCPSackRecoveryFail", "TcpExtTCPRcvQDrop", "TcpExtTCPOFODrop"}

func tcpRise(before, after map[string]uint64) string {
	var b strings.Builder
	for _, k := range tcpTold {
		if d := after[k] - before[k]; d != 0 {
			fmt.Fprintf(&b, " %s=%d", strings.TrimPrefix(k, "TcpExt"), d)
		}
	}
	return b.String()
}

// flowProbe is one flow's before-snapshot.
type flowProbe struct {
	start         time.Time
	st1, st2      map[string]float64
	sender, recvr map[string]uint64
}

func probeFlow(ctx context.Context, l *lab) (p flowProbe, err error) {
	p.start = time.Now()
	if p.st1, err = statusLeaves(ctx, l.rtrNS); err != nil {
		return p, err
	}
	if p.st2, err = statusLeaves(ctx, l.rtr2NS); err != nil {
		return p, err
	}
	if p.sender, err = tcpCounters(ctx, l.lanNS); err != nil {
		return p, err
	}
	p.recvr, err = tcpCounters(ctx, l.wanNS)
	return p, err
}

// report returns what rose since p, and the retransmitting seconds of
// iperf3 JSON b beside the SA switches the routers logged.
func (p flowProbe) report(ctx context.Context, l *lab, b []byte) string {
	var w strings.Builder
	if st1, err := statusLeaves(ctx, l.rtrNS); err == nil {
		fmt.Fprintf(&w, "\n  router 1 losses: %v", lossRise(p.st1, st1))
	}
	if st2, err := statusLeaves(ctx, l.rtr2NS); err == nil {
		fmt.Fprintf(&w, "\n  router 2 losses: %v", lossRise(p.st2, st2))
	}
	if s, err := tcpCounters(ctx, l.lanNS); err == nil {
		fmt.Fprintf(&w, "\n  sender TCP:%s", tcpRise(p.sender, s))
	}
	if s, err := tcpCounters(ctx, l.wanNS); err == nil {
		fmt.Fprintf(&w, "\n  receiver TCP:%s", tcpRise(p.recvr, s))
	}
	var r struct {
		Intervals []struct {
			Sum struct {
				Start       float64 `json:"start"`
				Bits        float64 `json:"bits_per_second"`
				Retransmits int     `json:"retransmits"`
			} `json:"sum"`
		} `json:"intervals"`
	}
	if json.Unmarshal(b, &r) == nil {
		fmt.Fprintf(&w, "\n  retransmitting seconds:")
		for _, iv := range r.Intervals {
			if iv.Sum.Retransmits > 0 {
				fmt.Fprintf(&w, " %.0fs:%d(%.0fM)", iv.Sum.Start, iv.Sum.Retransmits, iv.Sum.Bits/1e6)
			}
		}
	}
	for _, lg := range []struct{ name, file string }{{"router 1", "router.log"}, {"router 2", "router2.log"}} {
		fmt.Fprintf(&w, "\n  %s switches at:%s", lg.name, switchTimes(l.dir+"/"+lg.file, p.start))
	}
	return w.String()
}

// switchTimes lists, as seconds after start, the SA installs and
// switches logged in file after start.
func switchTimes(file string, start time.Time) string {
	f, err := os.Open(file)
	if err != nil {
		return " " + err.Error()
	}
	defer f.Close()
	var w strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var tag string
		switch {
		case strings.Contains(line, "rx sa installed"):
			tag = "rx"
		case strings.Contains(line, "transmitting with sak"):
			tag = "tx"
		case strings.Contains(line, "sak retired"):
			tag = "ret"
		default:
			continue
		}
		i := strings.Index(line, "time=")
		if i < 0 {
			continue
		}
		ts := line[i+5:]
		if j := strings.IndexByte(ts, ' '); j > 0 {
			ts = ts[:j]
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || t.Before(start) {
			continue
		}
		fmt.Fprintf(&w, " %s@%.2f", tag, t.Sub(start).Seconds())
	}
	return w.String()
}
