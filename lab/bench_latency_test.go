package lab

import (
	"math"
	"testing"
)

// pingOutput is iputils ping 20221126 output with a duplicate and a lost
// request (seq 3).
const pingOutput = `PING 10.77.2.2 (10.77.2.2) 56(84) bytes of data.
64 bytes from 10.77.2.2: icmp_seq=1 ttl=63 time=0.210 ms
64 bytes from 10.77.2.2: icmp_seq=2 ttl=63 time=0.190 ms
64 bytes from 10.77.2.2: icmp_seq=2 ttl=63 time=0.950 ms (DUP!)
64 bytes from 10.77.2.2: icmp_seq=4 ttl=63 time=12.5 ms

--- 10.77.2.2 ping statistics ---
4 packets transmitted, 3 received, +1 duplicates, 25% packet loss, time 150ms
rtt min/avg/max/mdev = 0.190/4.300/12.500/5.800 ms
`

func TestParsePing(t *testing.T) {
	st, err := parsePing([]byte(pingOutput))
	if err != nil {
		t.Fatalf("parsePing: %v", err)
	}
	if st.Sent != 4 || len(st.RTTs) != 3 {
		t.Fatalf("parsePing = %d sent, %d replies; want 4, 3", st.Sent, len(st.RTTs))
	}
	if got, want := st.avg(), (0.210+0.190+12.5)/3; math.Abs(got-want) > 1e-9 {
		t.Errorf("avg = %v, want %v", got, want)
	}
	if got := st.p99(); got != 12.5 {
		t.Errorf("p99 = %v, want 12.5", got)
	}
	if got := st.loss(); got != 25 {
		t.Errorf("loss = %v, want 25", got)
	}
	if _, err := parsePing([]byte("ping: connect: Network is unreachable\n")); err == nil {
		t.Error("parsePing of an error message: no error")
	}
}

func TestMedianFigureSkipsMissing(t *testing.T) {
	runs := []latencyRun{
		{UpBps: 1e9, Idle: pingStats{RTTs: []float64{0.1}, Sent: 1}},
		{UpBps: math.NaN(), Idle: pingStats{Sent: 1}},
		{UpBps: 3e9, Idle: pingStats{RTTs: []float64{0.3}, Sent: 1}},
	}
	if got := medianFigure(runs, func(r latencyRun) float64 { return r.UpBps }); got != 2e9 {
		t.Errorf("median throughput = %v, want 2e9 (the failed run skipped)", got)
	}
	if got := medianFigure(runs, func(r latencyRun) float64 { return r.Idle.avg() }); got != 0.2 {
		t.Errorf("median idle = %v, want 0.2 (the run without replies skipped)", got)
	}
}
