package status

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gvrouter/gvrouter/qdisc"
	"github.com/gvrouter/gvrouter/sqm"
)

// SQM is one shaped direction of a wan interface (config sqm:): the sqm
// package's Status (interface, direction, rate, overhead, diffserv, tin
// names, write errors, the qdisc's counters per tin) as it is.
type SQM struct {
	sqm.Status
}

// TinRows returns the tins in use with their names, for the page.
func (s SQM) TinRows() []SQMTin {
	out := make([]SQMTin, 0, s.Queue.NumTins)
	for i := range min(s.Queue.NumTins, len(s.Queue.Tins)) {
		name := fmt.Sprint(i)
		if i < len(s.TinNames) {
			name = s.TinNames[i]
		}
		out = append(out, SQMTin{Name: name, TinStats: s.Queue.Tins[i]})
	}
	return out
}

// SQMTin is a tin's counters with its name.
type SQMTin struct {
	Name string
	qdisc.TinStats
}

// Memory is the queue's allocated memory, its bound under any traffic.
func (s SQM) Memory() string { return formatBytes(uint64(max(s.Queue.MemoryBytes, 0))) }

// DelayMs and PeakDelayMs format the delays in milliseconds.
func (t SQMTin) DelayMs() string     { return fmt.Sprintf("%.2f ms", float64(t.Delay)/1e6) }
func (t SQMTin) PeakDelayMs() string { return fmt.Sprintf("%.2f ms", float64(t.PeakDelay)/1e6) }

const sqmHTML = `{{define "sqm" -}}
{{- if .SQM}}
<h2>Smart queue management</h2>
<div class="wrap"><table id="sqm" class="narrow">
<thead><tr><th>Interface</th><th>Direction</th><th class="num">Rate</th><th>Tin</th>
<th class="num">Delay</th><th class="num">Peak delay</th><th class="num">Sent</th>
<th class="num">CoDel drops</th><th class="num">ECN marks</th><th class="num">Overlimit drops</th><th class="num">Backlog</th></tr></thead>
<tbody>
{{- range .SQM}}{{$q := .}}
{{- range .TinRows}}
<tr>
<td>{{$q.Interface}}</td><td>{{$q.Direction}}</td><td class="num">{{bits (sqmRate $q.Rate)}}</td><td>{{.Name}}</td>
<td class="num">{{.DelayMs}}</td><td class="num">{{.PeakDelayMs}}</td><td class="num">{{count .SentPackets}}</td>
<td class="num">{{count .CoDelDrops}}</td><td class="num">{{count .ECNMarks}}</td><td class="num">{{count .OverlimitDrops}}</td>
<td class="num">{{count .BacklogPackets}} pkts, {{bytes .BacklogBytes}}</td>
</tr>
{{- end}}
{{- end}}
</tbody>
</table></div>
{{- range .SQM}}
<p class="sub">{{.Interface}} {{.Direction}}: at most {{num .Queue.Limit}} packets in {{.Memory}}; oversize drops {{count .Queue.OversizeDrops}}, write errors {{count .WriteErrors}}</p>
{{- end}}
{{- end}}
{{- end}}`

func init() {
	template := pageTemplate.Funcs(map[string]any{"sqmRate": func(r uint64) float64 { return float64(r) }})
	if _, err := template.Parse(sqmHTML); err != nil {
		panic(err)
	}
}

// sqmCollector exports the shaped directions' counters per tin.
type sqmCollector struct {
	s                                            *Server
	sent, sentBytes, codel, marks, over, backlog *prometheus.Desc
	delay, peak, rate, ecnOverload               *prometheus.Desc
	oversize, writeErrors, limit, memory         *prometheus.Desc
}

func newSQMCollector(s *Server) *sqmCollector {
	l := []string{"interface", "direction", "tin"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("gvrouter_sqm_"+name, help, labels, nil)
	}
	return &sqmCollector{
		s:           s,
		sent:        d("sent_packets_total", "Packets the shaper sent, per tin.", l),
		sentBytes:   d("sent_bytes_total", "Bytes the shaper sent, per tin.", l),
		codel:       d("codel_drops_total", "Packets CoDel dropped (queue delay above target for an interval), per tin.", l),
		marks:       d("ecn_marks_total", "Packets CoDel marked CE instead of dropping, per tin.", l),
		over:        d("overlimit_drops_total", "Packets dropped from the fattest flow because the queue was full, per tin.", l),
		ecnOverload: d("ecn_overload_drops_total", "ECN-capable packets dropped instead of marked: they waited past the mark limit (CoDel's interval) while marks were sent, per tin.", l),
		backlog:     d("backlog_packets", "Packets queued now, per tin.", l),
		delay:       d("delay_seconds", "Moving average of the queueing delay of sent packets, per tin.", l),
		peak:        d("peak_delay_seconds", "Largest queueing delay of a sent packet, per tin.", l),
		rate:        d("rate_bits_per_second", "The shaped rate.", []string{"interface", "direction"}),
		oversize:    d("oversize_drops_total", "Frames longer than a queue slot, dropped on arrival.", []string{"interface", "direction"}),
		writeErrors: d("write_errors_total", "Frames the shaper released that the output refused.", []string{"interface", "direction"}),
		limit:       d("limit_packets", "Packets all the direction's queues may hold together; a full queue drops from the fattest flow.", []string{"interface", "direction"}),
		memory:      d("memory_bytes", "Memory the direction's queues allocated at start: the bound under any traffic.", []string{"interface", "direction"}),
	}
}

// Describe implements prometheus.Collector.
func (c *sqmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sent, c.sentBytes, c.codel, c.marks, c.over, c.backlog, c.delay, c.peak, c.rate,
		c.ecnOverload, c.oversize, c.writeErrors, c.limit, c.memory} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *sqmCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c.s.current().SQM {
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, float64(q.Rate), q.Interface, q.Direction)
		ch <- prometheus.MustNewConstMetric(c.oversize, prometheus.CounterValue, float64(q.Queue.OversizeDrops), q.Interface, q.Direction)
		ch <- prometheus.MustNewConstMetric(c.writeErrors, prometheus.CounterValue, float64(q.WriteErrors), q.Interface, q.Direction)
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(q.Queue.Limit), q.Interface, q.Direction)
		ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(q.Queue.MemoryBytes), q.Interface, q.Direction)
		for _, t := range q.TinRows() {
			lv := []string{q.Interface, q.Direction, t.Name}
			ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(t.SentPackets), lv...)
			ch <- prometheus.MustNewConstMetric(c.sentBytes, prometheus.CounterValue, float64(t.SentBytes), lv...)
			ch <- prometheus.MustNewConstMetric(c.codel, prometheus.CounterValue, float64(t.CoDelDrops), lv...)
			ch <- prometheus.MustNewConstMetric(c.marks, prometheus.CounterValue, float64(t.ECNMarks), lv...)
			ch <- prometheus.MustNewConstMetric(c.over, prometheus.CounterValue, float64(t.OverlimitDrops), lv...)
			ch <- prometheus.MustNewConstMetric(c.ecnOverload, prometheus.CounterValue, float64(t.ECNOverloadDrops), lv...)
			ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(t.BacklogPackets), lv...)
			ch <- prometheus.MustNewConstMetric(c.delay, prometheus.GaugeValue, float64(t.Delay)/1e9, lv...)
			ch <- prometheus.MustNewConstMetric(c.peak, prometheus.GaugeValue, float64(t.PeakDelay)/1e9, lv...)
		}
	}
}
