package lab

import (
	"math"
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

// irttSample is irtt 0.9.0 client -o output cut to what the bench reads:
// three replies (one lost upstream) of 4 requests.
const irttSample = `{"version":{"irtt":"0.9.0"},"stats":{"packets_sent":4,"packets_received":3,
"packet_loss_percent":25,"upstream_loss_percent":25,"downstream_loss_percent":0},
"round_trips":[
 {"seqno":0,"lost":"false","delay":{"receive":2000000,"rtt":5000000,"send":3000000}},
 {"seqno":1,"lost":"true_up","delay":{}},
 {"seqno":2,"lost":"false","delay":{"receive":1000000,"rtt":4000000,"send":3000000}},
 {"seqno":3,"lost":"false","delay":{"receive":10000000,"rtt":30000000,"send":20000000}}]}`

func TestParseIRTT(t *testing.T) {
	st, err := parseIRTT([]byte(irttSample))
	if err != nil {
		t.Fatal(err)
	}
	if st.Sent != 4 || len(st.RTT) != 3 || len(st.Up) != 3 || len(st.Down) != 3 || st.Loss != 25 || st.LossUp != 25 || st.LossDown != 0 {
		t.Fatalf("parseIRTT = %+v", st)
	}
	if got := mean(st.RTT); got != 13 {
		t.Errorf("mean RTT = %v ms, want 13", got)
	}
	if got := p99(st.RTT); got != 30 {
		t.Errorf("p99 RTT = %v ms, want 30", got)
	}
	if got := mean(st.Up); got != 26.0/3 {
		t.Errorf("mean one-way up = %v ms, want %v", got, 26.0/3)
	}
	for _, bad := range []string{"", "{}", `{"stats":{"packets_sent":0}}`} {
		if _, err := parseIRTT([]byte(bad)); err == nil {
			t.Errorf("parseIRTT(%q) = nil error", bad)
		}
	}
}

func TestParseSQMRates(t *testing.T) {
	for in, want := range map[string]sqmRates{"": {100, 20}, "100/20": {100, 20}, "500/100": {500, 100}} {
		if got, err := parseSQMRates(in); err != nil || got != want {
			t.Errorf("parseSQMRates(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"100", "100/", "0/20", "a/b", "100/-1"} {
		if _, err := parseSQMRates(bad); err == nil {
			t.Errorf("parseSQMRates(%q) = nil error", bad)
		}
	}
}

// TestSQMBenchConfig checks that the bench's sqm: line is one the router
// takes, at 95 % of the modem and the modem's 14 bytes of Ethernet.
func TestSQMBenchConfig(t *testing.T) {
	b, err := routerConfig("gvl42", 8080, TopologyVeth, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err = withWANSQM(b, sqmRates{100, 20}.sqmConfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse("lab.yaml", b)
	if err != nil {
		t.Fatalf("config.Parse:\n%s\nerror: %v", b, err)
	}
	var sqm *config.SQM
	for i := range c.Interfaces {
		if c.Interfaces[i].SQM != nil {
			sqm = c.Interfaces[i].SQM
		}
	}
	if sqm == nil || sqm.Upload != 19e6 || sqm.Download != 90e6 || sqm.Overhead != 14 || !sqm.ECN {
		t.Fatalf("sqm = %+v, want upload 19 Mbit/s, download 90 Mbit/s, overhead 14, ecn on", sqm)
	}
}

func TestSQMFigures(t *testing.T) {
	run := sqmRun{
		Idle:       irttStats{RTT: []float64{1, 1}},
		Loaded:     irttStats{RTT: []float64{3, 5}, Up: []float64{1, 2}, Down: []float64{2, 3}},
		UpBps:      19e6,
		DnBps:      81e6,
		CPUSeconds: 1.0,
		Seconds:    10,
		FairMany:   9e6,
		FairOne:    9e6,
		UpLinkBps:  19e6 * 0.97,
		DnLinkBps:  90e6 * 0.95,
	}
	want := map[string]float64{"up lnk%": 97, "dn lnk%": 95, "+avg ms": 3, "+p99 ms": 4, "up p99": 2, "dn p99": 3, "up %": 100, "dn %": 90, "cpu s/Gb": 1, "cpu %": 10, "1-flow %": 50}
	for _, f := range sqmFigures(sqmRates{100, 20}) {
		if w, ok := want[f.name]; ok {
			if got := f.get(run); math.Abs(got-w) > 1e-9 {
				t.Errorf("%s = %v, want %v", f.name, got, w)
			}
			delete(want, f.name)
		}
	}
	if len(want) != 0 {
		t.Errorf("figures missing: %v", want)
	}
}
